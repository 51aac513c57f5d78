"""The in-process ingest engine (``engine="local"``): documents are chunked and embedded here, one
batch at a time, while a background thread uploads the batches already embedded.

Data flows one way. The calling thread reads documents, chunks them and embeds one batch at a
time (:class:`~c2v_rag.rag.ingestion.pipeline.IngestCore`); a background thread uploads finished
batches into the collection (:class:`~c2v_rag.rag.ingestion.sinks.BackgroundWrites` around a
:class:`~c2v_rag.rag.ingestion.sinks.QdrantSink`), so embedding batch k+1 overlaps uploading batch k.
A bounded queue between the two keeps memory flat on any corpus size.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from c2v_rag.core.interrupts import caused_by_ctrl_c
from c2v_rag.cpu.build_progress import build_bar_shown
from c2v_rag.documents.chunking import TokenChunker
from c2v_rag.documents.documents import InputSize, input_size, iter_documents
from c2v_rag.documents.files import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument
from c2v_rag.rag.embedding import Embedder
from c2v_rag.rag.errors import IngestError, IngestInterrupted
from c2v_rag.rag.ingestion.config import IngestConfig
from c2v_rag.rag.ingestion.engine import IngestPlan, IngestStore, raise_failed
from c2v_rag.rag.ingestion.pipeline import (
    BatchEmbedder,
    DocumentBatcher,
    EmbeddedBatch,
    FailedBatches,
    IngestCore,
    IngestProgress,
)
from c2v_rag.rag.ingestion.points import PointWriter
from c2v_rag.rag.ingestion.sinks import BackgroundWrites, QdrantSink, Retry, retrying_call
from c2v_rag.rag.results import IngestResult
from c2v_rag.store.collection import QdrantConfig, model_fingerprint
from c2v_rag.store.sparse import BM25Encoder
from c2v_rag.store.vectors import CollectionVectors

if TYPE_CHECKING:
    from c2v_rag.model.causal2vec import Causal2Vec

logger = logging.getLogger(__name__)


class LocalEngine:
    """The :class:`~c2v_rag.rag.ingestion.engine.IngestEngine` that runs in this process."""

    def __init__(self, *, model: Any, settings: IngestConfig, ray: Any = None) -> None:
        # Nothing to refuse: every model form and every setting runs here (``ray=`` is unused).
        self.documents: Iterator[SourceDocument] = iter(())
        self.log = ReadLog()
        self.size = InputSize("doc", None)
        self.embedder: Embedder | None = None
        self.chunker: TokenChunker | None = None

    def open_input(self, docs: Any, read: ReadOptions, log: ReadLog) -> None:
        self.documents = iter_documents(docs, options=read, log=log)
        self.log = log
        # The paths were listed as they were opened: the progress bar's total is known before any reading.
        self.size = input_size(docs, log)

    def fingerprint(self, plan: IngestPlan) -> dict[str, Any]:
        with build_bar_shown(plan.settings.show_progress):  # a first int8 load's bar, like the ingest's
            c2v: Causal2Vec = plan.model.load(default_quantize=plan.quantization)
        self.embedder = Embedder.for_documents(c2v, plan.settings)
        settings = plan.settings
        self.chunker = TokenChunker(c2v, settings.chunk_size, settings.chunk_overlap, context=settings.context)
        return model_fingerprint(
            c2v,
            plan.model.reference,
            settings.prefix_dim,
            settings.document_prompt,
            settings.chunk_context,
            settings.decoder_max_length,
        )

    def run(self, plan: IngestPlan, store: IngestStore) -> IngestResult:
        if self.embedder is None or self.chunker is None:
            raise RuntimeError("LocalEngine.run needs the model: call fingerprint(plan) first")
        run = LocalIngestRun(
            store.client,
            store.collection,
            plan.target,
            plan.settings,
            self.embedder,
            self.chunker,
            store.created,
            self.size,
            self.log,
            plan.roots,
            layout=plan.layout,
            sparse_encoder=plan.sparse_encoder,
        )
        result = run.execute(self.documents)
        suggest_edge(store.client, store.collection, plan.target, result)
        return result


# Past this many points, opening a local-mode store (it reads every point into Python objects) takes seconds and
# gigabytes that Edge does not, at every command-line search: docs/performance.md, "Stores".
LOCAL_MODE_POINTS_HINT = 10_000


def suggest_edge(client: Any, collection: str, target: QdrantConfig, result: IngestResult) -> None:
    """Say once per run when a local-mode collection has grown past what local mode is for."""
    if target.is_server or target.is_edge or not result.chunks_written:
        return
    points = client.count(collection, exact=True).count
    if points > LOCAL_MODE_POINTS_HINT:
        logger.warning(
            "collection %r holds %d points in qdrant-client's local mode, which reads them all into memory at each "
            "open and searches them by brute force in Python; Qdrant Edge indexes them (HNSW): "
            "c2v-rag migrate --path %s --collection %s --to-path NEWDIR "
            "--to-store edge, then use NEWDIR (docs/ingest-and-search.md, Stores)",
            collection,
            points,
            target.path,
            collection,
        )


class LocalIngestRun:
    """One in-process run: chunks and embeds on the calling thread, uploads on a background one."""

    def __init__(
        self,
        client,
        collection: str,
        target: QdrantConfig,
        settings: IngestConfig,
        embedder: Embedder,
        chunker: TokenChunker,
        created: bool,
        size: InputSize,
        log: ReadLog,
        roots: list[str],
        *,
        layout: CollectionVectors | None = None,
        sparse_encoder: BM25Encoder | None = None,
    ) -> None:
        self.settings = settings
        self.result = IngestResult(collection=collection, location=target.location)
        self.failures = FailedBatches(self.result, settings.on_error)
        # Embedded Qdrant is not safe for concurrent calls; a server takes the next batch's
        # stored-chunk check while the previous batch uploads.
        lock = threading.Lock() if _is_embedded(client) else None
        # Nothing can be stored or stale in a collection this run created.
        writer = PointWriter(
            client,
            collection,
            layout or CollectionVectors(dense=target.vector_name),
            retrying_call(Retry.of(settings), lock),
            fresh=created,
            scan_once=_is_local_mode(client),
        )
        self.sink = QdrantSink(writer, failed_docs=self.failures.doc_ids)
        self.uploads = BackgroundWrites(self.sink, settings.prefetch_batches, self.failures, written=self._count)
        self.started = time.perf_counter()
        # The summary's seconds are counted from the same start, so the bar's rate agrees with it.
        self.progress = IngestProgress(
            f"Ingesting into {collection}", size, show=settings.show_progress, started=self.started
        )
        self.core = IngestCore(
            DocumentBatcher(
                chunker,
                settings.batch_size,
                log if size.unit == "file" else None,
                # A collection this run created holds nothing to skip.
                unchanged=None if created else self.sink.unchanged_documents,
                clashes=log if settings.on_error == "continue" else None,
            ),
            BatchEmbedder(embedder, sparse_encoder),
            self.failures,
            self.progress,
        )
        self.log = log
        self.roots = roots

    def execute(self, documents: Iterable[SourceDocument]) -> IngestResult:
        self.uploads.start()
        try:
            self.core.run(documents, self.uploads)
        except KeyboardInterrupt:
            # Stop at once (no new embedding); the batches already embedded are still written below.
            self._finish()
            raise self._interrupted() from None
        except Exception as err:
            self._finish()
            if caused_by_ctrl_c(err):  # Ctrl-C inside a library that wraps what it catches (pydantic-core does)
                raise self._interrupted() from None
            # A bad file or record (or document): the core handed on what was read before it, so that a
            # re-run after the fix resumes past it.
            # The caller reports the error itself; this adds what survives it.
            logger.info(
                "Ingest stopped at an error; %d chunks were stored before it (a re-run skips them): %s",
                self.result.chunks_written,
                err,
            )
            raise
        self._finish()
        raise_failed(self.result, self.settings)
        if self.roots:
            self._sync()
        return self.result

    def _interrupted(self) -> IngestInterrupted:
        return IngestInterrupted(
            f"interrupted; {self.result.chunks_written} chunks were stored. Re-run the same ingest to "
            "resume: stored chunks are skipped and nothing is duplicated.",
            self.result,
        )

    def _finish(self) -> None:
        """Let the uploader write what is queued and stop; then record the counts, and show them on the bar."""
        try:
            self.uploads.close()
        finally:
            batcher = self.core.batcher
            self.result.documents = batcher.documents
            self.result.duplicate_documents = batcher.duplicate_documents
            self.result.empty_documents = batcher.empty_documents
            self.result.documents_unchanged = batcher.unchanged_documents
            self.result.documents_changed = self.sink.writer.replaced.documents
            self.result.old_chunks_deleted = self.sink.writer.replaced.chunks
            self.result.chunks = batcher.chunks
            self.result.seconds = time.perf_counter() - self.started
            self.result.record_reading(self.log)
            self.progress.close(self.result.chunks, self.result.seconds)

    def _count(self, embedded: EmbeddedBatch) -> None:
        """On the upload thread, once a batch is stored."""
        self.result.chunks_written += len(embedded.chunks)
        self.result.chunks_unchanged += embedded.unchanged

    def _sync(self) -> None:
        if self.result.failed:
            logger.warning(
                "Sync skipped: %d batches failed, so this run is not a complete picture of the sources; "
                "re-run to store them and sync",
                len(self.result.failed),
            )
            return
        try:
            report = self.sink.delete_gone(self.roots, self.core.batcher.seen, self.log)
        except Exception as err:
            raise IngestError(
                f"every document was stored, but deleting the ones gone from the sources failed: "
                f"{type(err).__name__}: {err}. Re-run the same ingest to finish the sync.",
                [],
                self.result,
            ) from err
        self.result.documents_deleted = report.documents_deleted
        self.result.chunks_deleted = report.chunks_deleted


def _is_embedded(client: Any) -> bool:
    """Whether ``client`` runs Qdrant in this process; unknown clients count as embedded (safe)."""
    inner = type(getattr(client, "_client", None)).__name__
    return inner not in ("QdrantRemote", "AsyncQdrantRemote")


def _is_local_mode(client: Any) -> bool:
    """Whether ``client`` is qdrant-client's local mode (Qdrant in Python, in this process)."""
    return type(getattr(client, "_client", None)).__name__ == "QdrantLocal"
