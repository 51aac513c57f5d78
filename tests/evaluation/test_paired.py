"""The paired bootstrap against what it must agree with: a constant difference, the normal approximation on many
items, and the mirror image when the two sides swap."""

from __future__ import annotations

import math
import random

import pytest

from c2v_rag.evaluation.paired import paired_bootstrap, sign_test


def test_a_constant_difference_has_no_spread():
    result = paired_bootstrap([0.5, 0.2, 0.9], [0.6, 0.3, 1.0])
    assert result.mean == pytest.approx(0.1) and result.low == pytest.approx(0.1) and result.high == pytest.approx(0.1)
    assert result.p_not_better == 0.0 and (result.better, result.worse, result.items) == (3, 0, 3)
    assert result.before == pytest.approx(1.6 / 3) and result.after == pytest.approx(1.9 / 3)


def test_many_items_agree_with_the_normal_approximation():
    rng = random.Random(1)
    before = [rng.random() for _ in range(3000)]
    after = [b + rng.gauss(0.01, 0.2) for b in before]
    diffs = [a - b for a, b in zip(after, before)]
    mean = sum(diffs) / len(diffs)
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1) / len(diffs))
    result = paired_bootstrap(before, after, confidence=0.95, resamples=20_000)
    assert result.mean == pytest.approx(mean)
    # The 95% percentile interval is mean -+ 1.96 s.e. here, to within the resampling noise (a few %).
    assert result.low == pytest.approx(mean - 1.96 * se, abs=0.1 * se)
    assert result.high == pytest.approx(mean + 1.96 * se, abs=0.1 * se)
    normal_p = 0.5 * math.erfc(mean / se / math.sqrt(2))
    assert result.p_not_better == pytest.approx(normal_p, abs=0.01)


def test_the_sign_test_counts_what_moved():
    assert sign_test(3, 0) == 1 / 8 and sign_test(0, 0) == 1.0 and sign_test(0, 3) == 1.0
    # 14 of 20 up: (C(20,14) + ... + C(20,20)) / 2^20, summed by hand.
    assert sign_test(14, 6) == pytest.approx((38760 + 15504 + 4845 + 1140 + 190 + 20 + 1) / 2**20)
    # Three items up on 84, none down: the bootstrap's p is near e^-3 (a resample misses all three), the sign
    # test's 1/8.
    result = paired_bootstrap([0.5] * 84, [1.0] * 3 + [0.5] * 81)
    assert result.p_not_better == pytest.approx(math.exp(-3), abs=0.01) and result.sign_p == 1 / 8


def test_swapping_the_sides_mirrors_the_interval():
    before, after = [0.1, 0.5, 0.7, 1.0, 0.0, 0.3], [0.3, 0.4, 0.9, 1.0, 0.5, 0.3]
    forward = paired_bootstrap(before, after, seed=3)
    backward = paired_bootstrap(after, before, seed=3)
    assert backward.mean == pytest.approx(-forward.mean)
    assert (backward.low, backward.high) == pytest.approx((-forward.high, -forward.low))
    assert (backward.better, backward.worse) == (forward.worse, forward.better) == (1, 3)


@pytest.mark.parametrize(
    "before, after, options, words",
    [
        ([0.1, 0.2], [0.1], {}, "same length"),
        ([], [], {}, "at least one item"),
        ([0.1], [0.2], {"confidence": 1.5}, "between 0 and 1"),
        ([0.1], [0.2], {"resamples": 0}, "at least 1"),
    ],
)
def test_bad_input_is_named(before, after, options, words):
    with pytest.raises(ValueError, match=words):
        paired_bootstrap(before, after, **options)
