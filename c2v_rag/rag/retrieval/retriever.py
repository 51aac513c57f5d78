"""What a framework retriever over :func:`c2v_rag.search` needs: the search options, in one place.

LlamaIndex's and LangChain's ``QdrantVectorStore`` open a server or qdrant-client's local mode,
but not Qdrant Edge, and they re-implement hybrid search and filters their own way. The
retrievers in the two integration packages (``llama_index.embeddings.causal2vec`` and
``langchain_causal2vec``) call :func:`c2v_rag.search` instead, so they read any backend with the
collection's own model, hybrid mode, filters and grouping by document. Both build their options
with :class:`RetrieverOptions`; each adds its framework's field names and result type.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import Any

from pydantic import Field

from c2v_rag.rag.options import ConnectionOptions, ModelOptions
from c2v_rag.rag.options import (
    SearchOptions as _SearchOptions,  # this module's SearchOptions: RetrieverOptions' older name
)
from c2v_rag.rag.retrieval.search import SearchHit, search_with

# One lock per embedded store directory: a store takes one client at a time, so the calls of a
# retriever used from several threads (LangChain's batch, asyncio's worker threads) take turns.
_STORE_LOCKS: dict[str, threading.Lock] = {}
_STORE_LOCKS_GUARD = threading.Lock()


# Each base's from_keywords builds that base alone, so their signatures differ; a RetrieverOptions is built
# from its fields, and splits them with as_given.
class RetrieverOptions(ConnectionOptions, ModelOptions, _SearchOptions):  # type: ignore[misc]
    """Where and how a retriever searches: every option of :func:`c2v_rag.search` as one flat set of
    fields (the store's, the model's and the search's, documented on their option classes), plus
    an open ``client``. The query and ``top_k`` come with each call, which splits the fields into
    the three option objects and hands them to :func:`~c2v_rag.rag.retrieval.search.search_with` whole."""

    client: Any = Field(
        default=None,
        description="an open client to use (left open); None: open the store "
        "for each query, so an embedded store stays free in between",
    )

    def search_hits(self, query: str, top_k: int, filter: Any = None) -> list[SearchHit]:
        """:func:`c2v_rag.search` with these options (``filter``, when given, replaces the stored one)."""
        fields = dict(self)
        connection = ConnectionOptions.as_given(fields)
        options = _SearchOptions.as_given(fields)
        if filter is not None:
            options = options.model_copy(update={"filter": filter})
        with self._embedded_store_turn(connection):
            return search_with(query, top_k, connection, ModelOptions.as_given(fields), options, self.client)

    def _embedded_store_turn(self, connection: ConnectionOptions) -> Any:
        if (
            self.client is not None
            or connection.qdrant_url is not None
            or (connection.qdrant is not None and connection.qdrant.url)
        ):
            return contextlib.nullcontext()
        target = connection.resolve()
        if target.path is None:  # a backend that keeps no directory: nothing to take turns on
            return contextlib.nullcontext()
        key = str(Path(target.path).expanduser().resolve())
        with _STORE_LOCKS_GUARD:
            return _STORE_LOCKS.setdefault(key, threading.Lock())

    async def asearch_hits(self, query: str, top_k: int, filter: Any = None) -> list[SearchHit]:
        """:meth:`search_hits` in a worker thread: embedding and an embedded store's calls block."""
        return await asyncio.to_thread(self.search_hits, query, top_k, filter)


# The name the integration packages imported before the options were split into their sets
# (c2v_rag.rag.options); a RetrieverOptions is a SearchOptions with the store, model and client added.
SearchOptions = RetrieverOptions
