"""The exported decoder's attention fused into GroupQueryAttention (c2v_rag.onnx_attention, issue 26): checked
against the torch decoder itself on a right-padded batch, left alone where the kernel does not apply."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

import onnxruntime as ort  # noqa: E402
from transformers import LlamaConfig, LlamaModel  # noqa: E402

from c2v_rag import onnx_decoder as od  # noqa: E402
from c2v_rag.onnx_attention import POSITIONS_FROM_LENGTHS, POSITIONS_KEY, fuse_attention  # noqa: E402


def _llama(head_dim: int) -> LlamaModel:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=40, hidden_size=4 * head_dim, num_attention_heads=4, num_key_value_heads=2,
                         num_hidden_layers=2, intermediate_size=96, max_position_embeddings=64, rope_theta=10000.0)
    return LlamaModel(config).eval()


def _batch(lengths: list[int], width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    longest = max(lengths)
    embeds = torch.randn(len(lengths), longest, width, generator=generator)
    mask = torch.zeros(len(lengths), longest, dtype=torch.long)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
    return embeds, mask, torch.arange(longest).expand(len(lengths), longest).contiguous()


def _session(model) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_fused_attention_computes_what_the_torch_decoder_computes(tmp_path):
    decoder = _llama(head_dim=16)
    exported = onnx.load(str(od.export_decoder(decoder, tmp_path / "decoder.onnx")))
    fused = onnx.load(str(tmp_path / "decoder.onnx"))
    assert fuse_attention(fused, decoder) == 2
    ops = [n.op_type for n in fused.graph.node]
    assert ops.count("GroupQueryAttention") == 2
    assert "Softmax" not in ops and "Expand" not in ops  # the eager chain (mask, repeat_kv) is gone
    assert {p.key: p.value for p in fused.metadata_props}[POSITIONS_KEY] == POSITIONS_FROM_LENGTHS
    embeds, mask, positions = _batch([11, 4, 7], 64)  # right padding, lengths unlike the export's trace
    with torch.no_grad():
        expected = decoder(inputs_embeds=embeds, attention_mask=mask, position_ids=positions).last_hidden_state
    feeds = {"inputs_embeds": embeds.numpy(), "attention_mask": mask.numpy(), "position_ids": positions.numpy()}
    real = mask.bool().numpy()
    got = _session(fused).run(None, feeds)[0]
    np.testing.assert_allclose(got[real], expected.numpy()[real], atol=2e-4, rtol=1e-4)
    # and the fused graph agrees with the unfused export as closely as that agrees with torch
    unfused = _session(exported).run(None, feeds)[0]
    assert np.abs(got[real] - unfused[real]).max() < 2e-4


def test_fusion_is_skipped_where_the_kernel_does_not_apply(tmp_path):
    decoder = _llama(head_dim=8)  # ONNX Runtime's kernel takes head sizes in multiples of 16
    model = onnx.load(str(od.export_decoder(decoder, tmp_path / "decoder.onnx")))
    before = [n.op_type for n in model.graph.node]
    assert fuse_attention(model, decoder) == 0
    assert [n.op_type for n in model.graph.node] == before


def test_a_fused_decoder_refuses_positions_it_would_ignore(tmp_path):
    decoder = _llama(head_dim=16)
    model = onnx.load(str(od.export_decoder(decoder, tmp_path / "decoder.onnx")))
    fuse_attention(model, decoder)
    onnx.save_model(model, str(tmp_path / "fused.onnx"))
    wrapped = od.OnnxDecoder(decoder, tmp_path / "fused.onnx", "fused", threads=1)
    assert wrapped.positions_from_lengths
    embeds, mask, positions = _batch([5, 3], 64)
    wrapped(inputs_embeds=embeds, attention_mask=mask, position_ids=positions)
    with pytest.raises(ValueError, match=r"positions 0\.\.T-1"):
        wrapped(inputs_embeds=embeds, attention_mask=mask, position_ids=positions + 2)
