"""What a store is to c2v_rag: the client calls it makes, which embedded engine a directory holds,
and which collection names are valid.

The package talks to every store through one interface, the part of ``QdrantClient`` it uses
(:class:`StoreClient`). A server and qdrant-client's local mode are ``QdrantClient`` objects;
:class:`~c2v_rag.rag.store.edge_client.EdgeClient` implements the same calls on Qdrant Edge.
:meth:`~c2v_rag.rag.store.collection.QdrantConfig.connect` picks the client for a connection's
settings, so ingest, search, sync, reindex and migrate run unchanged on any backend.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from c2v_rag.rag.errors import StoreKindError

StoreKind = Literal["local", "edge"]
STORES: tuple[StoreKind, ...] = ("local", "edge")
# The file that makes a directory a Qdrant Edge store (:mod:`c2v_rag.rag.store.edge_client` has its layout).
EDGE_MARKER = "c2v_edge.json"
_COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,254}$")


class StoreClient(Protocol):
    """The calls c2v_rag makes on a store: a subset of ``qdrant_client.QdrantClient``'s API, with its
    argument and result models. ``QdrantClient`` (server, local mode) and
    :class:`~c2v_rag.rag.store.edge_client.EdgeClient` implement it; :meth:`~c2v_rag.rag.store.collection.QdrantConfig.connect`
    returns the one a connection's settings call for."""

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


def check_collection_name(name: str) -> str:
    """``name``, or a ValueError when Qdrant would refuse it as a collection name (checked before any work)."""
    if not isinstance(name, str) or not _COLLECTION_NAME.match(name):
        raise ValueError(
            f"collection={name!r} is not a valid collection name: use letters, digits, '_', '-' "
            "and '.', starting with a letter or digit"
        )
    return name


def store_kind(path: str | Path) -> StoreKind | None:
    """Which embedded engine wrote the directory ``path``: ``"edge"``, ``"local"`` (qdrant-client's
    local mode), or None (missing, empty, or neither)."""
    path = Path(path).expanduser()
    if (path / EDGE_MARKER).is_file():
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
