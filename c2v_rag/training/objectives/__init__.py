"""What a training step optimises: one module per objective, one objective per recipe stage.

A recipe's ``objective:`` section is an objective's config: ``kind`` (``contrastive`` by default) and that
kind's own fields. Each objective's module holds its config, the class that computes its loss, and a
docstring saying what it optimises; :mod:`~c2v_rag.training.objectives.registry` lists them
(:data:`OBJECTIVES`) and builds the one a config names. Every objective runs the same
:class:`~c2v_rag.Causal2Vec` model and the same trainer; only the loss differs.
"""

from c2v_rag.training.objectives.base import BaseObjectiveConfig, Objective, ObjectiveContext
from c2v_rag.training.objectives.registry import (
    DEFAULT_KIND,
    OBJECTIVES,
    ObjectiveConfig,
    build_objective,
    objective_config,
)

__all__ = [
    "BaseObjectiveConfig",
    "Objective",
    "ObjectiveContext",
    "ObjectiveConfig",
    "OBJECTIVES",
    "DEFAULT_KIND",
    "build_objective",
    "objective_config",
]
