"""``mntp``: masked next token prediction (LLM2Vec, step 2).

Text tokens are masked and token i is predicted from the decoder's state at i - 1 through the LM head, so a
decoder made bidirectional learns to use the context on both sides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import torch
import torch.nn.functional as F
from pydantic import Field

from c2v_rag.encode.batching import Causal2VecBatch
from c2v_rag.training.gradcache import make_batch
from c2v_rag.training.lm_head import lm_head_weight, token_logits
from c2v_rag.training.objectives.base import BaseObjectiveConfig, Objective, ObjectiveContext, check_finite
from c2v_rag.training.step_texts import StepTexts

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from c2v_rag.model.causal2vec import Causal2Vec


class MNTPConfig(BaseObjectiveConfig):
    """``objective.kind: mntp``. The defaults are LLM2Vec's for Llama-family models: 20% of the text tokens,
    masked the BERT way (Appendix D.1.1; Mistral used 80% the RoBERTa way)."""

    kind: Literal["mntp"] = "mntp"
    mask_probability: float = Field(0.2, gt=0, lt=1, description="share of text tokens to predict")
    mask_strategy: Literal["bert", "roberta"] = Field("bert", description="80/10/10 mask/random/keep, or all mask")
    mask_token: str = Field("_", description="the stand-in mask token (LLM2Vec's underscore)")


def single_token_id(tokenizer, token: str) -> int:
    ids = tokenizer(token, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise ValueError(
            f"objective.mask_token={token!r} is {len(ids)} tokens for this tokenizer; pick one that is a "
            "single token (LLM2Vec uses '_')"
        )
    return int(ids[0])


def mntp_mask(
    batch: Causal2VecBatch,
    *,
    probability: float,
    strategy: str,
    mask_id: int,
    vocab_size: int,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Corrupted input ids and the boolean map of positions to predict, both [B, T] like ``batch.input_ids``.

    Only text tokens are candidates (never the template, the instruction or the Contextual slot),
    and never position 0, which has no previous state to predict it from. ``bert``: of the chosen
    tokens 80% become ``mask_id``, 10% a random token, 10% stay; ``roberta``: all become ``mask_id``.
    At least one token per batch is chosen.
    """
    assert batch.pool_mask is not None  # collate marks the text tokens of every batch
    ids = batch.input_ids.cpu()
    candidates = (batch.pool_mask.cpu() * batch.attention_mask.cpu()).bool()  # [B, T]
    candidates[:, 0] = False
    if not candidates.any():
        raise ValueError("MNTP: the batch has no text token to mask (every text is empty)")
    chosen = candidates & (torch.rand(ids.shape, generator=generator) < probability)
    if not chosen.any():
        flat = candidates.flatten().nonzero().flatten()
        pick = flat[torch.randint(len(flat), (1,), generator=generator)]
        chosen.view(-1)[pick] = True
    corrupted = ids.clone()
    if strategy == "roberta":
        corrupted[chosen] = mask_id
    else:
        roll = torch.rand(ids.shape, generator=generator)
        corrupted[chosen & (roll < 0.8)] = mask_id
        randomised = chosen & (roll >= 0.8) & (roll < 0.9)
        corrupted[randomised] = torch.randint(vocab_size, (int(randomised.sum()),), generator=generator)
    device = batch.input_ids.device
    return corrupted.to(device), chosen.to(device)


def mntp_loss(
    model: Causal2Vec, batch: Causal2VecBatch, corrupted: torch.Tensor, chosen: torch.Tensor, head: torch.Tensor
) -> torch.Tensor:
    """Mean cross-entropy of each chosen token's original id, predicted from the state just before it."""
    hidden, _ = model.decoder_states(batch, corrupted)  # [B, T, h]
    rows, cols = chosen.nonzero(as_tuple=True)  # N chosen positions
    logits = token_logits(hidden[rows, cols - 1], head)  # [N, vocab]: the states just before them
    return F.cross_entropy(logits, batch.input_ids[rows, cols])


def step_generator(seed: int, step: int) -> torch.Generator:
    """The masks' random generator, seeded by (seed, step): a resumed run masks the same tokens."""
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


class MNTPObjective(Objective[MNTPConfig]):
    """Masked next token prediction on the step's queries and positives, without instructions."""

    config_type = MNTPConfig
    multi_process = False
    gradient_cache = False

    def __init__(
        self, model: Causal2Vec, config: MNTPConfig, autocast: Callable[[], AbstractContextManager], seed: int
    ) -> None:
        self.model, self.config, self.autocast, self.seed = model, config, autocast, seed
        self.head = lm_head_weight(model.decoder, model.config.decoder, model.config.decoder_revision)  # [vocab, h]
        self.mask_id = single_token_id(model.tokenizer, config.mask_token)

    @classmethod
    def from_config(cls, config: MNTPConfig, context: ObjectiveContext) -> MNTPObjective:
        return cls(context.model, config, context.autocast, context.seed)

    def backward(self, texts: StepTexts, step: int, prepared: object | None = None) -> float:
        sentences = list(dict.fromkeys(texts.queries + texts.passages[: len(texts.queries)]))
        batch = make_batch(self.model, sentences, [None] * len(sentences))
        corrupted, chosen = mntp_mask(
            batch,
            probability=self.config.mask_probability,
            strategy=self.config.mask_strategy,
            mask_id=self.mask_id,
            vocab_size=self.head.size(0),
            generator=step_generator(self.seed, step),
        )
        with self.autocast():
            loss = check_finite(mntp_loss(self.model, batch, corrupted, chosen, self.head))
        loss.backward()
        return float(loss.detach())
