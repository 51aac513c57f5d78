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
from .chunking import TokenChunker
from .collection import DEFAULT_COLLECTION, QdrantConfig, check_payload_indexes, ensure_collection, model_fingerprint
from .deps import require_rag
from .documents import SourceDocument, iter_documents
from .embedder import Embedder, load_model
from .errors import IngestError
from .ids import content_hash, point_id
from .layout import CollectionLayout
from .payload import DOC_ID_KEY, chunk_metadata, chunk_payload
from .retry import call_with_retry
from .sparse import BM25Config, BM25Encoder, resolve_sparse

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

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
        default="raise", description="stop at the first failed batch, or record it and go on"
    )
    show_progress: bool = True
    sparse: BM25Config | None = Field(
        default=None, description="'bm25' (or a BM25Config): also store a BM25 sparse vector per chunk, for "
                                  "sparse and hybrid search")
    payload_indexes: dict[str, str] = Field(
        default_factory=dict, description="metadata key -> Qdrant index type (keyword, integer, float, ...)")

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
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def chunks_per_second(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        text = (f"{self.documents} documents, {self.chunks} chunks ({self.chunks_written} written, "
                f"{self.chunks_unchanged} unchanged) into {self.collection!r} at {self.location} in "
                f"{self.seconds:.1f} s ({self.chunks_per_second:.1f} chunks/s)")
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
    model: "str | Path | Causal2Vec | None" = None,
    device: str | None = None,
    dtype: str | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    batch_size: int | None = None,
    on_error: Literal["raise", "continue"] | None = None,
    show_progress: bool | None = None,
    sparse: "Literal['bm25'] | BM25Config | None" = None,
    payload_indexes: dict[str, str] | None = None,
    versioned: bool = False,
    config: IngestConfig | None = None,
    qdrant: QdrantConfig | None = None,
    client: "QdrantClient | None" = None,
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
        chunk_size, chunk_overlap, batch_size, on_error, show_progress: override ``config``.
        sparse: ``"bm25"`` also stores a BM25 sparse vector per chunk (vectors named
            ``text-dense`` and ``text-sparse-new``), for ``search(mode="sparse"|"hybrid")``.
        payload_indexes: metadata key -> index type (``keyword``, ``integer``, ``float``, ``bool``,
            ``datetime``, ``text``, ``uuid``), created on the collection for fast filters on a server.
        versioned: ``collection`` is an alias: a new name gets a ``{collection}_v1`` collection and
            the alias once every chunk is written (readers never see it half-built); an existing
            alias takes the chunks into its current collection. :func:`c2v_rag.reindex` later
            rebuilds it with another model and switches the alias.
        config, qdrant: the full option sets (:class:`IngestConfig`, :class:`QdrantConfig`).
        client: an open ``QdrantClient`` to use instead of connecting (left open).

    Returns:
        An :class:`IngestResult`. With ``on_error="raise"`` (default) a batch that still fails
        after retries raises :class:`IngestError` naming its document ids; re-running the same
        call then resumes with no duplicates.
    """
    require_rag("c2v_rag.ingest")
    overrides = {"chunk_size": chunk_size, "chunk_overlap": chunk_overlap, "batch_size": batch_size,
                 "on_error": on_error, "show_progress": show_progress, "sparse": sparse,
                 "payload_indexes": payload_indexes}
    settings = IngestConfig.model_validate(
        {**(config or IngestConfig()).model_dump(), **{k: v for k, v in overrides.items() if v is not None}}
    )
    target = QdrantConfig.resolve(qdrant, qdrant_url, path, api_key, prefer_grpc)
    documents = iter_documents(docs)  # checks the input's type and paths before the model loads
    reference, c2v = _resolve_model(model, device, dtype)
    embedder = Embedder(c2v, task=settings.task, text_instruction=settings.text_instruction, normalize=True,
                        batch_size=settings.batch_size, max_tokens_per_batch=settings.max_tokens_per_batch)
    chunker = TokenChunker(c2v, settings.chunk_size, settings.chunk_overlap)
    bm25 = settings.sparse  # "bm25" became a BM25Config when the settings were validated
    layout = CollectionLayout.for_ingest(target, bm25)
    sparse_encoder = BM25Encoder(bm25) if bm25 is not None else None  # fails fast when bm25s is missing
    own_client = client is None
    qdrant_client = target.connect() if own_client else client
    try:
        # An alias is written through to its collection; versioned=True publishes the alias only
        # once the collection is complete.
        collection, publish_as = (versioned_target(qdrant_client, collection) if versioned
                                  else (resolve_alias(qdrant_client, collection), None))
        created = ensure_collection(qdrant_client, collection, target, model_fingerprint(c2v, reference), layout,
                                    settings.payload_indexes)
        total = _count_documents(docs)
        run = _IngestRun(qdrant_client, collection, target, settings, embedder, chunker, created, total,
                         layout=layout, sparse_encoder=sparse_encoder)
        result = run.execute(documents)
        if publish_as is not None:
            if result.ok:
                switch_alias(qdrant_client, publish_as, collection)
            else:
                logger.warning("Alias %r not created: %d batches failed; re-run the ingest to finish %r and "
                               "publish it", publish_as, len(result.failed), collection)
        return result
    finally:
        if own_client:
            qdrant_client.close()


def _count_documents(docs: Any) -> int | None:
    """The number of documents when known up front, for the progress bar: a list without paths
    (a path may hold any number of documents)."""
    if isinstance(docs, (list, tuple)) and not any(isinstance(d, os.PathLike) for d in docs):
        return len(docs)
    return None


def _resolve_model(model, device, dtype) -> tuple[str | None, "Causal2Vec"]:
    """The model's reference as a collection records it (None for a loaded model), and the model."""
    # reindex.py uses this too: one place decides what a collection records as its model.
    from ..modeling import Causal2Vec
    from ..presets import DEFAULT_PRESET

    if isinstance(model, Causal2Vec):
        return None, model
    if model is not None and not isinstance(model, (str, Path)):
        raise TypeError(f"model must be a preset name, a variant directory or a Causal2Vec, got {type(model).__name__}")
    loaded = load_model(model, device=device, dtype=dtype)
    if model is None:
        return DEFAULT_PRESET, loaded
    as_path = Path(model).expanduser()
    return (str(as_path.resolve()) if as_path.is_dir() else str(model)), loaded


@dataclass
class _Pending:
    point_id: str
    text: str
    payload: dict[str, Any]


@dataclass
class _Batch:
    """Chunks embedded and uploaded together, and the documents that end in them."""

    chunks: list[_Pending] = field(default_factory=list)
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
                 embedder: Embedder, chunker: TokenChunker, created: bool, total: int | None, *,
                 layout: CollectionLayout | None = None, sparse_encoder: BM25Encoder | None = None) -> None:
        self.client = client
        self.collection = collection
        self.target = target
        self.settings = settings
        self.embedder = embedder
        self.chunker = chunker
        # Nothing can be stored or stale in a collection this run created.
        self.fresh = created
        self.result = IngestResult(collection=collection, location=target.location)
        self.seen: dict[str, str] = {}
        self.batch = _Batch()
        # Embedded Qdrant is not safe for concurrent calls; a server takes the next batch's
        # stored-chunk check while the previous batch uploads.
        self.client_lock = threading.Lock() if _is_embedded(client) else contextlib.nullcontext()
        self.failed_docs: set[str] = set()
        self.stop = threading.Event()
        self.queue: queue.Queue[_Batch | None] = queue.Queue(maxsize=settings.prefetch_batches)
        self.layout = layout or CollectionLayout(dense=target.vector_name)
        self.sparse_encoder = sparse_encoder
        # Counts chunks as they are embedded; tqdm's rate is then chunks/s. The chunk total is
        # unknown until every document is chunked, so the documents seen so far go in the postfix.
        self.progress = tqdm(desc=f"Ingesting into {collection}", unit="chunk", disable=not settings.show_progress)
        self.total_documents = total
        self.started = time.perf_counter()

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
        finally:
            self._put(None)
            uploader.join()
            self.progress.close()
            self.result.seconds = time.perf_counter() - self.started
        if self.result.failed and self.settings.on_error == "raise":
            failed = self.result.failed[0]
            shown = ", ".join(failed.doc_ids[:10]) + (" ..." if len(failed.doc_ids) > 10 else "")
            raise IngestError(
                f"a batch of {failed.chunks} chunks from documents [{shown}] failed: {failed.error}. "
                f"Stored so far: {self.result.chunks_written} chunks. Re-run the same ingest to resume; "
                "stored chunks are skipped and nothing is duplicated.",
                failed.doc_ids, self.result,
            )
        if self.result.failed:
            logger.warning("Ingest finished with %d failed batches (documents: %s); re-run to retry them",
                           len(self.result.failed), ", ".join(d for f in self.result.failed for d in f.doc_ids[:5]))
        return self.result

    def _add(self, doc: SourceDocument) -> None:
        # 16 hex digits tell repeats from clashes; the map holds one entry per document of the run.
        fingerprint = content_hash(doc.text, doc.metadata)[:16]
        previous = self.seen.get(doc.doc_id)
        if previous is not None:
            if previous != fingerprint:
                raise ValueError(
                    f"document id {doc.doc_id!r} appears twice in the input with different content"
                    f"{f' (second one from {doc.source})' if doc.source else ''}; document ids must be unique"
                )
            self.result.duplicate_documents += 1
            return
        self.seen[doc.doc_id] = fingerprint
        self.result.documents += 1
        ids = []
        for chunk in self.chunker.chunk(doc.text):
            metadata = chunk_metadata(doc, chunk)
            pid = point_id(doc.doc_id, chunk.index, content_hash(chunk.text, metadata))
            self.batch.chunks.append(_Pending(pid, chunk.text, chunk_payload(doc, chunk, pid, metadata)))
            self.batch.add_doc(doc.doc_id)
            ids.append(pid)
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
            todo = self._not_stored(batch.chunks)
            batch.unchanged = len(batch.chunks) - len(todo)
            vectors = self.embedder.embed_documents([c.text for c in todo]) if todo else []
        except Exception as err:
            self._fail(batch, err)
            return
        sparse = self.sparse_encoder.encode_documents([c.text for c in todo]) if self.sparse_encoder and todo else None
        batch.points = [
            _point(c.point_id, self.layout.point_vector(v, sparse[i] if sparse else None), c.payload)
            for i, (c, v) in enumerate(zip(todo, vectors))
        ]
        # Chunks count as done once embedded (stored ones once skipped), so the bar moves with the work.
        self.progress.update(len(batch.chunks))
        self._put(batch)

    def _not_stored(self, chunks: list[_Pending]) -> list[_Pending]:
        if self.fresh or not chunks:
            return chunks
        ids = [c.point_id for c in chunks]
        records = self._call(lambda: self.client.retrieve(self.collection, ids, with_payload=False,
                                                          with_vectors=False), "checking stored chunks")
        stored = {str(r.id) for r in records}
        return [c for c in chunks if c.point_id not in stored]

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
        from qdrant_client.http import models

        if batch.points:
            self._call(lambda: self.client.upsert(self.collection, batch.points, wait=True),
                       f"uploading {len(batch.points)} chunks")
        done = {d: ids for d, ids in batch.completed.items() if d not in self.failed_docs}
        if done and not self.fresh:
            keep: list[Any] = [pid for ids in done.values() for pid in ids]
            stale = models.Filter(
                must=[models.FieldCondition(key=DOC_ID_KEY, match=models.MatchAny(any=list(done)))],
                must_not=[models.HasIdCondition(has_id=keep)] if keep else None,
            )
            self._call(lambda: self.client.delete(self.collection, models.FilterSelector(filter=stale), wait=True),
                       f"deleting stale chunks of {len(done)} documents")
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
        logger.error("Batch of documents %s failed: %s", batch.doc_ids[:10], err)
        self.failed_docs.update(batch.doc_ids)
        self.result.failed.append(FailedBatch(doc_ids=list(batch.doc_ids), chunks=len(batch.chunks),
                                              error=f"{type(err).__name__}: {err}"))
        if self.settings.on_error == "raise":
            self.stop.set()


def _is_embedded(client: Any) -> bool:
    """Whether ``client`` runs Qdrant in this process; unknown clients count as embedded (safe)."""
    inner = type(getattr(client, "_client", None)).__name__
    return inner not in ("QdrantRemote", "AsyncQdrantRemote")


def _point(pid: str, vector: Any, payload: dict[str, Any]):
    from qdrant_client.http import models

    return models.PointStruct(id=pid, vector=vector, payload=payload)
