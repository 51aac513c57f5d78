"""quantize="int8" (c2v_rag.cpu.int8, issue 26): the per-token int8 graph rewrite against a numpy computation of the
same arithmetic, SmoothQuant's identity, the calibration, and the model it builds: close to the float vectors,
independent of the batch, cached on disk so that a second load neither calibrates nor exports again."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from c2v_rag import Causal2Vec  # noqa: E402
from c2v_rag.core.devices import INT8_METHOD  # noqa: E402
from c2v_rag.cpu import int8 as int8_module  # noqa: E402
from c2v_rag.cpu import onnx_decoder as od  # noqa: E402
from c2v_rag.cpu import onnx_encoder as onnx_encoder_module  # noqa: E402
from c2v_rag.cpu.onnx_encoder import OnnxEncoder  # noqa: E402
from c2v_rag.nn.projector import ContextualProjector  # noqa: E402

TEXTS = [
    "short",
    "a somewhat longer text about proteins and the cells that make them",
    "three words here",
    "and one more sentence, of middling length, to pad the batch",
]


@pytest.fixture(autouse=True)
def encoder_in_onnx(monkeypatch):
    """These tests check the ONNX graphs, the encoder's among them, on any CPU: the encoder runs in ONNX Runtime as
    on a CPU without native bf16 (test_the_encoder_runs_in_bf16_where_the_cpu_computes_it covers the other case)."""
    monkeypatch.setattr(int8_module, "encoder_runs_in_bf16", lambda: False)


@pytest.fixture(scope="module")
def tiny_variant(tiny_model_factory, tmp_path_factory):
    """A saved tiny llama variant, loaded by path as a user loads one."""
    path = tmp_path_factory.mktemp("variant-int8")
    tiny_model_factory("llama", max_length=128).save_pretrained(path)
    return path


def _linear_graph(w: np.ndarray, name: str = "/layers.0/mlp/up_proj/MatMul", opset: int = 17) -> onnx.ModelProto:
    """x [B, T, K] @ w [K, M], the way the exporter writes a linear layer (the weight an initializer)."""
    k, m = w.shape
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name=name)
    graph = helper.make_graph(
        [node],
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "t", m])],
        [numpy_helper.from_array(w.astype(np.float32), "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8 if opset < 21 else 10)


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(["y"], {"x": x.astype(np.float32)})[0]


def _per_token_int8_by_hand(x: np.ndarray, w: np.ndarray, maxima: np.ndarray | None, alpha: float) -> np.ndarray:
    """The int8 arithmetic the module doc describes, written out in numpy (float32 like the graph)."""
    x, w = x.reshape(-1, x.shape[-1]).astype(np.float32), w.astype(np.float32)
    if maxima is not None:
        s = np.clip(np.maximum(maxima, 1e-5) ** alpha / np.maximum(np.abs(w).max(1), 1e-5) ** (1 - alpha), 1e-5, None)
        s = s.astype(np.float32)
        x, w = x * (np.float32(1) / s), w * s[:, None]
    w_scale = (np.abs(w).max(0) / 64).astype(np.float32)
    wq = np.clip(np.round(w / w_scale), -64, 64)
    low = np.minimum(x.min(1, keepdims=True), 0)
    high = np.maximum(x.max(1, keepdims=True), 0)
    scale = np.maximum((high - low) / np.float32(255), np.float32(1e-8))
    zero_point = np.round(-low / scale)  # each row's own uint8 zero point
    xq = np.clip(np.round(x / scale) + zero_point, 0, 255)
    return (xq @ wq) * (scale * w_scale) - zero_point * scale * (wq * w_scale).sum(0)


@pytest.mark.parametrize("opset", [17, 23])  # the export's, and that of a graph with fused attention
@pytest.mark.parametrize("fold", [False, True])
@pytest.mark.parametrize("smooth", [False, True])
def test_the_rewrite_computes_per_token_int8_as_written_out_by_hand(smooth, fold, opset):
    rng = np.random.default_rng(0)
    w = rng.normal(size=(48, 40)).astype(np.float32)
    x = rng.normal(size=(3, 5, 48)).astype(np.float32)
    x[..., 7] *= 40  # an outlier channel, as LLM activations have
    x[1] *= 0.01  # a row of another magnitude: it gets its own scale
    maxima = np.abs(x).reshape(-1, 48).max(0) if smooth else None
    model = _linear_graph(w, opset=opset)
    replaced = int8_module.rewrite_per_token_int8(
        model.graph, {"layers.0.mlp.up_proj": maxima} if smooth else None, alpha=0.5, fold_zero_point=fold, opset=opset
    )
    onnx.checker.check_model(model, full_check=True)  # valid at its opset (the reductions' axes)
    assert replaced == 1
    # folded, the zero point's share is taken out inside the integer GEMM: no float pass over the output
    assert ("Add" in {n.op_type for n in model.graph.node}) is not fold
    assert "MatMulInteger" in {n.op_type for n in model.graph.node}
    assert "w" not in {i.name for i in model.graph.initializer}  # the float weight is gone
    got = _run(model, x)
    assert got.shape == (3, 5, 40)
    expected = _per_token_int8_by_hand(x, w, maxima, 0.5).reshape(3, 5, 40)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
    exact = x @ w
    # int8, not the float product: close to it, row by row (the small row too), yet not equal
    for row in range(3):
        err = np.abs(got[row] - exact[row]).max() / np.abs(exact[row]).max()
        assert 1e-6 < err < 0.05


@pytest.mark.parametrize("fold", [False, True])
def test_the_folded_zero_point_is_exact_integer_arithmetic(fold):
    """With the zero point inside the GEMM, the int32 accumulator holds (xq - z) @ wq exactly: the graph's
    output is that integer product times the row and column scales, to float32 rounding of the final product
    (6e-8 of the largest here). Unfolded, z x colsum is subtracted in float32 from a product of similar size:
    50 times that error at SmolLM2's width (576 inputs)."""
    rng = np.random.default_rng(1)
    w = rng.normal(size=(576, 24)).astype(np.float32)
    w[:, 3] = np.abs(w[:, 3])  # a column whose int8 weights sum far from zero: many zero-point rows
    x = rng.normal(size=(2, 7, 576)).astype(np.float32) + 1.0  # skewed rows: zero points of 70-100
    model = _linear_graph(w)
    int8_module.rewrite_per_token_int8(model.graph, None, fold_zero_point=fold)
    got = _run(model, x).reshape(-1, 24)
    rows = x.reshape(-1, 576)
    w_scale = (np.abs(w).max(0) / 64).astype(np.float32)
    wq = np.clip(np.round(w / w_scale), -64, 64).astype(np.int64)
    low, high = np.minimum(rows.min(1, keepdims=True), 0), np.maximum(rows.max(1, keepdims=True), 0)
    scale = np.maximum((high - low) / np.float32(255), np.float32(1e-8))
    z = np.round(-low / scale)
    assert z.min() > 50
    xq = np.clip(np.round(rows / scale) + z, 0, 255).astype(np.int64)
    exact = ((xq - z.astype(np.int64)) @ wq).astype(np.float64) * scale * w_scale
    error = np.abs(got - exact).max() / np.abs(exact).max()
    assert error < 3e-7 if fold else error > 1e-6


