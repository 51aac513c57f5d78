"""Where the vectors live: the Qdrant connection, and creating or checking a collection.

With no URL, Qdrant runs embedded in this process and keeps its files in a local directory (the
embedded default, under the user data directory), on one of the embedded engines (``store=``):
qdrant-client's local mode (``"local"``, Python objects and exact search, for small stores and
framework interop) or Qdrant Edge (``"edge"``, Qdrant's segment engine: HNSW, payload indexes,
quantization). An existing directory's engine is detected. With a URL it talks to a Qdrant server,
where sharding, replication, float16 storage, quantization and on-disk vectors take effect; local
mode accepts them and ignores them (a warning names the ones set), Edge honours all but sharding and
replication. Each is a backend of :mod:`c2v_rag.store.backends`' registry, which
:meth:`QdrantConfig.connect` asks for the client.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import re
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from c2v_rag.core.devices import INTERCHANGEABLE_QUANTIZE, LEGACY_INT8
from c2v_rag.core.wording import in_words
from c2v_rag.documents.payload_keys import RECORD_METADATA_KEY
from c2v_rag.store.backends import (
    DEFAULT_STORE,
    StoreKind,
    backend_for,
    backend_named,
    check_collection_name,
    check_store_directory,
    check_store_kind,
    check_store_name,
    store_kind,
)
from c2v_rag.store.errors import CollectionMismatchError, CollectionNotFoundError, server_error
from c2v_rag.store.point_schema import DEFAULT_SPARSE_NAME, DOC_ID_KEY, metadata_field
from c2v_rag.store.server_backend import API_KEY_ENV  # noqa: F401 (kept importable from here)
from c2v_rag.store.store_backend import StoreBackend, StoreClient
from c2v_rag.store.vectors import LAYOUT_KEY, CollectionVectors

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient
    from qdrant_client.http import models

    from c2v_rag.hub.variants import VariantDigests
    from c2v_rag.model.causal2vec import Causal2Vec

logger = logging.getLogger(__name__)

DEFAULT_COLLECTION = "c2v_rag"
LOCAL_PATH_ENV = "C2V_RAG_QDRANT_PATH"
# The key of a collection's metadata under which c2v_rag records its model fingerprint and layout.
FINGERPRINT_METADATA_KEY = RECORD_METADATA_KEY
# A config's prompt_format before the model loads: the format its decoder's tokenizer names, detected at load.
AUTO_PROMPT_FORMAT = "auto"
# The config fields, beside the weights, that change what the model makes of a document: a variant whose config.json
# was edited on one of them (a prompt format, the layers it runs) makes other vectors from the same weights.
FORWARD_FIELDS = (
    "decoder_layers",
    "placement",
    "attention",
    "echo",
    "echo_template",
    "prompt_format",
    "instruction_template",
)
# What makes two models' vectors comparable; a collection records it when created.
_FINGERPRINT_FIELDS = (
    "decoder",
    "encoder",
    "representation",
    "num_contextual_tokens",
    "embedding_dim",
    "normalize_parts",
    "encoder_share",
    "part_weights",
    "weights",
    "adapters",
    "bases",
    "truncate_dim",
    "quantize",
    *FORWARD_FIELDS,
)
# Fields whose absence from an older collection has a known meaning: those were all written in float.
_FINGERPRINT_DEFAULTS = {"quantize": "none", "part_weights": None}
# The readout fields a collection records (its vectors' part weights), which a search of it reads its queries with.
_READOUT_RECORD = ("encoder_share", "part_weights")


def recorded_readout(recorded: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The part weights a collection's vectors were made with (``encoder_share``, ``part_weights``), to read
    its queries the same way; None where it recorded none. A collection from before ``part_weights`` existed
    recorded ``encoder_share`` alone, which is then the whole readout (``part_weights`` None)."""
    if not recorded or recorded.get("encoder_share") is None:
        return None
    return {name: recorded.get(name, _FINGERPRINT_DEFAULTS.get(name)) for name in _READOUT_RECORD}


def default_local_path(store: str | None = None) -> Path:
    """The embedded Qdrant directory: ``$C2V_RAG_QDRANT_PATH`` or the user data directory's folder for
    the engine ``store`` names (``qdrant`` for local mode, ``qdrant-edge`` for ``store="edge"``: the
    engines' files differ)."""
    env = os.environ.get(LOCAL_PATH_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("c2v_rag")) / backend_named(store or DEFAULT_STORE).default_directory


# One lock per embedded store directory (QdrantConfig.turn).
_TURNS: dict[str, threading.RLock] = {}
_TURNS_GUARD = threading.Lock()


