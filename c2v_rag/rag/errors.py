"""Errors of the ingestion and search layer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from c2v_rag.core.errors import C2VError

if TYPE_CHECKING:
    from c2v_rag.rag.results import IngestResult


class CollectionMismatchError(C2VError, ValueError):
    """An existing collection was built for other vectors (size, distance, name or model)."""


class CollectionNotFoundError(C2VError, LookupError):
    """The collection to search does not exist."""


class IngestError(C2VError, RuntimeError):
    """A batch could not be embedded or written; ``doc_ids`` names its documents.

    Re-running the same ingest resumes: chunks already stored are skipped, the failed ones are
    written, and nothing is duplicated. ``result`` holds the counts of the partial run.
    """

    def __init__(self, message: str, doc_ids: list[str], result: IngestResult | None = None) -> None:
        super().__init__(message)
        self.doc_ids = doc_ids
        self.result = result


class StoreLockedError(C2VError, RuntimeError):
    """The embedded Qdrant directory is open in another client (this process or another one)."""


class StoreKindError(C2VError, ValueError):
    """A store directory was written by the other embedded engine (Qdrant Edge vs qdrant-client's local mode)."""


class QdrantUnreachableError(C2VError, ConnectionError):
    """The Qdrant server did not answer, after the configured retries."""


class QdrantRequestError(C2VError, RuntimeError):
    """The Qdrant server answered with an error status (4xx/5xx) to a request made before any write."""


class IngestInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped an ingest; ``result`` holds what was stored before it stopped.

    A :class:`KeyboardInterrupt`, so code that catches Ctrl-C still catches it. Re-running the
    same ingest resumes: stored chunks are skipped.
    """

    def __init__(self, message: str, result: IngestResult | None = None) -> None:
        super().__init__(message)
        self.result = result
