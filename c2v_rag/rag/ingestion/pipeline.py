"""The ingest pipeline, written once: what happens to each document and each batch, whichever engine runs it.

    documents -> deduplicated -> chunks (point ids, payloads) -> batches
              -> the chunks the sink does not hold yet -> dense vectors -> BM25 vectors -> the sink

- :class:`DocumentBatcher`: documents in, batches of ``batch_size`` chunks out, each document chunked as
  it streams in; a document met again is skipped and two documents sharing an id with other content
  are refused, or with ``on_error="continue"`` the second is skipped and recorded
  (:class:`~c2v_rag.rag.ingestion.points.SeenDocuments`).
- :class:`BatchEmbedder`: one batch through the model. It asks the sink which chunks it does not hold
  yet (so a re-run embeds nothing twice), embeds those, and adds their BM25 vectors when the run
  stores them.
- :class:`Sink`: where embedded batches go. :mod:`c2v_rag.rag.ingestion.sinks` has the Qdrant sink
  (idempotent upserts, stale-chunk deletion, uploads on a background thread) and the Parquet sink;
  the Ray actors' sinks (:mod:`c2v_rag.rag.ingestion.ray_dataflow`) also say what an actor returns.
- :class:`IngestCore`: the loop over documents for the runs in this process (``ingest``'s local
  engine and ``embed``'s): batch, embed, hand to the sink, with a failure policy and a progress bar
  (:class:`IngestProgress`).

On Ray, Ray tasks read and chunk (with the same :func:`~c2v_rag.rag.ingestion.points.document_chunks`),
a batch is a set of whole documents (:meth:`ChunkBatch.of_documents`), and every actor runs
:class:`BatchEmbedder` into its sink, so a point or a Parquet row is the same whichever engine made it.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
from tqdm.auto import tqdm

from c2v_rag.core.interrupts import caused_by_ctrl_c, remembered_interrupts
from c2v_rag.core.progress_bar import CountingBar, unsized_terminal
from c2v_rag.documents.documents import InputSize
from c2v_rag.encode.loop import Truncation, observing
from c2v_rag.rag.ingestion.points import (
    DocumentState,
    PendingChunk,
    SeenDocuments,
    document_chunks,
    document_fingerprint,
    document_hash,
    skip_clash,
)
from c2v_rag.rag.results import FailedBatch, IngestResult

if TYPE_CHECKING:
    from c2v_rag.documents.chunking import TokenChunker
    from c2v_rag.documents.files import ReadLog
    from c2v_rag.documents.source_document import SourceDocument
    from c2v_rag.rag.embedding import Embedder
    from c2v_rag.store.sparse import BM25Encoder

logger = logging.getLogger(__name__)

# A BM25 vector: term indices and their weights.
SparseVector = tuple[list[int], list[float]]


@dataclass
class ChunkBatch:
    """Chunks embedded and written together, and the documents they come from."""

    chunks: list[PendingChunk] = field(default_factory=list)
    # The documents with a chunk here or completed here, in order: what a failed batch names.
    doc_ids: list[str] = field(default_factory=list)
    # doc id -> all its point ids, for the documents whose last chunk is in this batch (or before
    # it): once the batch is stored, their other points are stale.
    completed: dict[str, list[str]] = field(default_factory=dict)
    # For progress: how far the inputs (files, or documents) are covered by this batch's chunks and those before
    # it, counted in inputs: the whole ones, plus the share of the one being read that its chunks so far cover.
    reach: float = 0.0
    # doc id -> its hash (points.document_hash), for the completed documents that have one: once they are stored
    # whole, their points carry it, and a re-run skips them unchanged.
    hashes: dict[str, str] = field(default_factory=dict)
    # The chunks of the documents met here that were stored whole and unchanged: skipped before chunking.
    stored_chunks: int = 0

    def add(self, doc_id: str, chunk: PendingChunk) -> None:
        self.chunks.append(chunk)
        self._name(doc_id)

    def complete(self, doc_id: str, point_ids: list[str], doc_hash: str | None = None) -> None:
        """Every chunk of ``doc_id`` has been added (to this batch or an earlier one)."""
        self._name(doc_id)
        self.completed[doc_id] = point_ids
        if doc_hash is not None:
            self.hashes[doc_id] = doc_hash

    @property
    def is_empty(self) -> bool:
        """It names no document and counts no stored chunk: nothing to hand on."""
        return not self.doc_ids and not self.stored_chunks

    def _name(self, doc_id: str) -> None:
        if not self.doc_ids or self.doc_ids[-1] != doc_id:
            self.doc_ids.append(doc_id)

    @classmethod
    def of_documents(cls, documents: Iterable[tuple[str, list[PendingChunk], str | None]]) -> ChunkBatch:
        """A batch of whole documents (doc id, its chunks, its hash), each completed in it. A document id met twice
        is taken once, as it was first met: the one the run keeps when the two differ (SeenDocuments)."""
        whole: dict[str, tuple[list[PendingChunk], str | None]] = {}
        for doc_id, chunks, doc_hash in documents:
            whole.setdefault(doc_id, (chunks, doc_hash))
        batch = cls()
        for doc_id, (chunks, doc_hash) in whole.items():
            for chunk in chunks:
                batch.add(doc_id, chunk)
            batch.complete(doc_id, [c.point_id for c in chunks], doc_hash)
        return batch


@dataclass
class EmbeddedBatch:
    """A batch after the model: the chunks the sink did not hold yet, with their vectors in the same order."""

    batch: ChunkBatch
    chunks: list[PendingChunk]
    # (len(chunks), dim) float32, unit length.
    vectors: np.ndarray
    # One BM25 vector per chunk when the run stores them, else None.
    sparse: list[SparseVector] | None = None

    @property
    def unchanged(self) -> int:
        """The batch's chunks the sink held already: neither embedded nor written again (those of documents
        skipped unchanged included)."""
        return len(self.batch.chunks) - len(self.chunks) + self.batch.stored_chunks


class Sink(Protocol):
    """Where embedded batches go: a Qdrant collection, Parquet files, or the rows a Ray actor returns."""

    def not_stored(self, chunks: Sequence[PendingChunk]) -> list[PendingChunk]:
        """The chunks to embed, in order: those the sink does not hold yet (all of them for a sink that
        cannot tell)."""
        ...

    def write(self, embedded: EmbeddedBatch) -> None:
        """Store an embedded batch."""
        ...


# doc states -> doc id -> its stored chunks, for those the sink holds whole under the same hash and root.
UnchangedLookup = Callable[[Sequence[DocumentState]], Mapping[str, int]]

# Documents looked up in one request, and the most text they may hold and the longest they may wait while others are
# read: enough to save requests, few enough that the batch behind them is not held up (one batch of 256 chunks of 200
# tokens is about 200K characters; a folder of slow PDFs reads a few a second).
LOOKUP_DOCUMENTS = 64
LOOKUP_CHARS = 256_000
LOOKUP_SECONDS = 1.0


@dataclass
class _Waiting:
    """A document read and waiting for its lookup, with its place among the inputs as it was when it was read."""

    doc: SourceDocument
    doc_hash: str
    # [start, start + share) of the inputs is this document; done_before: the inputs read whole before it.
    start: float
    share: float
    done_before: int


class DocumentBatcher:
    """Documents -> batches of ``batch_size`` chunks; a document is chunked as it streams in, so a batch
    is handed on as soon as it is full, even in the middle of a long document.

    With an ``unchanged`` lookup (a collection that may hold the documents already), documents wait in groups of
    up to :data:`LOOKUP_DOCUMENTS` (or :data:`LOOKUP_CHARS` of text, or :data:`LOOKUP_SECONDS` of reading) and one
    request asks which of them are stored whole under the same hash
    (:func:`~c2v_rag.rag.ingestion.points.document_hash`): those are counted as unchanged without being chunked or
    embedded. Chunking is most of what an unchanged re-run costs.

    Counts what it met as the results report it (``documents``, ``duplicate_documents``, ``empty_documents``,
    ``chunks``) and keeps the ids of the documents met (``seen``: what a sync compares the collection with).
    ``files`` is the reading's log when the input is files: how many have been read whole
    (:attr:`~c2v_rag.documents.files.ReadLog.files_done`) and where in the file being read a document lies; else
    the inputs are the documents. Each batch is stamped with how far its chunks reach (:attr:`ChunkBatch.reach`),
    within a document by where its last chunk ends, so that one long file still moves the bar. ``clashes``, the
    reading's log under ``on_error="continue"``, records a document whose id was met before with other content,
    which is skipped; without it such a document is refused.
    """

    def __init__(
        self,
        chunker: TokenChunker,
        batch_size: int,
        files: ReadLog | None = None,
        unchanged: UnchangedLookup | None = None,
        clashes: ReadLog | None = None,
    ) -> None:
        self.chunker = chunker
        self.batch_size = batch_size
        self.files = files
        self.unchanged = unchanged
        self.clashes = clashes
        self.seen = SeenDocuments("raise" if clashes is None else "continue")
        self.documents = 0
        self.duplicate_documents = 0
        self.empty_documents = 0
        self.unchanged_documents = 0
        self.chunks = 0
        self._documents_met = 0
        # The inputs read whole before the last document chunked (or skipped), and how far its chunks reach.
        self._done = 0
        self._reach = 0.0
        self._batch = ChunkBatch()
        self._waiting: list[_Waiting] = []
        self._waiting_chars = 0
        self._waiting_since = 0.0
        self._lookup_failed = False

    @property
    def inputs_done(self) -> int:
        """The inputs read whole so far: files when the input is files, else documents."""
        return self.files.files_done if self.files is not None else self._documents_met

    def add(self, doc: SourceDocument) -> Iterator[ChunkBatch]:
        """The batches ``doc``'s chunks fill (or those of the documents waiting with it), each as soon as it is
        full; none for a document met before.

        Raises:
            ValueError: the document's id was met before with other content, unless the batcher has a ``clashes``
                log (``on_error="continue"``), where the document is skipped and recorded.
        """
        done_before = self.inputs_done
        self._documents_met += 1
        met = self.seen.meet(doc.doc_id, document_fingerprint(doc), doc.source)
        if met == "repeat":
            self.duplicate_documents += 1
        if met != "new":
            if met == "clash" and self.clashes is not None:
                skip_clash(self.clashes, doc.doc_id, doc.source)
            return
        self.documents += 1
        # The document's place among the inputs: [start, end) of the one being read.
        before, after = self.files.document_span if self.files is not None else (0.0, 1.0)
        doc_hash = document_hash(doc, self.chunker)
        waiting = _Waiting(doc, doc_hash, done_before + before, after - before, done_before)
        if self.unchanged is None:
            yield from self._chunk(waiting)
            return
        if not self._waiting:
            self._waiting_since = time.perf_counter()
        self._waiting.append(waiting)
        self._waiting_chars += len(doc.text)
        if (
            len(self._waiting) >= LOOKUP_DOCUMENTS
            or self._waiting_chars >= LOOKUP_CHARS
            or time.perf_counter() - self._waiting_since >= LOOKUP_SECONDS
        ):
            yield from self._look_up()

    def rest(self) -> Iterator[ChunkBatch]:
        """The batches of the documents still waiting, then the batch being filled, handed on as it is."""
        yield from self._look_up()
        if not self._batch.is_empty:
            yield self._take()

    def _look_up(self) -> Iterator[ChunkBatch]:
        """The waiting documents: those stored whole and unchanged counted, the others chunked."""
        waiting, self._waiting, self._waiting_chars = self._waiting, [], 0
        if not waiting:  # documents wait only where there is a lookup
            return
        stored = self._stored(waiting)
        for item in waiting:
            chunks = stored.get(item.doc.doc_id)
            if chunks is None:
                yield from self._chunk(item)
                continue
            self.unchanged_documents += 1
            self.chunks += chunks
            self._batch.stored_chunks += chunks
            self._done = max(self._done, item.done_before)
            self._reach = max(self._reach, item.start + item.share)
        if not self._batch.chunks and self._batch.stored_chunks:
            yield self._take()  # nothing to embed yet: the bar moves by the documents skipped

    def _stored(self, waiting: list[_Waiting]) -> Mapping[str, int]:
        assert self.unchanged is not None
        states = [DocumentState(w.doc.doc_id, w.doc_hash, w.doc.source_root) for w in waiting]
        try:
            return self.unchanged(states)
        except Exception as err:  # the writes say whether the store works; this only saves work
            if not self._lookup_failed:
                logger.warning("Could not ask which documents are stored unchanged (%s); chunking them all", err)
            self._lookup_failed = True
            return {}

    def _chunk(self, item: _Waiting) -> Iterator[ChunkBatch]:
        doc = item.doc
        self._done = max(self._done, item.done_before)
        ids: list[str] = []
        for chunk in document_chunks(doc, self.chunker):
            self._batch.add(doc.doc_id, chunk)
            ids.append(chunk.point_id)
            if chunk.end_char is not None and doc.text:
                self._reach = max(self._reach, item.start + item.share * min(1.0, chunk.end_char / len(doc.text)))
            if len(self._batch.chunks) >= self.batch_size:
                yield self._take()
        self.chunks += len(ids)
        self.empty_documents += not ids
        self._reach = max(self._reach, item.start + item.share)
        self._batch.complete(doc.doc_id, ids, item.doc_hash)

    def _take(self) -> ChunkBatch:
        batch, self._batch = self._batch, ChunkBatch()
        batch.reach = max(self._reach, self._done)
        return batch


class BatchEmbedder:
    """One batch through the model: the chunks the sink does not hold yet -> dense vectors -> BM25 vectors."""

    def __init__(self, embedder: Embedder, sparse: BM25Encoder | None = None) -> None:
        self.embedder = embedder
        self.sparse = sparse

    def embed(self, batch: ChunkBatch, sink: Sink) -> EmbeddedBatch:
        todo = sink.not_stored(batch.chunks)
        texts = [c.text for c in todo]
        vectors = self.embedder.embed_documents(texts) if todo else np.empty((0, self.embedder.dim), dtype=np.float32)
        sparse = self.sparse.encode_documents(texts) if self.sparse is not None and todo else None
        return EmbeddedBatch(batch, todo, vectors, sparse)


class BatchFailures(Protocol):
    """What a batch that could not be embedded or written does to the run."""

    @property
    def stopped(self) -> bool:
        """Nothing more is to be embedded or written."""
        ...

    def record(self, batch: ChunkBatch, err: Exception) -> None:
        """Called while ``err`` is being handled; may raise it."""
        ...


class FailedBatches:
    """``ingest``'s policy: a failed batch (after retries) is recorded in ``result.failed``.

    With ``on_error="continue"`` the run goes on; with "raise" the run stops (nothing more is embedded
    or written) and ingest raises once what was embedded before the failure is stored. Either thread of
    the local engine may record.
    """

    def __init__(self, result: IngestResult, on_error: Literal["raise", "continue"]) -> None:
        self.result = result
        self.on_error = on_error
        # The documents a failed batch held: they keep their old points until a re-run stores them whole.
        self.doc_ids: set[str] = set()
        self._stop = threading.Event()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def record(self, batch: ChunkBatch, err: Exception) -> None:
        # With on_error="raise" the IngestError says this; with "continue" it is the only trace.
        level = logging.WARNING if self.on_error == "continue" else logging.INFO
        logger.log(level, "Batch of documents %s failed: %s", batch.doc_ids[:10], err)
        self.doc_ids.update(batch.doc_ids)
        self.result.failed.append(
            FailedBatch(doc_ids=list(batch.doc_ids), chunks=len(batch.chunks), error=f"{type(err).__name__}: {err}")
        )
        if self.on_error == "raise":
            self._stop.set()


class StopAtFirstFailure:
    """``embed``'s policy: the first batch that fails stops the run with its own error."""

    def __init__(self) -> None:
        self.stopped = False

    def record(self, batch: ChunkBatch, err: Exception) -> None:
        self.stopped = True
        raise err


