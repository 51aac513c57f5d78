"""Retrieval and RAG on Qdrant: ``ingest`` documents, ``search`` them, ``reindex`` behind an alias.

Importing this package needs no optional dependency; :func:`ingest` and :func:`search` check
for qdrant-client, llama-index-core and tenacity (``pip install 'c2v-rag[qdrant]'``) when
called, and say how to install what is missing; BM25 sparse vectors need bm25s and PyStemmer
(``pip install 'c2v-rag[hybrid]'``).
"""

from .collection import DEFAULT_COLLECTION, QdrantConfig, default_local_path
from .distributed import RayOptions
from .documents import SourceDocument, iter_documents
from .embedder import DEFAULT_QUERY_TASK, Embedder, EmbedderOptions, clear_model_cache, load_model
from .embed_to_parquet import EmbedResult, embed
from .errors import (
    CollectionMismatchError,
    CollectionNotFoundError,
    IngestError,
    IngestInterrupted,
    QdrantRequestError,
    QdrantUnreachableError,
    StoreKindError,
    StoreLockedError,
)
from .files import SkippedInput
from .filters import to_qdrant_filter
from .ingest_config import IngestConfig
from .ingest_result import FailedBatch, IngestResult
from .pipeline import ingest
from .migrate import MigrateResult, migrate
from .options import ConnectionOptions, ModelOptions, SearchOptions
from .reindex import ReindexResult, reindex
from .search import SearchHit, asearch, search, search_many
from .sparse import BM25Config, BM25Encoder

__all__ = [
    "ingest",
    "embed",
    "EmbedResult",
    "search",
    "search_many",
    "asearch",
    "SearchOptions",
    "ConnectionOptions",
    "ModelOptions",
    "reindex",
    "ReindexResult",
    "migrate",
    "MigrateResult",
    "to_qdrant_filter",
    "BM25Config",
    "BM25Encoder",
    "IngestConfig",
    "IngestResult",
    "RayOptions",
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
    "StoreKindError",
    "QdrantUnreachableError",
    "QdrantRequestError",
    "SkippedInput",
]
