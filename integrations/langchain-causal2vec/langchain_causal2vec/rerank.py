"""A LangChain document compressor that reranks retrieved documents with ``c2v_rag.Causal2VecReranker``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, Field, PrivateAttr

from c2v_rag import Causal2VecReranker, warn_if_reranked


class Causal2VecRerank(BaseDocumentCompressor):
    """Reorder documents by the likelihood a Causal2Vec variant's decoder gives the query after each document,
    fused with their retrieval scores when every document carries one (``metadata["_score"]``, as
    ``Causal2VecRetriever`` and ``langchain_qdrant`` set it; else the likelihood alone), and keep the best
    ``top_n``. Each returned document carries the reranked score as ``metadata["relevance_score"]``, as
    LangChain's other rerankers do.

    ``model`` is a preset name, a variant directory or a loaded ``c2v_rag.Causal2Vec`` (None: the default
    preset); ``device`` where the decoder runs. The reranker loads on first use.

    Example:
        .. code-block:: python

            from langchain_classic.retrievers import ContextualCompressionRetriever
            from langchain_causal2vec import Causal2VecRerank, Causal2VecRetriever

            retriever = ContextualCompressionRetriever(
                base_compressor=Causal2VecRerank(top_n=5),
                base_retriever=Causal2VecRetriever(collection="papers", path="store", k=20, rerank=None),
            )
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    top_n: int = Field(default=3, ge=1, description="documents to keep")
    model: Any = Field(default=None, description="a preset name, a variant directory or a loaded Causal2Vec")
    device: str | None = Field(default=None, description="cpu, cuda...; None: cuda when present")
    _reranker: Causal2VecReranker | None = PrivateAttr(default=None)

    @property
    def reranker(self) -> Causal2VecReranker:
        if self._reranker is None:
            self._reranker = Causal2VecReranker(self.model, device=self.device)
        return self._reranker

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        if not documents:
            return []
        warn_if_reranked((doc.metadata for doc in documents), "Causal2VecRerank")
        scores = [doc.metadata.get("_score") for doc in documents]
        ranked = self.reranker.rerank(
            query,
            [doc.page_content for doc in documents],
            self.top_n,
            first_stage=None if any(s is None for s in scores) else scores,
        )
        return [
            Document(
                page_content=documents[r.index].page_content,
                metadata={**documents[r.index].metadata, "relevance_score": r.relevance_score},
                id=documents[r.index].id,
            )
            for r in ranked
        ]