@pytest.mark.parametrize("sums", [[0, 1, -1, 64, -65, 700, -2_000], [5_000, -5_000, 3, 0, 0, 0, 1]])
def test_zero_point_rows_sum_to_minus_the_column_sums_within_the_weight_range(sums):
    wq = np.zeros((100, len(sums)), np.int8)
    for col, total in enumerate(sums):  # int8 columns with these sums
        values = np.full(100, np.sign(total) * (abs(total) // 100), np.int64)
        values[: abs(total) % 100] += np.sign(total)
        wq[:, col] = values
    assert (wq.astype(np.int64).sum(0) == sums).all()
    extra = int8_module._zero_point_width(wq, 64)
    assert extra % 4 == 0 and extra >= np.ceil(max(abs(t) for t in sums) / 64)
    rows = int8_module._zero_point_rows(wq, extra, 64)
    assert rows.shape == (extra, len(sums)) and rows.dtype == np.int8
    assert np.abs(rows.astype(np.int64)).max() <= 64  # 255 x 64 x 2 fits AVX2's int16 pair sums
    assert (rows.astype(np.int64).sum(0) == -np.array(sums)).all()
    with pytest.raises(ValueError, match="cannot carry"):  # 4 rows carry at most 4 x 64 = 256
        int8_module._zero_point_rows(wq, 4, 64)


def test_layers_reading_one_norm_share_its_quantization_and_fold_smoothquant_into_it():
    """q and k read the same RMSNorm output: one SmoothQuant factor (from both weights), one quantized copy,
    two int8 GEMMs, and 1/s folded into the norm's weight instead of a Mul; the numbers are those of one
    linear layer with the two weights side by side."""
    rng = np.random.default_rng(2)
    wq_, wk = rng.normal(size=(32, 24)).astype(np.float32), rng.normal(size=(32, 8)).astype(np.float32)
    gamma = rng.uniform(0.5, 2, size=32).astype(np.float32)
    x = rng.normal(size=(2, 6, 32)).astype(np.float32)
    x[..., 5] *= 30
    nodes = [
        helper.make_node("Mul", ["x", "gamma"], ["normed"], name="/layers.0/input_layernorm/Mul_1"),
        helper.make_node("MatMul", ["normed", "wq"], ["q"], name="/layers.0/self_attn/q_proj/MatMul"),
        helper.make_node("MatMul", ["normed", "wk"], ["k"], name="/layers.0/self_attn/k_proj/MatMul"),
    ]
    graph = helper.make_graph(
        nodes,
        "qk",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t", 32])],
        [
            helper.make_tensor_value_info("q", TensorProto.FLOAT, ["b", "t", 24]),
            helper.make_tensor_value_info("k", TensorProto.FLOAT, ["b", "t", 8]),
        ],
        [
            numpy_helper.from_array(gamma, "gamma"),
            numpy_helper.from_array(wq_, "wq"),
            numpy_helper.from_array(wk, "wk"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    normed = x * gamma
    amax = np.abs(normed).reshape(-1, 32).max(0)
    assert (
        int8_module.rewrite_per_token_int8(
            model.graph, {"layers.0.self_attn.q_proj": amax, "layers.0.self_attn.k_proj": amax}
        )
        == 2
    )
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("QuantizeLinear") == 1 and ops.count("MatMulInteger") == 2
    assert not any(name.endswith("_inv_s") for n in model.graph.node for name in n.input)  # no Mul by 1/s
    folded = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "gamma"))
    assert not np.allclose(folded, gamma)  # 1/s now lives in the norm's weight
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got_q, got_k = session.run(["q", "k"], {"x": x})
    both = _per_token_int8_by_hand(normed, np.concatenate([wq_, wk], axis=1), amax, 0.5).reshape(2, 6, 32)
    np.testing.assert_allclose(np.concatenate([got_q, got_k], axis=-1), both, rtol=1e-4, atol=1e-4 * np.abs(both).max())


def test_smoothquant_brings_an_outlier_channel_closer_to_the_float_product():
    rng = np.random.default_rng(1)
    w = rng.normal(size=(64, 32)).astype(np.float32)
    x = rng.normal(size=(1, 16, 64)).astype(np.float32)
    x[..., 3] *= 200
    exact = x @ w
    errors = []
    for maxima in (None, {"layers.0.mlp.up_proj": np.abs(x).reshape(-1, 64).max(0)}):
        model = _linear_graph(w)
        int8_module.rewrite_per_token_int8(model.graph, maxima)
        errors.append(np.abs(_run(model, x) - exact).mean())
    assert errors[1] < errors[0] / 2


def test_kept_float_layers_and_missing_maxima():
    w = np.ones((8, 4), np.float32)
    model = _linear_graph(w, "/layers.0/mlp/down_proj/MatMul")
    assert int8_module.rewrite_per_token_int8(model.graph, None, keep_float=("down_proj",)) == 0
    assert [n.op_type for n in model.graph.node] == ["MatMul"]
    assert int8_module.rewrite_per_token_int8(model.graph, None) == 1  # in int8 by default since recipe v4
    model = _linear_graph(w)
    with pytest.raises(ValueError, match=r"no calibration maxima for the ONNX node '/layers.0/mlp/up_proj/MatMul'"):
        int8_module.rewrite_per_token_int8(model.graph, {"layers.1.mlp.up_proj": np.ones(8)})


def test_the_packaged_calibration_set_is_readable_and_varied():
    documents, queries = int8_module.calibration_texts()
    assert len(documents) >= 40 and len(queries) >= 24
    lengths = sorted(len(d.split()) for d in documents)
    assert lengths[0] < 60 and lengths[-1] > 140  # short and long passages
    assert len(set(documents)) == len(documents) and all(q.strip() for q in queries)


def test_calibration_records_every_decoder_linear_layer_on_either_backbone(tiny_variant):
    from c2v_rag.nn.plain import PlainLlama

    model = Causal2Vec.from_pretrained(tiny_variant, device="cpu")
    assert isinstance(model.decoder, PlainLlama)  # the plain forward: its linear layers are not nn.Linear
    plain = int8_module.input_maxima(model)
    config = model.decoder.config
    projections = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj")
    projections += ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
    expected = {f"layers.{i}.{p}" for i in range(config.num_hidden_layers) for p in projections}
    assert set(plain) == expected
    modules = dict(model.decoder.named_modules())
    for name, values in plain.items():
        assert values.shape == (modules[name].weight.shape[1],) and (values > 0).all()
    # transformers' modules of the same weights see the same inputs: the same maxima, bit for bit
    transformers = int8_module.input_maxima(model.use_transformers_backbones())
    assert set(transformers) == expected
    for name in expected:
        np.testing.assert_array_equal(plain[name], transformers[name])
    with pytest.raises(ValueError, match="has no linear layer to calibrate"):
        int8_module.linear_input_maxima(torch.nn.Sequential(torch.nn.ReLU()), lambda: None)


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_quantize_int8_builds_a_cached_int8_decoder_close_to_float_and_batch_free(
    tiny_variant, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path))
    float_model = Causal2Vec.from_pretrained(tiny_variant, device="cpu")
    capsys.readouterr()
    model = Causal2Vec.from_pretrained(tiny_variant, device="cpu", quantize="int8")
    # The first load builds the graphs under one progress bar, which ends full, through every stage.
    shown = capsys.readouterr().err
    assert "Building the int8 model (once; cached for later loads)" in shown
    assert "100%" in shown and shown.count("Building the int8 model") >= 2, shown
    for name in ("exporting the decoder", "calibrating", "writing the int8 decoder", "exporting the encoder"):
        assert name in shown, name
    last = [line for line in shown.replace("\r", "\n").splitlines() if "Building the int8 model" in line][-1]
    assert "100%" in last and last.rstrip().endswith("built]"), last  # not "exporting the encoder" under a full bar
    assert model.quantization == INT8_METHOD and float_model.quantization == "none"
    assert isinstance(model.decoder, od.OnnxDecoder) and model.decoder.path.is_relative_to(tmp_path / "onnx")
    assert isinstance(model.encoder, OnnxEncoder) and model.encoder.path.is_relative_to(tmp_path / "onnx")
    ops = {n.op_type for n in onnx.load(str(model.decoder.path)).graph.node}
    assert "MatMulInteger" in ops
    exact = float_model.encode(TEXTS, normalize_embeddings=True)
    batch = model.encode(TEXTS, normalize_embeddings=True)
    alone = np.stack([model.encode(t, normalize_embeddings=True) for t in TEXTS])
    assert not np.allclose(batch, exact, atol=1e-5)  # it is int8, not the float graph
    assert _cos(batch, exact).min() > 0.99
    # A text's vector does not depend on its batch: every part computes each row on its own (ONNX Runtime's
    # kernels, the projector row by row), so alone and batched agree to float32 rounding at most; a
    # batch-dependent part would show as int8 rounding flips, ~1e-3 here.
    np.testing.assert_allclose(alone, batch, rtol=0, atol=1e-6)
    # A second load reads the cached graph: no calibration, no export, the same vectors. It finds the graphs by
    # the variant's digest, so it neither builds transformers' modules nor hashes the weights.
    monkeypatch.setattr(int8_module, "input_maxima", lambda *a, **k: pytest.fail("calibrated again"))
    monkeypatch.setattr(od, "export_decoder", lambda *a, **k: pytest.fail("exported again"))
    monkeypatch.setattr(onnx_encoder_module, "export_encoder", lambda *a, **k: pytest.fail("exported again"))
    monkeypatch.setattr(od, "hash_weights", lambda *a, **k: pytest.fail("hashed the weights again"))
    monkeypatch.setattr(
        Causal2Vec, "use_transformers_backbones", lambda *a, **k: pytest.fail("built transformers' modules")
    )
    capsys.readouterr()
    again = Causal2Vec.from_pretrained(tiny_variant, device="cpu", quantize="int8")
    assert "Building the int8 model" not in capsys.readouterr().err  # a load from the cache shows no bar
    assert again.decoder.path == model.decoder.path and again.encoder.path == model.encoder.path
    np.testing.assert_allclose(again.encode(TEXTS, normalize_embeddings=True), batch, atol=1e-6)


def test_a_variant_that_differs_in_an_adapters_scale_alone_gets_graphs_of_its_own(
    tiny_model_factory, tmp_path, monkeypatch
):
    """Two variants with the same weight files and another lora_alpha (an adapter scaled toward its base) are two
    models: each int8 load runs graphs built from its own merged weights. Found by the weights' digest alone, the
    second would run the first one's graphs and embed as the first does."""
    import json
    import shutil

    from tiny_models import with_lora

    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "cache"))
    model = with_lora(tiny_model_factory("llama", max_length=128), "encoder", std=2.0)
    variant = model.save_pretrained(tmp_path / "variant")
    halved = tmp_path / "halved"
    shutil.copytree(variant, halved)
    config_file = halved / "encoder_adapter" / "adapter_config.json"
    config = json.loads(config_file.read_text())
    config["lora_alpha"] = 4
    config_file.write_text(json.dumps(config))

    first = Causal2Vec.from_pretrained(variant, device="cpu", quantize="int8")
    first_vectors = first.encode(TEXTS, normalize_embeddings=True)
    second = Causal2Vec.from_pretrained(halved, device="cpu", quantize="int8")
    second_vectors = second.encode(TEXTS, normalize_embeddings=True)
    assert second.encoder.path != first.encoder.path
    second_float = Causal2Vec.from_pretrained(halved, device="cpu").encode(TEXTS, normalize_embeddings=True)
    first_float = Causal2Vec.from_pretrained(variant, device="cpu").encode(TEXTS, normalize_embeddings=True)
    assert _cos(first_float, second_float).min() < 0.999  # the two models embed apart (0.965-0.993 over seeds)
    # each int8 model is its own float model to int8 rounding (0.99999 over seeds); the other's graphs give 0.998 at
    # the most
    assert _cos(second_vectors, second_float).min() > 0.9995 and _cos(first_vectors, first_float).min() > 0.9995
    # And a second load of each finds its own graphs again.
    again = Causal2Vec.from_pretrained(halved, device="cpu", quantize="int8")
    assert again.encoder.path == second.encoder.path and again.decoder.path == second.decoder.path


