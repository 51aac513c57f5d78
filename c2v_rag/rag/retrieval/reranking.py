"""``search(..., rerank=N)``: the first stage's top N hits re-ordered by the decoder's likelihood, fused with their
scores (:meth:`~c2v_rag.rerank.Causal2VecReranker.fused_scores`), and the best ``top_k`` of them kept.

The reranker of a variant loads once per process (its base decoder: seconds) and is shared by every handle and
search that names the same model, device and dtype, as :func:`~c2v_rag.rag.embedding.load_model` shares models.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from c2v_rag.rag.options import ModelOptions

if TYPE_CHECKING:
    from c2v_rag.rerank import Causal2VecReranker


class _Hit(Protocol):
    """What reranking reads and sets of a :class:`~c2v_rag.rag.retrieval.search.SearchHit`."""

    text: str
    score: float
    rerank_score: float | None


HitT = TypeVar("HitT", bound=_Hit)

_cache: dict[tuple[Any, ...], Causal2VecReranker] = {}
_lock = threading.Lock()


def check_rerank(rerank: Any, top_k: int) -> None:
    """``rerank`` is None or a number of first-stage hits of at least ``top_k``."""
    if rerank is None:
        return
    if not isinstance(rerank, int) or isinstance(rerank, bool) or rerank < 1:
        raise ValueError(
            f"rerank must be a positive integer (how many first-stage hits to rerank) or None, got {rerank!r}"
        )
    if rerank < top_k:
        raise ValueError(
            f"rerank={rerank} is less than top_k={top_k}: the reranker orders the first stage's top {rerank} hits and "
            f"returns the best top_k of them, so pass rerank >= top_k (e.g. rerank=20 with top_k={top_k})"
        )


def shared_reranker(model: ModelOptions, recorded: str | None) -> Causal2VecReranker:
    """The reranker of the model that searches (``recorded``, a collection's model, when none is named)."""
    from c2v_rag.rerank import Causal2VecReranker

    resolved = model.resolve(recorded)
    source = resolved.loaded if resolved.loaded is not None else resolved.reference
    key = (source, model.device, model.dtype)
    with _lock:
        if key not in _cache:
            _cache[key] = Causal2VecReranker(source, device=model.device, dtype=model.dtype)
        return _cache[key]


def rerank_hits(reranker: Causal2VecReranker, query: str, hits: Sequence[HitT], top_k: int) -> list[HitT]:
    """``hits`` ordered by their fused score (set as each hit's ``rerank_score``), the best ``top_k`` kept."""
    if not hits:
        return []
    ranked = reranker.rerank(query, [hit.text for hit in hits], top_k, first_stage=[hit.score for hit in hits])
    for result in ranked:
        hits[result.index].rerank_score = result.relevance_score
    return [hits[result.index] for result in ranked]