class QdrantConfig(BaseModel):
    """How to reach Qdrant and how a new collection stores its vectors.

    ``url`` selects a server; otherwise ``path`` (or the default directory) holds an embedded
    instance. The API key defaults to ``$QDRANT_API_KEY`` for servers and is never logged.
    Storage options (``datatype``, ``quantization``, ``on_disk``, sharding, replication) apply
    when a collection is created; the embedded mode ignores the server-only ones.
    """

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(default=None, description="Qdrant server URL, e.g. https://host:6333")
    path: Path | None = Field(default=None, description="embedded Qdrant directory (no URL)")
    store: StoreKind | None = Field(
        default=None,
        description="the embedded engine: 'local' (qdrant-client's local mode) or 'edge' (Qdrant "
        "Edge); None detects an existing directory's and makes new ones 'local'",
    )
    hnsw_m: int | None = Field(
        default=None,
        ge=4,
        description="HNSW edges per node of a new collection (Edge and servers; None: the backend's default)",
    )
    hnsw_ef_construct: int | None = Field(default=None, ge=4, description="HNSW build depth of a new collection")
    hnsw_ef: int | None = Field(default=None, ge=1, description="HNSW search depth (Edge; recorded per collection)")
    api_key: SecretStr | None = None
    https: bool | None = None
    prefer_grpc: bool = Field(default=False, description="talk gRPC to the server (faster uploads)")
    grpc_port: int = Field(default=6334, ge=1, le=65535)
    timeout: int = Field(default=60, ge=1, description="seconds per request")

    vector_name: str = Field(
        default="",
        description="'' is the unnamed vector both frameworks open by default; "
        "a hybrid collection names it 'text-dense' unless set",
    )
    sparse_vector_name: str = Field(
        default=DEFAULT_SPARSE_NAME,
        min_length=1,
        description="the sparse vector of a hybrid collection (LlamaIndex's default)",
    )
    distance: Literal["cosine", "dot", "euclid"] = "cosine"
    datatype: Literal["float32", "float16"] = "float32"
    quantization: Literal["int8", "binary"] | None = None
    quantization_always_ram: bool = True
    on_disk: bool = Field(default=False, description="keep original vectors on disk (memmap)")
    on_disk_payload: bool | None = None
    shard_number: int | None = Field(default=None, ge=1)
    replication_factor: int | None = Field(default=None, ge=1)
    write_consistency_factor: int | None = Field(default=None, ge=1)

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str | None) -> str | None:
        if url is not None and not re.match(r"^https?://[^/\s]+", url):
            raise ValueError(f"qdrant_url={url!r} must look like http://host:6333 or https://host:6333")
        return url

    @model_validator(mode="after")
    def _check_target(self) -> QdrantConfig:
        if self.url is not None and self.path is not None:
            raise ValueError("pass either qdrant_url (a server) or path (embedded Qdrant), not both")
        if self.url is not None and self.store is not None:
            raise ValueError(
                f"store={self.store!r} picks an embedded engine, but qdrant_url names a server; pass one or the other"
            )
        return self

    @classmethod
    def resolve(
        cls,
        qdrant: QdrantConfig | None = None,
        url: str | None = None,
        path: str | Path | None = None,
        api_key: str | None = None,
        prefer_grpc: bool | None = None,
        store: str | None = None,
    ) -> QdrantConfig:
        """``qdrant`` with the given arguments laid over it, and the default local path filled in.

        ``store`` (``"local"``, ``"edge"``: a registered embedded engine) picks the embedded engine; a
        path another engine wrote is refused here (:class:`~c2v_rag.rag.errors.StoreKindError`), before
        any model loads.
        """
        if store is not None:
            check_store_name(store)
        base = (qdrant or cls()).model_dump()
        updates = {"url": url, "path": path, "api_key": api_key, "prefer_grpc": prefer_grpc, "store": store}
        base.update({k: v for k, v in updates.items() if v is not None})
        if url is not None and path is None:
            base["path"] = None
        if url is not None and store is None:
            base["store"] = None
        config = cls.model_validate(base)
        if config.url is not None or not config.backend.uses_directory:
            return config
        path = config.path if config.path is not None else default_local_path(config.store)
        check_store_directory(path)
        if config.store is None:
            return config.model_copy(update={"path": path, "store": store_kind(path) or DEFAULT_STORE})
        check_store_kind(path, config.store)
        return config.model_copy(update={"path": path})

    @property
    def backend(self) -> StoreBackend:
        """The backend these settings name (:func:`~c2v_rag.store.backends.backend_for`)."""
        return backend_for(self)

    @property
    def is_server(self) -> bool:
        return self.url is not None

    @property
    def absent(self) -> bool:
        """An embedded store whose directory does not exist yet: it holds nothing, and opening it would make one."""
        backend = self.backend
        return backend.uses_directory and not backend.directory(self).exists()

    def check_present(self, name: str, client: Any = None) -> None:
        """A :class:`CollectionNotFoundError` for ``name`` where no open ``client`` is given and this is an embedded
        store whose directory does not exist: a call that reads a collection must not create the store it reads
        (an empty local-mode store made there then refused ``--store edge``)."""
        if client is None and self.absent:
            raise collection_not_found(name, self)

    @property
    def is_edge(self) -> bool:
        """An embedded Qdrant Edge store: for the ingest engines that treat it apart (a Ray run builds its
        HNSW graph once the writing actor has let go of the store)."""
        return self.url is None and self.store == "edge"

    @property
    def location(self) -> str:
        """Where the data lives, for messages (never includes the API key)."""
        return self.backend.location(self)

    def client_kwargs(self) -> dict[str, Any]:
        """Arguments for ``QdrantClient`` (a server or local mode; Edge has its own client)."""
        return self.backend.client_kwargs(self)

    def connect(self) -> StoreClient:
        """A client on the store these settings name, from their backend (a ``QdrantClient`` for a
        server or local mode, an :class:`~c2v_rag.store.edge_client.EdgeClient` for Edge; each
        implements :class:`~c2v_rag.store.store_backend.StoreClient`).

        First, whatever the backend: its packages are checked, a directory another backend wrote is
        refused, and the settings it ignores are named in a warning.
        """
        backend = self.backend
        backend.require(self.location)
        if backend.uses_directory:
            check_store_kind(backend.directory(self), backend.name)
        ignored = backend.ignored_options(self)
        if ignored:
            logger.warning(
                "%s ignores the server options %s", backend.title[:1].upper() + backend.title[1:], ", ".join(ignored)
            )
        return backend.connect(self)

    def turn(self, client: StoreClient | None = None) -> contextlib.AbstractContextManager[Any]:
        """This process's turn on an embedded store's directory, which opens in one client at a time: searches from
        several threads (a web app's requests, LangChain's batch, asyncio's worker threads) wait for each other
        rather than fail on the directory's lock. A server, a store with no directory, and a call given an open
        ``client`` (which holds the store already) need no turn."""
        if client is not None or self.is_server or self.path is None:
            return contextlib.nullcontext()
        key = str(Path(self.path).expanduser().resolve())
        with _TURNS_GUARD:
            # Reentrant: a search inside another's turn in one thread meets the directory's own lock and its error.
            return _TURNS.setdefault(key, threading.RLock())

    @contextlib.contextmanager
    def opened(self, client: StoreClient | None = None) -> Iterator[StoreClient]:
        """``client`` (left open), or a client :meth:`connect` opens for the block and closes after it; either way
        inside :meth:`store_errors`."""
        own = client is None
        held = client if client is not None else self.connect()
        try:
            with self.store_errors():
                yield held
        finally:
            if own:
                held.close()

    @contextlib.contextmanager
    def store_errors(self) -> Iterator[None]:
        """A server's failure inside the block comes out as :class:`~c2v_rag.QdrantUnreachableError` (it did not
        answer) or :class:`~c2v_rag.QdrantRequestError` (it answered an error status), naming its URL and never its
        key, not as the HTTP library's own exception (:func:`~c2v_rag.store.errors.server_error`); anything else,
        and anything from an embedded store, as it is."""
        try:
            yield
        except Exception as err:
            translated = server_error(self.location, err, 1) if self.is_server else err
            if translated is err:
                raise
            raise translated from err

    def connect_async(self) -> AsyncQdrantClient | None:
        """An ``AsyncQdrantClient`` on the store, or None for a backend without one (Edge), whose
        searches run in a worker thread instead."""
        backend = self.backend
        backend.require(self.location)
        return backend.connect_async(self)

    def vector_params(self, dim: int) -> models.VectorParams:
        from qdrant_client.http import models

        return models.VectorParams(
            size=dim,
            distance=qdrant_distance(self.distance),
            on_disk=self.on_disk or None,
            datatype=models.Datatype.FLOAT16 if self.datatype == "float16" else None,
        )

    def quantization_config(self) -> models.ScalarQuantization | models.BinaryQuantization | None:
        from qdrant_client.http import models

        if self.quantization == "int8":
            return models.ScalarQuantization(
                scalar=models.ScalarQuantizationConfig(
                    type=models.ScalarType.INT8, quantile=0.99, always_ram=self.quantization_always_ram
                )
            )
        if self.quantization == "binary":
            return models.BinaryQuantization(
                binary=models.BinaryQuantizationConfig(always_ram=self.quantization_always_ram)
            )
        return None

    def create_collection_kwargs(self, dim: int, layout: CollectionVectors | None = None) -> dict[str, Any]:
        """Arguments for ``create_collection`` (minus the name and metadata); ``layout`` names the
        vectors and adds the sparse one (default: one dense vector named ``vector_name``)."""
        from qdrant_client.http import models

        params = self.vector_params(dim)
        dense = layout.dense if layout is not None else self.vector_name
        kwargs: dict[str, Any] = {
            "vectors_config": {dense: params} if dense or (layout is not None and layout.hybrid) else params,
            "sparse_vectors_config": layout.sparse_vectors_config() if layout is not None else None,
            "quantization_config": self.quantization_config(),
            "shard_number": self.shard_number,
            "replication_factor": self.replication_factor,
            "write_consistency_factor": self.write_consistency_factor,
            "on_disk_payload": self.on_disk_payload,
            "hnsw_config": (
                models.HnswConfigDiff(m=self.hnsw_m, ef_construct=self.hnsw_ef_construct)
                if self.hnsw_m or self.hnsw_ef_construct
                else None
            ),
        }
        return {k: v for k, v in kwargs.items() if v is not None}