def test_a_base_replaced_in_place_is_not_run_with_the_graphs_of_the_one_before(tiny_dirs, tmp_path, monkeypatch):
    """A later load finds a variant's int8 graphs by name, without hashing weights; the name covers the base models'
    files as they are, so a base replaced under the same path (a package upgrade) gets graphs of its own."""
    import shutil

    from safetensors.torch import load_file, save_file

    from c2v_rag.core.config import Causal2VecConfig

    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "cache"))
    base = tmp_path / "base"
    shutil.copytree(tiny_dirs["llama"], base)
    config = Causal2VecConfig(decoder=str(base), encoder=str(tiny_dirs["bert"]), dtype="float32", max_length=128)
    variant = Causal2Vec.from_config(config, device="cpu").save_pretrained(tmp_path / "variant")
    before = Causal2Vec.from_pretrained(variant, device="cpu", quantize="int8")
    before_vectors = before.encode(TEXTS, normalize_embeddings=True)

    (weights,) = base.glob("*.safetensors")
    generator = torch.Generator().manual_seed(1)
    state = load_file(str(weights))
    save_file({k: v + 0.05 * torch.randn(v.shape, generator=generator) for k, v in state.items()}, str(weights))
    after = Causal2Vec.from_pretrained(variant, device="cpu", quantize="int8")
    after_float = Causal2Vec.from_pretrained(variant, device="cpu").encode(TEXTS, normalize_embeddings=True)
    assert after.decoder.path != before.decoder.path
    assert _cos(after_float, before_vectors).min() < 0.999  # the new base embeds apart from the old
    assert _cos(after.encode(TEXTS, normalize_embeddings=True), after_float).min() > 0.9995  # int8 rounding: 0.9999


