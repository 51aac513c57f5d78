"""How an ingest or an embed chunks, batches, embeds and writes: :class:`IngestConfig`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from c2v_rag.documents.files import ReadOptions
from c2v_rag.documents.sniffing import DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_UNDECODABLE_SHARE
from c2v_rag.store.collection import check_payload_indexes
from c2v_rag.store.sparse import BM25Config, resolve_sparse


class IngestConfig(BaseModel):
    """How documents are chunked, batched, embedded and written."""

    model_config = ConfigDict(extra="forbid")

    chunk_size: int = Field(default=200, ge=8, description="decoder tokens per chunk")
    chunk_overlap: int = Field(default=20, ge=0, description="decoder tokens shared by neighbouring chunks")
    batch_size: int = Field(default=256, ge=1, description="chunks embedded and uploaded together")
    max_tokens_per_batch: int | None = Field(default=None, ge=1, description="padded tokens per forward pass")
    task: str | None = Field(default=None, description="a symmetric task gives documents its instruction")
    text_instruction: str | None = Field(default=None, description="a literal document instruction")
    prefetch_batches: int = Field(default=2, ge=1, description="embedded batches that may wait for upload")
    retry_attempts: int = Field(default=5, ge=1)
    retry_initial_wait: float = Field(default=0.5, ge=0)
    retry_max_wait: float = Field(default=30.0, ge=0)
    on_error: Literal["raise", "continue"] = Field(
        default="raise",
        description="stop at the first failed batch, unreadable file or bad JSONL record, or record it and go on",
    )
    sync: bool = Field(
        default=False,
        description="make the collection mirror the given files and folders: delete the points of documents "
        "gone from them (never points from other sources; never after a failed or partial read)",
    )
    max_file_bytes: int | None = Field(
        default=DEFAULT_MAX_FILE_BYTES,
        ge=1,
        description=".txt/.md files larger than this are skipped with a warning (None: no limit); .jsonl is streamed",
    )
    max_undecodable_share: float = Field(
        default=DEFAULT_MAX_UNDECODABLE_SHARE,
        ge=0,
        le=1,
        description="files with a larger share of bytes that are not UTF-8 are skipped as not text",
    )
    show_progress: bool = True
    sparse: BM25Config | None = Field(
        default=None,
        description="'bm25' (or a BM25Config): also store a BM25 sparse vector per chunk, for sparse and hybrid search",
    )
    payload_indexes: dict[str, str] = Field(
        default_factory=dict, description="metadata key -> Qdrant index type (keyword, integer, float, ...)"
    )
    truncate_dim: int | None = Field(
        default=None,
        ge=1,
        description="store shorter vectors (Matryoshka): one of the sizes the variant was trained for; the "
        "collection records it, and search embeds queries at the same size",
    )

    @field_validator("sparse", mode="before")
    @classmethod
    def _sparse(cls, value: Any) -> Any:
        return resolve_sparse(value) if value is None or isinstance(value, str) else value

    @model_validator(mode="after")
    def _check(self) -> IngestConfig:
        check_payload_indexes(self.payload_indexes)
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(f"chunk_overlap={self.chunk_overlap} must be smaller than chunk_size={self.chunk_size}")
        if self.task is not None and self.text_instruction is not None:
            raise ValueError("pass either task= or text_instruction=, not both")
        return self

    @classmethod
    def with_overrides(cls, config: IngestConfig | None, **overrides: Any) -> IngestConfig:
        """``config`` (or the defaults) with the keyword arguments that are not None laid over it,
        validated together: how ``ingest`` and ``embed`` merge their keywords with ``config=``."""
        return cls.model_validate(
            {**(config or cls()).model_dump(), **{k: v for k, v in overrides.items() if v is not None}}
        )

    @property
    def document_prompt(self) -> dict[str, str | None]:
        """The instruction documents get, as a collection records it, so that a reindex gives them the same."""
        return {"task": self.task, "instruction": self.text_instruction}

    def read_options(self) -> ReadOptions:
        """What reading the sources needs of these settings."""
        return ReadOptions(
            max_file_bytes=self.max_file_bytes, max_undecodable_share=self.max_undecodable_share, on_error=self.on_error
        )