class IngestProgress:
    """The progress bar of a run in this process: inputs done out of those known before reading, with the
    chunks so far and their rate in the postfix.

    It counts inputs (files, or documents when the input is not files) because their number is known
    before anything is read, so the bar has a total, a percentage and an ETA from the start; the chunks
    are known only as the documents are chunked. Files weigh their size on the bar (:meth:`InputSize.position`),
    so the percentage and the ETA follow the bytes read while the count shown is of files. An input is done once
    all its chunks are embedded (or found stored); the bar also moves through the input being read, by where its
    embedded chunks end in it (:attr:`ChunkBatch.reach`), so one long file gets a percentage and an ETA too, while
    the count shown is of whole inputs. Within a batch the bar moves with each forward pass, the bytes the batch
    reaches spread over its work, so a batch that takes minutes still moves it every few seconds.

    The rate is the chunks over the time since ``started``: the unit and the clock of the run's summary,
    whose figures the last refresh shows (:meth:`close`).

    While the bar is open, log records and warnings printed to the console go above it, not into its
    line; what the encoder and the decoder truncated is summed over the run and warned once it closes.
    """

    def __init__(self, desc: str, size: InputSize, *, show: bool, started: float | None = None) -> None:
        self.started = time.perf_counter() if started is None else started
        self.truncation = Truncation()
        self.size = size
        self.inputs = 0.0  # how far the batches done reach, in inputs (ChunkBatch.reach)
        self._shown = 0.0  # the inputs the bar shows, which may be inside the batch being embedded
        self.chunks = 0  # embedded or found stored, in the batches done
        self._batch: ChunkBatch | None = None
        self._output = contextlib.ExitStack()
        # tqdm's own rate would be inputs/s; the postfix carries the chunk rate the summary reports instead.
        # miniters=0: every update may redraw (at most every mininterval), even one that only changes the postfix.
        self.bar = CountingBar(
            desc=desc,
            total=size.extent,
            items=size.total,
            noun="files" if size.unit == "file" else "docs",
            disable=not show,
            miniters=0,
            **unsized_terminal(sys.stderr),
        )
        if not self.bar.disable:
            self.bar.start_t -= time.perf_counter() - self.started  # elapsed on the rate's clock
            self._output.enter_context(printed_above_bars())

    @contextlib.contextmanager
    def embedding(self, batch: ChunkBatch) -> Iterator[None]:
        """Around one batch's trip through the model: the bar follows its forward passes."""
        self._batch = batch
        try:
            with observing(self):
                yield
        finally:
            self._batch = None

    def encoded(self, done: int, of: int, work: float) -> None:
        """:class:`~c2v_rag.encode.loop.EncodeObserver`: ``done`` of the ``of`` chunks to embed are embedded,
        ``work`` of the work to embed them is done."""
        batch = self._batch
        if batch is None or not batch.chunks:
            return
        # The sink held the batch's other chunks already: they are done without the model.
        stored = max(0, len(batch.chunks) - of)
        chunks = min(len(batch.chunks), stored + done) + batch.stored_chunks
        # The inputs move with the work done, not the chunks: the longest chunks go first, so counting chunks
        # would run slow early in each batch and the bar's ETA would be too long.
        share = min(1.0, (stored + work * of) / len(batch.chunks))
        # Spread over the bytes the batch covers, not its count of inputs: a batch that opens with a small file
        # and goes on into large ones otherwise sat at the small file's sliver of the bar, with an ETA of hours.
        reach = max(self.inputs, batch.reach)
        if share < 1.0:
            start, end = self.size.position(self.inputs), self.size.position(reach)
            # never back, not even by the rounding of position's round trip
            reach = max(self._shown, min(reach, self.size.inputs_at(start + (end - start) * share)))
        self._show(reach, self.chunks + chunks)

    def truncated(self, cut: Truncation) -> None:
        """:class:`~c2v_rag.encode.loop.EncodeObserver`: what one call cut, summed for the warning at the end."""
        self.truncation += cut

    def embedded(self, batch: ChunkBatch) -> None:
        """``batch`` is through the model: its chunks and the inputs it completes are done."""
        self.inputs = max(self.inputs, batch.reach)
        self.chunks += len(batch.chunks) + batch.stored_chunks
        self._show(self.inputs, self.chunks)

    def finish(self, inputs_done: int) -> None:
        """Every input was read (and every batch sent): those that gave no chunk are done too."""
        self.inputs = max(self.inputs, inputs_done)
        self._show(self.inputs, self.chunks)

    def close(self, chunks: int | None = None, seconds: float | None = None) -> None:
        """Close the bar, showing ``chunks`` in ``seconds`` (the summary's figures) when given; then warn of
        what was truncated, if anything."""
        try:
            if not self.bar.disable:
                self._show(self._shown, self.chunks if chunks is None else chunks, seconds)
            self.bar.close()
        finally:
            self._output.close()
        message = self.truncation.message("chunks")
        if message is not None and self.truncation.encoder and self.truncation.encoder_max_length:
            # Chunking fits the encoder unless chunk_size exceeds what it reads (documents/chunking.py,
            # encoder_fit): name the size that does. Its [CLS] and [SEP] take two of its positions.
            fits = self.truncation.encoder_max_length - 2
            message += f" Chunks fit it whole at chunk_size={fits} or less."
        if message is not None:
            logger.warning("%s", message)

    def _show(self, inputs: float, chunks: int, seconds: float | None = None) -> None:
        if self.bar.disable:
            return
        seconds = time.perf_counter() - self.started if seconds is None else seconds
        self._shown = inputs
        # The sums of shares can land a hair under a whole number.
        self.bar.count = int(inputs + 1e-6)
        self.bar.set_postfix_str(chunks_and_rate(chunks, seconds), refresh=False)
        self.bar.update(self.size.position(inputs) - self.bar.n)


