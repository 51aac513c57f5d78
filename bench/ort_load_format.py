"""How long ONNX Runtime takes to open the int8 model's graphs: the optimized ONNX files the cache holds (what a load
opens today) against the same graphs saved in ONNX Runtime's own format (``.ort``, FlatBuffers, meant to load
faster), each in a fresh process, alternated round by round.

Opening the two sessions is most of an int8 load (``Causal2Vec.from_pretrained(quantize="int8")``), which a one-shot
``c2v-rag search`` pays every time (docs/performance.md, "One search from the command line"). The graphs are given
by path: the optimized files beside the cached graphs, ``$C2V_RAG_CACHE/onnx/*/*.optimized-*.onnx``, written by the
first session of each. Each ``.ort`` copy is written to a temporary folder (removed at the end) from the same
optimized graph with the optimizations off, so both load the same nodes.

    taskset -c 1 env OMP_NUM_THREADS=1 python bench/ort_load_format.py --rounds 5 \\
        --graph ~/.cache/c2v_rag/onnx/*/decoder-int8-token-sq.optimized-*.onnx \\
        --graph ~/.cache/c2v_rag/onnx/*/encoder-fp32.optimized-*.onnx --json ort_load_format.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import recorded_command, speed_flags

# The child opens one session as c2v_rag.cpu.ort_session does for an optimized graph (optimizations off, one thread,
# no spinning) and prints the seconds of the import and of the session's creation.
_CHILD = r"""
import sys, time
t0 = time.perf_counter()
import onnxruntime as ort
t1 = time.perf_counter()
options = ort.SessionOptions()
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
options.intra_op_num_threads = 1
options.inter_op_num_threads = 1
options.log_severity_level = 3
options.add_session_config_entry("session.intra_op.allow_spinning", "0")
if sys.argv[2] == "ort":
    options.add_session_config_entry("session.load_model_format", "ORT")
ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
print(f"{t1 - t0:.4f} {time.perf_counter() - t1:.4f}")
"""


def to_ort_format(graph: Path, target: Path) -> Path:
    """``graph`` saved in ONNX Runtime's format at ``target``, its nodes as they are (optimizations off)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.optimized_model_filepath = str(target)
    options.add_session_config_entry("session.save_model_format", "ORT")
    ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    return target


def open_seconds(path: Path, kind: str) -> float:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), kind], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[1])


def _time_graph(graph: Path, work: Path, rounds: int) -> dict:
    """Open ``graph`` and its ``.ort`` copy ``rounds`` times each, alternated; their sizes and seconds."""
    ort_file = to_ort_format(graph, work / f"{graph.stem}.ort")
    times: dict[str, list[float]] = {"onnx": [], "ort": []}
    for _ in range(rounds):  # alternated, so that drift on the core touches both alike
        times["onnx"].append(open_seconds(graph, "onnx"))
        times["ort"].append(open_seconds(ort_file, "ort"))
    row = {
        "graph": graph.name,
        "onnx_mb": round(graph.stat().st_size / 2**20, 1),
        "ort_mb": round(ort_file.stat().st_size / 2**20, 1),
        **{f"{kind}_median_s": round(statistics.median(v), 3) for kind, v in times.items()},
        **{f"{kind}_s": [round(x, 3) for x in v] for kind, v in times.items()},
    }
    row["ort_vs_onnx"] = round(row["ort_median_s"] / row["onnx_median_s"], 3)
    print(
        f"{graph.name}: open {row['onnx_median_s']:.3f} s as .onnx, {row['ort_median_s']:.3f} s as .ort "
        f"({row['ort_vs_onnx']:.2f}x)"
    )
    return row


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", type=Path, action="append", required=True, help="an optimized .onnx; repeatable")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    import onnxruntime

    work = Path(tempfile.mkdtemp(prefix="ort-format-"))
    try:
        rows = [_time_graph(graph, work, args.rounds) for graph in args.graph]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "command": recorded_command("bench/ort_load_format.py", sys.argv[1:] if argv is None else argv),
        "onnxruntime": onnxruntime.__version__,
        "cpu_flags": speed_flags(),
        "graphs": rows,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
