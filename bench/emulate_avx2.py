"""Run a benchmark with AVX2 kernels on an AVX-512 CPU: a stand-in for an AVX2-only machine.

    python bench/emulate_avx2.py -- bench/int8.py --data ../shared/data --docs 12 --claims 4 --candidates int8
    python bench/emulate_avx2.py --check        # show that every library took its AVX2 path

Issue 26's AVX2 targets need an AVX2-only CPU, and sessions land on whatever CPU the machine has. On an
AVX-512 CPU this script makes each library in the encode path dispatch as it would on AVX2:

- torch: ``ATEN_CPU_CAPABILITY=avx2`` (its elementwise and reduction kernels) and ``ONEDNN_MAX_CPU_ISA=AVX2``
  (oneDNN). Its float32 GEMMs go to MKL, which runs its AVX2 code on AMD CPUs in any case (``--check``
  shows the GEMM rate: the same with and without these variables on the AMD EPYC we measured).
- ONNX Runtime has no such switch: MLAS reads CPUID once, in a static constructor. The script copies the
  installed ``onnxruntime`` package into a cache folder and patches the copy's Python extension so that the
  AVX-512 (F, VNNI) and AVX-VNNI branches of that dispatch are never taken, and so that ONNX Runtime's own
  CPU-info record reports no AVX-512. The patch finds those branches by their byte patterns and refuses
  (naming the version) when any is missing or ambiguous: it is known to match onnxruntime 1.32.0 for
  Linux x86-64. The installed package is not touched.
- c2v_rag: ``cpu_flags()`` is made to return the machine's flags without any ``avx512*``, ``avx_vnni*`` or
  ``amx*`` (a ``sitecustomize`` module on the child's path), so ``dtype="auto"`` is float32 and
  ``quantize="auto"`` takes the ``avx2`` row, in every child process the benchmark starts too.

What this does not emulate: the core itself. An AVX2-only CPU (Zen 2/3, Haswell-Skylake) has other
caches, clocks and execution ports, so the ratios measured this way estimate, and do not replace, the
same run on such a CPU; the docs report them as emulated, next to the real AVX2 runs for calibration.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

# Each patch: (what it is, the bytes before, where in them the change starts, the new bytes there).
# MLAS_PLATFORM's constructor (onnxruntime/core/mlas/lib/platform.cpp), after CPUID leaf 7: each `je`
# that skips a branch becomes a `jmp`, so the branch's kernels are never installed.
_MLAS_PATCHES = (
    ("AVX-VNNI (CPUID 7.1 EAX bit 4)", bytes.fromhex("b901000000 0fa2 a810 74"), 9, b"\xeb"),
    ("AVX-512F (CPUID 7 EBX bit 16)", bytes.fromhex("41f7c200000100 74"), 7, b"\xeb"),
    ("AVX-VNNI-INT8 (CPUID 7.1 EDX bit 4)", bytes.fromhex("f6c210 74"), 3, b"\xeb"),
    ("AVX-NE-CONVERT (CPUID 7.1 EDX bit 5)", bytes.fromhex("83e220 74"), 3, b"\xeb"),
)
# onnxruntime::CPUIDInfo: `sete r9b` records "the OS saves AVX-512 state" (XCR0 & 0xE6): a 4-byte nop
# leaves it false (r9 was zeroed just before).
_CPUIDINFO_PATCH = (
    "CPUIDInfo AVX-512 OS support (XCR0 & 0xE6)",
    bytes.fromhex("a8e6 410f94c1"),
    2,
    bytes.fromhex("0f1f4000"),
)
# The MLAS branches sit within a few hundred bytes after the leaf-7.1 CPUID; the searches for the later
# patterns start there, so an identical byte run elsewhere in the binary cannot be taken by mistake.
_MLAS_WINDOW = 0x200

_DROPPED_FLAG_PREFIXES = ("avx512", "avx_vnni", "amx")


_UNKNOWN_BUILD = "this script knows onnxruntime 1.32.0 for Linux x86-64"


def _find_once(data: bytearray, name: str, pattern: bytes) -> int:
    """Where ``pattern`` occurs in ``data``, which must be exactly once. Raises SystemExit otherwise."""
    position = data.find(pattern)
    if position < 0 or data.find(pattern, position + 1) >= 0:
        raise SystemExit(f"{name} not recognized ({'not found' if position < 0 else 'ambiguous'}); {_UNKNOWN_BUILD}")
    return position


def _patch(data: bytearray) -> list[str]:
    """Apply the patches in place; return what was patched. Raises SystemExit when a pattern is missing."""
    name, pattern, at, new = _MLAS_PATCHES[0]
    anchor = _find_once(data, f"MLAS dispatch ({name})", pattern)
    located = [(name, anchor + at, new)]
    for name, pattern, at, new in _MLAS_PATCHES[1:]:
        position = data.find(pattern, anchor, anchor + _MLAS_WINDOW)
        if position < 0:
            raise SystemExit(f"MLAS dispatch not recognized ({name} not found after the CPUID); {_UNKNOWN_BUILD}")
        located.append((name, position + at, new))
    name, pattern, at, new = _CPUIDINFO_PATCH
    located.append((name, _find_once(data, f"ONNX Runtime's CPUIDInfo ({name})", pattern) + at, new))
    for _, position, new in located:  # all found before any byte changes
        data[position : position + len(new)] = new
    return [name for name, _, _ in located]


def patched_onnxruntime(root: Path) -> Path:
    """A copy of the installed onnxruntime under ``root`` with AVX2-only dispatch (made once per version)."""
    import onnxruntime

    source = Path(onnxruntime.__file__).parent
    folder = root / f"onnxruntime-{onnxruntime.__version__}"
    marker = folder / "PATCHED"
    if marker.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(source, folder / "onnxruntime")
    extensions = sorted((folder / "onnxruntime" / "capi").glob("onnxruntime_pybind11_state*.so"))
    if len(extensions) != 1:
        raise SystemExit(f"expected one onnxruntime_pybind11_state*.so in {source / 'capi'}, found {extensions}")
    data = bytearray(extensions[0].read_bytes())
    done = _patch(data)
    extensions[0].write_bytes(bytes(data))
    marker.write_text("\n".join(done) + "\n")
    return folder


_SITECUSTOMIZE = """\
# Written by bench/emulate_avx2.py: c2v_rag sees this CPU's flags without AVX-512, AVX-VNNI and AMX.
# Importing c2v_rag.core.devices here (torch with it) costs each Python process of the run a second at start.
try:
    import c2v_rag.core.devices as _devices
