"""Length-sorted, token-budget batching and padding."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

T = TypeVar("T")


def plan_batches(
    lengths: Sequence[int], *, max_tokens: int, max_batch_size: int, max_pad_fraction: float | None = None
) -> list[list[int]]:
    """Group indices into batches whose padded size ``rows * longest`` stays within ``max_tokens``.

    Indices are sorted by length, longest first, so each batch pads little and an out-of-memory
    error, if any, shows up on the first batch rather than after hours. A single input longer
    than the budget still gets a batch of its own. ``max_pad_fraction`` also starts a new batch
    where an input would be padded by more than that fraction of the batch's longest: on a CPU,
    where a forward pass costs about the same per token at any batch size, padding is pure loss.
    """
    if max_tokens < 1 or max_batch_size < 1:
        raise ValueError(f"max_tokens={max_tokens} and max_batch_size={max_batch_size} must be >= 1")
    if max_pad_fraction is not None and not 0 <= max_pad_fraction <= 1:
        raise ValueError(f"max_pad_fraction={max_pad_fraction} must be between 0 and 1, or None")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = lengths[current[0]] if current else 0
        too_short = max_pad_fraction is not None and longest - lengths[i] > max_pad_fraction * longest
        if current and ((len(current) + 1) * longest > max_tokens or len(current) >= max_batch_size or too_short):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def pad_right(sequences: Sequence[Sequence[int]], pad_value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token lists into ``(ids, attention_mask)`` long tensors.

    Right padding keeps every real token at the same position as in an unpadded sequence, and
    under causal attention no real token sees a pad, so batched and single results agree.
    """
    longest = max((len(s) for s in sequences), default=0)
    ids = torch.full((len(sequences), longest), pad_value, dtype=torch.long)
    mask = torch.zeros((len(sequences), longest), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return ids, mask


class Causal2VecBatch:
    """One model-ready batch: the decoder ids with empty Contextual slots, and the encoder ids.

    ``input_ids`` hold ``pad_id`` in the Contextual slots; the model overwrites those rows of the
    input embeddings with the projector output. ``contextual`` (C, [B, n, d]) and ``sentence`` (the
    encoder's own vector, [B, k]) are the encoder's outputs for these rows where they were computed
    ahead, in batches of the encoder's own (the encode loop); the batch then needs no encoder ids.
    """

    def __init__(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        context_positions: torch.Tensor,
        last_positions: torch.Tensor,
        encoder_input_ids: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        pool_mask: torch.Tensor | None = None,
        contextual: torch.Tensor | None = None,
        sentence: torch.Tensor | None = None,
    ) -> None:
        self.input_ids = input_ids
        self.attention_mask = attention_mask
        # Explicit positions: models with absolute position embeddings (GPT-2) need them, and they
        # make the layout independent of how the backbone infers positions from the mask.
        self.position_ids = torch.arange(input_ids.size(1)).expand_as(input_ids)
        self.context_positions = context_positions
        self.last_positions = last_positions
        self.encoder_input_ids = encoder_input_ids
        self.encoder_attention_mask = encoder_attention_mask
        # 1 on the text tokens that mean/weighted-mean pooling averages (LLM2Vec leaves the
        # instruction out); None pools over every real token.
        self.pool_mask = pool_mask
        self.contextual = contextual
        self.sentence = sentence

    @property
    def num_real_tokens(self) -> int:
        return int(self.attention_mask.sum())

    def to(self, device: torch.device) -> Causal2VecBatch:
        for name, value in vars(self).items():
            if isinstance(value, torch.Tensor):
                setattr(self, name, value.to(device, non_blocking=True))
        return self

    def pin_memory(self) -> Causal2VecBatch:
        """A copy with its tensors in page-locked memory, from which :meth:`to` copies to a GPU asynchronously."""
        pinned = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, torch.Tensor):
                setattr(pinned, name, value.pin_memory())
        return pinned


def collate(
    pieces: Sequence,
    encoder_ids: Sequence[Sequence[int]] | None,
    *,
    num_contextual_tokens: int,
    pad_id: int,
    encoder_pad_id: int = 0,
) -> Causal2VecBatch:
    """Lay out :class:`~c2v_rag.encode.prompting.DecoderPieces` (and encoder ids) as one batch."""
    slot = [pad_id] * num_contextual_tokens
    ids, mask = pad_right([p.head + slot + p.tail for p in pieces], pad_id)
    context = torch.tensor([len(p.head) for p in pieces], dtype=torch.long)
    last = mask.sum(1) - 1
    enc_ids = enc_mask = None
    if encoder_ids is not None:
        enc_ids, enc_mask = pad_right(encoder_ids, encoder_pad_id)
    pool = torch.zeros_like(mask)
    for row, p in enumerate(pieces):
        start, end = p.text_span
        offset = len(p.head) + num_contextual_tokens
        if end > start:
            pool[row, offset + start : offset + end] = 1
        else:
            pool[row, int(last[row])] = 1  # an empty text: its EOS state, rather than a zero vector
    return Causal2VecBatch(ids, mask, context, last, enc_ids, enc_mask, pool)


def forward_batches(forward: Callable[[list[int]], T], plan: list[list[int]], workers: int) -> Iterator[T]:
    """``forward`` of each batch of ``plan``, in order; ``workers`` batches at a time on as many threads when
    the model asks for it (:attr:`~c2v_rag.model.causal2vec.Causal2Vec.batch_workers`: the ONNX Runtime path, whose
    sessions run each batch on one core). Results are taken, and callbacks run, on the caller's thread."""
    workers = min(workers, len(plan))
    if workers <= 1:
        yield from map(forward, plan)
        return
    pool = ThreadPoolExecutor(workers, thread_name_prefix="c2v-batch")
    try:
        yield from pool.map(forward, plan)
    finally:
        # an error (or the caller stopping early) drops the batches not started yet
        pool.shutdown(wait=True, cancel_futures=True)