def chunks_and_rate(chunks: int, seconds: float) -> str:
    """An ingest bar's postfix: the chunks so far and their rate over ``seconds``, as the run's summary gives it."""
    rate = chunks / seconds if seconds > 0 else 0.0
    return f"{chunks} chunks, {rate:.1f} chunks/s"


@contextlib.contextmanager
def printed_above_bars() -> Iterator[None]:
    """Log records and warnings written to the console go above the open bars (tqdm clears them, writes,
    redraws them), instead of into a bar's line. Each console log handler, and the one logging falls back
    to without any, is wrapped for the duration; its level, filters and format stay its own. What is put
    back is only what is still this call's, so that runs overlapping in threads leave nothing wrapped. Ray's
    loggers have console handlers of their own (a Ray run's driver logs through them)."""
    wrapped = [
        (logger_, _AboveBars(handler), handler)
        for logger_ in map(logging.getLogger, (None, "c2v_rag", "ray", "ray.data"))
        for handler in logger_.handlers
        if _is_console(handler)
    ]
    for logger_, wrapper, handler in wrapped:
        logger_.handlers = [wrapper if h is handler else h for h in logger_.handlers]
    last_resort = logging.lastResort
    if last_resort is not None and not isinstance(last_resort, _AboveBars):
        logging.lastResort = _AboveBars(last_resort)
    ours = logging.lastResort
    show_warning = warnings.showwarning

    def warning_above(*args: Any, **kwargs: Any) -> None:
        with tqdm.external_write_mode(file=sys.stderr):
            show_warning(*args, **kwargs)

    warnings.showwarning = warning_above
    try:
        yield
    finally:
        if warnings.showwarning is warning_above:
            warnings.showwarning = show_warning
        if logging.lastResort is ours:
            logging.lastResort = last_resort
        for logger_, wrapper, handler in wrapped:
            logger_.handlers = [handler if h is wrapper else h for h in logger_.handlers]


