"""The int8 reranker (quantize="int8"/"auto"): its scores against the float decoder's, its graph built once and then
read from the cache without transformers, scores that do not depend on batching or on how many batches run at once,
when "auto" takes int8, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from rag_helpers import RERANK_DOCS, RERANK_QUERY, save_lm_variant

from c2v_rag.core.config import read_config
from c2v_rag.rerank import Causal2VecReranker
from c2v_rag.rerank.loading import scoring_plan

pytest.importorskip("onnxruntime")

DOCS = [*RERANK_DOCS, "Bone density falls with age, and calcium and vitamin D slow that loss in older adults."]
QUERY = RERANK_QUERY


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        root = tmp_path_factory.mktemp("int8-rerank-cache")
        patch.setenv("C2V_RAG_CACHE", str(root))
        yield root


@pytest.fixture(
    scope="module", params=[("llama", False), ("qwen2", True)], ids=["llama-untied-bos", "qwen2-tied-chatml"]
)
def variant(request, tmp_path_factory, tiny_dirs, onnx_cache):
    """A saved tiny variant whose base decoder has a language-model head."""
    family, tied = request.param
    variant, _ = save_lm_variant(tmp_path_factory.mktemp("int8-rerank"), family, tied, tiny_dirs["bert"])
    return variant


@pytest.fixture(scope="module")
def int8_reranker(variant):
    return Causal2VecReranker(variant, device="cpu", quantize="int8")


def test_int8_scores_follow_the_float_decoders(variant, int8_reranker):
    from c2v_rag.cpu.onnx_decoder import OnnxDecoder

    float32 = Causal2VecReranker(variant, device="cpu", dtype="float32")
    assert int8_reranker.precision == "int8" and float32.precision == "float32"
    assert isinstance(int8_reranker.scoring.likelihood.backbone, OnnxDecoder)
    assert "precision='int8'" in repr(int8_reranker)
    exact, approximate = float32.score(QUERY, DOCS), int8_reranker.score(QUERY, DOCS)
    assert not np.array_equal(exact, approximate)  # the int8 graph computed them
    # The float decoder spreads these documents over whole nats a token; int8 moves each by a small part of that
    # (this random decoder's weights are far larger than a trained one's, and so are its rounding errors).
    assert np.ptp(exact) > 1.0
    assert np.abs(approximate - exact).max() < 0.1 * np.ptp(exact)
    ranks = [np.argsort(np.argsort(v)) for v in (approximate, exact)]
    assert np.corrcoef(*ranks)[0, 1] > 0.9  # Spearman's rank correlation: one neighbouring swap of six is 0.94
    assert np.argmax(approximate) == np.argmax(exact)


def test_the_graph_is_read_from_the_cache_without_building(variant, int8_reranker, monkeypatch, onnx_cache):
    import c2v_rag.rerank.int8 as int8_module

    graphs = sorted(onnx_cache.glob("onnx/*/decoder-*.onnx"))

    def refuse(*args, **kwargs):
        raise AssertionError("the int8 reranker was built again")

    monkeypatch.setattr(int8_module, "_build", refuse)
    again = Causal2VecReranker(variant, device="cpu", quantize="int8")
    assert again.scoring.likelihood.backbone.path == int8_reranker.scoring.likelihood.backbone.path
    np.testing.assert_array_equal(again.score(QUERY, DOCS), int8_reranker.score(QUERY, DOCS))
    assert sorted(onnx_cache.glob("onnx/*/decoder-*.onnx")) == graphs


def test_int8_scores_do_not_depend_on_batching_or_workers(int8_reranker, monkeypatch):
    whole = int8_reranker.score(QUERY, DOCS)
    likelihood = int8_reranker.scoring.likelihood
    pairs = int8_reranker.pairs.pairs(int8_reranker.pairs.query_ids(QUERY), DOCS)
    one_by_one = [likelihood.log_probs([p], 1) for p in pairs]
    query_tokens = len(int8_reranker.pairs.query_ids(QUERY))
    np.testing.assert_allclose(np.concatenate(one_by_one) / query_tokens, whole, rtol=0, atol=1e-6)
    np.testing.assert_allclose(int8_reranker.score(QUERY, DOCS[::-1])[::-1], whole, rtol=0, atol=1e-6)
    # Two batches at once, each on its own thread (an ONNX Runtime session computes a batch on one core).
    monkeypatch.setattr(likelihood.backbone, "threads", 2)
    assert likelihood.workers == 2
    np.testing.assert_allclose(int8_reranker.score(QUERY, DOCS), whole, rtol=0, atol=1e-6)


def test_the_int8_reranker_runs_a_batch_on_every_usable_core_whatever_torchs_threads(variant, monkeypatch):
    # A search and a server keep torch at one thread (the float path's barriers); the int8 sessions do not wait at
    # barriers, so the reranker's batches go on every core the process may use.
    import c2v_rag.core.devices as devices

    monkeypatch.setattr(devices, "usable_cores", lambda: 3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        reranker = Causal2VecReranker(variant, device="cpu", quantize="int8")
        assert reranker.scoring.likelihood.workers == 3
    finally:
        torch.set_num_threads(threads)


def test_auto_takes_int8_where_new_vectors_would_be_int8(variant, monkeypatch):
    import c2v_rag.core.devices as devices

    config = read_config(variant)
    monkeypatch.setattr(devices, "cpu_class", lambda: "avx2")
    monkeypatch.setattr(devices, "int8_runtime_installed", lambda: True)
    monkeypatch.delenv("C2V_RAG_QUANTIZE", raising=False)
    assert scoring_plan(config, None, "base", "cpu", None, "auto").int8
    assert scoring_plan(config, None, "base", "cpu", None, "auto").precision == "int8"
    # a dtype asked for, the variant's own decoder, no quantize, a GPU: the float decoder
    assert scoring_plan(config, None, "base", "cpu", "bfloat16", "auto").precision == "bfloat16"
    assert not scoring_plan(config, None, "variant", "cpu", None, "auto").int8
    assert not scoring_plan(config, None, "base", "cpu", None, None).int8
    assert not scoring_plan(config, None, "base", "cuda", None, "auto").int8
    monkeypatch.setenv("C2V_RAG_QUANTIZE", "none")  # float everywhere
    assert not scoring_plan(config, None, "base", "cpu", None, "auto").int8
    monkeypatch.delenv("C2V_RAG_QUANTIZE")
    monkeypatch.setattr(devices, "int8_runtime_installed", lambda: False)  # no int8 extra
    assert scoring_plan(config, None, "base", "cpu", None, "auto").precision == devices.dtype_name(
        devices.resolve_dtype(config.dtype, torch.device("cpu"))
    )
    monkeypatch.setattr(devices, "int8_runtime_installed", lambda: True)
    monkeypatch.setattr(devices, "cpu_class", lambda: "other")  # int8 not measured as good here
    assert not scoring_plan(config, None, "base", "cpu", None, "auto").int8


def test_a_loaded_float_model_reranks_in_int8_where_new_vectors_would_be_int8(variant, monkeypatch):
    # A server's and the frameworks' models stay float for their vectors; their reranker goes as a search's does.
    import c2v_rag.core.devices as devices
    from c2v_rag import Causal2Vec

    monkeypatch.setattr(devices, "cpu_class", lambda: "avx2")
    monkeypatch.setattr(devices, "int8_runtime_installed", lambda: True)
    monkeypatch.delenv("C2V_RAG_QUANTIZE", raising=False)
    model = Causal2Vec.from_pretrained(variant, device="cpu", dtype="float32")
    assert scoring_plan(model.config, model, "base", None, None, "auto").int8
    model.quantization = "int8-token-sq"  # what the plan reads of an int8 model
    assert scoring_plan(model.config, model, "base", None, None, "auto").int8
    model.quantization = "none"
    # float asked for (quantize none, $C2V_RAG_QUANTIZE=none, a CPU where int8 is not the default): the model's dtype
    assert scoring_plan(model.config, model, "base", None, None, None).precision == "float32"
    monkeypatch.setenv("C2V_RAG_QUANTIZE", "none")
    assert scoring_plan(model.config, model, "base", None, None, "auto").precision == "float32"
    monkeypatch.delenv("C2V_RAG_QUANTIZE")
    monkeypatch.setattr(devices, "cpu_class", lambda: "amx")
    assert scoring_plan(model.config, model, "base", None, None, "auto").precision == "float32"


def test_auto_scores_with_the_float_decoder_when_the_int8_graph_cannot_be_built(variant, monkeypatch, caplog):
    import c2v_rag.core.devices as devices
    import c2v_rag.rerank.int8 as int8_module

    def broken(*args, **kwargs):
        raise RuntimeError("ONNX export failed: an operator this exporter does not know")

    monkeypatch.setattr(devices, "cpu_class", lambda: "avx2")
    monkeypatch.setattr(devices, "cpu_has_native_bf16", lambda: False)
    monkeypatch.delenv("C2V_RAG_QUANTIZE", raising=False)
    monkeypatch.setattr(int8_module, "int8_scoring_decoder", broken)
    with caplog.at_level("WARNING", logger="c2v_rag"):
        fallback = Causal2VecReranker(variant, device="cpu")
    assert fallback.precision == "float32"
    assert any("could not be built" in r.getMessage() and "operator" in r.getMessage() for r in caplog.records)
    exact = Causal2VecReranker(variant, device="cpu", dtype="float32")
    np.testing.assert_allclose(fallback.score(QUERY, DOCS), exact.score(QUERY, DOCS), rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeError, match="ONNX export failed"):  # asked for by name, the failure is the caller's
        Causal2VecReranker(variant, device="cpu", quantize="int8")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"quantize": "int4"}, "quantize must be one of auto, int8, none"),
        ({"quantize": "int8", "decoder": "variant"}, "scores with the base decoder"),
        ({"quantize": "int8", "device": "cuda"}, "runs on a CPU only"),
    ],
)
def test_bad_quantize_options_are_refused_before_loading(variant, options, message):
    with pytest.raises(ValueError, match=message):
        scoring_plan(
            read_config(variant),
            None,
            options.get("decoder", "base"),
            options.get("device", "cpu"),
            None,
            options["quantize"],
        )
    with pytest.raises(ValueError, match=message):
        Causal2VecReranker(variant, **options)


@pytest.mark.real_weights
def test_the_presets_int8_reranker_ranks_as_its_float_decoder_does(tmp_path, monkeypatch):
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path))
    query = "How can my server program cut its ties to the terminal it was started from?"
    docs = [
        "setsid() creates a new session if the calling process is not a process group leader.",
        "Bananas are rich in potassium and grow in tropical climates.",
        "A daemon forks, lets the parent exit, and calls setsid so that it has no controlling terminal.",
        "The kernel schedules threads by their priority and the time they have run.",
    ]
    exact = Causal2VecReranker(device="cpu", dtype="float32").score(query, docs)
    approximate = Causal2VecReranker(device="cpu", quantize="int8").score(query, docs)
    assert list(np.argsort(-approximate)) == list(np.argsort(-exact))
    np.testing.assert_allclose(approximate, exact, atol=0.15)


def test_a_shipped_calibration_builds_the_graph_a_float32_calibration_builds(variant, tmp_path, monkeypatch):
    import c2v_rag.cpu.int8 as recipe
    import c2v_rag.rerank.int8 as int8_module
    from c2v_rag.rerank.loading import write_rerank_calibration

    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "cache"))  # a new machine's: the graph is built again
    shipped_folder = tmp_path / "shipped"
    path = write_rerank_calibration(variant, shipped_folder)
    assert path.parent == shipped_folder and path.suffix == ".safetensors"
    monkeypatch.setattr(int8_module, "shipped_folder", lambda: shipped_folder)
    calibrations: list[int] = []
    calibrate = int8_module._calibrate
    monkeypatch.setattr(int8_module, "_calibrate", lambda *a, **k: calibrations.append(1) or calibrate(*a, **k))
    shipped = Causal2VecReranker(variant, device="cpu", quantize="int8")
    assert calibrations == []
    # Without it, a float32 calibration here gives the same maxima, so the same graph (under another key) and scores.
    monkeypatch.setattr(int8_module, "shipped_folder", lambda: tmp_path / "none")
    monkeypatch.setattr(recipe, "calibration_precision", lambda: "fp32")
    calibrated = Causal2VecReranker(variant, device="cpu", quantize="int8")
    assert calibrations == [1]
    assert calibrated.scoring.likelihood.backbone.path != shipped.scoring.likelihood.backbone.path
    np.testing.assert_array_equal(calibrated.score(QUERY, DOCS), shipped.score(QUERY, DOCS))


@pytest.mark.real_weights
def test_the_package_ships_a_reranker_calibration_for_the_presets_base():
    # Stale after the base package, the template or the calibration texts change: write it again with
    # c2v_rag.rerank.loading.write_rerank_calibration().
    from c2v_rag.cpu.int8 import shipped_bases
    from c2v_rag.hub.presets import resolve_variant_path
    from c2v_rag.rerank.int8 import shipped_folder, shipped_maxima
    from c2v_rag.rerank.loading import scoring_layout

    source, _, _, pairs = scoring_layout(read_config(resolve_variant_path(None)), None)
    made_on = shipped_bases(shipped_folder() / "smollm2-135m-instruct.safetensors")
    if made_on != {"decoder": source.content_digest()}:  # another release of the package or of its converter
        pytest.skip(f"the base decoder here ({source.content_digest()}) is not the one it was made on ({made_on})")
    shipped = shipped_maxima(source, pairs)
    assert shipped is not None, "stale: write it again with c2v_rag.rerank.loading.write_rerank_calibration()"
    assert "layers.29.mlp.down_proj" in shipped.maxima