def test_the_projector_row_by_row_gives_each_text_the_same_c_alone_or_in_a_batch():
    torch.manual_seed(0)
    projector = ContextualProjector(384, 576).eval()  # the preset's sizes: MiniLM into SmolLM2
    states, mask = torch.randn(16, 40, 384), torch.ones(16, 40, dtype=torch.long)
    mask[3:, 25:] = 0
    with torch.no_grad():
        batched = projector(states, mask)
        projector.row_by_row = True
        rows = projector(states, mask)
        for i, n in enumerate(mask.sum(1).tolist()):  # bitwise: what the text gets alone, unpadded
            assert torch.equal(rows[i], projector(states[i : i + 1, :n], mask[i : i + 1, :n])[0])
    torch.testing.assert_close(rows, batched, rtol=0, atol=1e-5)  # the same function, only per row


def test_the_cache_key_follows_the_encoder_the_embeddings_and_the_calibration(tiny_variant, monkeypatch):
    model = Causal2Vec.from_pretrained(tiny_variant, device="cpu")
    key = int8_module.recipe_key(model)
    documents, queries = int8_module.calibration_texts()
    monkeypatch.setattr(int8_module, "calibration_texts", lambda: (documents[1:], queries))
    assert int8_module.recipe_key(model) != key
    monkeypatch.undo()
    assert int8_module.recipe_key(model) == key
    with torch.no_grad():
        next(model.encoder.parameters()).add_(1e-3)
    assert int8_module.recipe_key(model) != key
    # the decoder's word embeddings are not in the graph (not in its key) but make its inputs
    key = int8_module.recipe_key(model)
    with torch.no_grad():
        model.decoder.get_input_embeddings().weight[0].add_(1e-3)
    assert int8_module.recipe_key(model) != key


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_calibration_runs_in_the_precision_the_cpu_computes_natively(monkeypatch, precision):
    monkeypatch.setattr(int8_module, "cpu_has_native_bf16", lambda: precision == "bf16")
    assert int8_module.calibration_precision() == precision
    torch.manual_seed(0)
    layers = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, 4))
    x = torch.randn(64, 16)
    maxima = int8_module.linear_input_maxima(layers, lambda: layers(x))
    # the second layer reads the first's output: computed in bf16 under bf16 calibration, else in float32
    first = layers[0]
    cast = torch.bfloat16 if precision == "bf16" else torch.float32
    expected = torch.nn.functional.linear(x.to(cast), first.weight.to(cast), first.bias.to(cast)).abs().amax(0)
    np.testing.assert_array_equal(maxima["1"], expected.detach().float().numpy())
    np.testing.assert_array_equal(maxima["0"], x.abs().amax(0).numpy())  # the model's input is not cast


