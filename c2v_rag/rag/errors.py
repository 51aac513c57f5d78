"""Errors of the ingestion and search layer; the store's own are :mod:`c2v_rag.store.errors`, re-exported here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from c2v_rag.core.errors import C2VError
from c2v_rag.store.errors import (
    CollectionMismatchError,
    CollectionNotFoundError,
    QdrantRequestError,
    QdrantUnreachableError,
    StoreKindError,
    StoreLockedError,
)

__all__ = [
    "CollectionMismatchError",
    "CollectionNotFoundError",
    "EmbedInterrupted",
    "IngestError",
    "IngestInterrupted",
    "QdrantRequestError",
    "QdrantUnreachableError",
    "RunInterrupted",
    "StoreKindError",
    "StoreLockedError",
]

if TYPE_CHECKING:
    from c2v_rag.rag.results import EmbedResult, IngestResult


class IngestError(C2VError, RuntimeError):
    """A batch could not be embedded or written; ``doc_ids`` names its documents.

    Re-running the same ingest resumes: chunks already stored are skipped, the failed ones are
    written, and nothing is duplicated. ``result`` holds the counts of the partial run.
    """

    def __init__(self, message: str, doc_ids: list[str], result: IngestResult | None = None) -> None:
        super().__init__(message)
        self.doc_ids = doc_ids
        self.result = result


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run that keeps what it wrote (an ingest, an embed); the message says how much and how to
    resume. A :class:`KeyboardInterrupt`, so code that catches Ctrl-C still catches it."""


class IngestInterrupted(RunInterrupted):
    """Ctrl-C stopped an ingest; ``result`` holds what was stored before it stopped.

    Re-running the same ingest resumes: stored chunks are skipped.
    """

    def __init__(self, message: str, result: IngestResult | None = None) -> None:
        super().__init__(message)
        self.result = result


class EmbedInterrupted(RunInterrupted):
    """Ctrl-C stopped an ``embed``; ``result`` holds what it wrote before it stopped (its open file closed).

    Re-running the same embed into the same folder resumes: chunks already written are skipped.
    """

    def __init__(self, message: str, result: EmbedResult) -> None:
        super().__init__(message)
        self.result = result