def qdrant_distance(name: str) -> models.Distance:
    from qdrant_client.http import models

    return {"cosine": models.Distance.COSINE, "dot": models.Distance.DOT, "euclid": models.Distance.EUCLID}[name]


def model_fingerprint(
    model: Causal2Vec,
    reference: str | None,
    truncate_dim: int | None = None,
    document_prompt: dict[str, str | None] | None = None,
    chunk_context: str | None = None,
    decoder_max_length: int | None = None,
) -> dict[str, Any]:
    """What a collection records about the model that filled it (``truncate_dim``: the prefix size it stores)."""
    from c2v_rag.hub.variants import VariantDigests

    return config_fingerprint(
        model.config,
        reference,
        VariantDigests.of_model(model),
        truncate_dim=truncate_dim,
        quantize=model.quantization,
        document_prompt=document_prompt,
        chunk_context=chunk_context,
        decoder_max_length=decoder_max_length,
    )


def config_fingerprint(
    config: Any,
    reference: str | None,
    digests: VariantDigests | None = None,
    truncate_dim: int | None = None,
    quantize: str = "none",
    document_prompt: dict[str, str | None] | None = None,
    chunk_context: str | None = None,
    decoder_max_length: int | None = None,
) -> dict[str, Any]:
    """:func:`model_fingerprint` from a variant's config alone, before its weights load; ``digests`` tell it
    from another variant with the same config (:class:`~c2v_rag.hub.variants.VariantDigests`: its weight files,
    adapter configs and base models' contents; a collection recorded before one of them was is not compared on
    it), ``truncate_dim`` the Matryoshka prefix
    the vectors keep (None: the whole vector), ``quantize`` the weights' quantization as applied
    (``"none"`` or ``"int8-token-sq"``: :meth:`~c2v_rag.Causal2Vec.apply_quantization`).

    A collection records the kind it was created with; float and int8 vectors of one model may still share
    it and search each other (:data:`~c2v_rag.core.devices.INTERCHANGEABLE_QUANTIZE`: measured harmless), while
    the removed torch int8 (``"int8"``) is refused. ``document_prompt`` (the ``task``/``instruction`` documents
    were embedded with) is recorded for a reindex, not compared; so are ``chunk_context`` and ``decoder_max_length``
    (None: whole chunks, left out), which an ingest into the collection reads
    (:meth:`~c2v_rag.IngestConfig.for_collection`)."""
    truncate_dim = None if truncate_dim == config.embedding_dim else truncate_dim
    return {
        "format": 1,
        "model": reference,
        "decoder": config.decoder,
        "encoder": config.encoder,
        "representation": config.representation,
        "num_contextual_tokens": config.num_contextual_tokens,
        "embedding_dim": truncate_dim or config.embedding_dim,
        "normalize_parts": config.normalize_parts,
        "encoder_share": config.encoder_share,
        "part_weights": config.part_weights,
        "weights": digests and digests.weights,
        "adapters": digests and digests.adapters,
        "bases": digests and digests.bases,
        "truncate_dim": truncate_dim,
        "quantize": quantize,
        **_forward_record(config),
        **({"document_prompt": document_prompt} if document_prompt is not None else {}),
        # How the chunks were cut (IngestConfig.chunk_context): an ingest into the collection cuts them the same.
        **({"chunk_context": chunk_context} if chunk_context is not None else {}),
        # The decoder tokens each chunk was read with (IngestConfig.decoder_max_length), where not the whole chunk.
        **({"decoder_max_length": decoder_max_length} if decoder_max_length is not None else {}),
    }


