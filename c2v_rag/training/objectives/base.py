"""What every training objective shares: the base of its config, the interface of its loss, what it is built from.

An objective is one module holding a pair: a pydantic config, whose ``kind`` names it in a recipe's
``objective:`` section and whose other fields are its own, and an :class:`Objective` that turns a step's
texts into a loss and its gradients. :mod:`~c2v_rag.training.objectives.registry` lists the pairs.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from c2v_rag.training.gradcache import ContrastiveStep, NonFiniteLossError
from c2v_rag.training.step_texts import StepTexts

if TYPE_CHECKING:
    from c2v_rag.model.causal2vec import Causal2Vec


class BaseObjectiveConfig(BaseModel):
    """The base of every objective's config: ``kind`` names the objective; a field it does not declare is refused.

    Subclasses narrow ``kind`` to a one-value ``Literal`` with that value as default: the registry's union
    tells the configs apart by it.
    """

    model_config = ConfigDict(extra="forbid")

    kind: str

    @classmethod
    def kind_name(cls) -> str:
        """The ``kind`` that names this config in a recipe."""
        return str(cls.model_fields["kind"].default)

    def prefix_sizes(self) -> list[int]:
        """The prefix sizes the objective trains the embedding to work at, which the saved variant then accepts
        as ``truncate_dim``; none unless it scores prefixes."""
        return []


class EmbeddingViewsConfig(BaseObjectiveConfig):
    """The fields of objectives that score embeddings with a contrastive loss: which views of the vector to score.

    Each view (a part of the layout, or a prefix) is scored alone with the batch's loss and the losses are
    summed with their weights (:func:`~c2v_rag.training.loss.over_views`).
    """

    parts: dict[str, float] = Field(
        default_factory=lambda: {"full": 1.0},
        description=(
            "which parts of the embedding the loss scores, each alone, with weights summed: 'full' (the whole "
            "vector) and the layout's parts ('encoder', 'contextual' = h_C, 'eos' = h_EOS...; "
            "Causal2VecConfig.parts). Scoring a part alone gives it a gradient of its own: in a concat it "
            "otherwise learns only what the whole needs from it"
        ),
    )
    matryoshka: dict[int, float] = Field(
        default_factory=dict,
        description=(
            "prefix size -> weight; each prefix of the vector is scored as an embedding too (Matryoshka), and "
            "the saved variant accepts these sizes as encode(truncate_dim=...)"
        ),
    )

    @model_validator(mode="after")
    def _check_views(self) -> EmbeddingViewsConfig:
        if not self.parts and not self.matryoshka:
            raise ValueError("objective.parts and objective.matryoshka are both empty: the loss would score nothing")
        for where, weights in (("parts", self.parts), ("matryoshka", self.matryoshka)):
            bad = {k: w for k, w in weights.items() if not w > 0}
            if bad:
                raise ValueError(f"objective.{where} weights must be positive, got {bad}")
        if self.matryoshka and min(self.matryoshka) < 1:
            raise ValueError(f"objective.matryoshka sizes must be positive, got {sorted(self.matryoshka)}")
        return self

    def prefix_sizes(self) -> list[int]:
        return sorted(self.matryoshka)


View = tuple[slice, float]
"""A column range of the embedding and the weight of the loss scored on it."""


def loss_views(config: EmbeddingViewsConfig, model: Causal2Vec) -> list[View]:
    """The (column range, weight) pairs ``objective.parts`` and ``objective.matryoshka`` name, checked against the
    model's embedding layout."""
    layout = model.config.parts
    unknown = sorted(set(config.parts) - set(layout))
    if unknown:
        raise ValueError(
            f"objective.parts names {unknown}, which this model's embedding does not have; its parts are "
            f"{sorted(layout)} (representation={model.config.representation!r}, "
            f"encoder_share={model.config.encoder_share}, part_weights={model.config.part_weights})"
        )
    too_long = sorted(n for n in config.matryoshka if n >= model.embedding_dim)
    if too_long:
        raise ValueError(
            f"objective.matryoshka sizes {too_long} are not shorter than the embedding "
            f"({model.embedding_dim} dims); a prefix must be"
        )
    views = [(layout[name], weight) for name, weight in config.parts.items()]
    return views + [(slice(0, n), weight) for n, weight in sorted(config.matryoshka.items())]


@dataclass(frozen=True)
class ObjectiveContext:
    """What an objective is built for besides its own config: the model, the step runner, and the run's settings."""

    model: Causal2Vec
    stepper: ContrastiveStep
    """Embeds a step's queries and passages and backpropagates a loss on them, whole or with GradCache."""
    device: torch.device
    temperature: float
    """``training.temperature``: the tau of InfoNCE and CoSENT."""
    seed: int
    """``training.seed``: objectives that draw at random draw from (seed, step), so a resumed run draws the same."""
    distributed: bool
    """Whether the run has several processes (torchrun)."""

    @property
    def autocast(self) -> Callable[[], AbstractContextManager]:
        """The run's mixed-precision context for forward passes."""
        return self.stepper.autocast


ConfigT = TypeVar("ConfigT", bound=BaseObjectiveConfig)


class Objective(ABC, Generic[ConfigT]):
    """What a training step optimises: :meth:`backward` computes the step's loss, backpropagates it, returns it.

    ``config_type`` is the config that names and configures the objective. ``multi_process`` and
    ``gradient_cache`` say whether it runs on several processes and with ``training.mini_batch_size``
    (GradCache); :func:`~c2v_rag.training.objectives.registry.build_objective` refuses a run that asks for what
    it lacks, before any step. ``prefetch`` says whether :meth:`prepare` does the step's host-side work
    (tokenizing), which ``training.prefetch_workers`` then runs in worker processes ahead of the step; an
    objective without it prepares its batches inside :meth:`backward`.
    """

    config_type: ClassVar[type[BaseObjectiveConfig]]
    multi_process: ClassVar[bool] = True
    gradient_cache: ClassVar[bool] = True
    prefetch: ClassVar[bool] = False

    @classmethod
    def kind(cls) -> str:
        return cls.config_type.kind_name()

    @classmethod
    @abstractmethod
    def from_config(cls, config: ConfigT, context: ObjectiveContext) -> Objective[ConfigT]:
        """The objective ``config`` describes, for the model and run of ``context``."""

    def prepare(self, texts: StepTexts) -> object | None:
        """The step's inputs built on the CPU from its texts alone (no device, no weights), for :meth:`backward`
        to take as ``prepared``; None where the objective prepares them in :meth:`backward` (``prefetch`` False).
        Prefetch workers call it in other processes, so it must not change the objective."""
        return None

    @abstractmethod
    def backward(self, texts: StepTexts, step: int, prepared: object | None = None) -> float:
        """Compute the step's loss, backpropagate it, and return its value; ``prepared`` is what :meth:`prepare`
        returned for ``texts``, or None to prepare them here. The trainer passes ``prepared`` only to objectives
        with ``prefetch``."""


def check_finite(loss: torch.Tensor) -> torch.Tensor:
    """``loss`` itself, or :class:`NonFiniteLossError` before a NaN or infinite loss is backpropagated."""
    if not math.isfinite(float(loss.detach())):
        raise NonFiniteLossError(f"the loss is {float(loss.detach())}")
    return loss
