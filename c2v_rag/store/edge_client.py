"""The Qdrant Edge backend: Qdrant's own segment engine (``qdrant-edge-py``) in this process.

:class:`EdgeClient` implements the :class:`~c2v_rag.store.store_backend.StoreClient` calls (the part of
``QdrantClient`` the package uses) on Qdrant Edge, so ingest, search, sync, reindex and migrate
run unchanged on it. Requests and results are qdrant-client's own models, translated at this
boundary and nowhere else (:mod:`c2v_rag.store.edge_translation`).

Qdrant Edge is one shard with no notion of collections, aliases or collection metadata, so an
Edge store is a directory of shards, each with its collection's settings, and a marker file
holding the aliases (:mod:`c2v_rag.store.edge_directory` has the layout).

Each write goes through the shard's write-ahead log before it returns, so a process killed
mid-ingest loses nothing written; a re-run resumes. The HNSW graph is built by
``EdgeShard.optimize()``, which Edge runs only when asked: :meth:`EdgeClient.close` runs it on
every collection this client wrote to (until then searches of new points are exact scans).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from c2v_rag.store.edge_directory import FORMAT, EdgeCollection, EdgeStore, require_edge
from c2v_rag.store.edge_translation import (
    as_list,
    client_id,
    client_record,
    client_scored,
    edge_config,
    edge_id,
    edge_prefetch,
    edge_query,
    edge_vector,
    enum_value,
    quantization_record,
    quantization_search,
    select_payload,
    to_edge_filter,
)
from c2v_rag.store.store_backend import check_collection_name

if TYPE_CHECKING:
    from qdrant_client.http import models

__all__ = [
    "EdgeClient",
    "EdgeCollectionInfo",
    "auto_search_ef",
    "HNSW_M",
    "HNSW_EF_CONSTRUCT",
    "HNSW_EF",
    "AUTO_EF_FROM",
    "AUTO_EF_AT_1M",
    "AUTO_EF_MAX",
]

logger = logging.getLogger(__name__)

# Shipped HNSW settings (docs/performance.md, "Stores", has the recall measured at them on real MiniLM vectors).
HNSW_M = 16
HNSW_EF_CONSTRUCT = 128
# The search ef of a collection of up to AUTO_EF_FROM points; larger ones search deeper (auto_search_ef).
# AUTO_EF_AT_1M is the smallest swept ef that kept recall@10 at 0.98 on the million-point store of
# docs/performance.md ("Stores").
HNSW_EF = 128
AUTO_EF_FROM = 100_000
AUTO_EF_AT_1M = 1024
AUTO_EF_MAX = 2048
# A query for groups asks for this many chunks per wanted document, doubling while too few documents come back.
_GROUP_OVERFETCH = 4
# Extra points asked of Edge per query, so that points tied at the cut are all seen before the (score, id) order.
_TIE_MARGIN = 8


def auto_search_ef(points: int) -> int:
    """The search ef for a graph of ``points`` points when none was chosen: ``HNSW_EF`` up to
    ``AUTO_EF_FROM`` points, ``AUTO_EF_AT_1M`` at a million, log-linear between and beyond (capped).

    One fixed ef cannot serve every size: at the shipped graph settings a shallow search keeps its recall
    at 100k points but loses it at a million (docs/performance.md, "Stores"), while a deeper search costs latency that
    small collections do not need to pay.
    """
    import math

    if points <= AUTO_EF_FROM:
        return HNSW_EF
    slope = math.log(AUTO_EF_AT_1M / HNSW_EF) / math.log(1_000_000 / AUTO_EF_FROM)
    return min(AUTO_EF_MAX, int(round(HNSW_EF * (points / AUTO_EF_FROM) ** slope)))


class EdgeClient:
    """The :class:`StoreClient` calls on a Qdrant Edge store in ``path`` (see the module docstring).

    One client holds the store at a time, across processes and within this one
    (:class:`~c2v_rag.rag.errors.StoreLockedError` otherwise), as in qdrant-client's local mode.
    HNSW settings apply to collections this client creates; each collection keeps its own. The
    search ef of a query is the request's (``search_params``), else this client's ``hnsw_ef``, else
    the one recorded for the collection, else :func:`auto_search_ef` of its size.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        hnsw_m: int | None = None,
        hnsw_ef_construct: int | None = None,
        hnsw_ef: int | None = None,
    ) -> None:
        require_edge("store='edge'")
        self._store = EdgeStore(path)
        self.path = self._store.path
        self.hnsw = {
            "m": hnsw_m or HNSW_M,
            "ef_construct": hnsw_ef_construct or HNSW_EF_CONSTRUCT,
            "search_ef": hnsw_ef,
        }
        self._hnsw_ef = hnsw_ef

    # ------------------------------------------------------------------ collections

    def collection_exists(self, collection_name: str) -> bool:
        return self._store.exists(collection_name)

    def get_collections(self) -> models.CollectionsResponse:
        from qdrant_client.http import models

        return models.CollectionsResponse(
            collections=[models.CollectionDescription(name=n) for n in self._store.names()]
        )

    def get_collection(self, collection_name: str) -> EdgeCollectionInfo:
        from qdrant_client.http import models

        col = self._store.collection(collection_name)
        spec = col.spec
        distances = {d.value.lower(): d for d in models.Distance}
        dense = {
            name: models.VectorParams(
                size=p["size"],
                distance=distances[p["distance"]],
                datatype=models.Datatype(p["datatype"]) if p.get("datatype") else None,
                on_disk=p.get("on_disk"),
            )
            for name, p in spec["vectors"].items()
        }
        sparse = {
            name: models.SparseVectorParams(modifier=models.Modifier.IDF if p.get("idf") else None)
            for name, p in (spec.get("sparse_vectors") or {}).items()
        }
        vectors: Any = dense[""] if list(dense) == [""] else dense
        info = col.shard.info()
        schema = {
            key: models.PayloadIndexInfo(data_type=models.PayloadSchemaType(kind), points=0)
            for key, kind in col.payload_indexes.items()
        }
        return EdgeCollectionInfo(
            config=EdgeCollectionConfig(
                params=EdgeCollectionParams(vectors=vectors, sparse_vectors=sparse or None),
                metadata=spec.get("metadata"),
                hnsw=dict(spec["hnsw"]),
            ),
            points_count=info.points_count,
            segments_count=info.segments_count,
            indexed_vectors_count=info.indexed_vectors_count,
            payload_schema=schema,
        )

    def create_collection(
        self,
        collection_name: str,
        vectors_config: Any = None,
        *,
        sparse_vectors_config: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        quantization_config: Any = None,
        on_disk_payload: bool | None = None,
        hnsw_config: Any = None,
        **ignored: Any,
    ) -> bool:
        """Create a collection from qdrant-client's ``VectorParams`` (one or a dict of named ones),
        ``SparseVectorParams`` and quantization models. Sharding and replication options mean
        nothing in one process and are ignored, as in local mode."""
        edge = require_edge("store='edge'")
        check_collection_name(collection_name)
        if self.collection_exists(collection_name):
            raise ValueError(f"Collection {collection_name} already exists in Qdrant Edge at {self.path}")
        named = vectors_config if isinstance(vectors_config, dict) else {"": vectors_config}
        hnsw = dict(self.hnsw)
        if hnsw_config is not None:  # a models.HnswConfigDiff
            hnsw.update(
                {k: v for k, v in (("m", hnsw_config.m), ("ef_construct", hnsw_config.ef_construct)) if v is not None}
            )
        spec = {
            "format": FORMAT,
            "vectors": {
                name: {
                    "size": p.size,
                    "distance": enum_value(p.distance),
                    "datatype": enum_value(p.datatype) if p.datatype else None,
                    "on_disk": p.on_disk,
                }
                for name, p in named.items()
                if p is not None
            },
            "sparse_vectors": {
                name: {"idf": p.modifier is not None and enum_value(p.modifier) == "idf"}
                for name, p in (sparse_vectors_config or {}).items()
            },
            "quantization": quantization_record(quantization_config),
            "on_disk_payload": on_disk_payload,
            "hnsw": hnsw,
            "metadata": metadata,
            "payload_indexes": {},
        }
        self._store.create(collection_name, spec, edge_config(edge, spec))
        return True

    def delete_collection(self, collection_name: str, **_: Any) -> bool:
        return self._store.delete(collection_name)

    def create_payload_index(self, collection_name: str, field_name: str, field_schema: Any = None, **_: Any) -> None:
        """A real payload index (Edge has them, unlike local mode), recorded for ``payload_schema``."""
        edge = require_edge("store='edge'")
        col = self._store.collection(collection_name)
        kind = enum_value(field_schema) if field_schema is not None else "keyword"
        if col.payload_indexes.get(field_name) == kind:
            return
        schema = getattr(edge.PayloadSchemaType, kind.capitalize())
        col.shard.update(edge.UpdateOperation.create_field_index(field_name, schema))
        col.payload_indexes[field_name] = kind
        col.spec["payload_indexes"] = dict(col.payload_indexes)
        col.save_spec()

    # ------------------------------------------------------------------ points

    def upsert(self, collection_name: str, points: Sequence[Any], **_: Any) -> None:
        edge = require_edge("store='edge'")
        col = self._store.collection(collection_name)
        converted = [edge.Point(edge_id(p.id), edge_vector(edge, p.vector), p.payload) for p in points]
        if converted:
            col.shard.update(edge.UpdateOperation.upsert_points(converted))
            col.dirty, col.points = True, None

    def retrieve(
        self, collection_name: str, ids: Sequence[Any], with_payload: Any = True, with_vectors: Any = False, **_: Any
    ) -> list[models.Record]:
        col = self._store.collection(collection_name)
        records = col.shard.retrieve([edge_id(i) for i in ids], with_payload=with_payload, with_vector=with_vectors)
        return [client_record(col.plain_vector, r) for r in records]

    def set_payload(self, collection_name: str, payload: dict[str, Any], points: Any, **_: Any) -> None:
        edge = require_edge("store='edge'")
        col = self._store.collection(collection_name)
        col.shard.update(edge.UpdateOperation.set_payload([edge_id(i) for i in points], dict(payload)))
        col.dirty, col.points = True, None

    def batch_update_points(self, collection_name: str, update_operations: Sequence[Any], **_: Any) -> None:
        """The set-payload operations of ``update_operations``, in order (the only kind c2v_rag batches)."""
        from qdrant_client.http import models

        for operation in update_operations:
            if not isinstance(operation, models.SetPayloadOperation):
                raise NotImplementedError(
                    f"store='edge' batches only set-payload operations, not {type(operation).__name__}"
                )
            self.set_payload(collection_name, operation.set_payload.payload, operation.set_payload.points)

    def delete(self, collection_name: str, points_selector: Any, **_: Any) -> None:
        from qdrant_client.http import models

        edge = require_edge("store='edge'")
        col = self._store.collection(collection_name)
        if isinstance(points_selector, models.FilterSelector):
            operation = edge.UpdateOperation.delete_points_by_filter(to_edge_filter(edge, points_selector.filter))
        elif isinstance(points_selector, models.Filter):
            operation = edge.UpdateOperation.delete_points_by_filter(to_edge_filter(edge, points_selector))
        else:
            ids = points_selector.points if isinstance(points_selector, models.PointIdsList) else points_selector
            operation = edge.UpdateOperation.delete_points([edge_id(i) for i in ids])
        col.shard.update(operation)
        col.dirty, col.points = True, None

    def scroll(
        self,
        collection_name: str,
        scroll_filter: Any = None,
        limit: int = 10,
        offset: Any = None,
        with_payload: Any = True,
        with_vectors: Any = False,
        **_: Any,
    ) -> tuple[list[models.Record], Any]:
        edge = require_edge("store='edge'")
        col = self._store.collection(collection_name)
        records, next_offset = col.shard.scroll(
            edge.ScrollRequest(
                offset=edge_id(offset) if offset is not None else None,
                limit=limit,
                filter=to_edge_filter(edge, scroll_filter),
                with_payload=with_payload,
                with_vector=with_vectors,
            )
        )
        next_id = client_id(next_offset) if next_offset is not None else None
        return [client_record(col.plain_vector, r) for r in records], next_id

    def count(self, collection_name: str, count_filter: Any = None, exact: bool = True, **_: Any) -> models.CountResult:
        from qdrant_client.http import models

        edge = require_edge("store='edge'")
        col = self._store.collection(collection_name)
        return models.CountResult(
            count=col.shard.count(edge.CountRequest(exact=True, filter=to_edge_filter(edge, count_filter)))
        )

    # ------------------------------------------------------------------ queries

    def query_batch_points(
        self, collection_name: str, requests: Sequence[models.QueryRequest], **_: Any
    ) -> list[models.QueryResponse]:
        from qdrant_client.http import models

        edge = require_edge("store='edge'")
        col = self._store.collection(collection_name)
        # Edge orders equal scores arbitrarily, and fusion makes ties common (RRF gives two points with swapped
        # ranks the same score): the same query gave two orders, and a tie at the cut two sets of points. Each
        # request is over-fetched, ordered by (score, id) and cut here, so a query always gets the same hits.
        wanted = [r.limit or 10 for r in requests]
        deeper = [r.model_copy(update={"limit": n + _TIE_MARGIN}) for r, n in zip(requests, wanted)]
        converted = [self._edge_request(edge, col, r) for r in deeper]
        results = col.shard.query_batch(edge.QueryBatchRequest(converted)) if converted else []
        return [
            models.QueryResponse(
                points=sorted(
                    (client_scored(col.plain_vector, p) for p in points),
                    key=lambda point: (-point.score, str(point.id)),
                )[:n]
            )
            for points, n in zip(results, wanted)
        ]

    def query_points(
        self,
        collection_name: str,
        query: Any = None,
        *,
        using: str | None = None,
        prefetch: Any = None,
        query_filter: Any = None,
        limit: int = 10,
        with_payload: Any = True,
        with_vectors: Any = False,
        score_threshold: float | None = None,
        search_params: Any = None,
        **_: Any,
    ) -> models.QueryResponse:
        """``QdrantClient.query_points`` for the request forms c2v_rag builds."""
        from qdrant_client.http import models

        request = models.QueryRequest(
            query=query,
            using=using,
            prefetch=prefetch,
            filter=query_filter,
            limit=limit,
            with_payload=with_payload,
            with_vector=with_vectors,
            score_threshold=score_threshold,
            params=search_params,
        )
        return self.query_batch_points(collection_name, [request])[0]

    def query_points_groups(
        self,
        collection_name: str,
        group_by: str,
        query: Any = None,
        *,
        using: str | None = None,
        prefetch: Any = None,
        query_filter: Any = None,
        limit: int = 10,
        group_size: int = 3,
        with_payload: Any = True,
        with_vectors: Any = False,
        score_threshold: float | None = None,
        search_params: Any = None,
        **_: Any,
    ) -> models.GroupsResult:
        """Grouped results as a server returns them: the ``limit`` best groups by their best point.

        Edge has no group query: this over-fetches points in score order (after the filter and
        any fusion) and groups them here, doubling the depth until ``limit`` groups are full or
        the collection has no more matches. Points without the ``group_by`` key are left out.
        """
        from qdrant_client.http import models

        selected = True if with_payload is True else ([group_by] if not with_payload else with_payload)
        depth = max(limit * group_size * _GROUP_OVERFETCH, 16)
        while True:
            points = self.query_points(
                collection_name,
                query,
                using=using,
                prefetch=prefetch,
                query_filter=query_filter,
                limit=depth,
                with_payload=True,
                with_vectors=with_vectors,
                score_threshold=score_threshold,
                search_params=search_params,
            ).points
            groups: dict[Any, list[Any]] = {}
            for point in points:
                key = (point.payload or {}).get(group_by)
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    continue
                members = groups.setdefault(key, [])
                if len(members) < group_size:
                    members.append(point)
            full = sum(len(m) == group_size for m in groups.values())
            if len(points) < depth or (len(groups) >= limit and full >= limit):
                break
            depth *= 2
        chosen = list(groups.items())[:limit]  # dicts keep insertion order: best point first
        return models.GroupsResult(
            groups=[
                models.PointGroup(id=key, hits=[select_payload(p, selected) for p in members])
                for key, members in chosen
            ]
        )

    def search_ef(self, collection_name: str) -> int:
        """The search ef a query of ``collection_name`` runs with when it sets none (see the class)."""
        col = self._store.collection(collection_name)
        ef = self._hnsw_ef or col.search_ef
        if ef:
            return ef
        if col.points is None:
            col.points = col.shard.info().points_count
        return auto_search_ef(col.points)

    def _edge_request(self, edge: Any, col: EdgeCollection, request: models.QueryRequest) -> Any:
        params = request.params
        ef = (params.hnsw_ef if params is not None and params.hnsw_ef else None) or self.search_ef(col.name)
        search = edge.SearchParams(
            hnsw_ef=ef,
            exact=bool(params.exact) if params is not None and params.exact else False,
            quantization=quantization_search(edge, col.spec, params),
        )
        return edge.QueryRequest(
            limit=request.limit or 10,
            offset=request.offset,
            query=edge_query(edge, request.query, request.using),
            prefetches=[edge_prefetch(edge, p, search) for p in as_list(request.prefetch)] or None,
            with_vector=request.with_vector if request.with_vector is not None else False,
            with_payload=request.with_payload if request.with_payload is not None else True,
            filter=to_edge_filter(edge, request.filter),
            score_threshold=request.score_threshold,
            params=search,
        )

    # ------------------------------------------------------------------ aliases

    def get_aliases(self) -> models.CollectionsAliasesResponse:
        from qdrant_client.http import models

        return models.CollectionsAliasesResponse(
            aliases=[
                models.AliasDescription(alias_name=a, collection_name=c) for a, c in sorted(self._store.aliases.items())
            ]
        )

    def update_collection_aliases(self, change_aliases_operations: Sequence[Any], **_: Any) -> bool:
        """Apply the operations together: the marker file is replaced atomically, so a reader of the
        store sees every change or none."""
        from qdrant_client.http import models

        aliases = self._store.aliases
        for op in change_aliases_operations:
            if isinstance(op, models.DeleteAliasOperation):
                aliases.pop(op.delete_alias.alias_name, None)
            elif isinstance(op, models.CreateAliasOperation):
                name = op.create_alias.collection_name
                if not self.collection_exists(name):
                    raise ValueError(
                        f"cannot point alias {op.create_alias.alias_name!r} at {name!r}: no such "
                        f"collection in Qdrant Edge at {self.path}"
                    )
                aliases[op.create_alias.alias_name] = name
            elif isinstance(op, models.RenameAliasOperation):
                aliases[op.rename_alias.new_alias_name] = aliases.pop(op.rename_alias.old_alias_name)
            else:
                raise TypeError(f"unsupported alias operation {type(op).__name__}")
        self._store.set_aliases(aliases)
        return True

    # ------------------------------------------------------------------ lifetime

    def optimize(self, collection_name: str | None = None) -> None:
        """Build the HNSW graphs (and merge segments) of the collections written to, or of one."""
        names = [collection_name] if collection_name else [n for n, c in self._store.opened.items() if c.dirty]
        for name in names:
            col = self._store.collection(name)
            col.shard.optimize()
            col.shard.flush()
            col.dirty = False

    def close(self, **_: Any) -> None:
        """Index what was written (see the module docstring), flush, and release the store."""
        if self._store.closed:
            return
        try:
            self.optimize()
        finally:
            self._store.close()

    def __enter__(self) -> EdgeClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@dataclass
class EdgeCollectionParams:
    vectors: Any
    sparse_vectors: dict[str, Any] | None = None


@dataclass
class EdgeCollectionConfig:
    params: EdgeCollectionParams
    metadata: dict[str, Any] | None = None
    hnsw: dict[str, int] = field(default_factory=dict)


@dataclass
class EdgeCollectionInfo:
    """What ``get_collection`` answers for an Edge collection: the fields of qdrant-client's
    ``CollectionInfo`` that c2v_rag reads (``config.params``, ``config.metadata``, counts, payload schema)."""

    config: EdgeCollectionConfig
    points_count: int
    segments_count: int
    indexed_vectors_count: int
    payload_schema: dict[str, Any]
