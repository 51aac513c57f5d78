"""The in-process ingest engine (``engine="local"``): documents are chunked and embedded here, one
batch at a time, while a background thread uploads the batches already embedded.

Data flows one way. The calling thread reads documents, chunks them and embeds one batch at a
time; a background thread uploads finished batches, so embedding batch k+1 overlaps uploading
batch k. A bounded queue between the two keeps memory flat on any corpus size.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from c2v_rag.rag.read.chunking import TokenChunker
from c2v_rag.rag.store.collection import QdrantConfig, model_fingerprint
from c2v_rag.rag.read.documents import iter_documents
from c2v_rag.rag.embedding import Embedder, load_model
from c2v_rag.rag.errors import IngestError, IngestInterrupted
from c2v_rag.rag.read.files import ReadLog, ReadOptions
from c2v_rag.rag.ingestion.config import IngestConfig
from c2v_rag.rag.ingestion.engine import IngestPlan, IngestStore, raise_failed
from c2v_rag.rag.results import FailedBatch, IngestResult
from c2v_rag.rag.store.vectors import CollectionLayout
from c2v_rag.rag.ingestion.points import PendingChunk, PointWriter, SeenDocuments, document_chunks, document_fingerprint
from c2v_rag.rag.store.retry import call_with_retry
from c2v_rag.rag.read.source_document import SourceDocument
from c2v_rag.rag.store.sparse import BM25Encoder
from c2v_rag.rag.ingestion.sync import delete_gone_documents

if TYPE_CHECKING:
    from c2v_rag.model.causal2vec import Causal2Vec

logger = logging.getLogger(__name__)


class LocalEngine:
    """The :class:`~c2v_rag.rag.ingestion.engine.IngestEngine` that runs in this process."""

    def __init__(self, *, model: Any, settings: IngestConfig, ray: Any = None) -> None:
        # Nothing to refuse: every model form and every setting runs here (``ray=`` is unused).
        self.documents: Iterator[SourceDocument] = iter(())
        self.log = ReadLog()
        self.total: int | None = None
        self.embedder: Embedder | None = None
        self.chunker: TokenChunker | None = None

    def open_input(self, docs: Any, read: ReadOptions, log: ReadLog) -> None:
        self.documents = iter_documents(docs, options=read, log=log)
        self.log = log
        self.total = _count_documents(docs)

    def fingerprint(self, plan: IngestPlan) -> dict[str, Any]:
        c2v: Causal2Vec = (plan.model if plan.reference is None
                           else load_model(plan.model, device=plan.device, dtype=plan.dtype, quantize=plan.quantize))
        self.embedder = Embedder.for_documents(c2v, plan.settings)
        self.chunker = TokenChunker(c2v, plan.settings.chunk_size, plan.settings.chunk_overlap)
        return model_fingerprint(c2v, plan.reference, plan.settings.truncate_dim)

    def run(self, plan: IngestPlan, store: IngestStore) -> IngestResult:
        if self.embedder is None or self.chunker is None:
            raise RuntimeError("LocalEngine.run needs the model: call fingerprint(plan) first")
        run = LocalIngestRun(store.client, store.collection, plan.target, plan.settings, self.embedder, self.chunker,
                             store.created, self.total, self.log, plan.roots, layout=plan.layout,
                             sparse_encoder=plan.sparse_encoder)
        result = run.execute(self.documents)
        suggest_edge(store.client, store.collection, plan.target, result)
        return result


# Above this many points local mode's brute-force search and in-memory points get slow and large
# (112 ms a query and 2.2 GB at 20,000 x 1,536; qdrant-client warns there too): docs/stores.md.
LOCAL_MODE_POINTS_HINT = 20_000


def suggest_edge(client: Any, collection: str, target: QdrantConfig, result: IngestResult) -> None:
    """Say once per run when a local-mode collection has grown past what local mode is for."""
    if target.is_server or target.is_edge or not result.chunks_written:
        return
    points = client.count(collection, exact=True).count
    if points > LOCAL_MODE_POINTS_HINT:
        logger.warning(
            "collection %r holds %d points in qdrant-client's local mode, which searches them by brute force in "
            "Python; Qdrant Edge indexes them (HNSW): c2v-rag migrate --path %s --collection %s --to-path NEWDIR "
            "--to-store edge, then use NEWDIR (docs/stores.md)", collection, points, target.path, collection)


def _count_documents(docs: Any) -> int | None:
    """The number of documents when known up front, for the progress bar: a list without paths
    (a path may hold any number of documents)."""
    if isinstance(docs, (list, tuple)) and not any(isinstance(d, os.PathLike) for d in docs):
        return len(docs)
    return None


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


class LocalIngestRun:
    """One in-process run: chunks and embeds on the calling thread, uploads on a background one."""

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
        raise_failed(self.result, self.settings)
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
