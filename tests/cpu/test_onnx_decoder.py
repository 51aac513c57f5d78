"""The decoder run by ONNX Runtime (c2v_rag.cpu.onnx_decoder, issue 26): the export reproduces torch's decoder call,
it is cached on disk by the weights, and it plugs into Causal2Vec with batching and readout unchanged. Every
vector is checked against the same model's torch float32 vectors."""

from __future__ import annotations

import builtins

import numpy as np
import pytest
import torch

from c2v_rag import Causal2Vec
from c2v_rag.core.errors import MissingPackageError

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from c2v_rag.cpu import onnx_decoder as od  # noqa: E402
from c2v_rag.cpu.ort_session import optimized_path  # noqa: E402

TEXTS = [
    "short",
    "a somewhat longer text about proteins and the cells that make them",
    "three words here",
    "and one more sentence, of middling length, to pad the batch",
]


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _with_decoder(model: Causal2Vec, decoder) -> Causal2Vec:
    return Causal2Vec(
        model.config, decoder, model.tokenizer, model.encoder, model.encoder_tokenizer, model.projector
    ).eval()


def test_fp32_export_matches_torch_in_a_batch_and_alone_and_is_cached(tiny_model_factory, tmp_path, monkeypatch):
    model = tiny_model_factory("llama")
    attention = model.decoder.config._attn_implementation
    decoder = od.onnx_decoder(model.decoder, "fp32", cache_dir=tmp_path)
    assert model.decoder.config._attn_implementation == attention  # traced in eager mode, then restored
    assert decoder.session.get_providers() == ["CPUExecutionProvider"]
    ort_model = _with_decoder(model, decoder)
    reference = model.encode(TEXTS, normalize_embeddings=True)
    batch = ort_model.encode(TEXTS, normalize_embeddings=True)
    alone = np.stack([ort_model.encode(t, normalize_embeddings=True) for t in TEXTS])
    assert _cos(batch, reference).min() > 0.99999
    assert _cos(alone, batch).min() > 0.99999
    np.testing.assert_allclose(batch, reference, atol=1e-4)
    # cached: one folder, the graph and its optimized form (c2v_rag.cpu.ort_session), nothing half-written; the
    # second call does not export again
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert files == sorted([decoder.path, optimized_path(decoder.path)])
    monkeypatch.setattr(od, "export_decoder", lambda *a, **k: pytest.fail("exported again"))
    assert od.onnx_decoder(model.decoder, "fp32", cache_dir=tmp_path).path == decoder.path


def test_the_cache_key_follows_the_weights(tiny_model_factory):
    model = tiny_model_factory("llama")
    key = od.decoder_key(model.decoder, "fp32")
    assert od.decoder_key(model.decoder, "nbits8-b32") != key
    # not where the weights were read from: the same base converted under another cache folder keeps its graphs
    model.decoder.config._name_or_path = "/somewhere/else/smollm2"
    assert od.decoder_key(model.decoder, "fp32") == key
    with torch.no_grad():
        next(p for n, p in model.decoder.named_parameters() if "layers.0" in n).add_(1e-3)
    assert od.decoder_key(model.decoder, "fp32") != key


def test_int8_blocks_stay_close_to_float_on_a_tiny_model(tiny_model_factory, tmp_path):
    model = tiny_model_factory("llama")
    ort_model = _with_decoder(model, od.onnx_decoder(model.decoder, "nbits8-b32", cache_dir=tmp_path))
    assert any(n.op_type == "MatMulNBits" for n in __import__("onnx").load(str(ort_model.decoder.path)).graph.node)
    cos = _cos(ort_model.encode(TEXTS, normalize_embeddings=True), model.encode(TEXTS, normalize_embeddings=True))
    assert cos.min() > 0.99


def test_a_missing_onnxruntime_names_the_extra(tiny_model_factory, monkeypatch):
    model = tiny_model_factory("llama")
    real_import = builtins.__import__

    def no_ort(name, *args, **kwargs):
        if name == "onnxruntime" or name.startswith("onnxruntime."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ort)
    monkeypatch.delitem(__import__("sys").modules, "onnxruntime", raising=False)
    with pytest.raises(MissingPackageError, match=r"c2v-rag\[int8\]"):
        od.onnx_decoder(model.decoder, "fp32")


def test_unknown_methods_are_refused():
    with pytest.raises(ValueError, match="one of fp32, nbits8-b32"):
        od.cached_onnx(torch.nn.Linear(2, 2), "int3")


# ------------------------------------------------------------------ the real preset (issue 26's bounds)

REAL_TEXTS = [
    "Vitamin D deficiency increases the risk of bone fractures.",
    "Low serum vitamin D was associated with higher fracture rates in elderly patients. " * 3,
    "The central bank raised interest rates by a quarter point.",
    (
        "Background: Mutations in the BRCA1 gene predispose carriers to breast and ovarian cancer. Methods: We "
        "sequenced tumours from 212 patients and compared expression profiles with matched normal tissue. "
        "Results: Loss of heterozygosity was found in 61% of tumours, and homologous recombination deficiency "
        "scores were higher in carriers. Conclusions: BRCA1 loss shapes the mutational landscape of these "
        "tumours and predicts response to platinum chemotherapy. "
    )
    * 2,
    "ATP synthase couples proton flow to phosphorylation.",
    "Microglia prune synapses during development through complement signalling in the mouse brain.",
]


@pytest.fixture(scope="module")
def preset():
    return Causal2Vec.from_pretrained(None, device="cpu", dtype="float32")


@pytest.mark.real_weights
@pytest.mark.parametrize(
    ("method", "to_float", "alone_vs_batch"),
    [
        ("fp32", 0.99999, 0.99999),
        # measured on 16 SciFact texts: 0.99913 worst, 0.99972 alone vs batch (docs/performance.md); the targets:
        ("nbits8-b32", 0.99, 0.999),
    ],
)
def test_the_preset_through_onnx_runtime_stays_within_the_bounds(
    preset, tmp_path_factory, method, to_float, alone_vs_batch
):
    decoder = od.onnx_decoder(preset.decoder, method, cache_dir=tmp_path_factory.mktemp("onnx"))
    ort_model = _with_decoder(preset, decoder)
    reference = preset.encode(REAL_TEXTS, normalize_embeddings=True)
    batch = ort_model.encode(REAL_TEXTS, normalize_embeddings=True)
    alone = np.stack([ort_model.encode(t, normalize_embeddings=True) for t in REAL_TEXTS])
    assert _cos(batch, reference).min() >= to_float
    for part in ("contextual", "eos"):
        span = preset.config.parts[part]
        assert _cos(batch[:, span], reference[:, span]).min() >= to_float - 0.005
    assert _cos(alone, batch).min() >= alone_vs_batch
