"""ONNX Runtime sessions with their optimized graphs cached (c2v_rag.cpu.ort_session): the first session saves the
optimized graph beside the graph, later ones load it with the optimizations off and compute the same outputs, bit
for bit, as a session that optimizes the graph itself (built here with onnxruntime directly); a damaged or stale
cached file is replaced, and the graph is never touched."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from c2v_rag.cpu import ort_session  # noqa: E402


def _graph(path: Path, seed: int = 0) -> Path:
    """A small graph ONNX Runtime rewrites: MatMul + Add (fused into one node), a GELU written out as its erf
    formula (fused into one op), and a constant subgraph (folded)."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b")
    consts = [
        numpy_helper.from_array(np.array(v, dtype=np.float32), n)
        for n, v in (("sqrt2", 2**0.5), ("one", 1.0), ("half", 0.5), ("two", 2.0), ("four", 4.0))
    ]
    nodes = [
        helper.make_node("Mul", ["two", "two"], ["also_four"]),  # a constant subgraph
        helper.make_node("Div", ["also_four", "four"], ["scale"]),
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["h"]),
        helper.make_node("Div", ["h", "sqrt2"], ["h_scaled"]),
        helper.make_node("Erf", ["h_scaled"], ["erf"]),
        helper.make_node("Add", ["erf", "one"], ["erf_1"]),
        helper.make_node("Mul", ["h", "erf_1"], ["h_erf"]),
        helper.make_node("Mul", ["h_erf", "half"], ["gelu"]),
        helper.make_node("Mul", ["gelu", "scale"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])],
        initializer=[w, b, *consts],
    )
    # onnx writes its newest IR version unless told; onnxruntime at its floor (1.31) reads up to 13, onnx 1.23.0 writes
    # 14. Opset 17's own IR version (8) is what the graph needs.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, path)
    return path


def _reference(path: Path, x: np.ndarray) -> np.ndarray:
    """The graph's output from a session that optimizes it in memory, as ONNX Runtime does by default."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


X = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)


def test_the_optimized_graph_is_saved_once_and_loaded_after_with_the_same_outputs(tmp_path):
    graph = _graph(tmp_path / "g.onnx")
    before = _sha(graph)
    expected = _reference(graph, X)

    first = ort_session.cpu_session(graph)
    optimized = ort_session.optimized_path(graph)
    assert optimized.parent == graph.parent and optimized.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([graph.name, optimized.name])  # no temporary left
    # it is the rewritten graph: fewer nodes than the ten written above
    assert len(onnx.load(optimized).graph.node) < len(onnx.load(graph).graph.node)
    saved_at = optimized.stat().st_mtime_ns

    second = ort_session.cpu_session(graph)
    assert Path(second._model_path) == optimized and optimized.stat().st_mtime_ns == saved_at
    for session in (first, second):
        np.testing.assert_array_equal(session.run(None, {"x": X})[0], expected)
    assert _sha(graph) == before


def test_a_damaged_optimized_graph_is_replaced(tmp_path):
    graph = _graph(tmp_path / "g.onnx")
    optimized = ort_session.optimized_path(graph)
    optimized.write_bytes(b"not a graph")  # a file cut short, or overwritten by something else
    session = ort_session.cpu_session(graph)
    np.testing.assert_array_equal(session.run(None, {"x": X})[0], _reference(graph, X))
    onnx.checker.check_model(onnx.load(optimized))  # written anew
    assert Path(ort_session.cpu_session(graph)._model_path) == optimized


def test_files_made_for_another_onnx_runtime_or_cpu_are_removed_and_others_kept(tmp_path):
    graph = _graph(tmp_path / "g.onnx")
    other_graph = _graph(tmp_path / "other.onnx")
    stale = graph.with_name("g.optimized-000000000000.onnx")
    stale.write_bytes(b"made by an older onnxruntime")
    others = other_graph.with_name("other.optimized-000000000000.onnx")
    others.write_bytes(b"another graph's")
    ort_session.cpu_session(graph)
    assert not stale.exists() and others.exists() and other_graph.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [graph.name, ort_session.optimized_path(graph).name, other_graph.name, others.name]
    )


def test_a_graph_written_anew_or_another_onnx_runtime_gets_its_own_optimized_form(tmp_path, monkeypatch):
    graph = _graph(tmp_path / "g.onnx")
    name = ort_session.optimized_path(graph).name
    assert name.startswith("g.optimized-") and name.endswith(".onnx")
    monkeypatch.setattr(ort, "__version__", ort.__version__ + ".post1")
    assert ort_session.optimized_path(graph).name != name
    monkeypatch.undo()

    first = ort_session.cpu_session(graph)
    old = ort_session.optimized_path(graph)
    rewritten = _graph(tmp_path / "g.onnx", seed=1)  # the same path, other weights (a cache rebuilt in place)
    assert ort_session.optimized_path(rewritten) != old
    session = ort_session.cpu_session(rewritten)
    np.testing.assert_array_equal(session.run(None, {"x": X})[0], _reference(rewritten, X))
    assert not np.array_equal(session.run(None, {"x": X})[0], first.run(None, {"x": X})[0])
    assert not old.exists() and ort_session.optimized_path(rewritten).is_file()


def test_a_cache_it_cannot_write_to_still_gives_the_optimized_session(tmp_path):
    graph = _graph(tmp_path / "g.onnx")
    blocked = ort_session.optimized_path(graph)
    blocked.mkdir()  # the optimized file cannot be renamed into place (as in a read-only cache)
    for _ in range(2):  # and again, with nothing cached from the first time
        session = ort_session.cpu_session(graph)
        np.testing.assert_array_equal(session.run(None, {"x": X})[0], _reference(graph, X))
    assert blocked.is_dir() and not any(blocked.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([graph.name, blocked.name])  # no temporary left
