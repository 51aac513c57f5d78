"""A LangChain retriever over a ``c2v_rag.Collection``: any backend (server, local mode, Qdrant Edge)."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, model_validator

from c2v_rag import RERANK_SCORE_KEY, RetrieverOptions, SearchHit

# langchain_qdrant.RetrievalMode's values, and the search mode each is.
RETRIEVAL_MODES = {"dense": "dense", "sparse": "sparse", "hybrid": "hybrid"}


class Causal2VecRetriever(RetrieverOptions, BaseRetriever):
    """Retrieve chunks of a collection made by ``c2v_rag.ingest``, from any backend.

    ``collection`` is a :class:`c2v_rag.Collection` handle, or a collection's name with the handle's store and
    model fields. The query is embedded with the collection's own model and instruction; ``retrieval_mode``
    (``dense``, ``sparse``, ``hybrid``, as ``langchain_qdrant.RetrievalMode``) picks the search,
    ``filter`` takes the dict form of ``c2v_rag.store.filters`` or a ``qdrant_client`` Filter, and
    ``group_by_document`` returns one chunk per document. ``k`` is the number of documents, as in
    ``search_kwargs={"k": ...}``; ``invoke(query, k=..., filter=...)`` overrides both per call.

    Each Document carries the chunk's text as ``page_content``, its metadata, and, as
    ``langchain_qdrant`` does, ``_id`` and ``_collection_name``; ``_score`` is the search score, and
    ``_rerank_score``, where the search reranked (``rerank``), the score that ordered the documents;
    ``start_index`` is where the chunk starts in its document's text, as LangChain's splitters record it with
    ``add_start_index=True`` (its own text: after the ``lead_chars`` characters of a lead, where it has one).

    Example:
        .. code-block:: python

            import c2v_rag
            from langchain_causal2vec import Causal2VecRetriever

            papers = c2v_rag.open_collection("papers", path="store", store="edge")
            retriever = Causal2VecRetriever(collection=papers, k=5, retrieval_mode="hybrid",
                                            filter={"year": {"gte": 2020}})
            docs = retriever.invoke("What causes spring tides?")
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    k: int = Field(default=4, ge=1, description="documents to return")
    retrieval_mode: str | None = Field(default=None, description="dense, sparse or hybrid (sets mode)")

    @model_validator(mode="before")
    @classmethod
    def _other_retrievers_names(cls, data: Any) -> Any:
        # VectorStoreRetriever's names and LlamaIndex's, which "extra inputs are not permitted" leaves unexplained.
        names = {
            "search_kwargs": "pass k= and filter= as fields (search_kwargs is VectorStoreRetriever's)",
            "top_k": "pass k=, LangChain's name for it",
            "search_type": "similarity is what it does; score_threshold= sets a cutoff (mmr is not offered)",
        }
        given = [name for name in names if isinstance(data, dict) and name in data]
        if given:
            raise ValueError("; ".join(f"Causal2VecRetriever has no {name}: {names[name]}" for name in given))
        return data

    @model_validator(mode="after")
    def _mode(self) -> Causal2VecRetriever:
        if self.retrieval_mode is not None:
            value = str(getattr(self.retrieval_mode, "value", self.retrieval_mode)).lower()
            if value not in RETRIEVAL_MODES:
                raise ValueError(f"retrieval_mode={self.retrieval_mode!r}: use one of {', '.join(RETRIEVAL_MODES)}")
            self.mode = RETRIEVAL_MODES[value]  # type: ignore[assignment]
        return self

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None, filter: Any = None
    ) -> list[Document]:
        return [self._document(hit) for hit in self.search_hits(query, self._k(k), filter)]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None, filter: Any = None
    ) -> list[Document]:
        return [self._document(hit) for hit in await self.asearch_hits(query, self._k(k), filter)]

    def _k(self, k: int | None) -> int:
        """A call's ``k``, else the field's; checked as the field is (0 is a mistake, not "the default")."""
        if k is None:
            return self.k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        return k

    def _document(self, hit: SearchHit) -> Document:
        metadata = {**hit.metadata, "_id": hit.id, "_collection_name": self.collection_name, "_score": hit.score}
        if hit.rerank_score is not None:  # the search reranked: what ordered the documents
            metadata[RERANK_SCORE_KEY] = hit.rerank_score
        if hit.doc_id is not None:
            metadata.setdefault("doc_id", hit.doc_id)
        if hit.start_char is not None:  # as a splitter's add_start_index records it
            metadata.setdefault("start_index", hit.start_char)
        return Document(page_content=hit.text, metadata=metadata, id=hit.id)
