"""A Qdrant Edge store on disk: its directory, lock, marker and aliases, and its collections' shards.

Qdrant Edge is one shard with no notion of collections, aliases or collection metadata, so an
Edge store is a directory laid out as::

    STORE/c2v_edge.json                      the marker (format, kind) and the aliases
    STORE/.lock                              held by the one open EdgeClient
    STORE/collections/NAME/collection.json   vector params, HNSW settings, metadata
    STORE/collections/NAME/shard/            the EdgeShard (segments, WAL)

:class:`EdgeStore` owns that layout; :class:`~c2v_rag.store.edge_client.EdgeClient` answers the client
calls on top of it. Files are replaced atomically and a collection appears whole or not at all,
so a process killed at any point leaves a store that opens.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from c2v_rag.core.files import write_text_atomically
from c2v_rag.store.errors import StoreLockedError
from c2v_rag.store.local_backend import LocalModeBackend
from c2v_rag.store.store_backend import wrong_store

FORMAT = 1
# The file that makes a directory a Qdrant Edge store.
EDGE_MARKER = "c2v_edge.json"
# What an Edge store is called in messages (:class:`~c2v_rag.store.edge_backend.EdgeBackend`'s description).
EDGE_DESCRIPTION = "a Qdrant Edge store (store='edge')"
_COLLECTIONS = "collections"
_COLLECTION_FILE = "collection.json"
_SHARD = "shard"
_LOCK = ".lock"


def require_edge(what: str) -> Any:
    """The ``qdrant_edge`` module, or an ImportError that says how to install it."""
    try:
        import qdrant_edge
    except ImportError as err:
        raise ImportError(f"{what} needs Qdrant Edge: pip install 'c2v-rag[edge]' (qdrant-edge-py)") from err
    return qdrant_edge


@dataclass
class EdgeCollection:
    """An open collection: its recorded settings (``spec``, its ``collection.json``) and its shard."""

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

    def save_spec(self) -> None:
        """Record ``spec`` (after a change to it, such as a new payload index)."""
        _write_json_atomically(self.directory / _COLLECTION_FILE, self.spec)


class EdgeStore:
    """The store directory ``path``, held (locked) from construction to :meth:`close`.

    One holder at a time, across processes and within this one (:class:`StoreLockedError`
    otherwise), as in qdrant-client's local mode.
    """

    def __init__(self, path: str | Path) -> None:
        import portalocker

        self.path = Path(path).expanduser()
        # Edge's files beside local mode's would leave a directory neither engine reads. QdrantConfig.connect
        # refuses every other backend's directory before this; opened directly, the sibling engine is refused here.
        local = LocalModeBackend()
        if local.holds(self.path):
            raise wrong_store(self.path, local, "edge", EDGE_DESCRIPTION)
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
        marker = self.path / EDGE_MARKER
        if marker.is_file():
            self._meta = json.loads(marker.read_text())
        else:
            self._meta = {"format": FORMAT, "kind": "qdrant-edge", "aliases": {}}
            self._save_meta()
        # The collections opened so far, by name.
        self.opened: dict[str, EdgeCollection] = {}
        self.closed = False

    # ------------------------------------------------------------------ aliases

    @property
    def aliases(self) -> dict[str, str]:
        """alias -> collection (a copy: change them with :meth:`set_aliases`)."""
        return dict(self._meta["aliases"])

    def set_aliases(self, aliases: dict[str, str]) -> None:
        """Replace every alias at once: the marker file is replaced atomically, so a reader of the store
        sees every change or none."""
        self._meta["aliases"] = aliases
        self._save_meta()

    def _save_meta(self) -> None:
        _write_json_atomically(self.path / EDGE_MARKER, self._meta)

    # ------------------------------------------------------------------ collections

    def _dir(self, name: str) -> Path:
        return self.path / _COLLECTIONS / name

    def exists(self, name: str) -> bool:
        return (self._dir(name) / _COLLECTION_FILE).is_file()

    def names(self) -> list[str]:
        """The collections, sorted."""
        root = self.path / _COLLECTIONS
        return sorted(p.name for p in root.iterdir() if (p / _COLLECTION_FILE).is_file()) if root.is_dir() else []

    def collection(self, name: str) -> EdgeCollection:
        """The open collection ``name``, opening its shard on first use."""
        if self.closed:
            raise RuntimeError(f"the Qdrant Edge client of {self.path} is closed")
        opened = self.opened.get(name)
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
                raise StoreLockedError(
                    f"collection {name!r} of Qdrant Edge at {self.path} is open elsewhere: close the other client"
                ) from err
            raise
        opened = EdgeCollection(name, directory, spec, shard, payload_indexes=dict(spec.get("payload_indexes", {})))
        self.opened[name] = opened
        return opened

    def create(self, name: str, spec: dict[str, Any], config: Any) -> None:
        """Write collection ``name`` with ``spec`` and a new shard of Edge config ``config``."""
        edge = require_edge("store='edge'")
        staging = self.path / _COLLECTIONS / f".new-{name}-{uuid.uuid4().hex[:8]}"
        staging.mkdir(parents=True)
        try:
            shard = edge.EdgeShard.create(str(staging / _SHARD), config)
            shard.close()
            _write_json_atomically(staging / _COLLECTION_FILE, spec)
            # The collection appears whole or not at all: a kill before this rename leaves a .new- directory only.
            os.replace(staging, self._dir(name))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def delete(self, name: str) -> bool:
        """Remove collection ``name`` and the aliases that point at it; False when there is none."""
        if not self.exists(name):
            return False
        opened = self.opened.pop(name, None)
        if opened is not None:
            opened.shard.close()
        # Aliases of a deleted collection go with it, as on a server.
        aliases = {a: c for a, c in self._meta["aliases"].items() if c != name}
        if aliases != self._meta["aliases"]:
            self.set_aliases(aliases)
        trash = self.path / _COLLECTIONS / f".deleted-{name}-{uuid.uuid4().hex[:8]}"
        os.replace(self._dir(name), trash)
        shutil.rmtree(trash, ignore_errors=True)
        return True

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Close every shard and release the store."""
        for col in self.opened.values():
            col.shard.close()
        self.opened.clear()
        self.closed = True
        import portalocker

        portalocker.unlock(self._lock_file)
        self._lock_file.close()

    def __del__(self) -> None:  # a store dropped without close() still releases its lock
        try:
            if not self.closed:
                for col in self.opened.values():
                    col.shard.close()
                self._lock_file.close()
        except Exception:
            pass


def _write_json_atomically(path: Path, data: Any) -> None:
    write_text_atomically(path, json.dumps(data, indent=1, sort_keys=True))
