"""Pooling: the encoder's mean pooling, and reading the embedding off the decoder's last layer."""

from __future__ import annotations

import torch

from c2v_rag.core.config import POOLED_REPRESENTATIONS, Representation


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Average ``hidden`` [B, T, k] over the positions where ``mask`` [B, T] is 1."""
    weights = mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)


def weighted_mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Position-weighted mean (SGPT, LLM2Vec): the k-th masked token of a row weighs k / (1 + ... + n).

    Later tokens of a causal decoder have seen more of the text, so they count more.
    """
    mask = mask.to(hidden.dtype)
    weights = (torch.cumsum(mask, dim=1) * mask).unsqueeze(-1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)


def readout_positions(
    representation: Representation,
    context_positions: torch.Tensor,
    last_positions: torch.Tensor,
    num_contextual_tokens: int,
) -> torch.Tensor | None:
    """The positions [B, R] whose last hidden states :func:`read_representation` reads, in no particular
    order, or None where it reads them all (the pooled representations). A decoder that can compute its
    last layer at some rows only (``OnnxDecoder.rows_only``) is given these."""
    if representation in POOLED_REPRESENTATIONS:
        return None
    offsets = torch.arange(num_contextual_tokens, device=context_positions.device)
    contextual = context_positions[:, None] + offsets
    if representation == "contextual":
        return contextual
    if representation in ("last_token", "eos_projector"):  # eos_projector's second part is C itself
        return last_positions[:, None]
    return torch.cat([contextual, last_positions[:, None]], dim=1)


def read_representation(
    representation: Representation,
    hidden: torch.Tensor,
    context_positions: torch.Tensor,
    last_positions: torch.Tensor,
    num_contextual_tokens: int,
    contextual_tokens: torch.Tensor | None,
    pool_mask: torch.Tensor | None = None,
    normalize_parts: bool = False,
) -> torch.Tensor:
    """The text embedding from the decoder's last hidden states ``hidden`` [B, L, d].

    ``context_positions`` [B] is where the Contextual tokens start, ``last_positions`` [B] the EOS;
    :func:`readout_positions` says which positions this reads.
    With several Contextual tokens their states are averaged into one h_C. ``pool_mask`` [B, L]
    marks the tokens ``mean`` and ``weighted_mean`` average over. ``normalize_parts`` L2-normalizes
    each part of ``concat``, ``average`` and ``eos_projector`` before they are combined: in small
    decoders h_C carries a few massive activation dimensions, and unnormalized it dominates the cosine.
    """
    if representation in POOLED_REPRESENTATIONS:
        if pool_mask is None:
            raise ValueError(f"representation={representation!r} needs the batch's pool_mask")
        return weighted_mean_pool(hidden, pool_mask) if representation == "weighted_mean" else mean_pool(hidden, pool_mask)
    rows = torch.arange(hidden.size(0), device=hidden.device)
    h_eos = hidden[rows, last_positions]
    if representation == "last_token":
        return h_eos
    if representation == "eos_projector":
        first, second = h_eos, contextual_tokens.mean(1).to(h_eos.dtype)
    else:
        offsets = torch.arange(num_contextual_tokens, device=hidden.device)
        h_c = hidden[rows[:, None], context_positions[:, None] + offsets].mean(1)
        if representation == "contextual":
            return h_c
        first, second = h_c, h_eos
    if normalize_parts:
        # In fp32: bf16 norms of vectors with massive activations lose the small dimensions.
        first = torch.nn.functional.normalize(first.float(), dim=-1).to(first.dtype)
        second = torch.nn.functional.normalize(second.float(), dim=-1).to(second.dtype)
    if representation in ("concat", "eos_projector"):
        return torch.cat([first, second], dim=-1)
    if representation == "average":
        return (first + second) / 2
    raise ValueError(f"unknown representation {representation!r}")


def mix_encoder_vector(decoder_vector: torch.Tensor, encoder_vector: torch.Tensor, share: float) -> torch.Tensor:
    """[sqrt(share) * unit(encoder_vector); sqrt(1 - share) * unit(decoder_vector)], a unit vector.

    The cosine of two such vectors is ``share`` times the encoder's cosine plus ``1 - share`` times the
    decoder readout's, whatever the two parts' norms and sizes: the share is exactly what it says.
    """
    decoder_unit = torch.nn.functional.normalize(decoder_vector.float(), dim=-1)
    mixed = torch.cat([encoder_part(encoder_vector, share), decoder_unit * (1.0 - share) ** 0.5], dim=-1)
    return mixed.to(decoder_vector.dtype)


def encoder_part(encoder_vector: torch.Tensor, share: float) -> torch.Tensor:
    """``sqrt(share) * unit(encoder_vector)`` in float32: the first part of :func:`mix_encoder_vector`'s vector,
    which a Matryoshka prefix inside it is computed from alone (no decoder)."""
    return torch.nn.functional.normalize(encoder_vector.float(), dim=-1) * share**0.5
