"""Readout mixes scored from stored vectors: the part weights an encoder share and an h_EOS fraction give, and
their names in reports.

A normalized concat stores each part as a unit vector times the square root of its weight, so any other weights
can be scored from one encoding pass by re-normalizing each part's slice and re-weighting it
(``experiments/readout_parts.py`` on the dev sets, ``bench/ood/mixes.py`` out of domain).
"""

from __future__ import annotations

import numpy as np


def mix_weights(share: float, eos_fraction: float = 0.5) -> dict[str, float]:
    """The ``part_weights`` of encoder share ``s`` with the decoder's ``1 - s`` split into h_EOS (a fraction f)
    and h_C (1 - f); f = 0.5 is ``encoder_share`` s."""
    decoder = 1.0 - share
    return {"encoder": share, "contextual": decoder * (1.0 - eos_fraction), "eos": decoder * eos_fraction}


def mix_label(share: float, eos_fraction: float = 0.5) -> str:
    """``encoder_share=s`` for the equal split (the labels earlier results used), else each part's weight."""
    if eos_fraction == 0.5:
        return f"encoder_share={share:g}"
    weights = mix_weights(share, eos_fraction)
    return f"encoder {share:g} / h_EOS {weights['eos']:.3g} / h_C {weights['contextual']:.3g}"


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Each row of ``x`` [N, D] scaled to unit length (zero rows stay zero)."""
    return x / np.linalg.norm(x, axis=1, keepdims=True).clip(min=1e-12)
