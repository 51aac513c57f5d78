"""Errors of the Qdrant store: a collection that is missing or built for other vectors, a store that is locked, of
the other engine, unreachable or answering with an error."""

from __future__ import annotations

from c2v_rag.core.errors import C2VError


class CollectionMismatchError(C2VError, ValueError):
    """An existing collection was built for other vectors (size, distance, name or model)."""


class CollectionNotFoundError(C2VError, LookupError):
    """The collection to search does not exist."""


class StoreLockedError(C2VError, RuntimeError):
    """The embedded Qdrant directory is open in another client (this process or another one)."""


class StoreKindError(C2VError, ValueError):
    """A store directory was written by the other embedded engine (Qdrant Edge vs qdrant-client's local mode)."""


class QdrantUnreachableError(C2VError, ConnectionError):
    """The Qdrant server did not answer, after the configured retries."""


class QdrantRequestError(C2VError, RuntimeError):
    """The Qdrant server answered with an error status (4xx/5xx) to a request made before any write."""
