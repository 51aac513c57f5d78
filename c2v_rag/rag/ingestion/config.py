"""How an ingest or an embed chunks, batches, embeds and writes: :class:`IngestConfig`."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from c2v_rag.core.config import Causal2VecConfig
from c2v_rag.documents.chunking import (
    DEFAULT_DECODER_MAX_LENGTH,
    ChunkContext,
    check_decoder_tokens,
    decoder_tokens,
    default_decoder_max_length,
)
from c2v_rag.documents.files import FileSelection, ReadOptions
from c2v_rag.documents.sniffing import DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_UNDECODABLE_SHARE
from c2v_rag.store.collection import check_payload_indexes
from c2v_rag.store.sparse import BM25Config, resolve_sparse

# What a collection's chunks were stored with, by its chunk_context (for its refusal of another).
_LED_BY: dict[str, str] = {
    "none": "without a lead",
    "lead": "led by their document's opening",
    "headings": "led by their document's title and the headings above them",
    "sections": "cut at headings and led by their document's title and the headings above them",
}
# A new collection's, and embed()'s, when none is asked for.
DEFAULT_CHUNK_CONTEXT: ChunkContext = "lead"


class IngestConfig(FileSelection):
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
        description=(
            "stop at the first failed batch, unreadable file, bad JSONL record or bad table row, or record it and go on"
        ),
    )
    sync: bool = Field(
        default=False,
        description="make the collection mirror the given files and folders: delete the points of documents "
        "gone from them (never points from other sources; never after a failed or partial read)",
    )
    max_file_bytes: int | None = Field(
        default=DEFAULT_MAX_FILE_BYTES,
        ge=1,
        description=(
            "files larger than this are skipped with a warning (None: no limit); .jsonl, .parquet, .csv and .tsv "
            "are streamed"
        ),
    )
    max_undecodable_share: float = Field(
        default=DEFAULT_MAX_UNDECODABLE_SHARE,
        ge=0,
        le=1,
        description=(
            "UTF-8 files with a larger share of invalid bytes are skipped as not text (below it those bytes are "
            "replaced); files in another encoding are read in it"
        ),
    )
    show_progress: bool = True
    sparse: BM25Config | None = Field(
        default=None,
        description="'bm25' (or a BM25Config): also store a BM25 sparse vector per chunk, for sparse and hybrid "
        "search; None: what an existing collection holds (a hybrid one's chunks get its BM25 vectors), else none",
    )
    payload_indexes: dict[str, str] = Field(
        default_factory=dict, description="metadata key -> Qdrant index type (keyword, integer, float, ...)"
    )
    truncate_dim: Annotated[int, Field(ge=1)] | Literal["full"] | None = Field(
        default=None,
        description="store shorter vectors (Matryoshka): one of the sizes the variant was trained for, or 'full' for "
        "the whole vector. The collection records it, and search embeds queries at the same size; None: what an "
        "existing collection recorded, else the whole vector",
    )
    chunk_context: ChunkContext | None = Field(
        default=None,
        description="'lead': each chunk after a document's first starts with the document's opening where it opens "
        "with a title (the title and the line under it, at most 200 characters; the title alone where that line "
        "is a heading), stored and embedded with it; "
        "'headings': that opening with the headings the chunk lies under after the title (Title › Chapter › "
        "Section, the innermost 200 characters of them); 'sections': as 'headings', and chunks cut at headings "
        "(short sections share a chunk, a long one is cut inside itself); 'none': chunks alone. The collection "
        "records it; None: what an existing collection recorded (one made before this was recorded, or by another "
        "tool: 'none'), else 'lead'",
    )

    decoder_max_length: int | None = Field(
        default=None,
        ge=0,
        description="decoder tokens each chunk is embedded with (the document template, the Contextual token, the "
        "text and EOS): the decoder reads the first ones of a longer chunk, while the encoder, and through it the "
        "Contextual token, reads all of it; fewer means a cheaper ingest (docs/performance.md has the trade). 0: "
        "whole chunks. The collection records it; None: what an existing collection recorded (one made before it "
        f"was recorded, or by another tool: whole chunks), else {DEFAULT_DECODER_MAX_LENGTH} for a model with a "
        "Contextual token and whole chunks for one without",
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
        check_decoder_tokens(self.decoder_max_length)
        return self

    @classmethod
    def with_overrides(cls, config: IngestConfig | None, **overrides: Any) -> IngestConfig:
        """``config`` (or the defaults) with the keyword arguments that are not None laid over it,
        validated together: how ``ingest`` and ``embed`` merge their keywords with ``config=``."""
        return cls.model_validate(
            {**(config or cls()).model_dump(), **{k: v for k, v in overrides.items() if v is not None}}
        )

    @property
    def context(self) -> ChunkContext:
        """What leads chunks after a document's first (``chunk_context``, None the default)."""
        return self.chunk_context or DEFAULT_CHUNK_CONTEXT

    def for_model(self, config: Causal2VecConfig) -> IngestConfig:
        """These settings for new vectors of ``config``'s model (a new collection, an embed run), resolved:
        ``chunk_context`` to its default where none is asked, and ``decoder_max_length`` to the one asked (0:
        whole chunks, held as None) or :func:`default_decoder_max_length`."""
        asked = self.decoder_max_length
        tokens = default_decoder_max_length(config) if asked is None else decoder_tokens(asked)
        return self.model_copy(
            update={
                "chunk_context": self.chunk_context or DEFAULT_CHUNK_CONTEXT,
                "decoder_max_length": tokens,
                "truncate_dim": self._vector_size(config),
            }
        )

    @property
    def prefix_dim(self) -> int | None:
        """``truncate_dim`` as a size: the prefix the vectors keep, None for the whole vector (``'full'``; left
        out, once :meth:`for_model` or :meth:`for_record` has resolved it)."""
        return None if self.truncate_dim == "full" else self.truncate_dim

    def _vector_size(self, config: Causal2VecConfig) -> int | None:
        """``truncate_dim`` as a collection records it: the prefix size, or None for the whole vector ('full',
        left out, or the whole size); an untrained size is refused here."""
        asked = self.prefix_dim
        if config.decoder_hidden_size is None:  # an old config: its sizes are checked once the model is loaded
            return asked
        return config.check_truncate_dim(asked)

    def for_collection(self, recorded: dict[str, Any] | None, name: str, config: Causal2VecConfig) -> IngestConfig:
        """These settings for a collection that recorded ``recorded`` (None: a new one, :meth:`for_model`):
        ``chunk_context`` resolved to what it recorded (a collection from before it was recorded: 'none'),
        ``decoder_max_length`` to what it recorded (none recorded: whole chunks, held as None), and
        ``truncate_dim`` to its vectors' size (None: whole vectors). A different one asked for is refused, as
        the collection's stored chunks would then be cut, or read, two ways, or its vectors would not fit."""
        return self.for_record(
            recorded, config, holder=f"collection {name!r}", instead="ingest into a new collection (collection=...)"
        )

    def for_record(
        self, recorded: dict[str, Any] | None, config: Causal2VecConfig, *, holder: str, instead: str
    ) -> IngestConfig:
        """:meth:`for_collection` for any record of earlier chunks (a collection's, an ``embed`` folder's):
        ``holder`` names what holds them and ``instead`` the way out, in the error of a setting that differs."""
        if recorded is None:
            return self.for_model(config)
        stored = recorded.get("chunk_context", "none")
        if self.chunk_context is not None and self.chunk_context != stored:
            raise ValueError(
                f"{holder} records chunk_context={stored!r}: its chunks were stored "
                f"{_LED_BY.get(stored, 'otherwise')}. Pass chunk_context={stored!r} "
                f"(or leave it out) to add to it, or {instead}"
            )
        read = recorded.get("decoder_max_length")
        if self.decoder_max_length is not None and decoder_tokens(self.decoder_max_length) != read:
            how = f"decoder_max_length={read}" if read is not None else "whole chunks (decoder_max_length=0)"
            raise ValueError(
                f"{holder} records {how}: its chunks were embedded so. Leave decoder_max_length out to "
                f"add to it as they were, or {instead}"
            )
        # A collection another tool made records no size: the asked one goes, checked against its vectors' size.
        asked = self._vector_size(config)
        size = recorded["truncate_dim"] if "truncate_dim" in recorded else asked
        if self.truncate_dim is not None and asked != size:
            how = f"truncate_dim={size}: its vectors are prefixes of {size} values" if size else "whole vectors"
            raise ValueError(f"{holder} records {how}. Leave truncate_dim out to add to it at that size, or {instead}")
        return self.model_copy(update={"chunk_context": stored, "decoder_max_length": read, "truncate_dim": size})

    @property
    def document_prompt(self) -> dict[str, str | None]:
        """The instruction documents get, as a collection records it, so that a reindex gives them the same."""
        return {"task": self.task, "instruction": self.text_instruction}

    def read_options(self) -> ReadOptions:
        """What reading the sources needs of these settings."""
        return dataclasses.replace(
            super().read_options(),
            max_file_bytes=self.max_file_bytes,
            max_undecodable_share=self.max_undecodable_share,
            on_error=self.on_error,
        )
