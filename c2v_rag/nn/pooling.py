"""Pooling token states into one vector (the encoder's mean, a position-weighted mean), and mixing the encoder's
sentence vector into the embedding. Which decoder states the embedding reads is :mod:`c2v_rag.nn.readout`'s."""

from __future__ import annotations

import torch


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


def mix_encoder_vector(decoder_vector: torch.Tensor, encoder_vector: torch.Tensor, share: float) -> torch.Tensor:
    """[sqrt(share) * unit(encoder_vector); sqrt(1 - share) * unit(decoder_vector)], a unit vector.

    The cosine of two such vectors is ``share`` times the encoder's cosine plus ``1 - share`` times the
    decoder readout's, whatever the two parts' norms and sizes: the share is exactly what it says.

    The result is float32 whatever the decoder's dtype: the encoder's part is pooled in float32 (as a
    Matryoshka prefix inside it is, alone), and rounding it to a bf16 decoder's dtype would make the prefix
    differ from the whole vector's first values.
    """
    decoder_unit = torch.nn.functional.normalize(decoder_vector.float(), dim=-1)
    return torch.cat([encoder_part(encoder_vector, share), decoder_unit * (1.0 - share) ** 0.5], dim=-1)


def encoder_part(encoder_vector: torch.Tensor, share: float) -> torch.Tensor:
    """``sqrt(share) * unit(encoder_vector)`` in float32: the first part of :func:`mix_encoder_vector`'s vector,
    which a Matryoshka prefix inside it is computed from alone (no decoder)."""
    return torch.nn.functional.normalize(encoder_vector.float(), dim=-1) * share**0.5


def split_parts(vector: torch.Tensor, widths: dict[str, int]) -> dict[str, torch.Tensor]:
    """A readout's vector [B, sum(widths)] cut into its named parts [B, width], in order."""
    return dict(zip(widths, vector.split(list(widths.values()), dim=-1), strict=True))


def weigh_parts(pieces: dict[str, torch.Tensor], weights: dict[str, float]) -> torch.Tensor:
    """``[sqrt(w) * unit(pieces[name]) for name, w in weights]`` concatenated in float32: a unit vector whose
    cosine with another is the sum of ``w`` times each part's cosine (``Causal2VecConfig.part_weights``).

    In float32 for the reason :func:`mix_encoder_vector` gives: a prefix computed alone must equal the whole
    vector's first values."""
    return torch.cat(
        [torch.nn.functional.normalize(pieces[name].float(), dim=-1) * weight**0.5 for name, weight in weights.items()],
        dim=-1,
    )
