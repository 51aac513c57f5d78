"""Where embedded batches go (:class:`~c2v_rag.rag.ingestion.pipeline.Sink`): a Qdrant collection or Parquet files.

- :class:`QdrantSink`: a collection in any store (qdrant-client's local mode, Qdrant Edge, a server),
  through the :class:`~c2v_rag.store.backends.StoreClient` calls of
  :class:`~c2v_rag.rag.ingestion.points.PointWriter`: stored chunks are skipped (and their source root
  claimed), a batch is upserted, then the stale points of the documents it completes are deleted; after a
  complete run, a sync deletes the documents gone from their sources.
- :class:`BackgroundWrites`: hands batches to another sink on a background thread, so that embedding
  batch k+1 overlaps writing batch k; a bounded queue keeps memory flat on any corpus size.
- :class:`ParquetSink`: ``embed``'s ``part-NNNNN.parquet`` files, in the rows of
  :func:`~c2v_rag.rag.ingestion.parquet_rows.chunk_table`.

The Ray actors' sinks, which also say what an actor returns to Ray, are in
:mod:`c2v_rag.rag.ingestion.ray_dataflow`.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from c2v_rag.rag.ingestion.parquet_folder import in_progress, part_name, with_record
from c2v_rag.rag.ingestion.parquet_rows import chunk_table
from c2v_rag.rag.ingestion.pipeline import BatchFailures, EmbeddedBatch, Sink
from c2v_rag.rag.ingestion.points import Call, DocumentState, PendingChunk, PointWriter, not_in
from c2v_rag.rag.ingestion.sync import SyncReport, delete_gone_documents
from c2v_rag.store.point_id_set import PointIdSet

if TYPE_CHECKING:
    from c2v_rag.documents.files import ReadLog
    from c2v_rag.rag.ingestion.config import IngestConfig

# The longest an embed file stays open: a run killed outright (no Ctrl-C) loses at most the chunks of this long.
FILE_SECONDS = 600.0


@dataclass(frozen=True)
class Retry:
    """How each Qdrant request is retried: attempts, and the first and longest wait in seconds."""

    attempts: int
    initial_wait: float
    max_wait: float

    @classmethod
    def of(cls, settings: IngestConfig) -> Retry:
        return cls(settings.retry_attempts, settings.retry_initial_wait, settings.retry_max_wait)


def retrying_call(retry: Retry, lock: threading.Lock | None = None) -> Call:
    """A :data:`~c2v_rag.rag.ingestion.points.Call` that retries each request with ``retry``, holding
    ``lock`` (if any) around each attempt: embedded Qdrant is not safe for concurrent calls."""
    from c2v_rag.store.retry import call_with_retry

    guard = lock if lock is not None else contextlib.nullcontext()

    def call(fn: Callable[[], Any], what: str) -> Any:
        def locked() -> Any:
            with guard:
                return fn()

        return call_with_retry(
            locked, what=what, attempts=retry.attempts, initial_wait=retry.initial_wait, max_wait=retry.max_wait
        )

    return call


class QdrantSink:
    """Embedded batches into a Qdrant collection, idempotently.

    Args:
        writer: the collection's writer (its client, vector layout, request policy, and whether the run
            created the collection, in which case nothing is stored or stale yet).
        failed_docs: documents a failed batch of this run held; the batches after it do not delete
            their old points (a document is replaced only once all its new chunks are stored).
    """

    def __init__(self, writer: PointWriter, failed_docs: Container[str] = frozenset()) -> None:
        self.writer = writer
        self.failed_docs = failed_docs

    def not_stored(self, chunks: Sequence[PendingChunk]) -> list[PendingChunk]:
        return self.writer.not_stored(chunks)

    def unchanged_documents(self, states: Sequence[DocumentState]) -> Mapping[str, int]:
        """:data:`~c2v_rag.rag.ingestion.pipeline.UnchangedLookup`: the documents stored whole and unchanged."""
        return self.writer.unchanged_documents(states)

    def write(self, embedded: EmbeddedBatch) -> None:
        """Upsert the batch's points; then mark the documents it completes as stored whole and delete their
        other points."""
        points = self.writer.points(embedded.chunks, embedded.vectors, embedded.sparse)
        completed = {d: ids for d, ids in embedded.batch.completed.items() if d not in self.failed_docs}
        self.writer.write(points, completed, embedded.batch.hashes)

    def delete_gone(self, roots: Iterable[str], seen: Container[str], log: ReadLog) -> SyncReport:
        """The sync: delete the points under ``roots`` whose document was not ``seen`` this run
        (:mod:`c2v_rag.rag.ingestion.sync` says what it never deletes)."""
        w = self.writer
        return delete_gone_documents(w.client, w.collection, roots, seen, log, w.call)


class BackgroundWrites:
    """A sink that writes into ``sink`` on a background thread: embedding the next batch overlaps writing
    this one, and at most ``prefetch`` embedded batches wait in memory.

    A batch whose write fails goes to ``failures``; once they stop the run, the batches still queued are
    dropped. ``written(batch)`` is called on the thread after each batch is stored.
    """

    def __init__(
        self, sink: Sink, prefetch: int, failures: BatchFailures, written: Callable[[EmbeddedBatch], None]
    ) -> None:
        self.sink = sink
        self.failures = failures
        self.written = written
        self.queue: queue.Queue[EmbeddedBatch | None] = queue.Queue(maxsize=prefetch)
        self.thread = threading.Thread(target=self._write_queued, name="c2v-rag-upload", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def not_stored(self, chunks: Sequence[PendingChunk]) -> list[PendingChunk]:
        # On the calling thread, while the batch before is written (under the client's lock where needed).
        return self.sink.not_stored(chunks)

    def write(self, embedded: EmbeddedBatch) -> None:
        self._put(embedded)

    def close(self) -> None:
        """Write what is queued (unless the run stopped), then end the thread."""
        self._put(None)
        self.thread.join()

    def _put(self, embedded: EmbeddedBatch | None) -> None:
        # A bounded put that gives up once the run has stopped, so a failure never deadlocks.
        while True:
            try:
                self.queue.put(embedded, timeout=0.2)
                return
            except queue.Full:
                if self.failures.stopped and embedded is not None:
                    return

    def _write_queued(self) -> None:
        while True:
            embedded = self.queue.get()
            if embedded is None:
                return
            if self.failures.stopped:
                continue  # drain what was queued before a failure; write nothing more
            try:
                self.sink.write(embedded)
                self.written(embedded)
            except Exception as err:
                self.failures.record(embedded.batch, err)


class ParquetSink:
    """``embed``'s files in ``folder``: ``part-00000.parquet``, ``part-00001.parquet``, ... (numbered from
    ``first_part``). A file takes whole batches and is closed once it holds ``rows_per_file`` rows or more, or has
    been open ``seconds_per_file`` (what a run killed outright loses at most). Each is written under a hidden name
    and renamed once closed (:mod:`~c2v_rag.rag.ingestion.parquet_folder`); its schema carries ``record``. Chunks
    whose point ids are in ``stored`` (an earlier run's files) are not embedded again."""

    def __init__(
        self,
        folder: Path,
        rows_per_file: int,
        *,
        record: Mapping[str, Any],
        stored: PointIdSet | None = None,
        first_part: int = 0,
        seconds_per_file: float = FILE_SECONDS,
    ) -> None:
        self.folder = folder
        self.rows_per_file = rows_per_file
        self.seconds_per_file = seconds_per_file
        self.record = record
        self.stored = stored if stored is not None else PointIdSet()
        self.files: list[str] = []
        self.rows = 0
        self.unchanged = 0  # chunks found in ``stored``: not embedded again
        self._next = first_part
        self._file: Any = None
        self._path: Path | None = None
        self._in_file = 0
        self._opened = 0.0

    def not_stored(self, chunks: Sequence[PendingChunk]) -> list[PendingChunk]:
        todo = not_in(self.stored, chunks)
        self.unchanged += len(chunks) - len(todo)
        return todo

    def write(self, embedded: EmbeddedBatch) -> None:
        import pyarrow.parquet as pq

        if not embedded.chunks:
            return  # a batch that only completes documents: nothing to write
        table = with_record(chunk_table(embedded), self.record)
        full = self._in_file >= self.rows_per_file or time.monotonic() - self._opened >= self.seconds_per_file
        if self._file is not None and full:
            self.close()
        if self._file is None:
            self._path = self.folder / part_name(self._next)
            self._next += 1
            self._file, self._in_file = pq.ParquetWriter(in_progress(self._path), table.schema), 0
            self._opened = time.monotonic()
        self._file.write_table(table)
        self._in_file += table.num_rows

    def close(self) -> None:
        """Close the open file and give it its name: its rows are then part of the folder, and :attr:`rows` (the rows
        of the closed files) counts them as the file holds them, so a Ctrl-C between a batch's write and any count of
        ours cannot leave the count a batch short."""
        import pyarrow.parquet as pq

        if self._file is not None and self._path is not None:
            self._file.close()
            self._file = None
            in_progress(self._path).replace(self._path)
            self.files.append(str(self._path))
            self.rows += pq.read_metadata(self._path).num_rows
