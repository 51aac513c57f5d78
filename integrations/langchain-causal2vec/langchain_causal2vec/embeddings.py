"""LangChain embeddings backed by a Causal2Vec model (decoder-only LLM as embedder)."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.embeddings import Embeddings
from pydantic import ConfigDict, Field

from c2v_rag.rag.embedder import EmbedderOptions


class Causal2VecEmbeddings(EmbedderOptions, Embeddings):
    """Causal2Vec embeddings for LangChain.

    ``embed_query`` gives queries the task's instruction (``task``, ``query_instruction``, or
    the variant's default); ``embed_documents`` gives documents none unless ``text_instruction``
    is set or the task is symmetric. Instances naming the same model, device and dtype share
    one loaded model; ``to_dict``/``from_dict`` carry the options only.

    Example:
        .. code-block:: python

            from langchain_causal2vec import Causal2VecEmbeddings

            embeddings = Causal2VecEmbeddings(task="SciFact")
            vectors = embeddings.embed_documents(["first text", "second text"])
    """

    model_config = ConfigDict(extra="forbid")

    batch_size: int = Field(default=1024, ge=1, description="texts per call into the encoder")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents (no instruction unless configured)."""
        return self.embedder(batch_size=self.batch_size).embed_documents(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed a query with its instruction."""
        return self.embedder().embed_query(text).tolist()

    # Encoding is CPU/GPU-bound: it runs in a worker thread so the event loop stays free.
    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, text)

    def to_dict(self) -> dict[str, Any]:
        """The options as plain data (no weights)."""
        return self.model_dump()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Causal2VecEmbeddings":
        return cls.model_validate(data)
