"""The objective section of a recipe: one config per kind, picked by ``kind``, each refusing the others' fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from c2v_rag.training import load_config
from c2v_rag.training.objectives.mntp import MNTPConfig
from c2v_rag.training.objectives.registry import CONFIGS, DEFAULT_KIND, OBJECTIVES, objective_config

PRESETS = Path(__file__).resolve().parents[2] / "c2v_rag" / "presets"
SAVED = sorted(PRESETS.glob("*/train_config*.yaml"))


def test_every_objective_is_named_by_its_config_kind():
    assert {"contrastive", "simcse", "mntp", "reconstruction", "distill"} <= set(OBJECTIVES)
    required = {"distill": {"teacher": "c2v-smollm2-135m-minilm"}}  # the fields a kind has no default for
    for kind, objective in OBJECTIVES.items():
        config = objective_config(kind=kind, **required.get(kind, {}))
        assert objective.config_type.kind_name() == kind == config.kind
        assert isinstance(config, CONFIGS[kind])
    with pytest.raises(ValueError, match="distill.teacher"):
        objective_config(kind="distill")
    assert objective_config().kind == DEFAULT_KIND == "contrastive"


@pytest.mark.parametrize("path", SAVED, ids=[f"{p.parent.name}/{p.stem}" for p in SAVED])
def test_the_presets_saved_configs_validate(path):
    # They list every kind's fields side by side; those of other kinds hold their defaults.
    assert load_config(path).objective.kind == "contrastive"


def test_a_field_of_another_kind_is_refused_naming_its_kind():
    with pytest.raises(
        ValueError,
        match=r"objective.dropout is a field of objective.kind 'simcse'.*; "
        r"objective.kind='contrastive' has none. Remove it",
    ):
        objective_config(dropout=0.3)
    with pytest.raises(
        ValueError,
        match=r"objective.parts is a field of objective.kind 'contrastive'.* 'simcse'.*; "
        r"objective.kind='reconstruction' has none.* takes alpha",
    ):
        objective_config(kind="reconstruction", parts={"full": 1.0})
    with pytest.raises(ValueError, match="objective.mask_prob is not a field of any objective.kind"):
        objective_config(kind="mntp", mask_prob=0.1)
    with pytest.raises(ValueError, match="does not match any of the expected tags: 'contrastive'"):
        objective_config(kind="no-such-kind")
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        MNTPConfig(alpha=0.2)  # a config class alone refuses them too, in pydantic's words


def test_a_mapping_of_every_kind_side_by_side_keeps_only_the_named_kinds_fields():
    side_by_side = {
        "mask_probability": 0.2,
        "mask_strategy": "bert",
        "mask_token": "_",
        "dropout": 0.3,
        "alpha": 0.2,
        "parts": {"full": 1.0},
        "matryoshka": {},
    }
    assert objective_config(kind="simcse", **{**side_by_side, "dropout": 0.1}).model_dump() == {
        "kind": "simcse",
        "parts": {"full": 1.0},
        "matryoshka": {},
        "dropout": 0.1,
    }
    assert objective_config(kind="mntp", **side_by_side).model_dump() == {
        "kind": "mntp",
        "mask_probability": 0.2,
        "mask_strategy": "bert",
        "mask_token": "_",
    }
    # A field of another kind away from its default set something that would not apply: refused.
    with pytest.raises(
        ValueError,
        match="objective.matryoshka is a field of objective.kind 'contrastive'.* "
        "'simcse'.*; objective.kind='mntp' has none",
    ):
        objective_config(kind="mntp", **{**side_by_side, "matryoshka": {8: 1.0}})
