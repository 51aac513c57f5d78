"""``contrastive``: supervised InfoNCE over in-batch and hard negatives, CoSENT on batches of scored pairs.

The loss of Causal2Vec (paper, Eq. 3), of LLM2Vec's supervised stage and of Anchor's Stage II. A dataset
with ``loss: cosent`` (scored pairs) is ranked with CoSENT instead. The temperature is ``training.temperature``;
hard negatives per query are ``training.hard_negatives`` or the dataset's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from c2v_rag.training.gradcache import ContrastiveStep, PreparedStep
from c2v_rag.training.loss import cosent, distributed_info_nce, over_views
from c2v_rag.training.objectives.base import EmbeddingViewsConfig, Objective, ObjectiveContext, View, loss_views
from c2v_rag.training.step_texts import StepTexts

WHOLE_VECTOR: tuple[View, ...] = ((slice(None), 1.0),)


class ContrastiveConfig(EmbeddingViewsConfig):
    """``objective.kind: contrastive`` (the default): InfoNCE, or CoSENT on scored pairs, on the chosen views."""

    kind: Literal["contrastive"] = "contrastive"


class ContrastiveObjective(Objective[ContrastiveConfig]):
    """InfoNCE on the step's queries against its positives and hard negatives; CoSENT on scored-pair batches.

    ``views`` (column range, weight) score parts and prefixes of the embedding, each alone (:func:`over_views`);
    the default scores the whole vector once.
    """

    config_type = ContrastiveConfig
    prefetch = True

    def __init__(
        self, stepper: ContrastiveStep, temperature: float, device: torch.device, views: Sequence[View] = WHOLE_VECTOR
    ) -> None:
        self.stepper, self.temperature, self.device, self.views = stepper, temperature, device, list(views)

    @classmethod
    def from_config(cls, config: ContrastiveConfig, context: ObjectiveContext) -> ContrastiveObjective:
        views = loss_views(config, context.model)
        reach = max((view.stop if view.stop is not None else context.model.embedding_dim) for view, _ in views)
        context.stepper.read_prefix(reach)  # a loss on the encoder's part alone skips the decoder's forward
        return cls(context.stepper, context.temperature, context.device, views)

    def prepare(self, texts: StepTexts) -> PreparedStep:
        return self.stepper.prepare(texts.queries, texts.query_instructions, texts.passages, texts.passage_instructions)

    def backward(self, texts: StepTexts, step: int, prepared: object | None = None) -> float:
        if prepared is not None and not isinstance(prepared, PreparedStep):
            raise TypeError(f"the contrastive objective prepares a PreparedStep, not {type(prepared).__name__}")
        # B queries on this process; M passages on every process together ([positives; hard negatives] per
        # process, gathered rank-major by distributed_info_nce); d the embedding width.
        if texts.scores is not None:
            scores = torch.tensor(texts.scores, device=self.device)  # [B]: the gold score of each (query, passage)

            def ranking_loss(q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
                # q, p [B, d]. No hard negatives on scored batches: this process's passages are its queries'
                # partners, and no pair is compared across processes.
                return cosent(q, p, scores, temperature=self.temperature)

            return self.stepper.run(
                texts.queries,
                texts.query_instructions,
                texts.passages,
                texts.passage_instructions,
                over_views(ranking_loss, self.views),
                prepared,
            )
        targets = torch.tensor(texts.targets, device=self.device)  # [B]: each query's positive among the M
        known = torch.tensor(texts.exclude, device=self.device)  # [B, M]: known positives, not negatives
        exclude = known if known.any() else None

        def loss_fn(q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
            # q [B, d] against this process's passages p [M / processes, d], gathered to [M, d].
            return distributed_info_nce(q, p, targets, temperature=self.temperature, exclude=exclude)

        return self.stepper.run(
            texts.queries,
            texts.query_instructions,
            texts.passages,
            texts.passage_instructions,
            over_views(loss_fn, self.views),
            prepared,
        )