def test_the_graph_keys_name_the_calibration_precision(tiny_variant, monkeypatch):
    model = Causal2Vec.from_pretrained(tiny_variant, device="cpu")
    keys = {}
    for native in (True, False):
        monkeypatch.setattr(int8_module, "cpu_has_native_bf16", lambda native=native: native)
        keys[native] = (int8_module.recipe_key(model), int8_module.variant_alias("w", "{}", None, "[]"))
    assert keys[True][0] != keys[False][0] and keys[True][1] != keys[False][1]


def test_int8_needs_float32_weights_and_a_cpu(tiny_variant):
    with pytest.raises(ValueError, match=r"dtype='bfloat16' cannot apply"):
        Causal2Vec.from_pretrained(tiny_variant, device="cpu", dtype="bfloat16", quantize="int8")
    with pytest.raises(ValueError, match=r"CPU only"):
        Causal2Vec.from_pretrained(tiny_variant, device="cuda", quantize="int8")


def test_int8_encodes_in_smaller_token_budgets_than_float_by_default(tiny_variant, tmp_path, monkeypatch):
    # 512 padded tokens per batch under int8 against float's 1,024 on a CPU (encoding.default_max_tokens):
    # the decoders' own inputs show the batches the encode loop formed.
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path))
    texts = [" ".join(["protein folding in the cell"] * 8)] * 40  # ~40 decoder tokens each
    seen: dict[str, list[int]] = {}
    for quantize in ("none", "int8"):
        model = Causal2Vec.from_pretrained(tiny_variant, device="cpu", quantize=quantize)
        shapes = seen.setdefault(quantize, [])
        forward = model.decoder.forward

        def watched(*args, _forward=forward, _shapes=shapes, **kwargs):
            embeds = kwargs["inputs_embeds"] if "inputs_embeds" in kwargs else args[0]
            _shapes.append(embeds.shape[0] * embeds.shape[1])
            return _forward(*args, **kwargs)

        monkeypatch.setattr(model.decoder, "forward", watched)
        model.encode(texts)
        explicit = len(shapes)
        model.encode(texts, max_tokens_per_batch=1024)  # an explicit budget still wins
        assert max(shapes[explicit:]) > 512
        del shapes[explicit:]
    assert max(seen["int8"]) <= 512 < max(seen["none"]) <= 1024


