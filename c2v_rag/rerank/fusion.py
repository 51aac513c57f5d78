"""Fusing a first-stage score (a cosine) with the reranker's likelihood, per query.

The two live on different scales (a cosine near 0.5-0.9, a mean log-probability near -1 to -4), and each
query's spread differs, so each list is z-scored over the query's candidates before the weighted sum: a
query's ranking then depends on the order and spacing of each score among its own candidates only. The same
normalisation makes the likelihood's length normalisation irrelevant to the ranking (a query's tokens are the
same for every candidate, so mean, sum and PMI differ per query by a constant factor or offset).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_WEIGHT = 0.5
"""The likelihood's weight in the fused score (the first stage's: 1 - weight); bench/rerank.py chose it."""


def zscore(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """``values`` centred and scaled to unit standard deviation; all equal (or one value): zeros."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return array
    spread = array.std()
    return (array - array.mean()) / spread if spread > 0 else np.zeros_like(array)


def fuse(
    first_stage: Sequence[float] | np.ndarray, likelihood: Sequence[float] | np.ndarray, weight: float
) -> np.ndarray:
    """``(1 - weight) * z(first_stage) + weight * z(likelihood)`` over one query's candidates."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be between 0 and 1 (the likelihood's share of the fused score), got {weight}")
    if len(first_stage) != len(likelihood):
        raise ValueError(f"{len(first_stage)} first-stage scores but {len(likelihood)} likelihoods")
    return (1.0 - weight) * zscore(first_stage) + weight * zscore(likelihood)