except ImportError:  # a process without c2v_rag on its path (a peer's venv): nothing to patch
    pass
else:
    _flags = _devices.cpu_flags()
    _devices.cpu_flags = lambda: frozenset(f for f in _flags if not f.startswith({prefixes!r}))
"""


def emulation_env(root: Path) -> dict[str, str]:
    folder = patched_onnxruntime(root)
    (folder / "sitecustomize.py").write_text(_SITECUSTOMIZE.format(prefixes=_DROPPED_FLAG_PREFIXES))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), str(Path.cwd()), env.get("PYTHONPATH")) if p)
    env["ATEN_CPU_CAPABILITY"] = "avx2"
    env["ONEDNN_MAX_CPU_ISA"] = "AVX2"
    return env


_CHECK = r"""
import time, numpy as np, onnxruntime as ort, torch
from onnx import helper, TensorProto, numpy_helper
import c2v_rag.core.devices as d
print("onnxruntime from", ort.__file__)
print("torch capability", torch.backends.cpu.get_cpu_capability(), "| c2v_rag cpu_class", d.cpu_class(),
      "| dtype auto", d.resolve_dtype("auto", torch.device("cpu")))
rng = np.random.default_rng(0)
x = rng.standard_normal((1024, 576)).astype(np.float32)
w = rng.standard_normal((576, 1536)).astype(np.float32)
wq = rng.integers(-64, 64, (576, 1536)).astype(np.int8)
def session(nodes, out, dtype):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1024, 576])],
                              [helper.make_tensor_value_info(out, dtype, None)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(wq, "wq")])
    options = ort.SessionOptions(); options.intra_op_num_threads = 1; options.log_severity_level = 3
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
fp32 = session([helper.make_node("MatMul", ["x", "w"], ["y"])], "y", TensorProto.FLOAT)
int8 = session([helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "s", "z"]),
                helper.make_node("MatMulInteger", ["xq", "wq", "z"], ["y"])], "y", TensorProto.INT32)
flops = 2 * 1024 * 576 * 1536 * 20
torch.set_num_threads(1)
tx, tw = torch.from_numpy(x), torch.from_numpy(w)
for name, run in (("ORT fp32 MatMul", lambda: fp32.run(None, {"x": x})),
                  ("ORT u8s8 MatMulInteger", lambda: int8.run(None, {"x": x})),
                  ("torch fp32 mm", lambda: tx @ tw)):
    run(); start = time.process_time()
    for _ in range(20): run()
    print(f"{name}: {flops / (time.process_time() - start) / 1e9:.0f} GOP/s")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "c2v_rag" / "avx2-emulation",
        help="where the patched onnxruntime copy is kept",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="print each library's dispatch and GEMM rates, emulated and native, then exit",
    )
    parser.add_argument("command", nargs="*", help="the script and its arguments, after --")
    args = parser.parse_args()
    if not args.check and not args.command:
        parser.error("give the benchmark to run after --, e.g. -- bench/int8.py --data ../shared/data")
    env = emulation_env(args.cache)
    if args.check:
        print("== native")
        subprocess.run([sys.executable, "-c", _CHECK], check=True)
        print("== emulated AVX2")
        subprocess.run([sys.executable, "-c", _CHECK], check=True, env=env)
        return
    raise SystemExit(subprocess.run([sys.executable, *args.command], env=env).returncode)


if __name__ == "__main__":
    main()