def _forward_record(config: Any) -> dict[str, Any]:
    """The :data:`FORWARD_FIELDS` of ``config`` as a record holds them (JSON); the echo template only where echo is
    on, as it changes nothing else."""
    record = config.model_dump(mode="json", include=set(FORWARD_FIELDS))
    if not config.echo:
        del record["echo_template"]
    return record


def collection_fingerprint(client: StoreClient, name: str) -> dict[str, Any] | None:
    """The model fingerprint a c2v_rag collection was created with, if any."""
    return fingerprint_of(client.get_collection(name))


def fingerprint_of(info: Any) -> dict[str, Any] | None:
    """The model fingerprint recorded in a collection's info (``get_collection``), if any."""
    metadata = getattr(info.config, "metadata", None) or {}
    value = metadata.get(FINGERPRINT_METADATA_KEY)
    return dict(value) if isinstance(value, dict) else None


_UNVERIFIED_WARNED: set[tuple[str, str]] = set()
_UNRECORDED_WARNED: set[tuple[str, str]] = set()
_MIXED_NOTED: set[tuple[str, str]] = set()


def check_model(
    stored: dict[str, Any] | None, fingerprint: dict[str, Any], name: str, location: str, asked: str | None = None
) -> None:
    """Raise :class:`CollectionMismatchError` when the collection's recorded model is another one (``asked``: the
    name the caller gave, where it is an alias of ``name``, which the advice then names):
    vectors of two models are not comparable even when their sizes agree. A collection that records no model
    (another tool made it) is used with a warning, once per collection: its vectors' size matches, nothing more is
    known."""
    if stored is None:
        if (location, name) not in _UNRECORDED_WARNED:
            _UNRECORDED_WARNED.add((location, name))
            logger.warning(
                "collection %r at %s records no model (another tool made it, or a Qdrant server before 1.16 dropped "
                "the record): its vectors are used as this model's, and scores mean nothing if another model made "
                "them. Ingest into a collection c2v_rag makes to have it checked",
                name,
                location,
            )
        return
    # Collections written before a field was recorded lack it: compare what they have.
    stored = {**_FINGERPRINT_DEFAULTS, **stored}
    differ = fingerprint_differences(stored, fingerprint)
    mixed = _mixed_kinds(stored["quantize"], fingerprint.get("quantize"))
    if mixed and (location, name) not in _MIXED_NOTED:
        _MIXED_NOTED.add((location, name))  # once per collection
        logger.info(
            "collection %r at %s holds quantize=%r vectors; these are quantize=%r: the two kinds of "
            "one model search each other alike (measured), so they are used together",
            name,
            location,
            stored["quantize"],
            fingerprint.get("quantize"),
        )
    if "weights" not in stored and fingerprint.get("weights") and (location, name) not in _UNVERIFIED_WARNED:
        _UNVERIFIED_WARNED.add((location, name))  # once per collection, not on every search
        logger.warning(
            "collection %r at %s predates weight fingerprints: c2v_rag cannot tell whether these weights "
            "(%s) built it. If it was built with an earlier release of this model, re-ingest it.",
            name,
            location,
            fingerprint["weights"],
        )
    if differ:
        behind = f" (behind the alias {asked!r})" if asked not in (None, name) else ""
        raise CollectionMismatchError(
            f"collection {name!r}{behind} at {location} was built with another model "
            f"({', '.join(f'{f}={stored.get(f)!r}' for f in differ)}; this one has "
            f"{', '.join(f'{f}={fingerprint.get(f)!r}' for f in differ)}). Vectors of different "
            "models cannot be compared: use another collection, or the model that built it"
            + (f" (quantize={stored['quantize']!r})." if "quantize" in differ else ".")
            + (
                " Its quantize='int8' is torch's dynamic int8, which c2v_rag no longer applies (its vectors were far "
                "from the float ones): re-ingest the collection."
                if "quantize" in differ and stored.get("quantize") == LEGACY_INT8
                else ""
            )
            + _readout_fix(stored, differ)
            + (
                " A base model's files changed since it was built (a package upgraded, a checkpoint saved over "
                "another): reinstall the one that built it, or re-embed the collection with this one."
                if "bases" in differ
                else ""
            )
            + _reindex_advice(name, asked)
        )


