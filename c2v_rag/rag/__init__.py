"""Retrieval and RAG on Qdrant: ``ingest`` documents, ``search`` them, ``reindex`` behind an alias.

Importing this package needs no optional dependency; :func:`ingest` and :func:`search` check
for qdrant-client, llama-index-core and tenacity (``pip install 'c2v-rag[qdrant]'``) when
called, and say how to install what is missing; BM25 sparse vectors need bm25s and PyStemmer
(``pip install 'c2v-rag[hybrid]'``).
"""

from c2v_rag.core.instructions import DEFAULT_QUERY_TASK
from c2v_rag.documents.documents import SourceDocument, iter_documents
from c2v_rag.rag.admin.delete import DeleteResult
from c2v_rag.rag.admin.listing import CollectionSummary
from c2v_rag.rag.admin.load_embedded import LoadResult
from c2v_rag.rag.admin.migrate import MigrateResult
from c2v_rag.rag.admin.reindex import ReindexResult
from c2v_rag.rag.embedding import Embedder, EmbedderOptions, clear_model_cache, load_model
from c2v_rag.rag.errors import (
    CollectionMismatchError,
    CollectionNotFoundError,
    EmbedInterrupted,
    IngestError,
    IngestInterrupted,
    QdrantRequestError,
    QdrantUnreachableError,
    RunInterrupted,
    StoreKindError,
    StoreLockedError,
)
from c2v_rag.rag.handle import (
    Collection,
    asearch,
    delete_documents,
    ingest,
    list_collections,
    load_embedded,
    migrate,
    open_collection,
    reindex,
    search,
    search_many,
)
from c2v_rag.rag.ingestion.config import IngestConfig
from c2v_rag.rag.ingestion.embed import embed
from c2v_rag.rag.ingestion.ray_dataflow import RayOptions
from c2v_rag.rag.options import ConnectionOptions, ModelOptions, SearchOptions
from c2v_rag.rag.results import EmbedResult, FailedBatch, IngestResult, SkippedInput
from c2v_rag.rag.retrieval.search import SearchHit
from c2v_rag.rag.retriever import RetrieverOptions
from c2v_rag.store.collection import DEFAULT_COLLECTION, QdrantConfig, default_local_path
from c2v_rag.store.filters import to_qdrant_filter
from c2v_rag.store.sparse import BM25Config, BM25Encoder

__all__ = [
    "Collection",
    "open_collection",
    "RetrieverOptions",
    "ingest",
    "embed",
    "EmbedResult",
    "load_embedded",
    "LoadResult",
    "search",
    "search_many",
    "asearch",
    "SearchOptions",
    "ConnectionOptions",
    "ModelOptions",
    "reindex",
    "ReindexResult",
    "migrate",
    "delete_documents",
    "DeleteResult",
    "list_collections",
    "CollectionSummary",
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
    "EmbedInterrupted",
    "RunInterrupted",
    "StoreLockedError",
    "StoreKindError",
    "QdrantUnreachableError",
    "QdrantRequestError",
    "SkippedInput",
]
