"""ONNX Runtime sessions on the CPU, as the int8 model runs its graphs, with each graph's optimized form cached.

Creating a session runs ONNX Runtime's graph optimizations (fusions, constant folding, layout) over the whole
graph, in every process: for the int8 preset's decoder that took longer than embedding a query does
(docs/performance.md, "One search from the command line"). The first session of a graph therefore saves the
optimized graph beside it, and later sessions load that with the optimizations off: the same nodes, so the same
outputs bit for bit (tests/cpu/test_ort_session.py).

ONNX Runtime warns that a graph optimized at its highest level may hold optimizations for the machine that made
it, so the optimized file is named by a hash of ONNX Runtime's version, the machine type and the CPU's flags, and
of the graph file's size and modification time: another CPU sharing the cache, another ONNX Runtime, or a graph
written anew makes its own. Files of the same graph made for another of these are removed when a new one is
written; the graph itself is never touched. Anything that goes wrong with the optimized file (a read-only cache,
a file ONNX Runtime refuses) falls back to optimizing in memory, as before.
"""

from __future__ import annotations

import hashlib
import logging
import platform
from pathlib import Path
from typing import Any

from c2v_rag.core.extras import require
from c2v_rag.core.files import write_atomically

logger = logging.getLogger(__name__)

_OPTIMIZED = ".optimized-"  # <graph stem>.optimized-<environment key>.onnx


def cpu_session(path: Path, threads: int = 1, *, spinning: bool = False) -> Any:
    """An ONNX Runtime session of the graph at ``path`` as :class:`~c2v_rag.cpu.onnx_decoder.OnnxDecoder` runs it:
    the CPU provider, all graph optimizations (applied once and cached: the module doc), errors only in its log,
    and ``threads`` intra-op threads.

    One thread by default: the encode loop runs as many batches side by side instead, one core each
    (:attr:`OnnxDecoder.batch_workers`): faster than one batch at a time on several intra-op threads, whose
    small kernels (the per-row quantization, norms, slices) do not split (docs/performance.md, "int8 on CPU").

    ``spinning`` off (the default): pool threads, where there are any, sleep when a kernel ends instead of
    spinning for the next. An int8 encode runs two sessions (encoder, decoder) and torch between them:
    spinning threads hold the cores the others are working on."""
    ort = require("onnxruntime", "running an ONNX graph", "int8")
    path = Path(path)
    optimized = optimized_path(path)

    def session(source: Path, *, optimize: bool, save_to: Path | None = None) -> Any:
        options = ort.SessionOptions()
        options.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        )
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        if save_to is not None:
            options.optimized_model_filepath = str(save_to)
        return ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])

    if optimized.is_file():
        try:
            return session(optimized, optimize=False)
        except Exception as err:  # ONNX Runtime's errors share no base class but Exception
            logger.warning("ignoring the optimized graph %s (%s); optimizing %s again", optimized, err, path.name)
    try:
        made: list[Any] = []

        def build(tmp: Path) -> Path:
            made.append(session(path, optimize=True, save_to=tmp / optimized.name))
            return tmp / optimized.name

        write_atomically(optimized, build)
    except Exception as err:  # a read-only cache, a full disk, a graph ONNX Runtime cannot save
        logger.info("could not cache the optimized graph of %s (%s); optimizing in memory", path, err)
        return made[0] if made else session(path, optimize=True)
    for stale in path.parent.glob(f"{path.stem}{_OPTIMIZED}*{path.suffix}"):
        if stale != optimized:
            stale.unlink(missing_ok=True)
    return made[0]


def optimized_path(path: Path) -> Path:
    """Where the optimized form of the graph at ``path`` is cached for this ONNX Runtime and CPU."""
    return path.with_name(f"{path.stem}{_OPTIMIZED}{_key(path)}{path.suffix}")


def _key(path: Path) -> str:
    """12 hex digits of what an optimized graph depends on: the graph file as written (its size and modification
    time: a graph written anew gets a new optimized form), ONNX Runtime's version, the machine type and the CPU's
    flags."""
    import onnxruntime

    from c2v_rag.core.devices import cpu_flags

    try:
        stat = path.stat()
        written = f"{stat.st_size} {stat.st_mtime_ns}"
    except OSError:  # no graph there: ONNX Runtime will say so when the session is made
        written = "missing"
    described = f"{written} {onnxruntime.__version__} {platform.machine()} {' '.join(sorted(cpu_flags()))}"
    return hashlib.sha256(described.encode()).hexdigest()[:12]