def _is_console(handler: logging.Handler) -> bool:
    return isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stdout, sys.stderr)


class _AboveBars(logging.Handler):
    """``handler``, writing with the progress bars cleared."""

    def __init__(self, handler: logging.Handler) -> None:
        super().__init__(handler.level)
        self.handler = handler

    def emit(self, record: logging.LogRecord) -> None:
        stream = getattr(self.handler, "stream", None) or sys.stderr
        with tqdm.external_write_mode(file=stream):
            self.handler.handle(record)


class IngestCore:
    """Documents through the pipeline into a sink, in this process (``ingest``'s local engine, ``embed``'s).

    Args:
        batcher: documents -> batches.
        embedder: a batch -> vectors.
        failures: what a failed batch does.
        progress: the bar, moved as batches go through the model (stored chunks once skipped).
    """

    def __init__(
        self, batcher: DocumentBatcher, embedder: BatchEmbedder, failures: BatchFailures, progress: IngestProgress
    ) -> None:
        self.batcher = batcher
        self.embedder = embedder
        self.failures = failures
        self.progress = progress

    def run(self, documents: Iterable[SourceDocument], sink: Sink) -> None:
        """Every document into ``sink``, batch by batch, until the documents end or the failures stop the run.

        An error while reading (a bad file or record, a document id clash) first hands on the batch read
        before it, so that a re-run after the fix resumes past it, then propagates. Ctrl-C propagates at
        once: nothing more is embedded.
        """
        try:
            with remembered_interrupts() as interrupts:
                for doc in documents:
                    interrupts.check()  # a Ctrl-C that a finalizer swallowed
                    if self.failures.stopped:
                        return
                    for batch in self.batcher.add(doc):
                        self._send(batch, sink)
        except Exception as err:
            if caused_by_ctrl_c(err):  # Ctrl-C inside a library that wraps it: nothing more is embedded
                raise
            try:
                self._send_rest(sink)
            except Exception as err:  # the error that stopped the reading is the one to report
                logger.debug("Could not store the batches read before the error: %s", err)
            raise
        if self._send_rest(sink):
            self.progress.finish(self.batcher.inputs_done)

    def _send_rest(self, sink: Sink) -> bool:
        """Send what the batcher still holds; False when the failures stopped the run before a batch of it."""
        for batch in self.batcher.rest():
            if self.failures.stopped:
                return False
            self._send(batch, sink)
        return True

    def _send(self, batch: ChunkBatch, sink: Sink) -> None:
        try:
            with self.progress.embedding(batch):
                embedded = self.embedder.embed(batch, sink)
            # Chunks count as done once embedded (stored ones once skipped), so the bar moves with the work.
            self.progress.embedded(batch)
            sink.write(embedded)
        except Exception as err:
            self.failures.record(batch, err)