def _reindex_advice(name: str, asked: str | None) -> str:
    """How to move collection ``name`` (behind the alias ``asked``, where the caller gave one) to another model."""
    if asked not in (None, name):
        return (
            f" To move it to this model: 'c2v-rag reindex --collection {asked} --model MODEL' (c2v_rag.reindex) "
            f"re-embeds its chunks into a new collection and switches {asked!r} to it; or ingest the documents "
            "again into a new collection."
        )
    return (
        f" To move it to this model: 'c2v-rag reindex --collection {name} --model MODEL' (c2v_rag.reindex) "
        "re-embeds its chunks behind the same name where it is an alias (ingest --versioned); add --convert "
        "(convert=True) where it is a plain collection, or ingest the documents again into a new collection."
    )


def fingerprint_differences(stored: Mapping[str, Any], fingerprint: Mapping[str, Any]) -> list[str]:
    """The fields of a model fingerprint on which ``stored`` (a record: a collection's, an embed folder's) names
    vectors that ``fingerprint``'s model cannot be compared with. Fields either side lacks are not compared (a record
    that predates them: a collection's, or an older embed folder's files loaded into a newer collection); float and
    int8 vectors of one model search each other alike (measured), and a base model is compared only where both
    recorded its contents."""
    # Both sides read a missing field as its default: two records from before a field (two files of one older embed
    # run) do not differ on it.
    stored, fingerprint = {**_FINGERPRINT_DEFAULTS, **stored}, {**_FINGERPRINT_DEFAULTS, **fingerprint}
    return [
        f
        for f in _FINGERPRINT_FIELDS
        if f in stored
        and f in fingerprint
        and stored[f] != fingerprint[f]
        and not (f == "quantize" and _mixed_kinds(stored[f], fingerprint.get(f)))
        and not (f == "bases" and not _bases_differ(stored[f], fingerprint.get(f)))
        # 'auto' is the format the decoder's tokenizer names (compared as the decoder): a variant's config says 'auto'
        # before it loads and the detected format after.
        and not (f == "prompt_format" and AUTO_PROMPT_FORMAT in (stored[f], fingerprint.get(f)))
    ]


