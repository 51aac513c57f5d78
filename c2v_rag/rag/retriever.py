"""What a framework retriever over :func:`c2v_rag.search` needs: the search options, in one place.

LlamaIndex's and LangChain's ``QdrantVectorStore`` open a server or qdrant-client's local mode,
but not Qdrant Edge, and they re-implement hybrid search and filters their own way. The
retrievers in the two integration packages (``llama_index.embeddings.causal2vec`` and
``langchain_causal2vec``) call :func:`c2v_rag.search` instead, so they read any backend with the
collection's own model, hybrid mode, filters and grouping by document. Both build their options
with :class:`SearchOptions`; each adds its framework's field names and result type.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from .collection import DEFAULT_COLLECTION, QdrantConfig
from .query import Fusion, SearchMode
from .search import SearchHit, search


# One lock per embedded store directory: a store takes one client at a time, so the calls of a
# retriever used from several threads (LangChain's batch, asyncio's worker threads) take turns.
_STORE_LOCKS: dict[str, threading.Lock] = {}
_STORE_LOCKS_GUARD = threading.Lock()


class SearchOptions(BaseModel):
    """Where and how a retriever searches: :func:`c2v_rag.search`'s arguments, minus the query and ``top_k``."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    collection: str = Field(default=DEFAULT_COLLECTION, description="a collection or an alias")
    mode: SearchMode = Field(default="dense", description="dense, sparse (BM25) or hybrid (both, fused)")
    fusion: Fusion = "rrf"
    filter: Any = Field(default=None, description="the dict form of c2v_rag.rag.filters or a qdrant Filter")
    score_threshold: float | None = None
    group_by_document: bool = Field(default=False, description="one hit per document, its best chunk")
    task: str | None = None
    instruction: str | None = None
    examples: list[tuple[str, str]] | None = Field(default=None, description="in-context (query, response) pairs "
                                                                         "for the query; None: the task's own")
    model: Any = Field(default=None, description="preset, variant directory or loaded Causal2Vec; None: the "
                                                 "collection's own model")
    device: str | None = None
    dtype: str | None = None
    quantize: str | None = Field(default=None, description="none, int8 or auto; None: the collection's own")
    qdrant_url: str | None = None
    path: str | Path | None = None
    store: Literal["local", "edge"] | None = None
    api_key: SecretStr | None = None
    prefer_grpc: bool | None = None
    qdrant: QdrantConfig | None = None
    client: Any = Field(default=None, description="an open client to use (left open); None: open the store "
                                                  "for each query, so an embedded store stays free in between")

    def search_hits(self, query: str, top_k: int, filter: Any = None) -> list[SearchHit]:
        """:func:`c2v_rag.search` with these options (``filter``, when given, replaces the stored one)."""
        with self._embedded_store_turn():
            return self._search(query, top_k, filter)

    def _search(self, query: str, top_k: int, filter: Any) -> list[SearchHit]:
        return search(
            query, top_k, collection=self.collection, qdrant_url=self.qdrant_url, path=self.path,
            api_key=self.api_key.get_secret_value() if self.api_key is not None else None,
            prefer_grpc=self.prefer_grpc, store=self.store, model=self.model, device=self.device, dtype=self.dtype,
            quantize=self.quantize, task=self.task, instruction=self.instruction, examples=self.examples,
            filter=self.filter if filter is None else filter,
            score_threshold=self.score_threshold, mode=self.mode, fusion=self.fusion,
            group_by_document=self.group_by_document, qdrant=self.qdrant, client=self.client)

    def _embedded_store_turn(self) -> Any:
        if self.client is not None or self.qdrant_url is not None or (self.qdrant is not None and self.qdrant.url):
            return contextlib.nullcontext()
        target = QdrantConfig.resolve(self.qdrant, path=self.path, store=self.store)
        key = str(Path(target.path).expanduser().resolve())
        with _STORE_LOCKS_GUARD:
            return _STORE_LOCKS.setdefault(key, threading.Lock())

    async def asearch_hits(self, query: str, top_k: int, filter: Any = None) -> list[SearchHit]:
        """:meth:`search_hits` in a worker thread: embedding and an embedded store's calls block."""
        return await asyncio.to_thread(self.search_hits, query, top_k, filter)
