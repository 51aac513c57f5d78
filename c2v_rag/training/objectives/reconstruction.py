"""``reconstruction``: Anchor's Stage I, text reconstruction from the embedding.

The query's embedding prefixes the decoder input and the LM head reconstructs the document (EBQ2D), and the
other way round (EBD2Q), weighted alpha and 1 - alpha (Anchor, Eq. 5). The embedding is fed back as one
input position, so it must have the decoder's width, and generation needs causal attention.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

import torch
import torch.nn.functional as F
from pydantic import Field

from c2v_rag.encode.batching import Causal2VecBatch, pad_right
from c2v_rag.nn.attention import attention_mode
from c2v_rag.nn.backbone import input_embeddings
from c2v_rag.training.gradcache import make_batch
from c2v_rag.training.lm_head import lm_head_weight, token_logits
from c2v_rag.training.objectives.base import BaseObjectiveConfig, Objective, ObjectiveContext, check_finite
from c2v_rag.training.step_texts import StepTexts

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from c2v_rag.model.causal2vec import Causal2Vec


class ReconstructionConfig(BaseObjectiveConfig):
    """``objective.kind: reconstruction``, with Anchor's alpha = 0.2 by default."""

    kind: Literal["reconstruction"] = "reconstruction"
    alpha: float = Field(0.2, ge=0, le=1, description="weight of EBQ2D; EBD2Q gets 1 - alpha")


def reconstruction_targets(model: Causal2Vec, texts: Sequence[str], max_length: int) -> list[list[int]]:
    """The token ids to reconstruct: the bare text, cut to fit after the embedding, then EOS."""
    encoded = model.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    return [ids[: max_length - 2] + [model.prompt_builder.eos_id] for ids in encoded]


def conditioned_lm_loss(
    model: Causal2Vec, prefix: torch.Tensor, targets: list[list[int]], head: torch.Tensor
) -> torch.Tensor:
    """Teacher-forced cross-entropy of ``targets`` given one prefix vector per row (Anchor, Eq. 3).

    The decoder reads ``[e; t_1 .. t_{m-1}]``; its state at position k predicts ``t_{k+1}``, so the
    first token is predicted from the embedding alone. Mean over every target token of the batch.
    """
    ids, mask = pad_right(targets, model.pad_id)  # [B, m]: the targets, right-padded
    ids, mask = ids.to(prefix.device), mask.to(prefix.device)
    words = input_embeddings(model.decoder)(ids[:, :-1])  # [B, m - 1, h]
    inputs = torch.cat([prefix.unsqueeze(1).to(words.dtype), words], dim=1)  # [B, m, h]: the prefix [B, h] first
    attention = torch.cat([torch.ones_like(mask[:, :1]), mask[:, :-1]], dim=1)  # [B, m]
    positions = torch.arange(inputs.size(1), device=inputs.device).expand(inputs.size(0), -1)
    hidden = model.decoder(
        inputs_embeds=inputs, attention_mask=attention, position_ids=positions, use_cache=False
    ).last_hidden_state  # [B, m, h]: position k predicts target k
    rows, cols = mask.bool().nonzero(as_tuple=True)
    return F.cross_entropy(token_logits(hidden[rows, cols], head), ids[rows, cols])


def reconstruction_loss(
    model: Causal2Vec,
    q_batch: Causal2VecBatch,
    d_batch: Causal2VecBatch,
    queries: Sequence[str],
    documents: Sequence[str],
    *,
    alpha: float,
    head: torch.Tensor,
    max_length: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``alpha * L_Q2D + (1 - alpha) * L_D2Q`` (Anchor, Eq. 5), with both parts."""
    e_q, e_d = model(q_batch), model(d_batch)  # [B, h] each
    q2d = conditioned_lm_loss(model, e_q, reconstruction_targets(model, documents, max_length), head)
    d2q = conditioned_lm_loss(model, e_d, reconstruction_targets(model, queries, max_length), head)
    return alpha * q2d + (1 - alpha) * d2q, q2d, d2q


class ReconstructionObjective(Objective[ReconstructionConfig]):
    """Anchor Stage I on the step's (query, positive) pairs."""

    config_type = ReconstructionConfig
    multi_process = False
    gradient_cache = False

    def __init__(
        self,
        model: Causal2Vec,
        config: ReconstructionConfig,
        autocast: Callable[[], AbstractContextManager],
        max_length: int,
    ) -> None:
        if model.embedding_dim != model.config.decoder_hidden_size:
            raise ValueError(
                f"objective.kind=reconstruction feeds the embedding back into the decoder, so it must have the "
                f"decoder's width {model.config.decoder_hidden_size}; representation={model.config.representation!r} "
                f"gives {model.embedding_dim}. Use 'last_token' (Anchor's [EOS]), 'mean', 'weighted_mean' or 'average'."
            )
        if attention_mode(model.decoder) != "causal":
            raise ValueError(
                "objective.kind=reconstruction trains generation, which needs causal attention; "
                "build the variant with attention='causal'"
            )
        self.model, self.config, self.autocast, self.max_length = model, config, autocast, max_length
        self.head = lm_head_weight(model.decoder, model.config.decoder, model.config.decoder_revision)  # [vocab, h]

    @classmethod
    def from_config(cls, config: ReconstructionConfig, context: ObjectiveContext) -> ReconstructionObjective:
        return cls(context.model, config, context.autocast, context.model.max_seq_length)

    def backward(self, texts: StepTexts, step: int, prepared: object | None = None) -> float:
        n = len(texts.queries)
        documents = texts.passages[:n]  # the positives; hard negatives are not reconstructed
        q_batch = make_batch(self.model, texts.queries, texts.query_instructions)
        d_batch = make_batch(self.model, documents, texts.passage_instructions[:n])
        with self.autocast():
            loss, _, _ = reconstruction_loss(
                self.model,
                q_batch,
                d_batch,
                texts.queries,
                documents,
                alpha=self.config.alpha,
                head=self.head,
                max_length=self.max_length,
            )
        check_finite(loss).backward()
        return float(loss.detach())
