"""The contrastive losses: InfoNCE with in-batch and hard negatives (paper, Eq. 3), CoSENT for scored pairs, and
their sum over parts and prefixes of the embedding (every part trained to embed; Matryoshka)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

import torch
import torch.nn.functional as F

from c2v_rag.training.ddp import gather_with_grad


def info_nce(
    queries: torch.Tensor,
    passages: torch.Tensor,
    targets: torch.Tensor,
    *,
    temperature: float = 0.05,
    exclude: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean over queries of -log softmax(cos(q, p) / tau)[target].

    ``queries`` [B, d], ``passages`` [M, d] (positives and hard negatives of the whole batch),
    ``targets`` [B] the index of each query's positive in ``passages``. Every other passage is a
    negative, except where ``exclude`` [B, M] is True: known positives of the query (the same
    document or label showing up for another query), which must not be pushed away.
    Computed in float32 whatever the embedding dtype.
    """
    if queries.dim() != 2 or passages.dim() != 2 or queries.size(1) != passages.size(1):
        raise ValueError(
            f"expected queries [B, d] and passages [M, d], got {tuple(queries.shape)} and {tuple(passages.shape)}"
        )
    q = F.normalize(queries.float(), dim=-1)
    p = F.normalize(passages.float(), dim=-1)
    logits = q @ p.T / temperature
    if exclude is not None:
        exclude = exclude.to(logits.device)
        rows = torch.arange(logits.size(0), device=logits.device)
        if exclude[rows, targets].any():
            raise ValueError("exclude masks a query's own positive")
        logits = logits.masked_fill(exclude, float("-inf"))
    return F.cross_entropy(logits, targets.to(logits.device))


def distributed_info_nce(
    queries: torch.Tensor,
    passages: torch.Tensor,
    targets: torch.Tensor,
    *,
    temperature: float,
    exclude: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`info_nce` of this process's queries against the passages of every process.

    ``targets`` and ``exclude`` index the gathered passages (rank-major). The result is the mean
    over local queries; DDP's gradient averaging then yields the gradient of the mean over all
    queries, since the gather hands each process the gradients that other processes' losses put
    on its passages.
    """
    return info_nce(queries, gather_with_grad(passages), targets, temperature=temperature, exclude=exclude)


def cosent(
    first: torch.Tensor, second: torch.Tensor, scores: torch.Tensor, *, temperature: float = 0.05
) -> torch.Tensor:
    """CoSENT (Su, 2022): log(1 + sum over pairs i, j with score_i > score_j of exp((cos_j - cos_i) / tau)).

    ``first`` and ``second`` [B, d] are the two sides of B scored pairs, ``scores`` [B] their gold
    similarity. Only the order of the scores matters, which is what Spearman-scored STS measures;
    InfoNCE on pairs above a threshold sees only near-paraphrases and learns nothing about the
    middle of the scale. Computed in float32. On several processes each ranks its own pairs
    (DDP averages the gradients): no gather is needed since no pair is compared across processes.
    """
    if first.shape != second.shape or first.dim() != 2 or scores.shape != first.shape[:1]:
        raise ValueError(
            f"expected first and second [B, d] and scores [B], got {tuple(first.shape)}, "
            f"{tuple(second.shape)} and {tuple(scores.shape)}"
        )
    cos = F.cosine_similarity(first.float(), second.float(), dim=-1) / temperature
    scores = scores.to(cos.device)
    # diff[i, j] = cos_j - cos_i, penalized where pair i should score above pair j.
    diff = cos[None, :] - cos[:, None]
    ordered = diff[scores[:, None] > scores[None, :]]
    return torch.logsumexp(torch.cat([ordered.new_zeros(1), ordered]), dim=0)


PairLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def over_views(loss_fn: PairLoss, views: Sequence[tuple[slice, float]]) -> PairLoss:
    """``sum_k w_k * loss_fn(q[:, s_k], p[:, s_k])`` over column ranges ``s_k`` of the embeddings, with weights ``w_k``.

    A view is a part of the layout (h_EOS alone, the encoder's vector...) or a prefix (Matryoshka,
    Kusupati et al. 2022): each is scored as an embedding of its own. Both losses normalize their
    inputs, so a slice counts by its direction, not by the scale the full vector gives it. One view
    ``(slice(None), 1.0)`` is ``loss_fn`` itself.
    """
    views = [(view, float(weight)) for view, weight in views]
    if not views:
        raise ValueError("over_views needs at least one (slice, weight) view")
    if len(views) == 1 and views[0] == (slice(None), 1.0):
        return loss_fn

    def summed(queries: torch.Tensor, passages: torch.Tensor) -> torch.Tensor:
        # a tensor, never sum()'s start 0: views is not empty
        return cast(torch.Tensor, sum(weight * loss_fn(queries[:, view], passages[:, view]) for view, weight in views))

    return summed
