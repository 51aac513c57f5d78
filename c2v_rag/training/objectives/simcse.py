"""``simcse``: unsupervised SimCSE (LLM2Vec, step 3).

Each sentence, embedded twice under different dropout masks, is its own positive; the other sentences of
the batch are its negatives. The loss is :mod:`~c2v_rag.training.objectives.contrastive`'s InfoNCE on that
layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from pydantic import Field

from c2v_rag.core.instructions import Instruction
from c2v_rag.nn.attention import set_attention_dropout
from c2v_rag.training.gradcache import ContrastiveStep
from c2v_rag.training.objectives.base import EmbeddingViewsConfig, Objective, ObjectiveContext, View, loss_views
from c2v_rag.training.objectives.contrastive import WHOLE_VECTOR, ContrastiveObjective
from c2v_rag.training.step_texts import StepTexts


class SimCSEConfig(EmbeddingViewsConfig):
    """``objective.kind: simcse``, with LLM2Vec's attention dropout of 0.3 (Appendix D.1.2)."""

    kind: Literal["simcse"] = "simcse"
    dropout: float = Field(0.3, ge=0, lt=1, description="attention dropout in the decoder")


def simcse_pairs(sentences: Sequence[str]) -> tuple[list[str], list[str], list[int], list[list[bool]]]:
    """SimCSE's layout: each sentence is its own positive; identical sentences are not negatives."""
    sentences = list(sentences)
    targets = list(range(len(sentences)))
    exclude = [[j != i and sentences[j] == s for j in range(len(sentences))] for i, s in enumerate(sentences)]
    return sentences, list(sentences), targets, exclude


class SimCSEObjective(Objective[SimCSEConfig]):
    """Unsupervised SimCSE on the step's queries, with no instruction (LLM2Vec, Section 2).

    The two embeddings of a sentence come from two separate forward passes (the queries, then the same
    sentences as passages), so dropout, raised to ``dropout`` in the decoder's attention, draws a different
    mask for each.
    """

    config_type = SimCSEConfig

    def __init__(
        self,
        stepper: ContrastiveStep,
        temperature: float,
        device: torch.device,
        dropout: float,
        views: Sequence[View] = WHOLE_VECTOR,
    ) -> None:
        self.contrastive = ContrastiveObjective(stepper, temperature, device, views)
        set_attention_dropout(stepper.model.decoder, dropout)

    @classmethod
    def from_config(cls, config: SimCSEConfig, context: ObjectiveContext) -> SimCSEObjective:
        return cls(
            context.stepper, context.temperature, context.device, config.dropout, loss_views(config, context.model)
        )

    def backward(self, texts: StepTexts, step: int, prepared: object | None = None) -> float:
        # B sentences -> B queries and the same B sentences as passages: targets [B] = 0..B-1, exclude [B, B].
        queries, positives, targets, exclude = simcse_pairs(texts.queries)
        none: list[Instruction] = [None] * len(queries)
        paired = StepTexts(texts.dataset, queries, none, positives, none, targets, exclude, 0)
        return self.contrastive.backward(paired, step)
