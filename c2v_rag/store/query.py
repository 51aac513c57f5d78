"""Qdrant query requests for the three retrieval modes, from already-embedded queries.

- ``dense``: nearest neighbours of the model's query vector;
- ``sparse``: BM25 over the sparse vectors (Qdrant applies IDF);
- ``hybrid``: both as prefetches, fused in Qdrant's query API: by reciprocal rank (``fusion="rrf"``,
  the default: it needs no score calibration between cosine and BM25, which live on unrelated
  scales) or by distribution-based score fusion (``fusion="dbsf"``: each list's scores normalized
  by their mean and spread, then summed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from c2v_rag.store.errors import CollectionMismatchError
from c2v_rag.store.vectors import CollectionVectors

if TYPE_CHECKING:
    from qdrant_client.http import models

SearchMode = Literal["dense", "sparse", "hybrid"]
MODES: tuple[str, ...] = ("dense", "sparse", "hybrid")
Fusion = Literal["rrf", "dbsf"]
FUSIONS: tuple[str, ...] = ("rrf", "dbsf")
# Each prefetch hands the fusion this many candidates per requested hit (at least PREFETCH_MIN):
# RRF can only promote what one of the two lists found.
PREFETCH_FACTOR = 4
PREFETCH_MIN = 50


def check_fusion(fusion: str) -> str:
    """``fusion`` itself, or a clear error naming the choices."""
    if fusion not in FUSIONS:
        raise ValueError(f"fusion={fusion!r} is not a fusion of hybrid search; use one of {', '.join(FUSIONS)}")
    return fusion


def check_mode(mode: str, layout: CollectionVectors, collection: str, location: str) -> None:
    """Refuse an unknown mode, or a sparse or hybrid search of a collection without sparse vectors."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not a search mode; use one of {', '.join(MODES)}")
    if mode != "dense" and not layout.hybrid:
        raise CollectionMismatchError(
            f"collection {collection!r} at {location} has no sparse vectors, so mode={mode!r} cannot run; "
            "search it with mode='dense', or ingest into a collection with sparse='bm25'"
        )


def query_request(
    layout: CollectionVectors,
    mode: str,
    top_k: int,
    *,
    dense: Sequence[float] | None = None,
    sparse: tuple[list[int], list[float]] | None = None,
    filter: models.Filter | None = None,
    score_threshold: float | None = None,
    with_vectors: bool = False,
    fusion: str = "rrf",
) -> models.QueryRequest:
    """One ``QueryRequest`` (for ``query_batch_points``) in ``layout`` for ``mode`` (``fusion``: how
    a hybrid request merges its two lists)."""
    from qdrant_client.http import models

    common: dict[str, Any] = {
        "limit": top_k,
        "with_payload": True,
        "with_vector": with_vectors,
        "score_threshold": score_threshold,
    }
    dense_using = layout.dense or None
    if mode == "dense":
        return models.QueryRequest(query=_floats(dense), using=dense_using, filter=filter, **common)
    if sparse is None:
        raise ValueError("a sparse or hybrid query needs its sparse vector")
    sparse_query = models.SparseVector(indices=list(sparse[0]), values=list(sparse[1]))
    if mode == "sparse":
        return models.QueryRequest(query=sparse_query, using=layout.sparse, filter=filter, **common)
    depth = max(PREFETCH_MIN, PREFETCH_FACTOR * top_k)
    # The filter goes on each prefetch: the fusion then merges only candidates that pass it.
    prefetch = [
        models.Prefetch(query=_floats(dense), using=dense_using, filter=filter, limit=depth),
        models.Prefetch(query=sparse_query, using=layout.sparse, filter=filter, limit=depth),
    ]
    fused = {"rrf": models.Fusion.RRF, "dbsf": models.Fusion.DBSF}[check_fusion(fusion)]
    return models.QueryRequest(prefetch=prefetch, query=models.FusionQuery(fusion=fused), filter=filter, **common)


def _floats(vector: Sequence[float] | None) -> list[float]:
    if vector is None:
        raise ValueError("a dense or hybrid query needs its dense vector")
    return [float(x) for x in vector]
