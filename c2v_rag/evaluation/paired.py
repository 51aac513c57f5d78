"""How sure a difference between two systems scored on the same items is: a paired bootstrap over the items.

Two models scored on the same queries differ query by query; their mean difference alone does not say whether
another draw of queries would show it again. Resampling the queries (with replacement) and taking the mean
difference of each resample gives an interval for it, and the share of resamples at or below zero is a one-sided
p-value for "the second is better". The numbers are the same for a given seed.

When few items change (two near-perfect rankers, most queries at rank 1 for both), the bootstrap is lenient:
three items that rose and none that fell give p 0.05 on any number of items, since a resample misses all three
with probability e^-3. The sign test (:attr:`PairedDifference.sign_p`) counts the items that moved instead: three
of three is p 0.125.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class PairedDifference:
    """``after`` less ``before`` over paired items, with a percentile bootstrap interval."""

    items: int
    before: float
    """The mean of ``before``."""
    after: float
    mean: float
    """The mean difference, ``after - before``."""
    low: float
    high: float
    confidence: float
    """The interval's coverage: two-sided, so ``low`` is also a one-sided bound at (1 + confidence) / 2."""
    p_not_better: float
    """Share of resampled mean differences at or below zero: a one-sided p-value for "after is better"."""
    better: int
    """Items whose score rose."""
    worse: int
    sign_p: float
    """One-sided sign test: the chance that at least ``better`` of the ``better + worse`` items that moved rose, were
    each as likely to fall (1.0 when none moved)."""

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def describe(self, digits: int = 4) -> str:
        """E.g. ``+0.0123, 95% interval [-0.0021, +0.0270], p 0.051; 14 better, 6 worse (sign test p 0.058)``."""
        interval = f"[{self.low:+.{digits}f}, {self.high:+.{digits}f}]"
        return (
            f"{self.mean:+.{digits}f}, {self.confidence:.0%} interval {interval}, p {self.p_not_better:.3f}; "
            f"{self.better} better, {self.worse} worse (sign test p {self.sign_p:.3f})"
        )


def paired_bootstrap(
    before: Sequence[float], after: Sequence[float], *, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> PairedDifference:
    """The difference ``after - before`` over paired items (the same queries, in the same order), with a
    ``confidence`` percentile interval from ``resamples`` bootstrap draws of the items."""
    first, second = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if first.shape != second.shape or first.ndim != 1:
        raise ValueError(
            f"paired scores must be two flat lists of the same length (got {first.shape} and {second.shape}): "
            "score both models on the same items, in the same order"
        )
    if not len(first):
        raise ValueError("no paired items to compare: score both models on at least one item")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (got {confidence}), e.g. 0.95")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1 (got {resamples}); 10,000 is usual")
    diff = second - first
    rng = np.random.default_rng(seed)
    # In chunks, so that 10,000 resamples of a few thousand items stay within a few MB.
    means = np.empty(resamples)
    step = max(1, 2_000_000 // len(diff))
    for start in range(0, resamples, step):
        count = min(step, resamples - start)
        means[start : start + count] = diff[rng.integers(0, len(diff), size=(count, len(diff)))].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    better, worse = int((diff > 0).sum()), int((diff < 0).sum())
    return PairedDifference(
        items=len(diff),
        before=float(first.mean()),
        after=float(second.mean()),
        mean=float(diff.mean()),
        low=float(low),
        high=float(high),
        confidence=confidence,
        p_not_better=float((means <= 0).mean()),
        better=better,
        worse=worse,
        sign_p=sign_test(better, worse),
    )


def sign_test(better: int, worse: int) -> float:
    """One-sided sign test: P(X >= better) for X ~ Binomial(better + worse, 1/2); 1.0 when nothing moved."""
    moved = better + worse
    if not moved:
        return 1.0
    return sum(math.comb(moved, k) for k in range(better, moved + 1)) / 2**moved
