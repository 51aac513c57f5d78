"""Retrieval and RAG on Qdrant: ``ingest`` documents, ``search`` them.

Importing this package needs no optional dependency; :func:`ingest` and :func:`search` check
for qdrant-client, llama-index-core and tenacity (``pip install 'c2v-rag[qdrant]'``) when
called, and say how to install what is missing.
"""

from .collection import DEFAULT_COLLECTION, QdrantConfig, default_local_path
from .documents import SourceDocument, iter_documents
from .embedder import DEFAULT_QUERY_TASK, Embedder, EmbedderOptions, clear_model_cache, load_model
from .errors import (
    CollectionMismatchError,
    CollectionNotFoundError,
    IngestError,
    IngestInterrupted,
    QdrantRequestError,
    QdrantUnreachableError,
    StoreLockedError,
)
from .files import SkippedInput
from .pipeline import FailedBatch, IngestConfig, IngestResult, ingest
from .search import SearchHit, search

__all__ = [
    "ingest",
    "search",
    "IngestConfig",
    "IngestResult",
    "FailedBatch",
    "QdrantConfig",
    "SearchHit",
    "SourceDocument",
    "iter_documents",
    "Embedder",
    "EmbedderOptions",
    "load_model",
    "clear_model_cache",
    "default_local_path",
    "DEFAULT_COLLECTION",
    "DEFAULT_QUERY_TASK",
    "IngestError",
    "CollectionMismatchError",
    "CollectionNotFoundError",
    "IngestInterrupted",
    "StoreLockedError",
    "QdrantUnreachableError",
    "QdrantRequestError",
    "SkippedInput",
]
