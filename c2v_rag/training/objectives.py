"""What a training step optimises: one module, one objective per recipe stage.

- ``contrastive``: InfoNCE over in-batch and hard negatives (Causal2Vec; LLM2Vec's supervised stage;
  Anchor's Stage II), and CoSENT on datasets of scored pairs that ask for it (``loss: cosent``);
- ``simcse``: unsupervised SimCSE (LLM2Vec step 3): each sentence embedded twice under different
  dropout masks is its own positive, the other sentences of the batch are negatives;
- ``mntp``: masked next token prediction (LLM2Vec step 2): mask text tokens and predict token i
  from the decoder's state at i - 1 through the LM head;
- ``reconstruction``: Anchor Stage I: the query embedding prefixes the decoder input and the LM
  head reconstructs the document (EBQ2D), and the other way round (EBD2Q), weighted alpha / 1 - alpha.

Every objective runs the same :class:`~c2v_rag.Causal2Vec` model and the same trainer; only the
loss differs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import torch
import torch.nn.functional as F

from c2v_rag.nn.attention import attention_mode, set_attention_dropout
from c2v_rag.encode.batching import Causal2VecBatch, pad_right
from c2v_rag.training.gradcache import ContrastiveStep, NonFiniteLossError, make_batch
from c2v_rag.training.lm_head import lm_head_weight, token_logits
from c2v_rag.training.loss import cosent, distributed_info_nce, over_views
from c2v_rag.training.sampling import StepTexts

if TYPE_CHECKING:
    from c2v_rag.model.causal2vec import Causal2Vec
    from c2v_rag.training.config import ObjectiveSection, TrainConfig


class Objective(Protocol):
    def backward(self, texts: StepTexts, step: int) -> float:
        """Compute the step's loss, backpropagate it, and return its value."""


# ------------------------------------------------------------------------------------------------ contrastive


def loss_views(section: "ObjectiveSection", model: "Causal2Vec") -> list[tuple[slice, float]]:
    """The (column range, weight) pairs ``objective.parts`` and ``objective.matryoshka`` name, checked against the
    model's embedding layout."""
    layout = model.config.parts
    unknown = sorted(set(section.parts) - set(layout))
    if unknown:
        raise ValueError(f"objective.parts names {unknown}, which this model's embedding does not have; its parts are "
                         f"{sorted(layout)} (representation={model.config.representation!r}, "
                         f"encoder_share={model.config.encoder_share})")
    too_long = sorted(n for n in section.matryoshka if n >= model.embedding_dim)
    if too_long:
        raise ValueError(f"objective.matryoshka sizes {too_long} are not shorter than the embedding "
                         f"({model.embedding_dim} dims); a prefix must be")
    views = [(layout[name], weight) for name, weight in section.parts.items()]
    return views + [(slice(0, n), weight) for n, weight in sorted(section.matryoshka.items())]


