"""``ingest``: documents -> chunks -> batches -> model -> vectors -> Qdrant, idempotently.

Data flows one way. The calling thread reads documents, chunks them and embeds one batch at a
time; a background thread uploads finished batches, so embedding batch k+1 overlaps uploading
batch k. A bounded queue between the two keeps memory flat on any corpus size.

Idempotence rests on deterministic point ids (document id, chunk index, content hash):

- chunks already stored are neither embedded nor written again, so a re-run adds nothing and a
  run that failed half-way resumes where it stopped;
- once all of a document's new chunks are stored, its other points (an older version's) are
  deleted, so a changed document leaves no stale chunks. A document whose upload failed keeps
  its old points until a re-run succeeds: nothing is lost.

Around the run: everything knowable without the model is checked before it loads
(``preflight``), a sync deletes documents gone from their source folders after a complete run
(``sync``), and a run that stops before writing anything removes the collection it created.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from tqdm.auto import tqdm

from .aliases import resolve_alias, switch_alias, versioned_target
from .chunking import TokenChunker, check_chunk_size
from .collection import (DEFAULT_COLLECTION, QdrantConfig, check_payload_indexes, config_fingerprint, ensure_collection,
                         model_fingerprint)
from .deps import require_rag
from .documents import SourceDocument, iter_documents
from .embedder import Embedder, load_model
from .errors import IngestError, IngestInterrupted
from .files import ReadLog, ReadOptions, SkippedInput
from .layout import CollectionLayout
from .points import PendingChunk, PointWriter, SeenDocuments, document_chunks, document_fingerprint
from .preflight import check_target, drop_if_empty, model_reference, open_client, server_error, variant_config, variant_weights
from .retry import call_with_retry
from .sniffing import DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_UNDECODABLE_SHARE
from .sparse import BM25Config, BM25Encoder, resolve_sparse
from .sync import delete_gone_documents, sync_roots

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

    from .distributed import RayOptions

    from ..modeling import Causal2Vec

logger = logging.getLogger(__name__)


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
        default=DEFAULT_MAX_FILE_BYTES, ge=1,
        description=".txt/.md files larger than this are skipped with a warning (None: no limit); .jsonl is streamed",
    )
    max_undecodable_share: float = Field(
        default=DEFAULT_MAX_UNDECODABLE_SHARE, ge=0, le=1,
        description="files with a larger share of bytes that are not UTF-8 are skipped as not text",
    )
    show_progress: bool = True
    sparse: BM25Config | None = Field(
        default=None, description="'bm25' (or a BM25Config): also store a BM25 sparse vector per chunk, for "
                                  "sparse and hybrid search")
    payload_indexes: dict[str, str] = Field(
        default_factory=dict, description="metadata key -> Qdrant index type (keyword, integer, float, ...)")
    truncate_dim: int | None = Field(
        default=None, ge=1,
        description="store shorter vectors (Matryoshka): one of the sizes the variant was trained for; the "
                    "collection records it, and search embeds queries at the same size")

    @field_validator("sparse", mode="before")
    @classmethod
    def _sparse(cls, value: Any) -> Any:
        return resolve_sparse(value) if value is None or isinstance(value, str) else value

    @model_validator(mode="after")
    def _check(self) -> "IngestConfig":
        check_payload_indexes(self.payload_indexes)
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(f"chunk_overlap={self.chunk_overlap} must be smaller than chunk_size={self.chunk_size}")
        if self.task is not None and self.text_instruction is not None:
            raise ValueError("pass either task= or text_instruction=, not both")
        return self

    @classmethod
    def with_overrides(cls, config: "IngestConfig | None", **overrides: Any) -> "IngestConfig":
        """``config`` (or the defaults) with the keyword arguments that are not None laid over it,
        validated together: how ``ingest`` and ``embed`` merge their keywords with ``config=``."""
        return cls.model_validate(
            {**(config or cls()).model_dump(), **{k: v for k, v in overrides.items() if v is not None}})

    def read_options(self) -> ReadOptions:
        """What reading the sources needs of these settings."""
        return ReadOptions(max_file_bytes=self.max_file_bytes, max_undecodable_share=self.max_undecodable_share,
                           on_error=self.on_error)


class FailedBatch(BaseModel):
    """A batch that could not be embedded or written, after retries."""

    doc_ids: list[str]
    chunks: int
    error: str


class IngestResult(BaseModel):
    """What an ingest did. ``chunks_unchanged`` were already stored and skipped."""

    collection: str
    location: str
    documents: int = 0
    duplicate_documents: int = 0
    chunks: int = 0
    chunks_written: int = 0
    chunks_unchanged: int = 0
    failed: list[FailedBatch] = Field(default_factory=list)
    files_skipped: int = 0
    records_skipped: int = 0
    skipped: list[SkippedInput] = Field(default_factory=list, description="the first 1,000 skipped inputs")
    documents_deleted: int = Field(default=0, description="documents gone from their source, deleted by a sync")
    chunks_deleted: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Every batch that was read got stored. Inputs skipped on purpose (files that are not
        text or over ``max_file_bytes``, and with ``on_error="continue"`` unreadable files and bad
        records) do not make it False: they are counted in ``files_skipped``/``records_skipped``,
        listed in ``skipped`` and were warned about one by one."""
        return not self.failed

    @property
    def chunks_per_second(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        text = (f"{self.documents} documents, {self.chunks} chunks ({self.chunks_written} written, "
                f"{self.chunks_unchanged} unchanged) into {self.collection!r} at {self.location} in "
                f"{self.seconds:.1f} s ({self.chunks_per_second:.1f} chunks/s)")
        if self.files_skipped or self.records_skipped:
            text += f"; skipped {self.files_skipped} files and {self.records_skipped} records"
        if self.documents_deleted:
            text += f"; sync deleted {self.documents_deleted} documents ({self.chunks_deleted} chunks)"
        if self.failed:
            text += f"; {len(self.failed)} batches failed"
        return text


def ingest(
    docs: Any,
    qdrant_url: str | None = None,
    collection: str = DEFAULT_COLLECTION,
    *,
    path: str | Path | None = None,
    api_key: str | None = None,
    prefer_grpc: bool | None = None,
    store: Literal["local", "edge"] | None = None,
    model: "str | Path | Causal2Vec | None" = None,
    device: str | None = None,
    dtype: str | None = None,
    quantize: str | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    batch_size: int | None = None,
    on_error: Literal["raise", "continue"] | None = None,
    sync: bool | None = None,
    show_progress: bool | None = None,
    sparse: "Literal['bm25'] | BM25Config | None" = None,
    payload_indexes: dict[str, str] | None = None,
    versioned: bool = False,
    truncate_dim: int | None = None,
    config: IngestConfig | None = None,
    qdrant: QdrantConfig | None = None,
    client: "QdrantClient | None" = None,
    engine: Literal["local", "ray"] = "local",
    ray: "RayOptions | str | None" = None,
) -> IngestResult:
    """Chunk, embed and store ``docs`` in a Qdrant collection; safe to re-run.

    Args:
        docs: strings, dicts (``text``, ``metadata``, optional ``id``), LlamaIndex Documents or
            Nodes, LangChain Documents, paths to files or folders of .txt/.md/.jsonl, or an
            iterable of these (streamed).
        qdrant_url: a Qdrant server; None uses embedded Qdrant in ``path`` (default: the user
            data directory, or ``$C2V_RAG_QDRANT_PATH``).
        collection: created on first use for the model's vectors; an existing one must match
            the model's vector size, the distance and the model itself.
        api_key: for the server; defaults to ``$QDRANT_API_KEY``. Never logged.
        model: a preset name, a variant directory or a loaded :class:`~c2v_rag.Causal2Vec`;
            None is the default preset. Loaded models are shared with other callers.
        quantize: ``"int8"`` embeds with int8 linear layers on a CPU; ``"auto"`` only where int8 met
            the quality bound, on no CPU yet (:meth:`~c2v_rag.Causal2Vec.from_pretrained`). The collection records it, and
            an existing collection of the other kind is refused before the weights load.
        sync: make the collection mirror the given files and folders (``docs`` must be paths).
            By default (False) an ingest only adds and updates: a document deleted or renamed
            in a folder keeps its points. With True, after a complete run, the points recorded
            under each given path whose document was not read this time are deleted. Points
            written from other paths or from non-path inputs are never touched; a missing
            path is an error before anything runs; files that could not be read keep their
            points; nothing is deleted after a failed batch (see :mod:`c2v_rag.rag.sync`).
        chunk_size, chunk_overlap, batch_size, on_error, show_progress: override ``config``.
            ``on_error="continue"`` also skips unreadable files and bad JSONL records, each
            reported (``file:line``) and counted in the result.
        sparse: ``"bm25"`` also stores a BM25 sparse vector per chunk (vectors named
            ``text-dense`` and ``text-sparse-new``), for ``search(mode="sparse"|"hybrid")``.
        payload_indexes: metadata key -> index type (``keyword``, ``integer``, ``float``, ``bool``,
            ``datetime``, ``text``, ``uuid``), created on the collection for fast filters on a server.
        versioned: ``collection`` is an alias: a new name gets a ``{collection}_v1`` collection and
            the alias once every chunk is written (readers never see it half-built); an existing
            alias takes the chunks into its current collection. :func:`c2v_rag.reindex` later
            rebuilds it with another model and switches the alias.
        truncate_dim: store shorter vectors (Matryoshka): one of the sizes the variant was trained
            for (``config.matryoshka_dims``). The collection records it and refuses another size;
            :func:`~c2v_rag.search` embeds queries at the size the collection stores.
        config, qdrant: the full option sets (:class:`IngestConfig`, :class:`QdrantConfig`).
        client: an open ``QdrantClient`` to use instead of connecting (left open).
        engine: ``"local"`` runs in this process; ``"ray"`` reads, chunks, embeds and writes on a Ray
            cluster (:mod:`c2v_rag.rag.distributed`, ``pip install 'c2v-rag[ray]'``): the same point ids,
            payloads and vectors, and the same guarantees, except ``sync=True`` (refused).
        ray: with ``engine="ray"``: a :class:`~c2v_rag.rag.distributed.RayOptions` or a cluster address.

    Everything that needs no model is checked before it loads: the paths and their suffixes,
    the store (a locked embedded directory, an unreachable server, after the configured
    retries), the collection's vector size, distance and model. Files that are not text (NUL
    bytes, a binary format's signature, mostly undecodable) or over ``max_file_bytes`` are
    skipped with one warning each. A run that stops before writing a point removes the
    collection it created.

    Returns:
        An :class:`IngestResult`. With ``on_error="raise"`` (default) a batch that still fails
        after retries raises :class:`IngestError` naming its document ids, and a bad file or
        record raises its error once what was read before it is stored; re-running the same
        call then resumes with no duplicates. Ctrl-C raises :class:`IngestInterrupted` (a
        ``KeyboardInterrupt``) once the batches already embedded are stored.
    """
    require_rag("c2v_rag.ingest")
    settings = IngestConfig.with_overrides(
        config, chunk_size=chunk_size, chunk_overlap=chunk_overlap, batch_size=batch_size, on_error=on_error,
        sync=sync, show_progress=show_progress, sparse=sparse, payload_indexes=payload_indexes,
        truncate_dim=truncate_dim)
    target = QdrantConfig.resolve(qdrant, qdrant_url, path, api_key, prefer_grpc, store)
    if engine not in ("local", "ray"):
        raise ValueError(f"engine={engine!r}: use 'local' (this process) or 'ray' (a Ray cluster)")
    if engine == "ray":
        from .distributed import RayOptions, require_ray

        require_ray("ingest(engine='ray')")
        ray_options = RayOptions.resolve(ray)
        _check_ray_ingest(model, settings)
    # 1. The input: types, paths, suffixes, folders' files (no file is read yet).
    log = ReadLog()
    read = settings.read_options()
    if engine == "ray":
        from .distributed import plan_sources

        plan = plan_sources(docs, read, log)
    else:
        documents = iter_documents(docs, options=read, log=log)
    roots = sync_roots(docs) if settings.sync else []
    # 2. The model's config (not its weights): chunk size, and what the collection must match.
    reference = model_reference(model)
    model_config = variant_config(model)
    weights, quantization = variant_weights(model), applied_quantization(model, quantize, device)
    check_chunk_size(settings.chunk_size, model_config.max_length)
    bm25 = settings.sparse  # "bm25" became a BM25Config when the settings were validated
    layout = CollectionLayout.for_ingest(target, bm25)
    sparse_encoder = BM25Encoder(bm25) if bm25 is not None else None  # fails fast when bm25s is missing
    # 3. The store: lock, reachability, and an existing collection's size, distance and model.
    own_client = client is None
    qdrant_client = (open_client(target, attempts=settings.retry_attempts, initial_wait=settings.retry_initial_wait,
                                 max_wait=settings.retry_max_wait) if own_client else client)
    created = False
    try:
        # An alias is written through to its collection; versioned=True publishes the alias only
        # once the collection is complete.
        collection, publish_as = (versioned_target(qdrant_client, collection) if versioned
                                  else (resolve_alias(qdrant_client, collection), None))
        try:
            check_target(qdrant_client, collection, target, model_config, reference, layout,
                         weights=weights, truncate_dim=settings.truncate_dim, quantize=quantization)
        except Exception as err:
            store_error = server_error(target, err, 1)
            if store_error is err:
                raise
            raise store_error from err
        # 4. The model, then the run.
        if engine == "ray":
            from .distributed import RayIngestRun

            # The actors load the model by its reference (a preset name or an absolute variant
            # directory, the same on every node); the driver needs its config alone.
            created = ensure_collection(qdrant_client, collection, target,
                                        config_fingerprint(model_config, reference, weights=weights,
                                                           truncate_dim=settings.truncate_dim, quantize=quantization),
                                        layout, settings.payload_indexes)
            ray_run = RayIngestRun(qdrant_client, collection, target, settings, layout,
                                   model=reference, device=device, dtype=dtype, quantize=quantize,
                                   created=created, options=ray_options, own_client=own_client)
            try:
                result = ray_run.execute(docs, plan, read)
            finally:
                qdrant_client = ray_run.client  # reopened when the one actor held an embedded store
            _raise_failed(result, settings)
            return _publish(qdrant_client, collection, target, created, result, publish_as)
        c2v = model if reference is None else load_model(model, device=device, dtype=dtype, quantize=quantize)
        embedder = Embedder.for_documents(c2v, settings)
        chunker = TokenChunker(c2v, settings.chunk_size, settings.chunk_overlap)
        created = ensure_collection(qdrant_client, collection, target,
                                    model_fingerprint(c2v, reference, settings.truncate_dim), layout,
                                    settings.payload_indexes)
        total = _count_documents(docs)
        run = _IngestRun(qdrant_client, collection, target, settings, embedder, chunker, created, total, log, roots,
                         layout=layout, sparse_encoder=sparse_encoder)
        result = run.execute(documents)
        _suggest_edge(qdrant_client, collection, target, result)
        return _publish(qdrant_client, collection, target, created, result, publish_as)
    except BaseException:
        if created:
            drop_if_empty(qdrant_client, collection, target)
        raise
    finally:
        if own_client:
            qdrant_client.close()


def _publish(client, collection: str, target: QdrantConfig, created: bool, result: IngestResult,
             publish_as: str | None) -> IngestResult:
    """After a run: drop a collection it created and left empty; switch a versioned alias."""
    if created and result.chunks_written == 0 and result.failed:
        drop_if_empty(client, collection, target)
    if publish_as is not None:
        if result.ok:
            switch_alias(client, publish_as, collection)
        else:
            logger.warning("Alias %r not created: %d batches failed; re-run the ingest to finish %r and "
                           "publish it", publish_as, len(result.failed), collection)
    return result


# Above this many points local mode's brute-force search and in-memory points get slow and large
# (112 ms a query and 2.2 GB at 20,000 x 1,536; qdrant-client warns there too): docs/stores.md.
LOCAL_MODE_POINTS_HINT = 20_000


def _suggest_edge(client: Any, collection: str, target: QdrantConfig, result: IngestResult) -> None:
    """Say once per run when a local-mode collection has grown past what local mode is for."""
    if target.is_server or target.is_edge or not result.chunks_written:
        return
    points = client.count(collection, exact=True).count
    if points > LOCAL_MODE_POINTS_HINT:
        logger.warning(
            "collection %r holds %d points in qdrant-client's local mode, which searches them by brute force in "
            "Python; Qdrant Edge indexes them (HNSW): c2v-rag migrate --path %s --collection %s --to-path NEWDIR "
            "--to-store edge, then use NEWDIR (docs/stores.md)", collection, points, target.path, collection)


def _check_ray_ingest(model: Any, settings: IngestConfig) -> None:
    """What ``engine="ray"`` cannot do, refused before anything runs."""
    if settings.sync:
        raise ValueError("sync=True is not supported with engine='ray': a sync needs one process to see every "
                         "document read. Ingest with engine='ray', then run the same ingest with sync=True on "
                         "the local engine (every chunk is stored already, so it embeds nothing)")
    if model is not None and not isinstance(model, (str, Path)):
        raise TypeError("engine='ray' loads the model in every actor from its name: pass a preset name or a "
                        "variant directory (save a loaded model with save_pretrained(dir)), not a model object")


def _raise_failed(result: IngestResult, settings: IngestConfig) -> None:
    """With ``on_error="raise"``, a failed batch becomes an :class:`IngestError` naming its documents."""
    if result.failed and settings.on_error == "raise":
        failed = result.failed[0]
        shown = ", ".join(failed.doc_ids[:10]) + (" ..." if len(failed.doc_ids) > 10 else "")
        raise IngestError(
            f"a batch of {failed.chunks} chunks from documents [{shown}] failed: {failed.error}. "
            f"Stored so far: {result.chunks_written} chunks. Re-run the same ingest to resume; "
            "stored chunks are skipped and nothing is duplicated.",
            failed.doc_ids, result,
        )
    if result.failed:
        logger.warning("Ingest finished with %d failed batches (documents: %s); re-run to retry them",
                       len(result.failed), ", ".join(d for f in result.failed for d in f.doc_ids[:5]))


def _count_documents(docs: Any) -> int | None:
    """The number of documents when known up front, for the progress bar: a list without paths
    (a path may hold any number of documents)."""
    if isinstance(docs, (list, tuple)) and not any(isinstance(d, os.PathLike) for d in docs):
        return len(docs)
    return None


def applied_quantization(model: "str | Path | Causal2Vec | None", quantize: str | None, device: str | None) -> str:
    """What a collection records as ``quantize`` before the weights load: a loaded model's own, else
    ``quantize`` resolved for ``device``."""
    from ..devices import resolve_device, resolve_quantize
    from ..modeling import Causal2Vec

    if isinstance(model, Causal2Vec):
        if quantize is not None and resolve_quantize(quantize, model.device) != model.quantization:
            raise ValueError(f"quantize={quantize!r} does not apply to a loaded model (it is quantize="
                             f"{model.quantization!r}): load it with Causal2Vec.from_pretrained(..., quantize=...)")
        return model.quantization
    return resolve_quantize(quantize, resolve_device(device))


def _resolve_model(model, device, dtype, quantize=None) -> tuple[str | None, "Causal2Vec"]:
    """The model's reference as a collection records it (None for a loaded model), and the model."""
    # reindex.py uses this too: preflight.model_reference decides what a collection records as its model.
    reference = model_reference(model)
    return reference, (model if reference is None else load_model(model, device=device, dtype=dtype,
                                                                    quantize=quantize))


@dataclass
class _Batch:
    """Chunks embedded and uploaded together, and the documents that end in them."""

    chunks: list[PendingChunk] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    # doc id -> all its point ids, for documents whose last chunk is in this batch: once the
    # batch is stored, their other points are stale.
    completed: dict[str, list[str]] = field(default_factory=dict)
    points: list[Any] = field(default_factory=list)
    unchanged: int = 0

    def add_doc(self, doc_id: str) -> None:
        if not self.doc_ids or self.doc_ids[-1] != doc_id:
            self.doc_ids.append(doc_id)


class _IngestRun:
    def __init__(self, client, collection: str, target: QdrantConfig, settings: IngestConfig,
                 embedder: Embedder, chunker: TokenChunker, created: bool, total: int | None,
                 log: ReadLog, roots: list[str], *, layout: CollectionLayout | None = None,
                 sparse_encoder: BM25Encoder | None = None) -> None:
        self.client = client
        self.collection = collection
        self.target = target
        self.settings = settings
        self.embedder = embedder
        self.chunker = chunker
        self.result = IngestResult(collection=collection, location=target.location)
        self.seen = SeenDocuments()
        self.batch = _Batch()
        # Embedded Qdrant is not safe for concurrent calls; a server takes the next batch's
        # stored-chunk check while the previous batch uploads.
        self.client_lock = threading.Lock() if _is_embedded(client) else contextlib.nullcontext()
        self.failed_docs: set[str] = set()
        self.stop = threading.Event()
        self.queue: queue.Queue[_Batch | None] = queue.Queue(maxsize=settings.prefetch_batches)
        self.layout = layout or CollectionLayout(dense=target.vector_name)
        # Nothing can be stored or stale in a collection this run created.
        self.writer = PointWriter(client, collection, self.layout, self._call, fresh=created)
        self.sparse_encoder = sparse_encoder
        # Counts chunks as they are embedded; tqdm's rate is then chunks/s. The chunk total is
        # unknown until every document is chunked, so the documents seen so far go in the postfix.
        self.progress = tqdm(desc=f"Ingesting into {collection}", unit="chunk", disable=not settings.show_progress)
        self.total_documents = total
        self.started = time.perf_counter()
        self.log = log
        self.roots = roots

    # ------------------------------------------------------------------ calling thread

    def execute(self, documents: Iterable[SourceDocument]) -> IngestResult:
        uploader = threading.Thread(target=self._upload_loop, name="c2v-rag-upload", daemon=True)
        uploader.start()
        try:
            for doc in documents:
                if self.stop.is_set():
                    break
                self._add(doc)
            if not self.stop.is_set():
                self._flush()
        except KeyboardInterrupt:
            # Stop at once (no new embedding); the batches already embedded are still written below.
            self._finish(uploader)
            raise IngestInterrupted(
                f"interrupted; {self.result.chunks_written} chunks were stored. Re-run the same ingest to "
                "resume: stored chunks are skipped and nothing is duplicated.", self.result) from None
        except Exception as err:
            # A bad file or record (or document): store what was read before it, so that a re-run
            # after the fix resumes past it.
            if not self.stop.is_set():
                with contextlib.suppress(Exception):
                    self._flush()
            self._finish(uploader)
            # The caller reports the error itself; this adds what survives it.
            logger.info("Ingest stopped at an error; %d chunks were stored before it (a re-run skips them): %s",
                        self.result.chunks_written, err)
            raise
        self._finish(uploader)
        _raise_failed(self.result, self.settings)
        if self.roots:
            self._sync()
        return self.result

    def _finish(self, uploader: threading.Thread) -> None:
        """Let the uploader write what is queued and stop; then record the counts."""
        self._put(None)
        uploader.join()
        self.progress.close()
        self.result.seconds = time.perf_counter() - self.started
        self.result.files_skipped = self.log.files_skipped
        self.result.records_skipped = self.log.records_skipped
        self.result.skipped = list(self.log.skipped)

    def _sync(self) -> None:
        if self.result.failed:
            logger.warning("Sync skipped: %d batches failed, so this run is not a complete picture of the sources; "
                           "re-run to store them and sync", len(self.result.failed))
            return
        try:
            report = delete_gone_documents(self.client, self.collection, self.roots, self.seen, self.log, self._call)
        except Exception as err:
            raise IngestError(
                f"every document was stored, but deleting the ones gone from the sources failed: "
                f"{type(err).__name__}: {err}. Re-run the same ingest to finish the sync.", [], self.result,
            ) from err
        self.result.documents_deleted = report.documents_deleted
        self.result.chunks_deleted = report.chunks_deleted

    def _add(self, doc: SourceDocument) -> None:
        if not self.seen.is_new(doc.doc_id, document_fingerprint(doc), doc.source):
            self.result.duplicate_documents += 1
            return
        self.result.documents += 1
        ids = []
        for chunk in document_chunks(doc, self.chunker):  # streamed: batches fill as it splits
            self.batch.chunks.append(chunk)
            self.batch.add_doc(doc.doc_id)
            ids.append(chunk.point_id)
            if len(self.batch.chunks) >= self.settings.batch_size:
                self._flush()
        self.result.chunks += len(ids)
        self.batch.add_doc(doc.doc_id)
        self.batch.completed[doc.doc_id] = ids

    def _flush(self) -> None:
        batch, self.batch = self.batch, _Batch()
        if not batch.doc_ids:
            return
        try:
            todo = self.writer.not_stored(batch.chunks)
            batch.unchanged = len(batch.chunks) - len(todo)
            vectors = self.embedder.embed_documents([c.text for c in todo]) if todo else []
        except Exception as err:
            self._fail(batch, err)
            return
        sparse = self.sparse_encoder.encode_documents([c.text for c in todo]) if self.sparse_encoder and todo else None
        batch.points = self.writer.points(todo, vectors, sparse)
        # Chunks count as done once embedded (stored ones once skipped), so the bar moves with the work.
        self.progress.update(len(batch.chunks))
        self._put(batch)

    def _put(self, batch: _Batch | None) -> None:
        # A bounded put that gives up once the uploader has stopped, so a failure never deadlocks.
        while True:
            try:
                self.queue.put(batch, timeout=0.2)
                return
            except queue.Full:
                if self.stop.is_set() and batch is not None:
                    return

    # ------------------------------------------------------------------ upload thread

    def _upload_loop(self) -> None:
        while True:
            batch = self.queue.get()
            if batch is None:
                return
            if self.stop.is_set():
                continue  # drain what was queued before a failure; write nothing more
            try:
                self._upload(batch)
            except Exception as err:
                self._fail(batch, err)

    def _upload(self, batch: _Batch) -> None:
        done = {d: ids for d, ids in batch.completed.items() if d not in self.failed_docs}
        self.writer.write(batch.points, done)
        self.result.chunks_written += len(batch.points)
        self.result.chunks_unchanged += batch.unchanged
        stored = self.result.chunks_written + self.result.chunks_unchanged
        docs = f"{self.result.documents}" + (f"/{self.total_documents}" if self.total_documents else "")
        self.progress.set_postfix(docs=docs, stored=stored, refresh=False)

    def _call(self, fn, what: str):
        def locked():
            with self.client_lock:
                return fn()

        s = self.settings
        return call_with_retry(locked, what=what, attempts=s.retry_attempts, initial_wait=s.retry_initial_wait,
                               max_wait=s.retry_max_wait)

    def _fail(self, batch: _Batch, err: Exception) -> None:
        # With on_error="raise" the IngestError says this; with "continue" it is the only trace.
        level = logging.WARNING if self.settings.on_error == "continue" else logging.INFO
        logger.log(level, "Batch of documents %s failed: %s", batch.doc_ids[:10], err)
        self.failed_docs.update(batch.doc_ids)
        self.result.failed.append(FailedBatch(doc_ids=list(batch.doc_ids), chunks=len(batch.chunks),
                                              error=f"{type(err).__name__}: {err}"))
        if self.settings.on_error == "raise":
            self.stop.set()


def _is_embedded(client: Any) -> bool:
    """Whether ``client`` runs Qdrant in this process; unknown clients count as embedded (safe)."""
    inner = type(getattr(client, "_client", None)).__name__
    return inner not in ("QdrantRemote", "AsyncQdrantRemote")