def test_int8_keeps_a_bidirectional_decoder_bidirectional(tiny_model_factory, tmp_path, monkeypatch):
    """LLM2Vec's recipe (every token sees the whole row, mean pooling): the int8 graph keeps the exported
    bidirectional attention with its padding mask, so the vectors stay close to float's, alone or batched."""
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path))
    path = tmp_path / "llm2vec-like"
    tiny_model_factory(
        "llama", num_contextual_tokens=0, representation="mean", encoder=None, attention="bidirectional", max_length=128
    ).save_pretrained(path)
    float_model = Causal2Vec.from_pretrained(path, device="cpu")
    model = Causal2Vec.from_pretrained(path, device="cpu", quantize="int8")
    ops = {n.op_type for n in onnx.load(str(model.decoder.path)).graph.node}
    assert "MatMulInteger" in ops and "Attention" not in ops  # int8 linears, the exported attention
    exact = float_model.encode(TEXTS, normalize_embeddings=True)
    batch = model.encode(TEXTS, normalize_embeddings=True)
    assert _cos(batch, exact).min() > 0.99
    alone = np.stack([model.encode(t, normalize_embeddings=True) for t in TEXTS])
    np.testing.assert_allclose(alone, batch, rtol=0, atol=1e-5)


@pytest.mark.parametrize("representation", ["concat", "last_token", "mean"])
def test_int8_computes_the_last_layer_at_the_rows_the_readout_reads(
    tiny_model_factory, tmp_path, monkeypatch, representation
):
    """The int8 graph's last layer runs at the positions the representation reads (C and EOS for concat, EOS
    for last_token; every row for mean, which pools them all), and the vectors are bit for bit those of the
    same graph run at every row."""
    from c2v_rag.cpu.onnx_attention import READOUT_INPUT

    model = tiny_model_factory("llama", representation=representation).eval()
    model.apply_quantization("int8", cache_dir=tmp_path)
    assert model.decoder.rows_only and READOUT_INPUT in {i.name for i in model.decoder.session.get_inputs()}
    fed = []
    run = model.decoder.session.run
    monkeypatch.setattr(
        model.decoder.session,
        "run",
        lambda names, feeds: (
            fed.append((feeds[READOUT_INPUT].shape[1], feeds["attention_mask"].shape[1])) or run(names, feeds)
        ),
    )
    vectors = model.encode(TEXTS, normalize_embeddings=True)
    rows = {"concat": 2, "last_token": 1}
    assert fed and all(r == rows.get(representation, length) for r, length in fed)
    monkeypatch.setattr(model.readout, "positions", lambda *a: None)  # every row computed, then read
    every_row = model.encode(TEXTS, normalize_embeddings=True)
    if representation == "last_token":
        np.testing.assert_allclose(every_row, vectors, rtol=0, atol=1e-6)
    else:
        np.testing.assert_array_equal(every_row, vectors)


