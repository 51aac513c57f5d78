"""Choosing the device and the numeric precision."""

from __future__ import annotations

import functools
import os
import platform
from pathlib import Path
from typing import Literal

import torch

_DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """The user's device, or CUDA when present, else CPU."""
    if device is not None:
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


_NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})  # x86 (avx512_bf16, AMX); Arm ("bf16")


@functools.lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """True where the CPU multiplies bf16 in hardware (avx512_bf16, AMX, Arm's bf16); there bf16 is 2.4-3x fp32.

    Read from the CPU's flags, not from torch's ``_is_mkldnn_bf16_supported``: that one is true on every
    AVX-512 CPU (Skylake-X, Cascade Lake, Ice Lake), where oneDNN emulates bf16 more slowly than float32.
    Where no flags can be read (no /proc/cpuinfo), torch's check is all there is.
    """
    flags = cpu_flags()
    if flags:
        return bool(flags & _NATIVE_BF16_FLAGS)
    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_dtype(name: str | torch.dtype, device: torch.device) -> torch.dtype:
    """Map ``"auto"`` to the fastest sensible precision for ``device``.

    CUDA: bf16 where supported, else fp16. CPU: bf16 where the CPU has native bf16 matmuls,
    else fp32 (emulated bf16 is slower than fp32).
    """
    if isinstance(name, torch.dtype):
        return name
    if name != "auto":
        try:
            return _DTYPES[name]
        except KeyError:
            raise ValueError(f"dtype={name!r} is not one of auto, float32, bfloat16, float16") from None
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device.type == "cpu" and cpu_has_native_bf16():
        return torch.bfloat16
    return torch.float32


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the platform tells it, e.g. under ``taskset``; else the
    machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def configure_cpu_threads(intra_op: int | None = 1, inter_op: int | None = 1) -> None:
    """Set torch's CPU thread pools for latency-bound work (serving, one search query).

    One intra-op thread is the default because it serves single queries best on a machine where other
    processes hold cores (docs/serving.md has the measurement): with two,
    each of the forward pass's hundreds of parallel regions waits at a barrier for a thread that
    is itself waiting for a busy core. ``None`` keeps torch's own choice. The inter-op pool can be
    sized only once per process, before it is used; a later call leaves it as it is.
    """
    if intra_op is not None:
        if intra_op < 1:
            raise ValueError(f"intra_op={intra_op} threads: pass 1 or more, or None for torch's default")
        torch.set_num_threads(intra_op)
    if inter_op is not None and torch.get_num_interop_threads() != inter_op:
        try:
            torch.set_num_interop_threads(inter_op)
        except RuntimeError:  # already used or already set: keep it
            pass


# ------------------------------------------------------------------ int8 weights

QUANTIZE_CHOICES: tuple[str, ...] = ("none", "int8", "auto")
# The int8 method ``quantize="int8"`` applies (c2v_rag.cpu.int8: per-token int8 with SmoothQuant, in ONNX Runtime),
# by the name collections record. Older collections may hold "int8" (torch's dynamic int8, whose vectors were far
# from the float ones), a value no model applies any more, so they refuse these vectors.
INT8_METHOD = "int8-token-sq"
LEGACY_INT8 = "int8"
# Kinds of vector of one model that may share a collection and search each other: mixing them scores like float
# against float (docs/performance.md, "Mixing float and int8 vectors").
INTERCHANGEABLE_QUANTIZE: frozenset[str] = frozenset({"none", INT8_METHOD})
# CPU classes where int8 met the quality bound and ran faster than the float default, so ``quantize="auto"`` picks
# it there (docs/performance.md, "Your CPU, and what the defaults pick", states the rule; "int8 on CPU" has each
# class's numbers). The avx512_bf16 run's float32 and int8 use no
# bf16 instruction, so it stands for AVX-512 VNNI CPUs without bf16 too. AMX CPUs multiply bf16 in tiles, much
# faster than avx512_bf16, and int8 has not been shown faster there, so they keep bf16.
_INT8_WITHIN_QUALITY_BOUND: frozenset[str] = frozenset({"avx2", "avx512_vnni", "avx512_bf16"})
_INT8_PACKAGES = ("onnxruntime", "onnx")


# The CPU features that decide a speed number (float32 or native bf16, int8 kernels), named beside every timing
# (avx512vnni is older kernels' spelling of avx512_vnni).
SPEED_FLAGS = (
    "avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8",
)  # fmt: skip


@functools.cache
def _cpuinfo_line(*prefixes: str) -> str | None:
    """The value of the first /proc/cpuinfo line that starts with one of ``prefixes`` (None: none, or no file)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith(prefixes)), None)


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them in /proc/cpuinfo (empty where it cannot be read)."""
    return frozenset((_cpuinfo_line("flags", "Features") or "").split())


