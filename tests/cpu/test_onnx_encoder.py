"""The encoder run by ONNX Runtime in float32 (c2v_rag.cpu.onnx_encoder, part of quantize="int8"): the same states as
transformers' own forward on real all-MiniLM-L6-v2 weights, padded batches of shapes the export never saw, cached
on disk, clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from c2v_rag.cpu import onnx_encoder as oe  # noqa: E402
from c2v_rag.hub.sources import resolve_reference  # noqa: E402

TEXTS = [
    "short",
    "a somewhat longer text about proteins and the cells that make them, and then some more words",
    "three words here",
    "Vitamin D deficiency increases the risk of bone fractures in the elderly.",
]


@pytest.fixture(scope="module")
def minilm():
    from transformers import AutoModel, AutoTokenizer

    path = resolve_reference("all-minilm-l6-v2").location
    tokenizer = AutoTokenizer.from_pretrained(path, padding_side="right")
    return tokenizer, AutoModel.from_pretrained(path, dtype=torch.float32).eval()


@pytest.mark.real_weights
def test_the_onnx_encoder_gives_transformers_states_on_real_minilm(minilm, tmp_path):
    tokenizer, bert = minilm
    encoder = oe.onnx_encoder(bert, cache_dir=tmp_path)
    assert encoder.path.is_relative_to(tmp_path) and encoder.config is bert.config
    for texts in (TEXTS, TEXTS[:1], TEXTS[1:3]):  # other batch sizes and lengths than the trace's (2 x 12)
        enc = tokenizer(texts, padding=True, return_tensors="pt")
        with torch.no_grad():
            expected = bert(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
        got = encoder(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
        real = enc["attention_mask"].bool()
        assert got.shape == expected.shape and got.dtype == torch.float32
        # float32 both: equal to rounding at every real token (padding positions are never read)
        torch.testing.assert_close(got[real], expected[real], atol=2e-5, rtol=1e-4)


@pytest.mark.real_weights
def test_the_export_is_cached_by_the_weights(minilm, tmp_path, monkeypatch):
    _, bert = minilm
    first = oe.onnx_encoder(bert, cache_dir=tmp_path)
    monkeypatch.setattr(oe, "export_encoder", lambda *a, **k: pytest.fail("exported again"))
    assert oe.onnx_encoder(bert, cache_dir=tmp_path).path == first.path
    monkeypatch.undo()
    changed = type(bert)(bert.config).eval()  # same config, other weights: another file
    changed.load_state_dict({k: v + 1e-3 for k, v in bert.state_dict().items()})
    assert oe.encoder_key(changed) != oe.encoder_key(bert)
    assert sorted(p.name for p in tmp_path.iterdir()) == [oe.encoder_key(bert)]  # one folder, no temporary left


@pytest.mark.real_weights
def test_the_onnx_encoder_refuses_what_it_cannot_run(minilm, tmp_path):
    tokenizer, bert = minilm
    encoder = oe.onnx_encoder(bert, cache_dir=tmp_path)
    ids = tokenizer(TEXTS[:1], return_tensors="pt")["input_ids"]
    with pytest.raises(ValueError, match="last hidden state only"):
        encoder(input_ids=ids, output_hidden_states=True)
    with pytest.raises(ValueError, match="input_ids and attention_mask only"):
        encoder(input_ids=ids, token_type_ids=torch.ones_like(ids))
    np.testing.assert_allclose(
        encoder(input_ids=ids).last_hidden_state.numpy(),
        encoder(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state.numpy(),
    )
    with pytest.raises(ValueError, match="float32 weights"):
        oe.export_encoder(type(bert)(bert.config).to(torch.bfloat16), tmp_path / "x.onnx")