def test_int8_runs_batches_side_by_side_one_core_each_with_the_same_vectors(tiny_variant, tmp_path, monkeypatch):
    """Under int8 the encode loop runs ``batch_workers`` batches at once on as many threads (each ONNX Runtime
    call on one): every text gets the vector it gets one batch at a time, in the caller's order, and an
    error in a batch reaches the caller."""
    import threading

    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path))
    model = Causal2Vec.from_pretrained(tiny_variant, device="cpu", quantize="int8")
    texts = [f"text {i}: " + "words and more words " * (1 + i % 9) for i in range(40)]
    model.decoder.threads = 1
    assert model.batch_workers == 1
    one_at_a_time = model.encode(texts, max_tokens_per_batch=64)
    callers: set[str] = set()
    run = model.decoder.session.run
    monkeypatch.setattr(
        model.decoder.session, "run", lambda *a: callers.add(threading.current_thread().name) or run(*a)
    )
    model.decoder.threads = 3
    assert model.batch_workers == 3
    side_by_side = model.encode(texts, max_tokens_per_batch=64)
    np.testing.assert_array_equal(side_by_side, one_at_a_time)
    assert len(callers) == 3 and all(name.startswith("c2v-batch") for name in callers)
    model.decoder.threads = None  # torch's thread count, read when encoding
    torch_threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert model.batch_workers == 2
    finally:
        torch.set_num_threads(torch_threads)

    def broken(*a):
        raise RuntimeError("a batch failed")

    monkeypatch.setattr(model.decoder.session, "run", broken)
    model.decoder.threads = 3
    with pytest.raises(RuntimeError, match="a batch failed"):
        model.encode(texts, max_tokens_per_batch=64)