def _mixed_kinds(stored: str | None, current: str | None) -> bool:
    """Whether two quantize kinds differ only as float and int8 vectors of one model do, which search each other
    alike (measured): no mismatch."""
    kinds = {stored, current}
    return len(kinds) > 1 and kinds <= INTERCHANGEABLE_QUANTIZE


def _bases_differ(stored: Mapping[str, str] | None, current: Mapping[str, str] | None) -> bool:
    """Whether two records of base contents (:func:`~c2v_rag.hub.variants.bases_digests`) name other weights: a
    role is compared where both recorded it, and both as hub ids or both as local folders. A hub snapshot's digest
    covers other files than a folder's, so a collection built from a hub id and searched with a local copy of it is
    not refused; nor is one recorded before hub bases had digests."""
    stored, current = stored or {}, current or {}
    roles = stored.keys() & current.keys()
    if not roles:
        return False
    from c2v_rag.hub.sources import same_kind_of_digest

    return any(stored[r] != current[r] for r in roles if same_kind_of_digest(stored[r], current[r]))


def _readout_fix(stored: dict[str, Any], differ: list[str]) -> str:
    """Where only the part weights differ, the one-line fix for a model object the caller passed (a model named
    is read at the recorded weights by itself, by an ingest and a search alike)."""
    # The vector's size follows the weights (a part left out is not stored): that difference is the weights' too.
    if not set(differ) & set(_READOUT_RECORD) or not set(differ) <= {*_READOUT_RECORD, "embedding_dim"}:
        return ""
    readout = ", ".join(f"{f}={v!r}" for f, v in (recorded_readout(stored) or {}).items())
    return (
        f" Only the part weights differ: a model object reads it after model.set_readout({readout}); an ingest or "
        "a search that names the model (or none, for the default preset) uses the weights it recorded by itself."
    )


