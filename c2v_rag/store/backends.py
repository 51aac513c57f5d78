"""The store backends there are, in one registry, and how a connection's settings pick one.

:data:`STORE_BACKENDS` holds one :class:`~c2v_rag.store.store_backend.StoreBackend` of each kind:
a Qdrant server, qdrant-client's local mode, Qdrant Edge.
:meth:`QdrantConfig.connect <c2v_rag.store.collection.QdrantConfig.connect>` asks it for the
backend its settings name (:func:`backend_for`), :func:`store_kind` asks each embedded one whether
it holds a directory, and ``store=`` takes the name of any embedded one (:data:`StoreKind`).

Adding a store is a :class:`~c2v_rag.store.store_backend.StoreBackend` subclass in a module of its
own and one line in :data:`STORE_BACKENDS` (docs/architecture.md has a worked example).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Protocol

from pydantic import AfterValidator

from c2v_rag.store.edge_backend import EdgeBackend
from c2v_rag.store.local_backend import LocalModeBackend
from c2v_rag.store.server_backend import ServerBackend
from c2v_rag.store.store_backend import StoreBackend, StoreClient, check_collection_name, wrong_store

# Kept importable from here, where they were defined before a backend got a class of its own.
__all__ = [
    "STORE_BACKENDS",
    "StoreKind",
    "DEFAULT_STORE",
    "SERVER",
    "backend_named",
    "backend_for",
    "embedded_stores",
    "store_kind",
    "check_store_kind",
    "check_store_name",
    "StoreBackend",
    "StoreClient",
    "check_collection_name",
]

# name -> backend. The order is the order in which store_kind asks the embedded ones about a directory.
STORE_BACKENDS: dict[str, StoreBackend] = {
    backend.name: backend for backend in (ServerBackend(), LocalModeBackend(), EdgeBackend())
}
# The backend of a qdrant_url=, and the embedded one for a new directory when store= is not given.
SERVER = "server"
DEFAULT_STORE = "local"


def embedded_stores() -> tuple[str, ...]:
    """The names ``store=`` takes: the embedded backends', in registry order."""
    return tuple(name for name, backend in STORE_BACKENDS.items() if backend.embedded)


def check_store_name(store: str) -> str:
    """``store``, or a ValueError when it names no embedded backend (a server is picked by ``qdrant_url=``)."""
    if store not in embedded_stores():
        raise ValueError(
            f"store={store!r} is not an embedded engine; use one of {', '.join(embedded_stores())} "
            "(or qdrant_url= for a server)"
        )
    return store


# The embedded engine a store= names: a string, checked against the registry where pydantic validates it
# (a Literal would be one more list to extend for each new backend).
StoreKind = Annotated[str, AfterValidator(check_store_name)]


def backend_named(name: str) -> StoreBackend:
    """The registered backend called ``name``."""
    return STORE_BACKENDS[name]


class _Target(Protocol):
    """What picks a backend: a server's URL, else the embedded engine's name."""

    @property
    def url(self) -> str | None: ...
    @property
    def store(self) -> str | None: ...


def backend_for(target: _Target) -> StoreBackend:
    """The backend a connection's settings name: the server for a URL, else the embedded engine ``store``
    names (:data:`DEFAULT_STORE` when unset: a directory's own engine is filled in by
    :meth:`QdrantConfig.resolve <c2v_rag.store.collection.QdrantConfig.resolve>`)."""
    return STORE_BACKENDS[SERVER if target.url is not None else (target.store or DEFAULT_STORE)]


def store_kind(path: str | Path) -> str | None:
    """Which embedded engine wrote the directory ``path``: its backend's name (``"edge"``, ``"local"``...), or
    None (missing, empty, or none of them)."""
    path = Path(path).expanduser()
    return next((name for name, backend in STORE_BACKENDS.items() if backend.embedded and backend.holds(path)), None)


def check_store_directory(path: str | Path) -> None:
    """Refuse a store path that names something other than a directory (a document, say), before any work: the
    store would try to make its directory there."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(
            f"path {str(path)!r} (--path) is a file, not a store directory; pass the directory of a store (one is "
            "made where none is)"
        )


def check_store_kind(path: Path, wanted: str) -> None:
    """Refuse to open ``path`` as the backend ``wanted`` when another one wrote it (before any model loads)."""
    found = store_kind(path)
    if found is not None and found != wanted:
        raise wrong_store(path, STORE_BACKENDS[found], wanted, STORE_BACKENDS[wanted].description)
