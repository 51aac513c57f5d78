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
