"""LlamaIndex embeddings backed by a Causal2Vec model (decoder-only LLM as embedder)."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import ConfigDict, Field, model_validator

from c2v_rag import DEFAULT_PRESET, EmbedderOptions, make_splitter

# The encoder batches by token budget after sorting by length; LlamaIndex's own batches only
# need to be large enough not to get in its way.
DEFAULT_EMBED_BATCH_SIZE = 1024


class Causal2VecEmbedding(EmbedderOptions, BaseEmbedding):
    """Causal2Vec embeddings for LlamaIndex.

    Queries get the task's instruction (``task``, ``query_instruction``, or the variant's
    default); texts get none unless ``text_instruction`` is set or the task is symmetric.
    Instances naming the same model, device and dtype share one loaded model, which is loaded on
    first use and never serialized: ``to_dict``/``from_dict`` and pickling carry the options only.

    It takes ``HuggingFaceEmbedding``'s names too: ``model_name`` (the variant directory or
    preset; the same as ``model``), ``show_progress_bar``, ``device``, ``query_instruction``,
    ``text_instruction``, ``embed_batch_size`` (any size: the encoder batches by tokens). An
    unknown argument is an error.

    Example:
        .. code-block:: python

            from llama_index.core import Settings
            from llama_index.embeddings.causal2vec import Causal2VecEmbedding

            Settings.embed_model = Causal2VecEmbedding(task="SciFact")
            Settings.embed_model = Causal2VecEmbedding(model_name="path/to/variant", show_progress_bar=True)
    """

    model_config = ConfigDict(extra="forbid")

    embed_batch_size: int = Field(default=DEFAULT_EMBED_BATCH_SIZE, gt=0, description="texts per call into the encoder")

    @model_validator(mode="before")
    @classmethod
    def _hugging_face_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and "show_progress_bar" in data:
            data = dict(data)
            value = data.pop("show_progress_bar")
            if data.get("show_progress", value) != value:
                raise ValueError("show_progress and show_progress_bar differ: pass one")
            data["show_progress"] = value
        return data

    @model_validator(mode="after")
    def _name_model(self) -> Causal2VecEmbedding:
        if self.model_name == "unknown":
            self.model_name = self.model or DEFAULT_PRESET
        elif self.model is None:
            self.model = self.model_name  # HuggingFaceEmbedding's name for the model to load
        elif self.model != self.model_name:
            raise ValueError(f"model={self.model!r} and model_name={self.model_name!r} differ: pass one")
        self.check_dimensions()
        return self

    @classmethod
    def class_name(cls) -> str:
        return "Causal2VecEmbedding"

    @property
    def embedding_dim(self) -> int:
        """The size of the vectors: ``dimensions``, or the model's whole vector (loads the model)."""
        return self.embedder().dim

    def text_splitter(self, chunk_size: int = 200, chunk_overlap: int = 20):
        """A ``SentenceSplitter`` sized in this model's own tokens, for ``Settings.node_parser``."""
        return make_splitter(self.loaded_model().tokenizer, chunk_size, chunk_overlap)

    def _get_query_embedding(self, query: str) -> Embedding:
        return self.embedder().embed_query(query).tolist()

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self.embedder(batch_size=self.embed_batch_size).embed_documents(texts).tolist()

    # Encoding is CPU/GPU-bound: it runs in a worker thread so the event loop stays free.
    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)

    def to_payload(self) -> dict[str, Any]:
        return {**super().to_payload(), "model": self.model or DEFAULT_PRESET}
