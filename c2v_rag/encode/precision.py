"""Output precisions for embeddings, following sentence-transformers' ``precision`` names."""

from __future__ import annotations

from typing import Literal

import numpy as np

Precision = Literal["float32", "float16", "int8", "uint8", "binary", "ubinary"]
PRECISIONS: tuple[str, ...] = ("float32", "float16", "int8", "uint8", "binary", "ubinary")


def output_dtype(precision: str) -> np.dtype:
    return np.dtype(
        {
            "float32": np.float32,
            "float16": np.float16,
            "int8": np.int8,
            "uint8": np.uint8,
            "binary": np.int8,
            "ubinary": np.uint8,
        }[precision]
    )


def quantize(embeddings: np.ndarray, precision: str, calibration: np.ndarray | None = None) -> np.ndarray:
    """Convert float32 embeddings [N, D] to ``precision``.

    ``int8``/``uint8`` map each dimension's [min, max] (taken from ``calibration``, else from the
    embeddings themselves) onto 256 levels. ``binary``/``ubinary`` keep the sign bit of each
    dimension, packed 8 per byte (``binary`` is offset by -128 into int8).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision == "float32":
        return embeddings.astype(np.float32, copy=False)
    if precision == "float16":
        return embeddings.astype(np.float16)
    if precision in ("binary", "ubinary"):
        packed = np.packbits(embeddings > 0, axis=-1)
        return (packed.astype(np.int16) - 128).astype(np.int8) if precision == "binary" else packed
    reference = embeddings if calibration is None else calibration
    if len(reference) == 0:
        return np.zeros(embeddings.shape, dtype=output_dtype(precision))
    low, high = reference.min(axis=0), reference.max(axis=0)
    steps = np.where(high > low, (high - low) / 255.0, 1.0)
    levels = np.clip(np.round((embeddings - low) / steps), 0, 255)
    return (levels - 128).astype(np.int8) if precision == "int8" else levels.astype(np.uint8)
