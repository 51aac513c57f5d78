"""Choosing the device and the numeric precision."""

from __future__ import annotations

import functools

import torch

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
           "fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """The user's device, or CUDA when present, else CPU."""
    if device is not None:
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


@functools.lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """True where the CPU multiplies bf16 natively (avx512_bf16 or AMX); there bf16 is ~3x fp32."""
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


def configure_cpu_threads(intra_op: int | None = 1, inter_op: int | None = 1) -> None:
    """Set torch's CPU thread pools for latency-bound work (serving, one search query).

    One intra-op thread is the default because it was the measured best for single queries on a
    machine where other processes hold cores (docs/serving.md, bench/serve_threads.py): with two,
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
