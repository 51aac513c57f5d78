"""InfoNCE on cosine similarity with in-batch and hard negatives (paper, Eq. 3)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .distributed import gather_with_grad


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
        raise ValueError(f"expected queries [B, d] and passages [M, d], got {tuple(queries.shape)} and {tuple(passages.shape)}")
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
