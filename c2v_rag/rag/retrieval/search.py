"""Search a collection: embed queries with their instruction and read the nearest chunks from Qdrant, densely,
by BM25, or both fused (``mode``). :class:`c2v_rag.Collection`'s ``search``, ``search_many`` and ``asearch``
run here."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field
from tqdm.auto import tqdm

from c2v_rag.core.progress_bar import unsized_terminal
from c2v_rag.rag.embedding import Embedder
from c2v_rag.rag.errors import CollectionMismatchError
from c2v_rag.rag.extras import require_rag
from c2v_rag.rag.options import CommonSearchOptions, ModelOptions, SearchOptions
from c2v_rag.rag.retrieval.reranking import auto_reranker, check_rerank, rerank_hits, resolve_rerank, shared_reranker
from c2v_rag.store.aliases import aresolve_alias, resolve_alias
from c2v_rag.store.collection import (
    QdrantConfig,
    check_collection_name,
    check_model,
    collection_not_found,
    config_fingerprint,
    fingerprint_of,
    held_names,
    model_fingerprint,
    recorded_readout,
    require_collection,
    stored_vector_params,
)
from c2v_rag.store.filters import FilterKeyCheck, check_filter_keys, to_qdrant_filter
from c2v_rag.store.point_schema import DOC_ID_KEY, payload_char_span, payload_metadata, payload_text
from c2v_rag.store.query import check_fusion, check_mode, query_request
from c2v_rag.store.sparse import BM25Encoder
from c2v_rag.store.vectors import CollectionVectors

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient
    from qdrant_client.http import models

    from c2v_rag.model.causal2vec import Causal2Vec
    from c2v_rag.rerank import Causal2VecReranker
    from c2v_rag.store.store_backend import StoreClient


class SearchHit(BaseModel):
    """One retrieved chunk: its score, id, text, document and metadata, and optionally its vector.

    ``score`` is the cosine (dense), the BM25 score (sparse) or, for hybrid, a fused rank score, not a
    similarity: with ``fusion="rrf"`` 1.0 for a chunk first in both lists, 0.67 for one second in both
    (``dbsf``: the two scores normalised and summed). ``vector`` is the stored dense vector, present with
    ``with_vectors=True``. ``rerank_score`` is set when the search reranked (``rerank=N``): the first stage's score
    fused with the decoder's likelihood of the query given the hit's text, which ordered the hits; ``score`` stays
    the first stage's. ``start_char`` and ``end_char`` are where the chunk lies in its document's text as read, for
    a citation or a highlight: ``text[metadata.get("lead_chars", 0):]`` is that span (None where the collection's
    writer recorded none).
    """

    id: str
    score: float
    text: str
    doc_id: str | None = None
    source: str | None = None
    chunk_index: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    vector: list[float] | None = None
    rerank_score: float | None = None
    start_char: int | None = None
    end_char: int | None = None

    @classmethod
    def from_point(cls, point: Any, dense_vector: str = "") -> SearchHit:
        payload = point.payload or {}
        metadata = payload_metadata(payload)
        doc_id = payload.get(DOC_ID_KEY, metadata.get(DOC_ID_KEY))
        chunk_index = metadata.get("chunk_index")
        start_char, end_char = payload_char_span(payload)
        return cls(
            id=str(point.id),
            score=float(point.score),
            text=payload_text(payload),
            doc_id=None if doc_id in (None, "None") else str(doc_id),
            source=next((str(metadata[k]) for k in ("source", "file_path", "url") if metadata.get(k)), None),
            chunk_index=chunk_index if isinstance(chunk_index, int) else None,
            metadata=metadata,
            vector=_dense_vector(getattr(point, "vector", None), dense_vector),
            start_char=start_char,
            end_char=end_char,
        )


def _dense_vector(vector: Any, name: str) -> list[float] | None:
    if vector is None:
        return None
    if isinstance(vector, dict):
        vector = vector.get(name)
    return [float(x) for x in vector] if isinstance(vector, list) else None


def search_queries(
    queries: Sequence[str],
    top_k: int,
    target: QdrantConfig,
    model: ModelOptions,
    options: SearchOptions,
    client: StoreClient | None = None,
) -> list[list[SearchHit]]:
    """The hits of each query on ``options.collection`` in ``target``, embedded in one batch and sent in one
    Qdrant request (:meth:`c2v_rag.Collection.search_many`); ``client`` is an open client to use (left open)."""
    require_rag("c2v_rag.search")
    call = _SearchCall.check(queries, top_k, options, model)
    if not call.queries:
        return []
    return _search_sync(call, target, client)


async def asearch_query(
    query: str,
    top_k: int,
    target: QdrantConfig,
    model: ModelOptions,
    options: SearchOptions,
    client: AsyncQdrantClient | StoreClient | None = None,
) -> list[SearchHit]:
    """:func:`search_queries` for one query under asyncio: Qdrant through ``AsyncQdrantClient``, the model in a
    worker thread (:meth:`c2v_rag.Collection.asearch`). An embedded store (local mode, Qdrant Edge), and a
    synchronous ``client``, are searched whole in a worker thread."""
    require_rag("c2v_rag.asearch")
    from qdrant_client import AsyncQdrantClient

    check_query(query)
    call = _SearchCall.check([query], top_k, options, model)
    if client is not None and not isinstance(client, AsyncQdrantClient):
        # A handle's QdrantClient: it may hold the embedded store, which a second client could not open.
        return (await asyncio.to_thread(_search_sync, call, target, client))[0]
    own_client = client is None
    if own_client and not target.is_server:
        # An embedded store opens in one client at a time: concurrent searches take turns in worker threads
        # (QdrantConfig.turn), where each opening its own AsyncQdrantClient failed on the directory's lock.
        return (await asyncio.to_thread(_search_sync, call, target, None))[0]
    target.check_present(options.collection, client)
    qdrant_client = client if client is not None else target.connect_async()
    if qdrant_client is None:
        return (await asyncio.to_thread(_search_sync, call, target, None))[0]
    try:
        with target.store_errors():  # as QdrantConfig.opened gives a server's failures to the sync paths
            return (await _search_async(call, target, qdrant_client))[0]
    finally:
        if own_client:
            await qdrant_client.close()


@dataclass
class _SearchCall:
    """One call of search_many or asearch, its arguments checked: all they share. The two differ
    only in how they talk to Qdrant (:func:`_search_sync`, :func:`_search_async`)."""

    queries: list[str]
    top_k: int
    options: SearchOptions
    model: ModelOptions
    query_filter: models.Filter | None

    @classmethod
    def check(cls, queries: Sequence[str], top_k: int, options: SearchOptions, model: ModelOptions) -> _SearchCall:
        """The checks that need no store and no model, so a bad argument fails before either opens."""
        queries = _check_queries(queries, top_k)
        check_rerank(options.rerank, top_k)
        query_filter = to_qdrant_filter(options.filter)  # a bad filter fails before any model loads
        check_fusion(options.fusion)
        return cls(queries, top_k, options, model, query_filter)

    def checked(self, client: StoreClient, target: QdrantConfig) -> tuple[str, Any]:
        """The concrete collection the call names and its info, once it is there and any filter key it uses is
        carried by its chunks (a missing one fails, or warns, here: before the model loads)."""
        check_collection_name(self.options.collection)
        concrete = resolve_alias(client, self.options.collection)
        info = require_collection(client, concrete, target)
        check_filter_keys(client, concrete, self.options.filter, self.options.collection, target.location)
        return concrete, info

    def prepared(self, info: Any, concrete: str, target: QdrantConfig) -> tuple[_Plan, int | None]:
        """The plan for the collection ``concrete`` (read as ``info``), and the depth it reranks (None: it does
        not): blocking, as it loads the model and the reranker, once per process."""
        plan = _Plan.build(info, concrete, target, self.options, self.model)
        recorded = _recorded_model(fingerprint_of(info))
        depth = resolve_rerank(self.options.rerank, self.top_k, self.model, recorded)  # "auto" decided
        if depth is not None:
            auto = self.options.rerank == "auto"
            plan.reranker = auto_reranker(self.model, recorded) if auto else shared_reranker(self.model, recorded)
        return plan, depth if plan.reranker is not None else None

    def plan(self, info: Any, concrete: str, target: QdrantConfig) -> tuple[_Plan, list[models.QueryRequest]]:
        """The plan for the collection ``concrete`` (read as ``info``) and the requests of the
        queries: blocking, as it loads the model and embeds."""
        plan, depth = self.prepared(info, concrete, target)
        # With rerank=N the first stage reads the top N; :meth:`finish` keeps the best top_k of them.
        first_stage = depth if depth is not None else self.top_k
        return plan, plan.requests(self.queries, first_stage, self.query_filter, self.options)

    def finish(self, plan: _Plan, found: list[list[SearchHit]]) -> list[list[SearchHit]]:
        """The hits of each query as returned: reranked and cut to ``top_k`` where the call reranks (blocking: it
        runs the decoder)."""
        if plan.reranker is None:
            return found
        pairs = tqdm(
            zip(self.queries, found),
            total=len(found),
            desc="Reranking",
            unit="query",
            disable=not self.options.show_progress,
            **unsized_terminal(sys.stderr),
        )
        with pairs:
            return [rerank_hits(plan.reranker, query, hits, self.top_k) for query, hits in pairs]


def prepare_search(
    top_k: int, target: QdrantConfig, model: ModelOptions, options: SearchOptions, client: StoreClient | None = None
) -> None:
    """What a search of ``options.collection`` with these arguments does before its queries, without one: every
    check (the collection, its model, the filter's keys, the mode), then the model and any reranker loaded
    (:meth:`c2v_rag.Collection.prepare_search`)."""
    require_rag("c2v_rag.prepare_search")
    call = _SearchCall.check([], top_k, options, model)
    target.check_present(options.collection, client)
    with target.turn(client), target.opened(client) as qdrant_client:
        concrete, info = call.checked(qdrant_client, target)
        call.prepared(info, concrete, target)


def _search_sync(call: _SearchCall, target: QdrantConfig, client: StoreClient | None) -> list[list[SearchHit]]:
    with target.turn(client):
        return _search_opened(call, target, client)


def _search_opened(call: _SearchCall, target: QdrantConfig, client: StoreClient | None) -> list[list[SearchHit]]:
    target.check_present(call.options.collection, client)
    with target.opened(client) as qdrant_client:
        concrete, info = call.checked(qdrant_client, target)
        plan, requests = call.plan(info, concrete, target)
        return call.finish(plan, _read(qdrant_client, concrete, plan.layout, requests, call.options.group_by_document))


async def _search_async(call: _SearchCall, target: QdrantConfig, client: AsyncQdrantClient) -> list[list[SearchHit]]:
    check_collection_name(call.options.collection)
    concrete = await aresolve_alias(client, call.options.collection)
    if not await client.collection_exists(concrete):
        held = held_names(await client.get_collections(), await client.get_aliases())
        raise collection_not_found(call.options.collection, target, held)
    keys = FilterKeyCheck(call.options.filter, call.options.collection, target.location)
    if (sample := keys.sample()) is not None:
        unseen = keys.unseen((await client.scroll(concrete, **sample))[0])
        keys.settle({key: bool((await client.scroll(concrete, **keys.look_for(key)))[0]) for key in unseen})
    plan, requests = await asyncio.to_thread(call.plan, await client.get_collection(concrete), concrete, target)
    if call.options.group_by_document:
        found = [_group_hits(await client.query_points_groups(concrete, **grouped(r)), plan.layout) for r in requests]
    else:
        found = [_hits(r, plan.layout) for r in await client.query_batch_points(concrete, requests)]
    return await asyncio.to_thread(call.finish, plan, found) if plan.reranker is not None else found


def _read(
    client: StoreClient,
    concrete: str,
    layout: CollectionVectors,
    requests: list[models.QueryRequest],
    group_by_document: bool,
) -> list[list[SearchHit]]:
    """The hits of ``requests`` on ``concrete``: one Qdrant batch, or with ``group_by_document``
    one grouped query each."""
    if group_by_document:
        return [_group_hits(client.query_points_groups(concrete, **grouped(r)), layout) for r in requests]
    return [_hits(r, layout) for r in client.query_batch_points(concrete, requests)]


def nearest_chunks(
    client: StoreClient,
    collection: str,
    target: QdrantConfig,
    vector: Sequence[float] | None,
    top_k: int,
    options: CommonSearchOptions | None = None,
    query: str | None = None,
    *,
    recorded: Mapping[str, Any] | None = None,
) -> list[SearchHit]:
    """The ``top_k`` chunks nearest to an already-embedded query ``vector``, with their payloads,
    filtered and grouped by ``options`` (``filter``, ``score_threshold``, ``group_by_document``). With
    ``options.mode`` ``"sparse"`` or ``"hybrid"``, ``query`` is the query's text, encoded here for the BM25 side
    as the collection recorded it (a sparse search needs no ``vector``). ``recorded``: the collection's record
    as a check just read it (``{}`` for another tool's collection), where ``collection`` is the concrete name;
    None reads the alias and the record here."""
    options = options or CommonSearchOptions()
    if recorded is None:
        concrete = resolve_alias(client, collection)
        recorded = fingerprint_of(client.get_collection(concrete))
    else:
        concrete = collection
    layout = CollectionVectors.from_fingerprint(recorded, target)
    check_mode(options.mode, layout, collection, target.location)
    sparse = None
    if options.mode != "dense":
        if query is None:
            raise ValueError(f"mode={options.mode!r} needs the query's text for its BM25 side: pass query=")
        sparse = BM25Encoder(layout.bm25).encode_queries([query])[0]
    check_filter_keys(client, concrete, options.filter, collection, target.location)
    request = query_request(
        layout,
        options.mode,
        top_k,
        dense=vector,
        sparse=sparse,
        filter=to_qdrant_filter(options.filter),
        score_threshold=options.score_threshold,
        fusion=options.fusion,
    )
    return _read(client, concrete, layout, [request], options.group_by_document)[0]


@dataclass
class _Plan:
    """What one search call needs, read once from one concrete collection."""

    layout: CollectionVectors
    mode: str
    embedder: Embedder | None
    sparse: BM25Encoder | None
    fusion: str = "rrf"
    reranker: Causal2VecReranker | None = None

    @classmethod
    def build(
        cls, info: Any, concrete: str, target: QdrantConfig, options: SearchOptions, model: ModelOptions
    ) -> _Plan:
        collection = options.collection  # the name asked for, an alias or ``concrete`` itself, for messages
        stored = fingerprint_of(info)
        layout = CollectionVectors.from_fingerprint(stored, target)
        check_mode(options.mode, layout, collection, target.location)
        params = stored_vector_params(info, collection, target.model_copy(update={"vector_name": layout.dense}))
        embedder = None
        if options.mode != "sparse":
            _check_before_loading(stored, model, concrete, target.location, collection)
            c2v = _model_for(stored, model)
            # Queries are embedded at the size the collection stores (a Matryoshka prefix, or whole).
            truncate_dim = (stored or {}).get("truncate_dim")
            # A model other than the one that filled the collection gives incomparable vectors; checked first, as
            # its message says what differs (other part weights change the size too).
            check_model(stored, model_fingerprint(c2v, None, truncate_dim), concrete, target.location, collection)
            dim = truncate_dim or c2v.embedding_dim
            if dim != params.size:
                raise CollectionMismatchError(
                    f"collection {collection!r} at {target.location} stores {params.size}-dimensional vectors, "
                    f"but the model makes {dim}-dimensional ones: search with the model that built it"
                )
            embedder = Embedder(
                c2v,
                task=options.task,
                query_instruction=options.instruction,
                query_examples=options.examples,
                normalize=True,
                truncate_dim=truncate_dim,
                show_progress=options.show_progress,
            )
        sparse = BM25Encoder(layout.bm25) if options.mode != "dense" else None
        return cls(layout, options.mode, embedder, sparse, options.fusion)

    def requests(
        self, queries: list[str], top_k: int, query_filter: models.Filter | None, options: SearchOptions
    ) -> list[models.QueryRequest]:
        dense = self.embedder.embed_queries(queries) if self.embedder is not None else [None] * len(queries)
        sparse: Sequence[tuple[list[int], list[float]] | None] = [None] * len(queries)
        if self.sparse is not None:
            sparse = self.sparse.encode_queries(queries)
        return [
            query_request(
                self.layout,
                self.mode,
                top_k,
                dense=d,
                sparse=s,
                filter=query_filter,
                score_threshold=options.score_threshold,
                with_vectors=options.with_vectors,
                fusion=self.fusion,
            )
            for d, s in zip(dense, sparse)
        ]


def _hits(response: Any, layout: CollectionVectors) -> list[SearchHit]:
    return [SearchHit.from_point(p, layout.dense) for p in response.points]


def _group_hits(response: Any, layout: CollectionVectors) -> list[SearchHit]:
    return [SearchHit.from_point(group.hits[0], layout.dense) for group in response.groups if group.hits]


def grouped(request: models.QueryRequest) -> dict[str, Any]:
    """``query_points_groups`` arguments for ``request``: its ``limit`` best documents, one chunk each.

    Qdrant groups server-side (or in embedded Qdrant) by the payload's ``doc_id``, after the
    filter and, in hybrid mode, after fusion, so a document's rank is its best chunk's.
    """
    return {
        "group_by": DOC_ID_KEY,
        "group_size": 1,
        "query": request.query,
        "using": request.using,
        "prefetch": request.prefetch,
        "query_filter": request.filter,
        "limit": request.limit,
        "with_payload": request.with_payload,
        "with_vectors": request.with_vector,
        "score_threshold": request.score_threshold,
    }


def check_query(query: Any) -> None:
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"query must be a non-empty string, got {query!r}")


def _check_queries(queries: Sequence[str], top_k: int) -> list[str]:
    if isinstance(queries, str) or not isinstance(queries, Sequence):
        raise TypeError(
            f"queries must be a list of strings, got {type(queries).__name__}; use search() for a single query"
        )
    for i, q in enumerate(queries):
        if not isinstance(q, str) or not q.strip():
            raise ValueError(f"queries[{i}] must be a non-empty string, got {q!r}")
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
    return list(queries)


def _check_before_loading(
    stored: dict[str, Any] | None, model: ModelOptions, concrete: str, location: str, asked: str
) -> None:
    """Refuse a collection of another model from the variant's config and weights' digest, read without its
    weights: ``search --model V`` on another model's collection loaded V for seconds before refusing it.

    What the load would take from the collection's record (its quantization, its part weights) is taken from it
    here too, so only a real difference is refused; the check after the load (:meth:`_Plan.build`) still runs.
    """
    if stored is None:
        return
    recorded = stored.get("model")
    resolved = model.resolve(recorded if isinstance(recorded, str) else None)
    if resolved.loaded is not None:
        return  # a loaded model is checked as it is, at once
    config = resolved.config
    readout = recorded_readout(stored)
    if readout is not None:
        config = config.model_copy(update=readout)
    fingerprint = config_fingerprint(
        config,
        resolved.reference,
        resolved.digests,
        truncate_dim=stored.get("truncate_dim"),
        quantize=stored.get("quantize", "none"),
    )
    check_model(stored, fingerprint, concrete, location, asked)


def _model_for(stored: dict[str, Any] | None, model: ModelOptions) -> Causal2Vec:
    # The model, quantization and part weights that filled the collection, unless others are named: its query
    # vectors, embedded as its documents were, are the only comparable ones.
    return model.resolve(_recorded_model(stored)).as_recorded(stored)


def _recorded_model(stored: dict[str, Any] | None) -> str | None:
    """The model reference a collection recorded (None: none, or not a reference)."""
    recorded = (stored or {}).get("model")
    return recorded if isinstance(recorded, str) else None
