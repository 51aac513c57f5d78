"""What a store backend is: :class:`StoreBackend`, and the client calls every backend answers (:class:`StoreClient`).

A backend is one way of keeping a collection: a Qdrant server, qdrant-client's local mode, Qdrant Edge.
Each says, as a subclass of :class:`StoreBackend`, its name (the ``store=`` that picks an embedded one),
how to tell that a directory holds it, what it needs installed, and how to open a client on it: a
:class:`StoreClient`, the part of ``QdrantClient``'s API the package calls, so ingest, search, sync,
reindex and migrate run unchanged on every backend. The backends there are, and how one is chosen, are
:mod:`c2v_rag.store.backends`' registry.

A backend reads the connection's settings through :class:`StoreSettings` (the fields of
:class:`~c2v_rag.store.collection.QdrantConfig` it needs) rather than importing that class:
``QdrantConfig`` asks the registry for its backend, so the backends sit below it.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from c2v_rag.core.extras import Requirement, require
from c2v_rag.store.errors import StoreKindError

if TYPE_CHECKING:
    from pydantic import SecretStr
    from qdrant_client import AsyncQdrantClient

_COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,254}$")


class StoreClient(Protocol):
    """The calls c2v_rag makes on a store: a subset of ``qdrant_client.QdrantClient``'s API, with its
    argument and result models. ``QdrantClient`` (server, local mode) and
    :class:`~c2v_rag.store.edge_client.EdgeClient` implement it; :meth:`StoreBackend.connect`
    returns one."""

    def collection_exists(self, collection_name: str) -> bool: ...
    def get_collection(self, collection_name: str) -> Any: ...
    def get_collections(self) -> Any: ...
    def create_collection(self, collection_name: str, vectors_config: Any, **kwargs: Any) -> bool: ...
    def delete_collection(self, collection_name: str, **kwargs: Any) -> bool: ...
    def create_payload_index(
        self, collection_name: str, field_name: str, field_schema: Any = None, **kwargs: Any
    ) -> Any: ...
    def upsert(self, collection_name: str, points: Any, **kwargs: Any) -> Any: ...
    def retrieve(self, collection_name: str, ids: Sequence[Any], **kwargs: Any) -> list[Any]: ...
    def set_payload(self, collection_name: str, payload: dict[str, Any], points: Any, **kwargs: Any) -> Any: ...
    def batch_update_points(self, collection_name: str, update_operations: Sequence[Any], **kwargs: Any) -> Any: ...
    def delete(self, collection_name: str, points_selector: Any, **kwargs: Any) -> Any: ...
    def scroll(self, collection_name: str, **kwargs: Any) -> tuple[list[Any], Any]: ...
    def count(self, collection_name: str, count_filter: Any = None, exact: bool = True, **kwargs: Any) -> Any: ...
    def query_batch_points(self, collection_name: str, requests: Sequence[Any], **kwargs: Any) -> list[Any]: ...
    def query_points_groups(self, collection_name: str, group_by: str, **kwargs: Any) -> Any: ...
    def get_aliases(self) -> Any: ...
    def update_collection_aliases(self, change_aliases_operations: Sequence[Any], **kwargs: Any) -> Any: ...
    def close(self, **kwargs: Any) -> None: ...


class StoreSettings(Protocol):
    """What a backend reads of a connection's settings: these fields of
    :class:`~c2v_rag.store.collection.QdrantConfig`, which documents each. Read-only here, so a
    field the config narrows (``datatype`` is one of two strings there) still matches."""

    @property
    def url(self) -> str | None: ...
    @property
    def path(self) -> Path | None: ...
    @property
    def api_key(self) -> SecretStr | None: ...
    @property
    def https(self) -> bool | None: ...
    @property
    def prefer_grpc(self) -> bool: ...
    @property
    def grpc_port(self) -> int: ...
    @property
    def timeout(self) -> int: ...
    @property
    def datatype(self) -> str: ...
    @property
    def hnsw_m(self) -> int | None: ...
    @property
    def hnsw_ef_construct(self) -> int | None: ...
    @property
    def hnsw_ef(self) -> int | None: ...


QDRANT_CLIENT = Requirement("qdrant_client", "qdrant-client", "qdrant")


class StoreBackend(ABC):
    """One kind of store: what it is called, where its data lives, what it needs, how to open it.

    A subclass sets the class attributes and implements :meth:`connect`; the others have defaults
    that fit a backend keeping its data in a directory of this process. Instances hold no state: the
    registry keeps one of each (:data:`~c2v_rag.store.backends.STORE_BACKENDS`).
    """

    #: The registry's key; for an embedded backend, the value of ``store=`` that picks it.
    name: ClassVar[str]
    #: What the store is, in messages: ``"a Qdrant Edge store (store='edge')"``.
    description: ClassVar[str]
    #: How messages start a sentence about it, and name where it is (``"Qdrant Edge at DIR"``).
    title: ClassVar[str]
    #: Runs in this process, picked by ``store=`` (a server is picked by ``qdrant_url=`` instead).
    embedded: ClassVar[bool] = True
    #: Keeps its data in ``path``: a default directory is filled in, and a directory another backend
    #: holds is refused before any model loads (:func:`~c2v_rag.store.backends.check_store_kind`).
    uses_directory: ClassVar[bool] = True
    #: The folder under the user data directory when no ``path`` is given (backends' files differ).
    default_directory: ClassVar[str] = "qdrant"
    #: The packages :meth:`require` checks before a client opens.
    requires: ClassVar[tuple[Requirement, ...]] = (QDRANT_CLIENT,)
    #: Settings this backend accepts and ignores (a warning names those set): ``QdrantConfig`` field names.
    ignores: ClassVar[tuple[str, ...]] = ()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    def holds(self, path: Path) -> bool:
        """Whether the directory ``path`` holds a store of this backend (its files, not a guess).
        False by default: a backend without a directory holds none."""
        return False

    @abstractmethod
    def connect(self, settings: StoreSettings) -> StoreClient:
        """A client on the store ``settings`` name, which the caller closes. Called by
        :meth:`QdrantConfig.connect <c2v_rag.store.collection.QdrantConfig.connect>` once the
        directory's kind is checked and :meth:`require` has passed."""

    def connect_async(self, settings: StoreSettings) -> AsyncQdrantClient | None:
        """An ``AsyncQdrantClient`` on the store for :func:`~c2v_rag.asearch`, or None when the backend has
        none (the default): its searches then run whole in a worker thread on :meth:`connect`'s client."""
        return None

    def client_kwargs(self, settings: StoreSettings) -> dict[str, Any]:
        """The arguments of a ``QdrantClient`` on this store; a backend qdrant-client cannot open refuses."""
        raise ValueError(
            f"{self.location(settings)} is {self.description}, which QdrantClient cannot open; "
            "use QdrantConfig.connect()"
        )

    def location(self, settings: StoreSettings) -> str:
        """Where the data lives, for messages (never the API key)."""
        return f"{self.title} at {settings.path}"

    def directory(self, settings: StoreSettings) -> Path:
        """The directory the store is kept in: ``settings.path``, which
        :meth:`QdrantConfig.resolve <c2v_rag.store.collection.QdrantConfig.resolve>` fills in."""
        if settings.path is None:
            raise ValueError(
                f"{self.description} is kept in a directory: pass path= (or let QdrantConfig.resolve "
                "fill in the default one)"
            )
        return Path(settings.path)

    def ignored_options(self, settings: StoreSettings) -> list[str]:
        """The settings of :attr:`ignores` that ``settings`` sets (to other than None or False)."""
        return [name for name in self.ignores if getattr(settings, name) not in (None, False)]

    def require(self, feature: str) -> None:
        """Check that :attr:`requires` is installed; a missing package is a
        :class:`~c2v_rag.core.errors.MissingPackageError` naming ``feature`` and the pip command."""
        for needed in self.requires:
            require(needed.module, feature, needed.extra, distribution=needed.distribution)


def check_collection_name(name: str) -> str:
    """``name``, or a ValueError when Qdrant would refuse it as a collection name (checked before any work)."""
    if not isinstance(name, str) or not _COLLECTION_NAME.match(name):
        raise ValueError(
            f"collection={name!r} is not a valid collection name: use letters, digits, '_', '-' "
            "and '.', starting with a letter or digit"
        )
    return name


def wrong_store(path: Path, found: StoreBackend, wanted_name: str, wanted_description: str) -> StoreKindError:
    """The error for opening ``path``, which ``found`` holds, as the backend ``wanted_name``: it names
    both and the ways out."""
    return StoreKindError(
        f"{path} holds {found.description}, not {wanted_description}: the embedded engines keep "
        f"different files. Open it with store={found.name!r} (or leave store unset: an existing store's kind is "
        f"detected), use another path for a new {wanted_name} store, or copy its collections across with "
        f"c2v_rag.migrate(..., source_path={str(path)!r}, target_store={wanted_name!r})."
    )
