"""The Qdrant Edge backend: Qdrant's own segment engine (``qdrant-edge-py``) in this process.

The package talks to every store through one interface, the part of ``QdrantClient`` it uses
(:class:`StoreClient`): collections and their metadata, upsert/retrieve/scroll/count/delete,
payload updates, batched and grouped queries, aliases. A server and qdrant-client's local mode
are ``QdrantClient`` objects; :class:`EdgeClient` implements the same calls on Qdrant Edge, so
ingest, search, sync, reindex and migrate run unchanged on any backend. Requests and results
are qdrant-client's own models: filters, queries and points are translated at this boundary
and nowhere else.

Qdrant Edge is one shard with no notion of collections, aliases or collection metadata, so an
Edge store is a directory laid out as::

    STORE/c2v_edge.json                      the marker (format, kind) and the aliases
    STORE/.lock                              held by the one open EdgeClient
    STORE/collections/NAME/collection.json   vector params, HNSW settings, metadata
    STORE/collections/NAME/shard/            the EdgeShard (segments, WAL)

Each write goes through the shard's write-ahead log before it returns, so a process killed
mid-ingest loses nothing written; a re-run resumes. The HNSW graph is built by
``EdgeShard.optimize()``, which Edge runs only when asked: :meth:`EdgeClient.close` runs it on
every collection this client wrote to (until then searches of new points are exact scans).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .errors import StoreKindError, StoreLockedError

if TYPE_CHECKING:
    from qdrant_client.http import models

logger = logging.getLogger(__name__)

MARKER = "c2v_edge.json"
FORMAT = 1
_COLLECTIONS = "collections"
_COLLECTION_FILE = "collection.json"
_SHARD = "shard"
_LOCK = ".lock"

# Shipped HNSW settings (docs/stores.md has the recall measured at them on real MiniLM vectors).
HNSW_M = 16
HNSW_EF_CONSTRUCT = 128
# The search ef of a collection of up to AUTO_EF_FROM points (measured: recall@10 >= 0.99 at 100k); larger
# ones search deeper (auto_search_ef). AUTO_EF_AT_1M is the smallest swept ef with recall@10 >= 0.98 on the
# 1M x 384 store of docs/stores.md (128: 0.910, 256: 0.949, 512: 0.965, 1024: 0.982 at p50 5.2 ms).
HNSW_EF = 128
AUTO_EF_FROM = 100_000
AUTO_EF_AT_1M = 1024
AUTO_EF_MAX = 2048
# A query for groups asks for this many chunks per wanted document, doubling while too few documents come back.
_GROUP_OVERFETCH = 4
# Extra points asked of Edge per query, so that points tied at the cut are all seen before the (score, id) order.
_TIE_MARGIN = 8

StoreKind = Literal["local", "edge"]


class StoreClient(Protocol):
    """The calls c2v_rag makes on a store: a subset of ``qdrant_client.QdrantClient``'s API, with its
    argument and result models. ``QdrantClient`` (server, local mode) and :class:`EdgeClient` implement it."""

    def collection_exists(self, collection_name: str) -> bool: ...
    def get_collection(self, collection_name: str) -> Any: ...
    def get_collections(self) -> Any: ...
    def create_collection(self, collection_name: str, vectors_config: Any, **kwargs: Any) -> bool: ...
    def delete_collection(self, collection_name: str, **kwargs: Any) -> bool: ...
    def create_payload_index(self, collection_name: str, field_name: str, field_schema: Any = None,
                             **kwargs: Any) -> Any: ...
    def upsert(self, collection_name: str, points: Any, **kwargs: Any) -> Any: ...
    def retrieve(self, collection_name: str, ids: Sequence[Any], **kwargs: Any) -> list[Any]: ...
    def set_payload(self, collection_name: str, payload: dict[str, Any], points: Any, **kwargs: Any) -> Any: ...
    def delete(self, collection_name: str, points_selector: Any, **kwargs: Any) -> Any: ...
    def scroll(self, collection_name: str, **kwargs: Any) -> tuple[list[Any], Any]: ...
    def count(self, collection_name: str, count_filter: Any = None, exact: bool = True, **kwargs: Any) -> Any: ...
    def query_batch_points(self, collection_name: str, requests: Sequence[Any], **kwargs: Any) -> list[Any]: ...
    def query_points_groups(self, collection_name: str, group_by: str, **kwargs: Any) -> Any: ...
    def get_aliases(self) -> Any: ...
    def update_collection_aliases(self, change_aliases_operations: Sequence[Any], **kwargs: Any) -> Any: ...
    def close(self, **kwargs: Any) -> None: ...


def auto_search_ef(points: int) -> int:
    """The search ef for a graph of ``points`` points when none was chosen: ``HNSW_EF`` up to
    ``AUTO_EF_FROM`` points, ``AUTO_EF_AT_1M`` at a million, log-linear between and beyond (capped).

    One fixed ef cannot serve every size: at the shipped graph settings recall@10 at ef=128 is
    above 0.99 at 100k points and 0.908 at a million (docs/stores.md), while a deeper search
    costs latency that small collections do not need to pay.
    """
    import math

    if points <= AUTO_EF_FROM:
        return HNSW_EF
    slope = math.log(AUTO_EF_AT_1M / HNSW_EF) / math.log(1_000_000 / AUTO_EF_FROM)
    return min(AUTO_EF_MAX, int(round(HNSW_EF * (points / AUTO_EF_FROM) ** slope)))


def require_edge(what: str) -> Any:
    """The ``qdrant_edge`` module, or an ImportError that says how to install it."""
    try:
        import qdrant_edge
    except ImportError as err:
        raise ImportError(f"{what} needs Qdrant Edge: pip install 'c2v-rag[edge]' (qdrant-edge-py)") from err
    return qdrant_edge


def store_kind(path: str | Path) -> StoreKind | None:
    """Which embedded engine wrote the directory ``path``: ``"edge"``, ``"local"`` (qdrant-client's
    local mode), or None (missing, empty, or neither)."""
    path = Path(path).expanduser()
    if (path / MARKER).is_file():
        return "edge"
    # qdrant-client's local mode writes meta.json and keeps its collections under collection/.
    if (path / "meta.json").is_file() or (path / "collection").is_dir():
        return "local"
    return None


_KIND_NAMES = {"edge": "a Qdrant Edge store (store='edge')",
               "local": "a qdrant-client local-mode store (store='local')"}


def check_store_kind(path: Path, wanted: StoreKind) -> None:
    """Refuse to open ``path`` as ``wanted`` when the other engine wrote it (before any model loads)."""
    found = store_kind(path)
    if found is not None and found != wanted:
        raise StoreKindError(
            f"{path} holds {_KIND_NAMES[found]}, not {_KIND_NAMES[wanted]}: the two embedded engines keep "
            f"different files. Open it with store={found!r} (or leave store unset: an existing store's kind is "
            f"detected), use another path for a new {wanted} store, or copy its collections across with "
            f"c2v_rag.migrate(..., source_path={str(path)!r}, target_store={wanted!r})."
        )


@dataclass
class _Collection:
    """An open collection: its recorded settings and its shard."""

    name: str
    directory: Path
    spec: dict[str, Any]
    shard: Any
    dirty: bool = False
    payload_indexes: dict[str, str] = field(default_factory=dict)
    points: int | None = None  # cached for the automatic search ef; None after a write

    @property
    def search_ef(self) -> int | None:
        """The search ef chosen for this collection, or None (chosen by size). Collections made before
        ``search_ef`` was recorded wrote the shipped ef as ``ef``, which was no choice: they go by size."""
        return self.spec["hnsw"].get("search_ef")

    @property
    def dense_names(self) -> list[str]:
        return list(self.spec["vectors"])

    @property
    def plain_vector(self) -> bool:
        """One unnamed dense vector and no sparse one: points carry a bare list, as in qdrant-client."""
        return list(self.spec["vectors"]) == [""] and not self.spec.get("sparse_vectors")


class EdgeClient:
    """The :class:`StoreClient` calls on a Qdrant Edge store in ``path`` (see the module docstring).

    One client holds the store at a time, across processes and within this one
    (:class:`~c2v_rag.rag.errors.StoreLockedError` otherwise), as in qdrant-client's local mode.
    HNSW settings apply to collections this client creates; each collection keeps its own. The
    search ef of a query is the request's (``search_params``), else this client's ``hnsw_ef``, else
    the one recorded for the collection, else :func:`auto_search_ef` of its size.
    """

    def __init__(self, path: str | Path, *, hnsw_m: int | None = None, hnsw_ef_construct: int | None = None,
                 hnsw_ef: int | None = None) -> None:
        require_edge("store='edge'")
        import portalocker

        self.path = Path(path).expanduser()
        check_store_kind(self.path, "edge")
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(self.path / _LOCK, "a+")  # noqa: SIM115 (held until close)
        try:
            portalocker.lock(self._lock_file, portalocker.LOCK_EX | portalocker.LOCK_NB)
        except portalocker.exceptions.LockException as err:
            self._lock_file.close()
            raise StoreLockedError(
                f"Qdrant Edge at {self.path} is open in another client (this process or another one); an "
                "embedded store allows one at a time. Close the other client, or run a Qdrant server and pass "
                "qdrant_url."
            ) from err
        marker = self.path / MARKER
        if marker.is_file():
            self._meta = json.loads(marker.read_text())
        else:
            self._meta = {"format": FORMAT, "kind": "qdrant-edge", "aliases": {}}
            self._save_meta()
        self.hnsw = {"m": hnsw_m or HNSW_M, "ef_construct": hnsw_ef_construct or HNSW_EF_CONSTRUCT,
                     "search_ef": hnsw_ef}
        self._hnsw_ef = hnsw_ef
        self._open: dict[str, _Collection] = {}
        self._closed = False

    # ------------------------------------------------------------------ store files

    def _save_meta(self) -> None:
        _write_json_atomically(self.path / MARKER, self._meta)

    def _dir(self, name: str) -> Path:
        return self.path / _COLLECTIONS / name

    def _collection(self, name: str) -> _Collection:
        if self._closed:
            raise RuntimeError(f"the Qdrant Edge client of {self.path} is closed")
        opened = self._open.get(name)
        if opened is not None:
            return opened
        directory = self._dir(name)
        spec_file = directory / _COLLECTION_FILE
        if not spec_file.is_file():
            raise ValueError(f"Collection {name} not found in Qdrant Edge at {self.path}")
        edge = require_edge("store='edge'")
        spec = json.loads(spec_file.read_text())
        try:
            shard = edge.EdgeShard.load(str(directory / _SHARD))
        except Exception as err:
            if "WouldBlock" in str(err):
                raise StoreLockedError(f"collection {name!r} of Qdrant Edge at {self.path} is open elsewhere: "
                                       "close the other client") from err
            raise
        opened = _Collection(name, directory, spec, shard, payload_indexes=dict(spec.get("payload_indexes", {})))
        self._open[name] = opened
        return opened

    # ------------------------------------------------------------------ collections

    def collection_exists(self, collection_name: str) -> bool:
        return (self._dir(collection_name) / _COLLECTION_FILE).is_file()

    def get_collections(self) -> "models.CollectionsResponse":
        from qdrant_client.http import models

        root = self.path / _COLLECTIONS
        names = sorted(p.name for p in root.iterdir() if (p / _COLLECTION_FILE).is_file()) if root.is_dir() else []
        return models.CollectionsResponse(collections=[models.CollectionDescription(name=n) for n in names])

    def get_collection(self, collection_name: str) -> "EdgeCollectionInfo":
        from qdrant_client.http import models

        col = self._collection(collection_name)
        spec = col.spec
        distances = {d.value.lower(): d for d in models.Distance}
        dense = {name: models.VectorParams(size=p["size"], distance=distances[p["distance"]],
                                           datatype=models.Datatype(p["datatype"]) if p.get("datatype") else None,
                                           on_disk=p.get("on_disk"))
                 for name, p in spec["vectors"].items()}
        sparse = {name: models.SparseVectorParams(modifier=models.Modifier.IDF if p.get("idf") else None)
                  for name, p in (spec.get("sparse_vectors") or {}).items()}
        vectors: Any = dense[""] if list(dense) == [""] else dense
        info = col.shard.info()
        schema = {key: models.PayloadIndexInfo(data_type=models.PayloadSchemaType(kind), points=0)
                  for key, kind in col.payload_indexes.items()}
        return EdgeCollectionInfo(
            config=EdgeCollectionConfig(params=EdgeCollectionParams(vectors=vectors, sparse_vectors=sparse or None),
                                        metadata=spec.get("metadata"), hnsw=dict(spec["hnsw"])),
            points_count=info.points_count, segments_count=info.segments_count,
            indexed_vectors_count=info.indexed_vectors_count, payload_schema=schema)

    def create_collection(self, collection_name: str, vectors_config: Any = None, *,
                          sparse_vectors_config: dict[str, Any] | None = None, metadata: dict[str, Any] | None = None,
                          quantization_config: Any = None, on_disk_payload: bool | None = None,
                          hnsw_config: Any = None, **ignored: Any) -> bool:
        """Create a collection from qdrant-client's ``VectorParams`` (one or a dict of named ones),
        ``SparseVectorParams`` and quantization models. Sharding and replication options mean
        nothing in one process and are ignored, as in local mode."""
        from .collection import check_collection_name

        edge = require_edge("store='edge'")
        check_collection_name(collection_name)
        if self.collection_exists(collection_name):
            raise ValueError(f"Collection {collection_name} already exists in Qdrant Edge at {self.path}")
        named = vectors_config if isinstance(vectors_config, dict) else {"": vectors_config}
        hnsw = dict(self.hnsw)
        if hnsw_config is not None:  # a models.HnswConfigDiff
            hnsw.update({k: v for k, v in (("m", hnsw_config.m), ("ef_construct", hnsw_config.ef_construct))
                         if v is not None})
        spec = {
            "format": FORMAT,
            "vectors": {name: {"size": p.size, "distance": _enum_value(p.distance),
                               "datatype": _enum_value(p.datatype) if p.datatype else None, "on_disk": p.on_disk}
                        for name, p in named.items() if p is not None},
            "sparse_vectors": {name: {"idf": p.modifier is not None and _enum_value(p.modifier) == "idf"}
                               for name, p in (sparse_vectors_config or {}).items()},
            "quantization": _quantization_record(quantization_config),
            "on_disk_payload": on_disk_payload,
            "hnsw": hnsw,
            "metadata": metadata,
            "payload_indexes": {},
        }
        directory = self._dir(collection_name)
        staging = self.path / _COLLECTIONS / f".new-{collection_name}-{uuid.uuid4().hex[:8]}"
        staging.mkdir(parents=True)
        try:
            shard = edge.EdgeShard.create(str(staging / _SHARD), _edge_config(edge, spec))
            shard.close()
            _write_json_atomically(staging / _COLLECTION_FILE, spec)
            # The collection appears whole or not at all: a kill before this rename leaves a .new- directory only.
            os.replace(staging, directory)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return True

    def delete_collection(self, collection_name: str, **_: Any) -> bool:
        if not self.collection_exists(collection_name):
            return False
        opened = self._open.pop(collection_name, None)
        if opened is not None:
            opened.shard.close()
        # Aliases of a deleted collection go with it, as on a server.
        aliases = {a: c for a, c in self._meta["aliases"].items() if c != collection_name}
        if aliases != self._meta["aliases"]:
            self._meta["aliases"] = aliases
            self._save_meta()
        trash = self.path / _COLLECTIONS / f".deleted-{collection_name}-{uuid.uuid4().hex[:8]}"
        os.replace(self._dir(collection_name), trash)
        shutil.rmtree(trash, ignore_errors=True)
        return True

    def create_payload_index(self, collection_name: str, field_name: str, field_schema: Any = None,
                             **_: Any) -> None:
        """A real payload index (Edge has them, unlike local mode), recorded for ``payload_schema``."""
        edge = require_edge("store='edge'")
        col = self._collection(collection_name)
        kind = _enum_value(field_schema) if field_schema is not None else "keyword"
        if col.payload_indexes.get(field_name) == kind:
            return
        schema = getattr(edge.PayloadSchemaType, kind.capitalize())
        col.shard.update(edge.UpdateOperation.create_field_index(field_name, schema))
        col.payload_indexes[field_name] = kind
        col.spec["payload_indexes"] = dict(col.payload_indexes)
        _write_json_atomically(col.directory / _COLLECTION_FILE, col.spec)

    # ------------------------------------------------------------------ points

    def upsert(self, collection_name: str, points: Sequence[Any], **_: Any) -> None:
        edge = require_edge("store='edge'")
        col = self._collection(collection_name)
        converted = [edge.Point(_edge_id(p.id), _edge_vector(edge, p.vector), p.payload) for p in points]
        if converted:
            col.shard.update(edge.UpdateOperation.upsert_points(converted))
            col.dirty, col.points = True, None

    def retrieve(self, collection_name: str, ids: Sequence[Any], with_payload: Any = True,
                 with_vectors: Any = False, **_: Any) -> list["models.Record"]:
        col = self._collection(collection_name)
        records = col.shard.retrieve([_edge_id(i) for i in ids], with_payload=with_payload, with_vector=with_vectors)
        return [_record(col, r) for r in records]

    def set_payload(self, collection_name: str, payload: dict[str, Any], points: Any, **_: Any) -> None:
        edge = require_edge("store='edge'")
        col = self._collection(collection_name)
        col.shard.update(edge.UpdateOperation.set_payload([_edge_id(i) for i in points], dict(payload)))
        col.dirty, col.points = True, None

    def delete(self, collection_name: str, points_selector: Any, **_: Any) -> None:
        from qdrant_client.http import models

        edge = require_edge("store='edge'")
        col = self._collection(collection_name)
        if isinstance(points_selector, models.FilterSelector):
            operation = edge.UpdateOperation.delete_points_by_filter(to_edge_filter(edge, points_selector.filter))
        elif isinstance(points_selector, models.Filter):
            operation = edge.UpdateOperation.delete_points_by_filter(to_edge_filter(edge, points_selector))
        else:
            ids = points_selector.points if isinstance(points_selector, models.PointIdsList) else points_selector
            operation = edge.UpdateOperation.delete_points([_edge_id(i) for i in ids])
        col.shard.update(operation)
        col.dirty, col.points = True, None

    def scroll(self, collection_name: str, scroll_filter: Any = None, limit: int = 10, offset: Any = None,
               with_payload: Any = True, with_vectors: Any = False, **_: Any) -> tuple[list["models.Record"], Any]:
        edge = require_edge("store='edge'")
        col = self._collection(collection_name)
        records, next_offset = col.shard.scroll(edge.ScrollRequest(
            offset=_edge_id(offset) if offset is not None else None, limit=limit,
            filter=to_edge_filter(edge, scroll_filter), with_payload=with_payload, with_vector=with_vectors))
        return [_record(col, r) for r in records], (_client_id(next_offset) if next_offset is not None else None)

    def count(self, collection_name: str, count_filter: Any = None, exact: bool = True,
              **_: Any) -> "models.CountResult":
        from qdrant_client.http import models

        edge = require_edge("store='edge'")
        col = self._collection(collection_name)
        return models.CountResult(count=col.shard.count(edge.CountRequest(exact=True,
                                                                        filter=to_edge_filter(edge, count_filter))))

    # ------------------------------------------------------------------ queries

    def query_batch_points(self, collection_name: str, requests: Sequence["models.QueryRequest"],
                           **_: Any) -> list["models.QueryResponse"]:
        from qdrant_client.http import models

        edge = require_edge("store='edge'")
        col = self._collection(collection_name)
        # Edge orders equal scores arbitrarily, and fusion makes ties common (RRF gives two points with swapped
        # ranks the same score): the same query gave two orders, and a tie at the cut two sets of points. Each
        # request is over-fetched, ordered by (score, id) and cut here, so a query always gets the same hits.
        wanted = [r.limit or 10 for r in requests]
        deeper = [r.model_copy(update={"limit": n + _TIE_MARGIN}) for r, n in zip(requests, wanted)]
        converted = [self._edge_request(edge, col, r) for r in deeper]
        results = col.shard.query_batch(edge.QueryBatchRequest(converted)) if converted else []
        return [models.QueryResponse(points=sorted((_scored(col, p) for p in points),
                                                   key=lambda point: (-point.score, str(point.id)))[:n])
                for points, n in zip(results, wanted)]

    def query_points(self, collection_name: str, query: Any = None, *, using: str | None = None,
                     prefetch: Any = None, query_filter: Any = None, limit: int = 10, with_payload: Any = True,
                     with_vectors: Any = False, score_threshold: float | None = None, search_params: Any = None,
                     **_: Any) -> "models.QueryResponse":
        """``QdrantClient.query_points`` for the request forms c2v_rag builds."""
        from qdrant_client.http import models

        request = models.QueryRequest(query=query, using=using, prefetch=prefetch, filter=query_filter, limit=limit,
                                      with_payload=with_payload, with_vector=with_vectors,
                                      score_threshold=score_threshold, params=search_params)
        return self.query_batch_points(collection_name, [request])[0]

    def query_points_groups(self, collection_name: str, group_by: str, query: Any = None, *,
                            using: str | None = None, prefetch: Any = None, query_filter: Any = None,
                            limit: int = 10, group_size: int = 3, with_payload: Any = True, with_vectors: Any = False,
                            score_threshold: float | None = None, search_params: Any = None,
                            **_: Any) -> "models.GroupsResult":
        """Grouped results as a server returns them: the ``limit`` best groups by their best point.

        Edge has no group query: this over-fetches points in score order (after the filter and
        any fusion) and groups them here, doubling the depth until ``limit`` groups are full or
        the collection has no more matches. Points without the ``group_by`` key are left out.
        """
        from qdrant_client.http import models

        selected = True if with_payload is True else ([group_by] if not with_payload else with_payload)
        depth = max(limit * group_size * _GROUP_OVERFETCH, 16)
        while True:
            points = self.query_points(collection_name, query, using=using, prefetch=prefetch,
                                       query_filter=query_filter, limit=depth, with_payload=True,
                                       with_vectors=with_vectors, score_threshold=score_threshold,
                                       search_params=search_params).points
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
        return models.GroupsResult(groups=[
            models.PointGroup(id=key, hits=[_select_payload(p, selected) for p in members]) for key, members in chosen])

    def search_ef(self, collection_name: str) -> int:
        """The search ef a query of ``collection_name`` runs with when it sets none (see the class)."""
        col = self._collection(collection_name)
        if self._hnsw_ef or col.search_ef:
            return self._hnsw_ef or col.search_ef
        if col.points is None:
            col.points = col.shard.info().points_count
        return auto_search_ef(col.points)

    def _edge_request(self, edge: Any, col: _Collection, request: "models.QueryRequest") -> Any:
        params = request.params
        ef = (params.hnsw_ef if params is not None and params.hnsw_ef else None) or self.search_ef(col.name)
        search = edge.SearchParams(hnsw_ef=ef, exact=bool(params.exact) if params is not None and params.exact
                                   else False, quantization=_quantization_search(edge, col, params))
        return edge.QueryRequest(
            limit=request.limit or 10, offset=request.offset, query=_edge_query(edge, request.query, request.using),
            prefetches=[_edge_prefetch(edge, p, search) for p in _as_list(request.prefetch)] or None,
            with_vector=request.with_vector if request.with_vector is not None else False,
            with_payload=request.with_payload if request.with_payload is not None else True,
            filter=to_edge_filter(edge, request.filter), score_threshold=request.score_threshold, params=search)

    # ------------------------------------------------------------------ aliases

    def get_aliases(self) -> "models.CollectionsAliasesResponse":
        from qdrant_client.http import models

        return models.CollectionsAliasesResponse(aliases=[
            models.AliasDescription(alias_name=a, collection_name=c) for a, c in sorted(self._meta["aliases"].items())])

    def update_collection_aliases(self, change_aliases_operations: Sequence[Any], **_: Any) -> bool:
        """Apply the operations together: the marker file is replaced atomically, so a reader of the
        store sees every change or none."""
        from qdrant_client.http import models

        aliases = dict(self._meta["aliases"])
        for op in change_aliases_operations:
            if isinstance(op, models.DeleteAliasOperation):
                aliases.pop(op.delete_alias.alias_name, None)
            elif isinstance(op, models.CreateAliasOperation):
                name = op.create_alias.collection_name
                if not self.collection_exists(name):
                    raise ValueError(f"cannot point alias {op.create_alias.alias_name!r} at {name!r}: no such "
                                     f"collection in Qdrant Edge at {self.path}")
                aliases[op.create_alias.alias_name] = name
            elif isinstance(op, models.RenameAliasOperation):
                aliases[op.rename_alias.new_alias_name] = aliases.pop(op.rename_alias.old_alias_name)
            else:
                raise TypeError(f"unsupported alias operation {type(op).__name__}")
        self._meta["aliases"] = aliases
        self._save_meta()
        return True

    # ------------------------------------------------------------------ lifetime

    def optimize(self, collection_name: str | None = None) -> None:
        """Build the HNSW graphs (and merge segments) of the collections written to, or of one."""
        names = [collection_name] if collection_name else [n for n, c in self._open.items() if c.dirty]
        for name in names:
            col = self._collection(name)
            col.shard.optimize()
            col.shard.flush()
            col.dirty = False

    def close(self, **_: Any) -> None:
        """Index what was written (see the module docstring), flush, and release the store."""
        if self._closed:
            return
        try:
            self.optimize()
        finally:
            for col in self._open.values():
                col.shard.close()
            self._open.clear()
            self._closed = True
            import portalocker

            portalocker.unlock(self._lock_file)
            self._lock_file.close()

    def __enter__(self) -> "EdgeClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # a client dropped without close() still releases its lock
        try:
            if not self._closed:
                for col in self._open.values():
                    col.shard.close()
                self._lock_file.close()
        except Exception:
            pass


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


# ---------------------------------------------------------------------- translation


def _enum_value(value: Any) -> str:
    return str(getattr(value, "value", value)).lower()


def _write_json_atomically(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def _quantization_record(config: Any) -> dict[str, Any] | None:
    if config is None:
        return None
    scalar = getattr(config, "scalar", None)
    if scalar is not None:
        return {"kind": "int8", "quantile": scalar.quantile, "always_ram": scalar.always_ram}
    binary = getattr(config, "binary", None)
    if binary is not None:
        return {"kind": "binary", "always_ram": binary.always_ram}
    raise ValueError(f"Qdrant Edge backend: unsupported quantization {type(config).__name__}")


# Candidates fetched with the quantized codes per wanted hit, before rescoring with the originals: binary
# codes alone rank poorly (docs/performance.md: 4x candidates rescored recovers float32's nDCG), int8 well.
_OVERSAMPLING = {"binary": 4.0, "int8": 1.0}


def _quantization_search(edge: Any, col: _Collection, params: Any) -> Any:
    """Search a quantized collection with its codes, then rescore the hits with the float32 originals.

    Edge does not rescore unless asked (measured: int8 scores came back as the codes' approximations),
    so a quantized collection asks for it here; a request's own quantization params win.
    """
    asked = getattr(params, "quantization", None) if params is not None else None
    if asked is not None:
        return edge.QuantizationSearchParams(ignore=bool(asked.ignore), rescore=asked.rescore,
                                             oversampling=asked.oversampling)
    kind = (col.spec.get("quantization") or {}).get("kind")
    if kind is None:
        return None
    return edge.QuantizationSearchParams(rescore=True, oversampling=_OVERSAMPLING[kind])


def _edge_config(edge: Any, spec: dict[str, Any]) -> Any:
    distances = {"cosine": edge.Distance.Cosine, "dot": edge.Distance.Dot, "euclid": edge.Distance.Euclid,
                 "manhattan": edge.Distance.Manhattan}
    datatypes = {"float32": edge.VectorStorageDatatype.Float32, "float16": edge.VectorStorageDatatype.Float16,
                 "uint8": edge.VectorStorageDatatype.Uint8}
    vectors = {name: edge.EdgeVectorParams(size=p["size"], distance=distances[p["distance"]], on_disk=p.get("on_disk"),
                                           datatype=datatypes[p["datatype"]] if p.get("datatype") else None)
               for name, p in spec["vectors"].items()}
    sparse = {name: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf if p["idf"] else None)
              for name, p in spec["sparse_vectors"].items()}
    quant = spec.get("quantization")
    quantization = None
    if quant and quant["kind"] == "int8":
        quantization = edge.ScalarQuantizationConfig(edge.ScalarType.Int8, quantile=quant.get("quantile"),
                                                     always_ram=quant.get("always_ram"))
    elif quant and quant["kind"] == "binary":
        quantization = edge.BinaryQuantizationConfig(always_ram=quant.get("always_ram"))
    hnsw = spec["hnsw"]
    return edge.EdgeConfig(
        vectors=vectors or None, sparse_vectors=sparse or None, on_disk_payload=spec.get("on_disk_payload"),
        # full_scan_threshold (KB): below it a filtered search scans instead of walking the graph, Qdrant's default.
        hnsw_config=edge.HnswIndexConfig(m=hnsw["m"], ef_construct=hnsw["ef_construct"], full_scan_threshold=10_000),
        quantization_config=quantization)


def _edge_id(point_id: Any) -> Any:
    if isinstance(point_id, uuid.UUID):
        return str(point_id)
    return point_id


def _client_id(point_id: Any) -> Any:
    """Ids as qdrant-client returns them: UUIDs as strings, integers as integers."""
    return str(point_id) if isinstance(point_id, uuid.UUID) else point_id


def _edge_vector(edge: Any, vector: Any) -> Any:
    from qdrant_client.http import models

    if isinstance(vector, dict):
        return {name: (edge.SparseVector(list(v.indices), [float(x) for x in v.values])
                       if isinstance(v, models.SparseVector) else [float(x) for x in v])
                for name, v in vector.items()}
    return {"": [float(x) for x in vector]}


def _client_vector(col: _Collection, vector: Any) -> Any:
    from qdrant_client.http import models

    if vector is None:
        return None
    if not isinstance(vector, dict):
        return vector
    out = {name: (models.SparseVector(indices=list(v.indices), values=list(v.values)) if hasattr(v, "indices")
                  else list(v)) for name, v in vector.items()}
    if col.plain_vector and "" in out:
        return out[""]
    return out


def _record(col: _Collection, record: Any) -> "models.Record":
    from qdrant_client.http import models

    return models.Record(id=_client_id(record.id), payload=record.payload, vector=_client_vector(col, record.vector))


def _scored(col: _Collection, point: Any) -> "models.ScoredPoint":
    from qdrant_client.http import models

    return models.ScoredPoint(id=_client_id(point.id), version=point.version, score=point.score,
                              payload=point.payload, vector=_client_vector(col, point.vector))


def _select_payload(point: "models.ScoredPoint", selected: Any) -> "models.ScoredPoint":
    if selected is True or point.payload is None:
        return point
    if selected is False:
        return point.model_copy(update={"payload": None})
    return point.model_copy(update={"payload": {k: v for k, v in point.payload.items() if k in selected}})


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _edge_query(edge: Any, query: Any, using: str | None) -> Any:
    """qdrant-client's query (a dense list, a SparseVector, NearestQuery, FusionQuery) as Edge's."""
    from qdrant_client.http import models

    if query is None:
        return None
    if isinstance(query, models.NearestQuery):
        query = query.nearest
    if isinstance(query, models.FusionQuery):
        if query.fusion == models.Fusion.RRF:
            # qdrant-client's local mode and the server rank with k=2 by default; so does this.
            return edge.Fusion.Rrf(k=2)
        return edge.Fusion.Dbsf()
    if isinstance(query, models.RrfQuery):
        return edge.Fusion.Rrf(k=query.rrf.k if query.rrf.k is not None else 2, weights=query.rrf.weights)
    if isinstance(query, models.SparseVector):
        return edge.Query.Nearest(edge.SparseVector(list(query.indices), [float(v) for v in query.values]),
                                  using=using)
    if isinstance(query, (list, tuple)) or hasattr(query, "tolist"):
        values = query.tolist() if hasattr(query, "tolist") else query
        return edge.Query.Nearest([float(v) for v in values], using=using or "")
    raise ValueError(f"the Qdrant Edge backend does not translate queries of type {type(query).__name__}; "
                     "use a dense vector, a SparseVector or a fusion")


def _edge_prefetch(edge: Any, prefetch: "models.Prefetch", search: Any) -> Any:
    return edge.Prefetch(limit=prefetch.limit or 10, query=_edge_query(edge, prefetch.query, prefetch.using),
                         prefetches=[_edge_prefetch(edge, p, search) for p in _as_list(prefetch.prefetch)] or None,
                         params=search, filter=to_edge_filter(edge, prefetch.filter),
                         score_threshold=prefetch.score_threshold)


def to_edge_filter(edge: Any, flt: "models.Filter | None") -> Any:
    """A qdrant-client ``Filter`` (what :func:`~c2v_rag.rag.filters.to_qdrant_filter` makes, or a raw one)
    as Edge's: the same conditions, nested filters included."""
    if flt is None:
        return None
    return edge.Filter(must=_conditions(edge, flt.must), should=_conditions(edge, flt.should),
                       must_not=_conditions(edge, flt.must_not),
                       min_should=(edge.MinShould(_conditions(edge, flt.min_should.conditions) or [],
                                                  flt.min_should.min_count) if flt.min_should else None))


def _conditions(edge: Any, conditions: Any) -> list[Any] | None:
    if conditions is None:
        return None
    return [_condition(edge, c) for c in _as_list(conditions)]


def _condition(edge: Any, condition: Any) -> Any:
    from qdrant_client.http import models

    if isinstance(condition, models.Filter):
        return to_edge_filter(edge, condition)
    if isinstance(condition, models.HasIdCondition):
        return edge.HasIdCondition({_edge_id(i) for i in condition.has_id})
    if isinstance(condition, models.IsEmptyCondition):
        return edge.IsEmptyCondition(condition.is_empty.key)
    if isinstance(condition, models.IsNullCondition):
        return edge.IsNullCondition(condition.is_null.key)
    if isinstance(condition, models.HasVectorCondition):
        return edge.HasVectorCondition(condition.has_vector)
    if isinstance(condition, models.NestedCondition):
        return edge.NestedCondition(condition.nested.key, to_edge_filter(edge, condition.nested.filter))
    if isinstance(condition, models.FieldCondition):
        kwargs: dict[str, Any] = {}
        if condition.match is not None:
            kwargs["match"] = _match(edge, condition.match)
        if condition.range is not None:
            kwargs["range"] = _range(edge, condition.range)
        if condition.values_count is not None:
            vc = condition.values_count
            kwargs["values_count"] = edge.ValuesCount(lt=vc.lt, gt=vc.gt, lte=vc.lte, gte=vc.gte)
        if condition.is_empty is not None:
            kwargs["is_empty"] = condition.is_empty
        if condition.is_null is not None:
            kwargs["is_null"] = condition.is_null
        if condition.geo_radius is not None:
            g = condition.geo_radius
            kwargs["geo_radius"] = edge.GeoRadius(edge.GeoPoint(lon=g.center.lon, lat=g.center.lat), g.radius)
        if condition.geo_bounding_box is not None:
            b = condition.geo_bounding_box
            kwargs["geo_bounding_box"] = edge.GeoBoundingBox(edge.GeoPoint(lon=b.top_left.lon, lat=b.top_left.lat),
                                                             edge.GeoPoint(lon=b.bottom_right.lon,
                                                                           lat=b.bottom_right.lat))
        if not kwargs:
            raise ValueError(f"the Qdrant Edge backend cannot translate the condition on {condition.key!r}")
        return edge.FieldCondition(key=condition.key, **kwargs)
    raise ValueError(f"the Qdrant Edge backend does not translate filter conditions of type "
                     f"{type(condition).__name__}")


def _match(edge: Any, match: Any) -> Any:
    from qdrant_client.http import models

    if isinstance(match, models.MatchValue):
        return edge.MatchValue(match.value)
    if isinstance(match, models.MatchAny):
        return edge.MatchAny(list(match.any))
    if isinstance(match, models.MatchExcept):
        return edge.MatchExcept(list(getattr(match, "except_", None) or getattr(match, "except")))
    if isinstance(match, models.MatchText):
        return edge.MatchText(match.text)
    if isinstance(match, models.MatchPhrase):
        return edge.MatchPhrase(match.phrase)
    raise ValueError(f"the Qdrant Edge backend does not translate {type(match).__name__}")


def _range(edge: Any, rng: Any) -> Any:
    from qdrant_client.http import models

    bounds = {op: getattr(rng, op) for op in ("gt", "gte", "lt", "lte")}
    if isinstance(rng, models.DatetimeRange):
        return edge.RangeDateTime(**{op: (v.isoformat() if hasattr(v, "isoformat") else v)
                                     for op, v in bounds.items()})
    return edge.RangeFloat(**bounds)


def iter_points(client: Any, collection: str, batch_size: int = 256,
                with_vectors: bool = True) -> Iterable[list["models.Record"]]:
    """Every point of ``collection`` in pages of ``batch_size``, with payloads (and vectors)."""
    offset = None
    while True:
        records, offset = client.scroll(collection, limit=batch_size, offset=offset, with_payload=True,
                                        with_vectors=with_vectors)
        if records:
            yield records
        if offset is None:
            return