def test_the_encoder_runs_in_bf16_where_the_cpu_computes_it(tiny_variant, tmp_path, monkeypatch, capsys):
    """Where the CPU multiplies bf16 natively, int8 keeps the torch encoder, in bf16: no encoder graph is exported,
    its batches run one at a time (torch splits each across its threads) while the decoder's run side by side, and
    the vectors stay close to the float model's and to themselves alone. A note of the graphs written there names no
    encoder graph, so a CPU that runs the encoder in ONNX Runtime builds one rather than take the note."""
    import threading

    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path))
    monkeypatch.setattr(int8_module, "encoder_runs_in_bf16", lambda: True)
    float_model = Causal2Vec.from_pretrained(tiny_variant, device="cpu")
    capsys.readouterr()
    model = Causal2Vec.from_pretrained(tiny_variant, device="cpu", quantize="int8")
    shown = capsys.readouterr().err
    assert "exporting the decoder" in shown and "exporting the encoder" not in shown
    assert not list((tmp_path / "onnx").rglob("encoder-fp32.onnx"))
    assert isinstance(model.decoder, od.OnnxDecoder) and not isinstance(model.encoder, OnnxEncoder)
    assert {p.dtype for p in model.encoder.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in model.projector.parameters()} == {torch.float32}
    exact = float_model.encode(TEXTS, normalize_embeddings=True)
    batch = model.encode(TEXTS, normalize_embeddings=True)
    alone = np.stack([model.encode(t, normalize_embeddings=True) for t in TEXTS])
    assert _cos(batch, exact).min() > 0.99
    assert _cos(alone, batch).min() > 0.999  # bf16 rounding may move with the batch; float32 keeps it to 1e-6

    texts = [f"text {i}: " + "words and more words " * (1 + i % 9) for i in range(40)]
    model.decoder.threads = 1
    one_at_a_time = model.encode(texts, max_tokens_per_batch=64)
    model.decoder.threads = 3
    assert model.batch_workers == 3 and model.encoder_workers == 1
    callers: dict[str, set[str]] = {"encoder": set(), "decoder": set()}
    forward, run = model.encoder.forward, model.decoder.session.run
    monkeypatch.setattr(
        model.encoder,
        "forward",
        lambda *a, **k: callers["encoder"].add(threading.current_thread().name) or forward(*a, **k),
    )
    monkeypatch.setattr(
        model.decoder.session, "run", lambda *a: callers["decoder"].add(threading.current_thread().name) or run(*a)
    )
    np.testing.assert_array_equal(model.encode(texts, max_tokens_per_batch=64), one_at_a_time)
    assert callers["encoder"] == {threading.current_thread().name}
    assert len(callers["decoder"]) == 3 and all(name.startswith("c2v-batch") for name in callers["decoder"])

    monkeypatch.setattr(int8_module, "encoder_runs_in_bf16", lambda: False)
    capsys.readouterr()
    onnx_encoder = Causal2Vec.from_pretrained(tiny_variant, device="cpu", quantize="int8")
    assert "exporting the encoder" in capsys.readouterr().err
    assert isinstance(onnx_encoder.encoder, OnnxEncoder) and onnx_encoder.decoder.path == model.decoder.path
    assert onnx_encoder.encoder_workers == onnx_encoder.batch_workers
    assert _cos(onnx_encoder.encode(TEXTS, normalize_embeddings=True), batch).min() > 0.999


def test_torch_models_run_one_batch_at_a_time(tiny_variant):
    assert Causal2Vec.from_pretrained(tiny_variant, device="cpu").batch_workers == 1
