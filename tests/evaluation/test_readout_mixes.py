"""A mix scored from stored vectors is the vector the model gives at those weights (what the mix scripts rely on)."""

from __future__ import annotations

import numpy as np
import pytest

from c2v_rag.evaluation.readout_mixes import mix_label, mix_weights, unit_rows

TEXTS = ["one text", "another, longer text about proteins and structures", "a third"]


@pytest.mark.parametrize(("share", "eos_fraction"), [(0.75, 0.5), (0.8, 1.0), (0.6, 0.25)])
def test_reweighting_stored_parts_equals_encoding_at_those_weights(tiny_model_factory, share, eos_fraction):
    model = tiny_model_factory("llama", normalize_parts=True, encoder_share=0.5)
    stored = model.encode(TEXTS, instruction="Retrieve passages")
    parts = model.config.parts
    weights = {name: w for name, w in mix_weights(share, eos_fraction).items() if w > 0}
    mixed = np.concatenate([np.sqrt(w) * unit_rows(stored[:, parts[name]]) for name, w in weights.items()], axis=1)
    model.set_readout(part_weights=weights)
    np.testing.assert_allclose(mixed, model.encode(TEXTS, instruction="Retrieve passages"), atol=1e-5)


def test_weights_sum_to_one_and_labels_keep_earlier_names():
    assert sum(mix_weights(0.8, 1.0).values()) == pytest.approx(1.0)
    assert mix_weights(0.8, 1.0) == pytest.approx({"encoder": 0.8, "contextual": 0.0, "eos": 0.2})
    assert mix_label(0.75) == "encoder_share=0.75"  # the equal split keeps the name earlier results used
    assert mix_label(0.75, 0.75) == "encoder 0.75 / h_EOS 0.188 / h_C 0.0625"
    np.testing.assert_allclose(np.linalg.norm(unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]])), axis=1), [1.0, 0.0])
