"""LangChain embeddings backed by a Causal2Vec model (decoder-only LLM as embedder)."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.embeddings import Embeddings
from pydantic import ConfigDict, Field, model_validator

from c2v_rag import EmbedderOptions, apply_encode_kwargs, check_encode_kwargs

# HuggingFaceEmbeddings' model_kwargs that mean something for a variant, and the field each sets.
MODEL_KWARGS = {"device": "device", "dtype": "dtype", "torch_dtype": "dtype"}
DTYPES = ("auto", "float32", "bfloat16", "float16")


class Causal2VecEmbeddings(EmbedderOptions, Embeddings):
    """Causal2Vec embeddings for LangChain.

    ``embed_query`` gives queries the task's instruction (``task``, ``query_instruction``, or
    the variant's default); ``embed_documents`` gives documents none unless ``text_instruction``
    is set or the task is symmetric. Instances naming the same model, device and dtype share
    one loaded model; ``to_dict``/``from_dict`` carry the options only.

    It also takes ``HuggingFaceEmbeddings``' arguments, so that code written for a
    sentence-transformers model moves over by changing the class name: ``model_name`` (the
    variant directory or preset), ``model_kwargs`` (``device``, ``dtype``), ``encode_kwargs`` for
    documents and ``query_encode_kwargs`` for queries (``batch_size``, ``normalize_embeddings``,
    ``show_progress_bar``, ``max_tokens_per_batch``, ``prompt``, ``prompt_name``); as there,
    queries use ``encode_kwargs`` when ``query_encode_kwargs`` is empty. Anything else is refused.

    Example:
        .. code-block:: python

            from langchain_causal2vec import Causal2VecEmbeddings

            embeddings = Causal2VecEmbeddings(task="SciFact")
            vectors = embeddings.embed_documents(["first text", "second text"])
            same = Causal2VecEmbeddings(model_name="path/to/variant", model_kwargs={"device": "cpu"},
                                        encode_kwargs={"normalize_embeddings": True})
    """

    model_config = ConfigDict(extra="forbid")

    batch_size: int = Field(default=1024, ge=1, description="texts per call into the encoder")
    model_name: str | None = Field(default=None, description="HuggingFaceEmbeddings' name for `model`")
    model_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="device and dtype, as in HuggingFaceEmbeddings"
    )
    encode_kwargs: dict[str, Any] = Field(default_factory=dict, description="encode options for documents")
    query_encode_kwargs: dict[str, Any] = Field(default_factory=dict, description="encode options for queries")

    @model_validator(mode="after")
    def _hugging_face_style(self) -> Causal2VecEmbeddings:
        if self.model_name is not None:
            if self.model is not None and self.model != self.model_name:
                raise ValueError(f"model={self.model!r} and model_name={self.model_name!r} differ: pass one")
            self.model = self.model_name
        unknown = sorted(set(self.model_kwargs) - set(MODEL_KWARGS))
        if unknown:
            raise ValueError(
                f"model_kwargs has {unknown}, which a Causal2Vec variant does not use; "
                f"accepted: {sorted(MODEL_KWARGS)} (set other options in the variant's config)"
            )
        for key, value in self.model_kwargs.items():
            field = MODEL_KWARGS[key]
            value = str(value).removeprefix("torch.")  # torch.float32 -> "float32"
            if getattr(self, field) not in (None, value):
                raise ValueError(
                    f"{field}={getattr(self, field)!r} and model_kwargs[{key!r}]={value!r} differ: pass one"
                )
            setattr(self, field, value)
        self.model_kwargs = {key: str(value).removeprefix("torch.") for key, value in self.model_kwargs.items()}
        check_encode_kwargs(self.encode_kwargs, "encode_kwargs")
        check_encode_kwargs(self.query_encode_kwargs, "query_encode_kwargs")
        if self.dtype not in (None, *DTYPES):
            raise ValueError(f"model_kwargs dtype {self.dtype!r} is not one of {DTYPES}")
        self.check_dimensions()
        return self

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents (no instruction unless configured)."""
        embedder = apply_encode_kwargs(self.embedder(batch_size=self.batch_size), self.encode_kwargs, "document")
        return embedder.embed_documents(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed a query with its instruction."""
        return (
            apply_encode_kwargs(self.embedder(), self.query_encode_kwargs or self.encode_kwargs, "query")
            .embed_query(text)
            .tolist()
        )

    # Encoding is CPU/GPU-bound: it runs in a worker thread so the event loop stays free.
    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, text)

    def to_dict(self) -> dict[str, Any]:
        """The options as plain data (no weights)."""
        return self.model_dump()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Causal2VecEmbeddings:
        return cls.model_validate(data)