def speed_flags() -> list[str]:
    """Which of :data:`SPEED_FLAGS` this CPU has."""
    flags = cpu_flags()
    return [f for f in SPEED_FLAGS if f in flags]


def cpu_model() -> str:
    """The CPU's name as /proc/cpuinfo gives it, else as the platform module does ("" where neither knows)."""
    return _cpuinfo_line("model name") or platform.processor()


CpuClass = Literal["amx", "avx512_bf16", "avx512_vnni", "avx2", "other"]


def cpu_class() -> CpuClass:
    """The row of the ``auto`` table (docs/performance.md, "int8 on CPU") this CPU falls in: ``amx`` (AMX
    tiles, bf16 in hardware), ``avx512_bf16`` (bf16 dot products in AVX-512, no AMX), ``avx512_vnni`` (int8
    dot products in AVX-512, no bf16), ``avx2`` or ``other``."""
    flags = cpu_flags()
    if flags & {"amx_bf16", "amx_tile", "amx_int8"}:
        return "amx"
    if "avx512_bf16" in flags:
        return "avx512_bf16"
    if flags & {"avx512_vnni", "avx512vnni"}:
        return "avx512_vnni"
    if "avx2" in flags or (not flags and torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")):
        return "avx2"
    return "other"


def int8_runtime_installed() -> bool:
    """Whether the packages of ``quantize="int8"`` (the ``int8`` extra) can be imported."""
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in _INT8_PACKAGES)


QUANTIZE_ENV = "C2V_RAG_QUANTIZE"


def default_quantize() -> str:
    """The ``quantize`` of new vectors when none is asked for (an ingest into a new collection, ``embed``):
    ``auto`` (int8 on the CPU classes where it met the quality bound and ran at least 1.5x float's speed:
    docs/performance.md), or ``$C2V_RAG_QUANTIZE`` (``none`` keeps float everywhere). A model loaded with
    ``Causal2Vec.from_pretrained`` stays float unless asked: that default is the library's, not the model's."""
    value = os.environ.get(QUANTIZE_ENV, "").strip() or "auto"
    if value not in QUANTIZE_CHOICES:
        raise ValueError(
            f"${QUANTIZE_ENV}={value!r} is not one of {', '.join(QUANTIZE_CHOICES)}: set it to one or unset it"
        )
    return value


def resolve_quantize(name: str | None, device: torch.device) -> str:
    """Map ``quantize`` to what is applied and recorded: ``"none"`` or :data:`INT8_METHOD`.

    ``None``/``"none"`` keeps the float weights. ``"int8"`` (or its recorded name :data:`INT8_METHOD`)
    runs the decoder's linear layers in int8 on a CPU (:mod:`c2v_rag.cpu.int8`; needs
    ``pip install 'c2v-rag[int8]'``). ``"auto"`` picks int8 on a CPU class where it was measured within
    the quality bound and faster than float (``_INT8_WITHIN_QUALITY_BOUND``) when the int8 extra is
    installed, and ``"none"`` elsewhere (GPUs included).
    """
    if name is None or name == "none":
        return "none"
    if name not in (*QUANTIZE_CHOICES, INT8_METHOD):
        raise ValueError(f"quantize={name!r} is not one of {', '.join(QUANTIZE_CHOICES)}")
    if name == "auto":
        if device.type != "cpu" or cpu_class() not in _INT8_WITHIN_QUALITY_BOUND or not int8_runtime_installed():
            return "none"
        return INT8_METHOD
    if device.type != "cpu":
        raise ValueError(
            f"quantize='int8' runs on a CPU only, not on {device}: pass device='cpu', "
            "or drop quantize to use the GPU in bf16/fp16"
        )
    return INT8_METHOD


def resolve_compute_dtype(dtype: str | torch.dtype, device: torch.device, quantize: str | None) -> torch.dtype:
    """The float dtype a model loads in, given ``quantize``: int8 layers compute around float32, so
    ``auto`` becomes float32 there and bf16/fp16 are refused."""
    if resolve_quantize(quantize, device) == "none":
        return resolve_dtype(dtype, device)
    chosen = torch.float32 if dtype == "auto" else resolve_dtype(dtype, device)
    if chosen != torch.float32:
        raise ValueError(
            f"quantize={quantize!r} computes in float32 around its int8 matmuls, so dtype="
            f"{dtype_name(chosen)!r} cannot apply: pass dtype='auto' or 'float32', or drop quantize"
        )
    return chosen