def stored_vector_params(info: Any, name: str, config: QdrantConfig) -> models.VectorParams:
    """The collection's params for ``config.vector_name``, or a clear error."""
    vectors = info.config.params.vectors
    if isinstance(vectors, dict):
        if config.vector_name not in vectors:
            raise CollectionMismatchError(
                f"collection {name!r} at {config.location} has named vectors {sorted(vectors)} but none "
                f"named {config.vector_name!r}; pass vector_name= one of them, or use another collection"
            )
        return vectors[config.vector_name]
    if config.vector_name:
        raise CollectionMismatchError(
            f"collection {name!r} at {config.location} has one unnamed vector; pass vector_name='' "
            f"instead of {config.vector_name!r}"
        )
    return vectors


def check_collection(
    client: StoreClient,
    name: str,
    config: QdrantConfig,
    fingerprint: dict[str, Any],
    layout: CollectionVectors | None = None,
    info: Any = None,
    asked: str | None = None,
) -> None:
    """Raise :class:`CollectionMismatchError` when ``name`` cannot take these vectors (``layout``:
    the vectors each point will carry; default one dense vector named ``config.vector_name``).
    ``info``: the collection's ``get_collection``, where the caller has read it (else it is read here, once);
    ``asked``: the name the caller gave, where it is an alias of ``name``."""
    info = client.get_collection(name) if info is None else info
    recorded = fingerprint_of(info)
    if layout is not None:
        stored = CollectionVectors.from_fingerprint(recorded, config.model_copy(update={"vector_name": ""}))
        layout.check_against(stored, name, config.location)
        config = config.model_copy(update={"vector_name": layout.dense})
    else:
        # The dense vector of a collection that records its layout (a hybrid one names it).
        config = config.model_copy(update={"vector_name": CollectionVectors.from_fingerprint(recorded, config).dense})
    params = stored_vector_params(info, name, config)
    dim = fingerprint["embedding_dim"]
    if params.size != dim:
        record = recorded or {}
        if any(field in record and record[field] != fingerprint.get(field) for field in _READOUT_RECORD):
            # Other part weights: that error names the fix.
            check_model(record, fingerprint, name, config.location, asked)
        stored_size = record.get("truncate_dim")
        hint = (
            f"It was built with truncate_dim={stored_size} and this run asks for "
            f"truncate_dim={fingerprint.get('truncate_dim')}: pass truncate_dim={stored_size}, "
            "use another collection (collection=...)"
            if stored_size or fingerprint.get("truncate_dim")
            else "Use another collection (collection=...)"
        )
        raise CollectionMismatchError(
            f"collection {name!r} at {config.location} stores {params.size}-dimensional vectors, but the "
            f"model makes {dim}-dimensional ones. {hint} or the model that built it."
        )
    expected = qdrant_distance(config.distance)
    if params.distance != expected:
        raise CollectionMismatchError(
            f"collection {name!r} at {config.location} uses {params.distance.value} distance, not "
            f"{expected.value}; pass distance='{params.distance.value.lower()}' or use another collection"
        )
    check_model(recorded, fingerprint, name, config.location, asked)


def ensure_collection(
    client: StoreClient,
    name: str,
    config: QdrantConfig,
    fingerprint: dict[str, Any],
    layout: CollectionVectors | None = None,
    payload_indexes: dict[str, str] | None = None,
) -> bool:
    """Create ``name`` for these vectors, or check the existing one; True when created.

    ``layout`` (recorded in the collection) names the vectors and adds a sparse one;
    ``payload_indexes`` maps metadata keys to Qdrant index types, created when missing.
    """
    check_collection_name(name)
    if client.collection_exists(name):
        check_collection(client, name, config, fingerprint, layout)
        _create_payload_indexes(client, name, payload_indexes or {})
        return False
    from qdrant_client.http import models

    kwargs = config.create_collection_kwargs(fingerprint["embedding_dim"], layout)
    metadata = {**fingerprint, LAYOUT_KEY: layout.record()} if layout is not None else fingerprint
    try:
        client.create_collection(name, metadata={FINGERPRINT_METADATA_KEY: metadata}, **kwargs)
    except Exception:
        if client.collection_exists(name):  # created meanwhile by a concurrent ingest
            check_collection(client, name, config, fingerprint, layout)
            return False
        raise
    # Stale-chunk deletion filters on doc_id; on a server that filter needs an index to scale.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")
        client.create_payload_index(name, DOC_ID_KEY, field_schema=models.PayloadSchemaType.KEYWORD, wait=True)
    _create_payload_indexes(client, name, payload_indexes or {})
    if config.is_server and fingerprint_of(client.get_collection(name)) is None:
        # A server before Qdrant 1.16 takes create_collection's metadata and drops it without an error.
        logger.warning(
            "Qdrant at %s did not keep collection %r's metadata (servers before Qdrant 1.16 drop it): c2v_rag "
            "cannot check that later ingests and searches of it use the model that filled it, nor read the part "
            "weights and chunk settings it was made with. Upgrade the server to Qdrant 1.16 or later",
            config.location,
            name,
        )
    logger.info(
        "Created collection %r at %s (%d dims, %s)",
        name,
        config.location,
        fingerprint["embedding_dim"],
        config.distance,
    )
    return True


