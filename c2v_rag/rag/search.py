"""``search``, ``search_many`` and ``asearch``: embed queries with their instruction and read the
nearest chunks from Qdrant, densely, by BM25, or both fused (``mode``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from .aliases import aresolve_alias, resolve_alias
from .collection import (
    DEFAULT_COLLECTION,
    QdrantConfig,
    check_collection_name,
    check_model,
    collection_not_found,
    fingerprint_of,
    model_fingerprint,
    require_collection,
    stored_vector_params,
)
from .deps import require_rag
from .embedder import Embedder, load_model
from .errors import CollectionMismatchError
from .filters import to_qdrant_filter
from .layout import CollectionLayout
from .payload import DOC_ID_KEY, payload_metadata, payload_text
from .query import Fusion, SearchMode, check_fusion, check_mode, query_request
from .sparse import BM25Encoder

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient, QdrantClient
    from qdrant_client.http import models

    from ..modeling import Causal2Vec


class SearchHit(BaseModel):
    """One retrieved chunk: its score, id, text, document and metadata, and optionally its vector.

    ``score`` is the cosine (dense), the BM25 score (sparse) or the reciprocal-rank fusion score
    (hybrid). ``vector`` is the stored dense vector, present with ``with_vectors=True``.
    """

    id: str
    score: float
    text: str
    doc_id: str | None = None
    source: str | None = None
    chunk_index: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    vector: list[float] | None = None

    @classmethod
    def from_point(cls, point: Any, dense_vector: str = "") -> "SearchHit":
        payload = point.payload or {}
        metadata = payload_metadata(payload)
        doc_id = payload.get(DOC_ID_KEY, metadata.get(DOC_ID_KEY))
        chunk_index = metadata.get("chunk_index")
        return cls(
            id=str(point.id), score=float(point.score), text=payload_text(payload),
            doc_id=None if doc_id in (None, "None") else str(doc_id),
            source=next((str(metadata[k]) for k in ("source", "file_path", "url") if metadata.get(k)), None),
            chunk_index=chunk_index if isinstance(chunk_index, int) else None,
            metadata=metadata,
            vector=_dense_vector(getattr(point, "vector", None), dense_vector),
        )


def _dense_vector(vector: Any, name: str) -> list[float] | None:
    if vector is None:
        return None
    if isinstance(vector, dict):
        vector = vector.get(name)
    return [float(x) for x in vector] if isinstance(vector, list) else None


def search(
    query: str,
    top_k: int = 5,
    *,
    collection: str = DEFAULT_COLLECTION,
    qdrant_url: str | None = None,
    path: str | Path | None = None,
    api_key: str | None = None,
    prefer_grpc: bool | None = None,
    store: Literal["local", "edge"] | None = None,
    model: "str | Path | Causal2Vec | None" = None,
    device: str | None = None,
    dtype: str | None = None,
    quantize: str | None = None,
    task: str | None = None,
    instruction: str | None = None,
    examples: Sequence[tuple[str, str]] | None = None,
    filter: "Mapping[str, Any] | models.Filter | None" = None,
    score_threshold: float | None = None,
    mode: SearchMode = "dense",
    fusion: Fusion = "rrf",
    with_vectors: bool = False,
    group_by_document: bool = False,
    qdrant: QdrantConfig | None = None,
    client: "QdrantClient | None" = None,
) -> list[SearchHit]:
    """The ``top_k`` chunks nearest to ``query`` in a collection made by :func:`ingest`.

    The query gets the retrieval instruction (``task`` or ``instruction``; otherwise the
    variant's default, else MS MARCO's); documents were stored without one. ``examples`` are
    in-context ``(query, response)`` pairs before the query's instruction (Causal2Vec "w/ ICL");
    None uses the task's registered ones, ``[]`` none. ``model`` defaults
    to the one the collection was built with; another model is refused. So does ``quantize``
    (``"none"``/``"int8"``/``"auto"``): queries are embedded as the collection's documents were.

    Args:
        filter: a ``qdrant_client.models.Filter`` (used as is) or the dict form of
            :mod:`c2v_rag.rag.filters`: ``{"topic": "x"}``, ``{"lang": ["en", "de"]}``,
            ``{"year": {"gte": 2020}}``, ``{"must_not": {...}}``.
        mode: ``"dense"`` (the model's vectors), ``"sparse"`` (BM25) or ``"hybrid"`` (both,
            fused); the last two need a collection ingested with ``sparse="bm25"``.
        fusion: how ``mode="hybrid"`` merges the dense and the BM25 lists: ``"rrf"`` (reciprocal
            rank, the default) or ``"dbsf"`` (distribution-based score fusion), both in Qdrant.
        with_vectors: also return each hit's stored dense vector.
        group_by_document: return the ``top_k`` best documents rather than chunks: each hit is a
            document's best chunk, with its score (MaxP: a long document ranks by its best passage,
            and no document fills several places). Points without a ``doc_id`` are left out.
        collection: a collection or an alias (resolved once, so a reindex switching the alias
            meanwhile is never half-seen).

    Connection arguments are those of :func:`ingest` (``store``: the embedded engine, detected
    from an existing directory when unset); collections written by LlamaIndex or LangChain can
    be searched too.
    """
    _check_query(query)
    return search_many([query], top_k, collection=collection, qdrant_url=qdrant_url, path=path, api_key=api_key,
                       prefer_grpc=prefer_grpc, store=store, model=model, device=device, dtype=dtype,
                       quantize=quantize, task=task, instruction=instruction, examples=examples, filter=filter,
                       score_threshold=score_threshold, mode=mode,
                       fusion=fusion, with_vectors=with_vectors, group_by_document=group_by_document, qdrant=qdrant,
                       client=client)[0]


def search_many(
    queries: Sequence[str],
    top_k: int = 5,
    *,
    collection: str = DEFAULT_COLLECTION,
    qdrant_url: str | None = None,
    path: str | Path | None = None,
    api_key: str | None = None,
    prefer_grpc: bool | None = None,
    store: Literal["local", "edge"] | None = None,
    model: "str | Path | Causal2Vec | None" = None,
    device: str | None = None,
    dtype: str | None = None,
    quantize: str | None = None,
    task: str | None = None,
    instruction: str | None = None,
    examples: Sequence[tuple[str, str]] | None = None,
    filter: "Mapping[str, Any] | models.Filter | None" = None,
    score_threshold: float | None = None,
    mode: SearchMode = "dense",
    fusion: Fusion = "rrf",
    with_vectors: bool = False,
    group_by_document: bool = False,
    qdrant: QdrantConfig | None = None,
    client: "QdrantClient | None" = None,
) -> list[list[SearchHit]]:
    """:func:`search` for many queries: embedded in one batch, sent in one Qdrant request.

    Returns one list of hits per query, in the order of ``queries``.
    """
    require_rag("c2v_rag.search")
    queries = _check_queries(queries, top_k)
    query_filter = to_qdrant_filter(filter)  # a bad filter fails before any model loads
    check_fusion(fusion)
    if not queries:
        return []
    target = QdrantConfig.resolve(qdrant, qdrant_url, path, api_key, prefer_grpc, store)
    own_client = client is None
    qdrant_client = target.connect() if own_client else client
    try:
        check_collection_name(collection)
        concrete = resolve_alias(qdrant_client, collection)
        info = require_collection(qdrant_client, concrete, target)
        plan = _Plan.build(info, collection, concrete, target, mode, model, device, dtype, task, instruction, fusion,
                           examples=examples, quantize=quantize)
        requests = plan.requests(queries, top_k, query_filter, score_threshold, with_vectors)
        if group_by_document:
            return [plan.group_hits(qdrant_client.query_points_groups(concrete, **grouped(r))) for r in requests]
        responses = qdrant_client.query_batch_points(concrete, requests)
        return [plan.hits(r) for r in responses]
    finally:
        if own_client:
            qdrant_client.close()


async def asearch(
    query: str,
    top_k: int = 5,
    *,
    collection: str = DEFAULT_COLLECTION,
    qdrant_url: str | None = None,
    path: str | Path | None = None,
    api_key: str | None = None,
    prefer_grpc: bool | None = None,
    store: Literal["local", "edge"] | None = None,
    model: "str | Path | Causal2Vec | None" = None,
    device: str | None = None,
    dtype: str | None = None,
    quantize: str | None = None,
    task: str | None = None,
    instruction: str | None = None,
    examples: Sequence[tuple[str, str]] | None = None,
    filter: "Mapping[str, Any] | models.Filter | None" = None,
    score_threshold: float | None = None,
    mode: SearchMode = "dense",
    fusion: Fusion = "rrf",
    with_vectors: bool = False,
    group_by_document: bool = False,
    qdrant: QdrantConfig | None = None,
    client: "AsyncQdrantClient | None" = None,
) -> list[SearchHit]:
    """:func:`search` for asyncio: Qdrant through ``AsyncQdrantClient``, model loading and
    embedding in a worker thread, so the event loop stays free. ``client`` is an open
    ``AsyncQdrantClient`` to use (left open). Qdrant Edge has no async client: a search of an
    Edge store runs whole in a worker thread."""
    from qdrant_client import AsyncQdrantClient

    require_rag("c2v_rag.asearch")
    _check_query(query)
    queries = _check_queries([query], top_k)
    query_filter = to_qdrant_filter(filter)
    check_fusion(fusion)
    target = QdrantConfig.resolve(qdrant, qdrant_url, path, api_key, prefer_grpc, store)
    if target.is_edge and client is None:
        hits = await asyncio.to_thread(
            search_many, queries, top_k, collection=collection, model=model, device=device, dtype=dtype,
            quantize=quantize, task=task, instruction=instruction, examples=examples, filter=query_filter,
            score_threshold=score_threshold, mode=mode, fusion=fusion,
            with_vectors=with_vectors, group_by_document=group_by_document, qdrant=target)
        return hits[0]
    own_client = client is None
    if own_client:
        if not target.is_server:
            target.path.mkdir(parents=True, exist_ok=True)
        qdrant_client = AsyncQdrantClient(**target.client_kwargs())
    else:
        qdrant_client = client
    try:
        check_collection_name(collection)
        concrete = await aresolve_alias(qdrant_client, collection)
        if not await qdrant_client.collection_exists(concrete):
            raise collection_not_found(collection, target)
        info = await qdrant_client.get_collection(concrete)
        plan = await asyncio.to_thread(_Plan.build, info, collection, concrete, target, mode, model, device, dtype,
                                       task, instruction, fusion, examples, quantize)
        requests = await asyncio.to_thread(plan.requests, queries, top_k, query_filter, score_threshold,
                                           with_vectors)
        if group_by_document:
            return plan.group_hits(await qdrant_client.query_points_groups(concrete, **grouped(requests[0])))
        responses = await qdrant_client.query_batch_points(concrete, requests)
        return plan.hits(responses[0])
    finally:
        if own_client:
            await qdrant_client.close()


def nearest_chunks(
    client: "QdrantClient",
    collection: str,
    target: QdrantConfig,
    vector: Sequence[float],
    top_k: int,
    *,
    filter: "Mapping[str, Any] | models.Filter | None" = None,
    score_threshold: float | None = None,
    group_by_document: bool = False,
) -> list[SearchHit]:
    """The ``top_k`` chunks nearest to an already-embedded query ``vector``, with their payloads
    (or, with ``group_by_document``, the ``top_k`` documents, each as its best chunk)."""
    concrete = resolve_alias(client, collection)
    layout = CollectionLayout.from_fingerprint(fingerprint_of(client.get_collection(concrete)), target)
    request = query_request(layout, "dense", top_k, dense=vector, filter=to_qdrant_filter(filter),
                            score_threshold=score_threshold)
    if group_by_document:
        groups = client.query_points_groups(concrete, **grouped(request)).groups
        return [SearchHit.from_point(g.hits[0], layout.dense) for g in groups if g.hits]
    response = client.query_batch_points(concrete, [request])[0]
    return [SearchHit.from_point(p, layout.dense) for p in response.points]


@dataclass
class _Plan:
    """What one search call needs, read once from one concrete collection."""

    layout: CollectionLayout
    mode: str
    embedder: Embedder | None
    sparse: BM25Encoder | None
    fusion: str = "rrf"

    @classmethod
    def build(cls, info: Any, collection: str, concrete: str, target: QdrantConfig, mode: str, model, device,
              dtype, task, instruction, fusion: str = "rrf", examples=None,
              quantize: str | None = None) -> "_Plan":
        stored = fingerprint_of(info)
        layout = CollectionLayout.from_fingerprint(stored, target)
        check_mode(mode, layout, collection, target.location)
        params = stored_vector_params(info, collection, target.model_copy(update={"vector_name": layout.dense}))
        embedder = None
        if mode != "sparse":
            c2v = _model_for(stored, model, device, dtype, quantize)
            # Queries are embedded at the size the collection stores (a Matryoshka prefix, or whole).
            truncate_dim = (stored or {}).get("truncate_dim")
            dim = truncate_dim or c2v.embedding_dim
            if dim != params.size:
                raise CollectionMismatchError(
                    f"collection {collection!r} at {target.location} stores {params.size}-dimensional vectors, "
                    f"but the model makes {dim}-dimensional ones: search with the model that built it"
                )
            # A model other than the one that filled the collection gives incomparable vectors.
            check_model(stored, model_fingerprint(c2v, None, truncate_dim), concrete, target.location)
            embedder = Embedder(c2v, task=task, query_instruction=instruction, query_examples=examples, normalize=True,
                                truncate_dim=truncate_dim)
        sparse = BM25Encoder(layout.bm25) if mode != "dense" else None
        return cls(layout, mode, embedder, sparse, fusion)

    def requests(self, queries: list[str], top_k: int, query_filter, score_threshold, with_vectors) -> list:
        dense = self.embedder.embed_queries(queries) if self.embedder is not None else [None] * len(queries)
        sparse = self.sparse.encode_queries(queries) if self.sparse is not None else [None] * len(queries)
        return [query_request(self.layout, self.mode, top_k, dense=d, sparse=s, filter=query_filter,
                              score_threshold=score_threshold, with_vectors=with_vectors, fusion=self.fusion)
                for d, s in zip(dense, sparse)]

    def hits(self, response: Any) -> list[SearchHit]:
        return [SearchHit.from_point(p, self.layout.dense) for p in response.points]

    def group_hits(self, response: Any) -> list[SearchHit]:
        return [SearchHit.from_point(group.hits[0], self.layout.dense) for group in response.groups if group.hits]


def grouped(request: "models.QueryRequest") -> dict[str, Any]:
    """``query_points_groups`` arguments for ``request``: its ``limit`` best documents, one chunk each.

    Qdrant groups server-side (or in embedded Qdrant) by the payload's ``doc_id``, after the
    filter and, in hybrid mode, after fusion, so a document's rank is its best chunk's.
    """
    return {"group_by": DOC_ID_KEY, "group_size": 1, "query": request.query, "using": request.using,
            "prefetch": request.prefetch, "query_filter": request.filter, "limit": request.limit,
            "with_payload": request.with_payload, "with_vectors": request.with_vector,
            "score_threshold": request.score_threshold}


def _check_query(query: Any) -> None:
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"query must be a non-empty string, got {query!r}")


def _check_queries(queries: Sequence[str], top_k: int) -> list[str]:
    if isinstance(queries, str) or not isinstance(queries, Sequence):
        raise TypeError(f"queries must be a list of strings, got {type(queries).__name__}; "
                        "use search() for a single query")
    for i, q in enumerate(queries):
        if not isinstance(q, str) or not q.strip():
            raise ValueError(f"queries[{i}] must be a non-empty string, got {q!r}")
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
    return list(queries)


def _model_for(stored: dict[str, Any] | None, model, device, dtype, quantize=None) -> "Causal2Vec":
    from ..modeling import Causal2Vec

    if isinstance(model, Causal2Vec):
        return model
    if model is None:
        # The model that filled the collection: its query vectors are the only comparable ones.
        recorded = (stored or {}).get("model")
        if isinstance(recorded, str):
            model = recorded
    if quantize is None:
        # Queries embedded as the collection's documents were (int8 or float): the comparable vectors.
        quantize = (stored or {}).get("quantize", "none")
    return load_model(model, device=device, dtype=dtype, quantize=quantize)
