"""What a framework retriever over a :class:`~c2v_rag.Collection` needs: its options, in one place.

LlamaIndex's and LangChain's ``QdrantVectorStore`` open a server or qdrant-client's local mode,
but not Qdrant Edge, and they re-implement hybrid search and filters their own way. The
retrievers in the two integration packages (``llama_index.embeddings.causal2vec`` and
``langchain_causal2vec``) search through a collection handle instead, so they read any backend with the
collection's own model, hybrid mode, filters and grouping by document. Both build their options
with :class:`RetrieverOptions`; each adds its framework's field names and result type.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from c2v_rag.core.instructions import check_task
from c2v_rag.rag.handle import Collection
from c2v_rag.rag.options import OPEN_KEYS, ConnectionOptions, ModelOptions, SearchOptions
from c2v_rag.rag.retrieval.search import SearchHit
from c2v_rag.store.collection import DEFAULT_COLLECTION

RERANK_SCORE_KEY = "_rerank_score"
"""The metadata key under which the framework retrievers pass on a hit's ``rerank_score`` when their search
reranked (the item's score stays the first stage's, as :class:`~c2v_rag.SearchHit` keeps it): how a reranker
chained after them tells that its items were reranked already (:func:`warn_if_reranked`)."""


def warn_if_reranked(metadata: Iterable[Mapping[str, Any]], reranker: str) -> None:
    """Warn (once per place, as :mod:`warnings` does) when every item a ``reranker`` is given came reranked from a
    Causal2VecRetriever: by default (``rerank="auto"``) the retriever reranks its top 20 where the decoder is fast,
    and a reranker chained after it does the same work again."""
    items = list(metadata)
    if items and all(RERANK_SCORE_KEY in item for item in items):
        warnings.warn(
            f"{reranker} got results that Causal2VecRetriever has already reranked (its rerank option, 'auto' by "
            "default, reranks its top 20 where the decoder is fast): reranking them again costs as much once more. "
            "Give the retriever rerank=None to rerank once, here.",
            UserWarning,
            stacklevel=3,
        )


class RetrieverOptions(ConnectionOptions, ModelOptions, SearchOptions):  # type: ignore[misc]
    """Where and how a retriever searches: a :class:`~c2v_rag.Collection` handle as ``collection``, or its
    name with the handle's store and model fields passed through once (documented on the option classes), and
    the search's fields. The query and ``top_k`` come with each call."""

    collection: Any = Field(
        default=DEFAULT_COLLECTION,
        description="a Collection handle (c2v_rag.open_collection), or the name of a collection or alias, "
        "opened with this object's store and model fields",
    )
    client: Any = Field(
        default=None,
        description="an open client to use (left open); None: open the store "
        "for each query, so an embedded store stays free in between",
    )
    _handle: Collection | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _store_named_once(self) -> RetrieverOptions:
        named = [k for k in sorted(OPEN_KEYS) if getattr(self, k, None) is not None]
        if isinstance(self.collection, Collection) and named:
            raise ValueError(f"collection is a Collection handle: give its store and model to it, not {named}")
        check_task(self.task)  # before the first query loads a model
        return self

    @property
    def handle(self) -> Collection:
        """The collection handle, given or opened once from these options."""
        if isinstance(self.collection, Collection):
            return self.collection
        if self._handle is None:
            self._handle = Collection(self.collection, **{k: getattr(self, k) for k in OPEN_KEYS})
        return self._handle

    @property
    def collection_name(self) -> str:
        return self.handle.name

    def search_hits(self, query: str, top_k: int, filter: Any = None) -> list[SearchHit]:
        """The handle's search with these options (``filter``, when given, replaces the stored one)."""
        options = SearchOptions.as_given({k: v for k, v in dict(self).items() if k != "collection"})
        if filter is not None:
            options = options.model_copy(update={"filter": filter})
        # Calls from several threads take turns on an embedded store (QdrantConfig.turn).
        return self.handle.search(query, top_k, options=options)

    async def asearch_hits(self, query: str, top_k: int, filter: Any = None) -> list[SearchHit]:
        """:meth:`search_hits` in a worker thread: embedding and an embedded store's calls block."""
        return await asyncio.to_thread(self.search_hits, query, top_k, filter)