def require_collection(client: StoreClient, name: str, config: QdrantConfig) -> Any:
    """The collection's info, or :class:`CollectionNotFoundError` with the fix."""
    check_collection_name(name)
    try:  # one round trip to a server where the collection exists, as it does on every search
        return client.get_collection(name)
    except Exception:
        # Each backend says "not found" its own way (a 404, a ValueError, Edge's error): asked plainly here.
        if not client.collection_exists(name):
            raise collection_not_found(name, config, store_names(client)) from None
        raise


def store_names(client: StoreClient) -> list[str]:
    """The names a store answers to: its collections and their aliases, sorted."""
    return held_names(client.get_collections(), client.get_aliases())


def held_names(collections: Any, aliases: Any) -> list[str]:
    """:func:`store_names` from a store's answers to ``get_collections`` and ``get_aliases`` (an async client's
    too)."""
    return sorted({c.name for c in collections.collections} | {a.alias_name for a in aliases.aliases})


# How close a name must be to one the store holds to be offered as the one meant (difflib's ratio).
_CLOSE_NAME = 0.75


def collection_not_found(name: str, config: QdrantConfig, held: Sequence[str] = ()) -> CollectionNotFoundError:
    """The error for a collection ``name`` the store lacks; ``held``, the names it has (:func:`store_names`), are
    listed, the closest first offered, since a mistyped or forgotten name is the common cause."""
    ingest = f"c2v_rag.ingest(..., collection={name!r}) or c2v-rag ingest PATH --collection {name}"
    if config.absent:
        return CollectionNotFoundError(
            f"collection {name!r} does not exist at {config.location}: there is no store there (the directory does "
            f"not exist). Name the store you ingested into (--path, path=), or ingest documents first ({ingest})."
        )
    if not held:
        return CollectionNotFoundError(
            f"collection {name!r} does not exist at {config.location}. Ingest documents first ({ingest}), "
            "or name the collection you ingested into."
        )
    close = difflib.get_close_matches(name, held, n=1, cutoff=_CLOSE_NAME)
    meant = f"; did you mean {close[0]!r}?" if close else "."
    listed = in_words([repr(n) for n in held[:10]]) + (f" and {len(held) - 10} more" if len(held) > 10 else "")
    return CollectionNotFoundError(
        f"collection {name!r} does not exist at {config.location}, which holds {listed}{meant} Name one of them "
        f"(--collection, collection=), or ingest documents into {name!r} first ({ingest})."
    )


# Metadata value types a payload index can be declared for, as ingest(payload_indexes=) names them.
PAYLOAD_INDEX_TYPES = ("keyword", "integer", "float", "bool", "datetime", "text", "uuid")


def check_payload_indexes(indexes: dict[str, str] | None) -> dict[str, str]:
    """``{metadata key: index type}``, checked; a clear error names a wrong type and the allowed ones."""
    if not indexes:
        return {}
    if not isinstance(indexes, dict):
        raise TypeError(f"payload_indexes must be a dict of metadata key -> index type, got {type(indexes).__name__}")
    for key, kind in indexes.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"payload_indexes keys must be metadata key strings, got {key!r}")
        if kind not in PAYLOAD_INDEX_TYPES:
            raise ValueError(
                f"payload_indexes[{key!r}]={kind!r} is not an index type; use one of {', '.join(PAYLOAD_INDEX_TYPES)}"
            )
    return dict(indexes)


def payload_index_fields(indexes: dict[str, str]) -> dict[str, models.PayloadSchemaType]:
    """Payload paths (metadata keys live under ``metadata.``) and their Qdrant schema types."""
    from qdrant_client.http import models

    return {metadata_field(key): models.PayloadSchemaType(kind) for key, kind in indexes.items()}


def _create_payload_indexes(client: StoreClient, name: str, indexes: dict[str, str]) -> None:
    # Filters on an unindexed field scan every point on a server; creating an index that exists
    # already is a no-op there, so this runs on every ingest that declares them.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")
        for field, schema in payload_index_fields(check_payload_indexes(indexes)).items():
            client.create_payload_index(name, field, field_schema=schema, wait=True)