class ContrastiveObjective:
    """InfoNCE on the step's queries against its positives and hard negatives; CoSENT on scored-pair batches.

    ``views`` (column range, weight) score parts and prefixes of the embedding, each alone (:func:`over_views`);
    the default scores the whole vector once.
    """

    def __init__(self, stepper: ContrastiveStep, temperature: float, device: torch.device,
                 views: Sequence[tuple[slice, float]] = ((slice(None), 1.0),)) -> None:
        self.stepper, self.temperature, self.device, self.views = stepper, temperature, device, list(views)

    def backward(self, texts: StepTexts, step: int) -> float:
        if texts.scores is not None:
            scores = torch.tensor(texts.scores, device=self.device)

            def ranking_loss(q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
                # No hard negatives on scored batches: this process's passages are its queries' partners.
                return cosent(q, p, scores, temperature=self.temperature)

            return self.stepper.run(texts.queries, texts.query_instructions, texts.passages,
                                    texts.passage_instructions, over_views(ranking_loss, self.views))
        targets = torch.tensor(texts.targets, device=self.device)
        exclude = torch.tensor(texts.exclude, device=self.device)
        exclude = exclude if exclude.any() else None

        def loss_fn(q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
            return distributed_info_nce(q, p, targets, temperature=self.temperature, exclude=exclude)

        return self.stepper.run(texts.queries, texts.query_instructions, texts.passages, texts.passage_instructions,
                                over_views(loss_fn, self.views))


def simcse_pairs(sentences: Sequence[str]) -> tuple[list[str], list[str], list[int], list[list[bool]]]:
    """SimCSE's layout: each sentence is its own positive; identical sentences are not negatives."""
    sentences = list(sentences)
    targets = list(range(len(sentences)))
    exclude = [[j != i and sentences[j] == s for j in range(len(sentences))] for i, s in enumerate(sentences)]
    return sentences, list(sentences), targets, exclude


class SimCSEObjective(ContrastiveObjective):
    """Unsupervised SimCSE on the step's queries, with no instruction (LLM2Vec, Section 2).

    The two embeddings of a sentence come from two separate forward passes, so dropout (raised to
    ``dropout`` in the decoder's attention, LLM2Vec's 0.3) draws a different mask for each.
    """

    def __init__(self, stepper: ContrastiveStep, temperature: float, device: torch.device, dropout: float,
                 views: Sequence[tuple[slice, float]] = ((slice(None), 1.0),)) -> None:
        super().__init__(stepper, temperature, device, views)
        set_attention_dropout(stepper.model.decoder, dropout)

    def backward(self, texts: StepTexts, step: int) -> float:
        queries, positives, targets, exclude = simcse_pairs(texts.queries)
        none = [None] * len(queries)
        paired = StepTexts(texts.dataset, queries, none, positives, none, targets, exclude, 0)
        return super().backward(paired, step)


# ------------------------------------------------------------------------------------------------ MNTP


def single_token_id(tokenizer, token: str) -> int:
    ids = tokenizer(token, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise ValueError(f"objective.mask_token={token!r} is {len(ids)} tokens for this tokenizer; pick one that is a "
                         "single token (LLM2Vec uses '_')")
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
    """Corrupted input ids and the boolean map of positions to predict.

    Only text tokens are candidates (never the template, the instruction or the Contextual slot),
    and never position 0, which has no previous state to predict it from. ``bert``: of the chosen
    tokens 80% become ``mask_id``, 10% a random token, 10% stay; ``roberta``: all become ``mask_id``.
    At least one token per batch is chosen.
    """
    ids = batch.input_ids.cpu()
    candidates = (batch.pool_mask.cpu() * batch.attention_mask.cpu()).bool()
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


def mntp_loss(model: "Causal2Vec", batch: Causal2VecBatch, corrupted: torch.Tensor, chosen: torch.Tensor,
              head: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of each chosen token's original id, predicted from the state just before it."""
    hidden, _ = model.decoder_states(batch, corrupted)
    rows, cols = chosen.nonzero(as_tuple=True)
    logits = token_logits(hidden[rows, cols - 1], head)
    return F.cross_entropy(logits, batch.input_ids[rows, cols])


def _step_generator(seed: int, step: int) -> torch.Generator:
    # Seeded by (seed, step): a resumed run masks the same tokens.
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


def _check_finite(loss: torch.Tensor) -> torch.Tensor:
    if not math.isfinite(float(loss.detach())):
        raise NonFiniteLossError(f"the loss is {float(loss.detach())}")
    return loss


class MNTPObjective:
    """Masked next token prediction on the step's queries and positives, without instructions."""

    def __init__(self, model: "Causal2Vec", section: "ObjectiveSection", autocast, seed: int) -> None:
        self.model, self.section, self.autocast, self.seed = model, section, autocast, seed
        self.head = lm_head_weight(model.decoder, model.config.decoder, model.config.decoder_revision)
        self.mask_id = single_token_id(model.tokenizer, section.mask_token)

    def backward(self, texts: StepTexts, step: int) -> float:
        sentences = list(dict.fromkeys(texts.queries + texts.passages[: len(texts.queries)]))
        batch = make_batch(self.model, sentences, [None] * len(sentences))
        corrupted, chosen = mntp_mask(batch, probability=self.section.mask_probability,
                                      strategy=self.section.mask_strategy, mask_id=self.mask_id,
                                      vocab_size=self.head.size(0), generator=_step_generator(self.seed, step))
        with self.autocast():
            loss = _check_finite(mntp_loss(self.model, batch, corrupted, chosen, self.head))
        loss.backward()
        return float(loss.detach())


# ------------------------------------------------------------------------------------------------ Anchor


def reconstruction_targets(model: "Causal2Vec", texts: Sequence[str], max_length: int) -> list[list[int]]:
    """The token ids to reconstruct: the bare text, cut to fit after the embedding, then EOS."""
    encoded = model.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    return [ids[: max_length - 2] + [model.prompts.eos_id] for ids in encoded]


def conditioned_lm_loss(model: "Causal2Vec", prefix: torch.Tensor, targets: list[list[int]],
                        head: torch.Tensor) -> torch.Tensor:
    """Teacher-forced cross-entropy of ``targets`` given one prefix vector per row (Anchor, Eq. 3).

    The decoder reads ``[e; t_1 .. t_{m-1}]``; its state at position k predicts ``t_{k+1}``, so the
    first token is predicted from the embedding alone. Mean over every target token of the batch.
    """
    ids, mask = pad_right(targets, model.pad_id)
    ids, mask = ids.to(prefix.device), mask.to(prefix.device)
    words = model.decoder.get_input_embeddings()(ids[:, :-1])
    inputs = torch.cat([prefix.unsqueeze(1).to(words.dtype), words], dim=1)
    attention = torch.cat([torch.ones_like(mask[:, :1]), mask[:, :-1]], dim=1)
    positions = torch.arange(inputs.size(1), device=inputs.device).expand(inputs.size(0), -1)
    hidden = model.decoder(inputs_embeds=inputs, attention_mask=attention, position_ids=positions,
                           use_cache=False).last_hidden_state
    rows, cols = mask.bool().nonzero(as_tuple=True)
    return F.cross_entropy(token_logits(hidden[rows, cols], head), ids[rows, cols])


def reconstruction_loss(model: "Causal2Vec", q_batch: Causal2VecBatch, d_batch: Causal2VecBatch,
                        queries: Sequence[str], documents: Sequence[str], *, alpha: float, head: torch.Tensor,
                        max_length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``alpha * L_Q2D + (1 - alpha) * L_D2Q`` (Anchor, Eq. 5), with both parts."""
    e_q, e_d = model(q_batch), model(d_batch)
    q2d = conditioned_lm_loss(model, e_q, reconstruction_targets(model, documents, max_length), head)
    d2q = conditioned_lm_loss(model, e_d, reconstruction_targets(model, queries, max_length), head)
    return alpha * q2d + (1 - alpha) * d2q, q2d, d2q


class ReconstructionObjective:
    """Anchor Stage I on the step's (query, positive) pairs."""

    def __init__(self, model: "Causal2Vec", section: "ObjectiveSection", autocast, max_length: int) -> None:
        if model.embedding_dim != model.config.decoder_hidden_size:
            raise ValueError(
                f"objective.kind=reconstruction feeds the embedding back into the decoder, so it must have the "
                f"decoder's width {model.config.decoder_hidden_size}; representation={model.config.representation!r} "
                f"gives {model.embedding_dim}. Use 'last_token' (Anchor's [EOS]), 'mean', 'weighted_mean' or 'average'."
            )
        if attention_mode(model.decoder) != "causal":
            raise ValueError("objective.kind=reconstruction trains generation, which needs causal attention; "
                             "build the variant with attention='causal'")
        self.model, self.section, self.autocast, self.max_length = model, section, autocast, max_length
        self.head = lm_head_weight(model.decoder, model.config.decoder, model.config.decoder_revision)

    def backward(self, texts: StepTexts, step: int) -> float:
        n = len(texts.queries)
        documents = texts.passages[:n]
        q_batch = make_batch(self.model, texts.queries, texts.query_instructions)
        d_batch = make_batch(self.model, documents, texts.passage_instructions[:n])
        with self.autocast():
            loss, _, _ = reconstruction_loss(self.model, q_batch, d_batch, texts.queries, documents,
                                             alpha=self.section.alpha, head=self.head, max_length=self.max_length)
        _check_finite(loss).backward()
        return float(loss.detach())


# ------------------------------------------------------------------------------------------------ factory


def build_objective(config: "TrainConfig", model: "Causal2Vec", stepper: ContrastiveStep, device: torch.device,
                    distributed: bool) -> Objective:
    """The objective ``config.objective`` names, checked against the rest of the run."""
    section, training = config.objective, config.training
    if section.kind in ("mntp", "reconstruction"):
        if distributed:
            raise ValueError(f"objective.kind={section.kind!r} runs on one process for now; launch without torchrun")
        if training.mini_batch_size is not None:
            raise ValueError(f"objective.kind={section.kind!r} has no GradCache path; unset training.mini_batch_size")
    if section.kind == "contrastive":
        return ContrastiveObjective(stepper, training.temperature, device, loss_views(section, model))
    if section.kind == "simcse":
        return SimCSEObjective(stepper, training.temperature, device, section.dropout, loss_views(section, model))
    if section.kind == "mntp":
        return MNTPObjective(model, section, stepper.autocast, training.seed)
    return ReconstructionObjective(model, section, stepper.autocast, model.max_seq_length)
