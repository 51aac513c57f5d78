"""``ServerConfig``: everything ``c2v-rag serve`` can be told, with the limits' meanings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from c2v_rag.rag.options import ConnectionOptions
from c2v_rag.store.backends import StoreKind, check_store_directory

API_KEY_ENV = "C2V_RAG_API_KEY"


class ServerConfig(BaseModel):
    """How the embeddings server listens, batches, and what it refuses.

    The defaults suit one CPU host: loopback only, no API key (set one before binding another
    interface), a few milliseconds of batching window, and limits that keep one request from
    holding the model for minutes.
    """

    model_config = ConfigDict(extra="forbid")

    # -- where and what
    host: str = Field("127.0.0.1", description="interface to bind; loopback unless you mean to expose it")
    port: int = Field(8080, ge=0, le=65535, description="0 picks a free port")
    model: str | None = Field(None, description="variant directory or preset; None is the default preset")
    model_name: str | None = Field(None, description="the name clients send as 'model' (default: the variant's)")
    device: str | None = None
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = None
    quantize: Literal["none", "int8", "auto"] | None = Field(
        default=None,
        description="CPU: the decoder's linear layers in int8 (docs/performance.md, 'int8 on CPU'); "
        "use the setting the collection was ingested with",
    )
    api_key: SecretStr | None = Field(
        None, description=f"Bearer token clients must send; default ${API_KEY_ENV}; never logged"
    )

    # -- what an input type means
    default_input_type: Literal["query", "document"] = Field(
        "document",
        description="for clients that send no input_type (plain OpenAI clients): documents get "
        "no instruction, as when ingesting",
    )
    normalize: bool = Field(True, description="unit-length vectors, as OpenAI's are (cosine = dot product)")

    # -- dynamic batching
    max_wait_ms: float = Field(5.0, ge=0, description="longest a request waits for others to share its batch")
    max_batch_tokens: int | None = Field(
        None, ge=1, description="padded decoder tokens per forward pass (default: encode's, by device)"
    )
    batch_size: int = Field(256, ge=1, description="texts per forward pass, at most")
    max_pad_fraction: float | None = Field(
        None,
        ge=0,
        le=1,
        description="a text is padded by at most this fraction of its batch's longest "
        "(default: 0.25 on CPU, where padding is pure loss; no limit on GPU)",
    )
    max_round_texts: int = Field(
        2048, ge=1, description="texts merged into one batching round; later requests wait for the next"
    )

    # -- limits
    max_texts_per_request: int = Field(2048, ge=1, description="more inputs in one request: 413")
    max_tokens_per_request: int = Field(
        262_144, ge=1, description="more decoder tokens (after truncation) in one request: 413"
    )
    max_request_bytes: int = Field(16 * 2**20, ge=1, description="larger request bodies: 413")
    max_queued_texts: int = Field(
        8192, ge=1, description="texts waiting for the model; beyond it requests get 503 with Retry-After"
    )
    retry_after_s: int = Field(1, ge=1, description="the Retry-After a 503 carries")

    # -- CPU threads (docs/serving.md has the measurements behind the default)
    threads: int | None = Field(1, ge=1, description="intra-op CPU threads; None keeps torch's default")

    # -- memory (docs/serving.md, "Memory over time")
    release_memory_idle_s: float = Field(
        1.0,
        ge=0,
        description="hand the memory forward passes freed back to the system once model work has paused this "
        "long (seconds); 0 keeps it",
    )
    release_memory_every_s: float = Field(
        60.0, gt=0, description="while requests keep coming, hand it back at most this often (seconds)"
    )
    kernel_cache_shapes: int | None = Field(
        256,
        ge=1,
        description="compiled CPU kernels kept in each of torch's two kernel caches, one a matrix shape, where "
        "$ONEDNN_PRIMITIVE_CACHE_CAPACITY and $LRU_CACHE_CAPACITY are unset; None keeps torch's 1,024",
    )

    # -- /v1/search
    qdrant_url: str | None = Field(None, description="Qdrant server for /v1/search (API key: $QDRANT_API_KEY)")
    qdrant_path: Path | None = Field(
        None,
        description="embedded Qdrant directory for /v1/search (None, with no qdrant_url: the store ingest "
        "and search use, $C2V_RAG_QDRANT_PATH or the user data directory)",
    )
    qdrant_store: StoreKind | None = Field(
        None, description="the embedded engine of qdrant_path (default: detected from the directory)"
    )
    collection: str = Field("c2v_rag", description="default collection for /v1/search")
    prefer_grpc: bool = Field(False, description="talk gRPC to the Qdrant server")

    graceful_shutdown_s: float = Field(30.0, ge=0, description="how long in-flight requests may take on shutdown")

    @model_validator(mode="after")
    def _store_is_a_directory(self) -> ServerConfig:
        # Checked at start: a file given as the store made every /v1/search a 500 after a minute of loading.
        if self.qdrant_path is not None:
            check_store_directory(self.qdrant_path)
        return self

    @model_validator(mode="after")
    def _key_from_env(self) -> ServerConfig:
        if self.api_key is None and os.environ.get(API_KEY_ENV):
            self.api_key = SecretStr(os.environ[API_KEY_ENV])
        if self.api_key is not None and not self.api_key.get_secret_value():
            self.api_key = None
        return self

    def connection(self) -> ConnectionOptions:
        """The store /v1/search reads, as the library's :class:`~c2v_rag.rag.options.ConnectionOptions`
        (the API key of a Qdrant server comes from ``$QDRANT_API_KEY``: ``api_key`` is the server's own)."""
        return ConnectionOptions(
            qdrant_url=self.qdrant_url, path=self.qdrant_path, prefer_grpc=self.prefer_grpc, store=self.qdrant_store
        )
