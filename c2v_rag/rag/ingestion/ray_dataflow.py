"""The Ray engine's dataflow: read, chunk, embed and write a corpus over a Ray cluster (Ray Data).

``ingest(..., engine="ray")`` (whose driver side is :mod:`c2v_rag.rag.ingestion.ray_engine`) and
``embed(..., engine="ray")`` run the same steps as the in-process engine, spread over a cluster;
they share every piece that decides a result (reading, chunking, point ids, payloads, the
collection checks, the batch step of :mod:`c2v_rag.rag.ingestion.pipeline` and the Qdrant sink of
:mod:`c2v_rag.rag.ingestion.sinks`), so a point is the same whichever engine wrote it.

The dataflow, one way:

1. **Read**: files and folders are listed and checked on the driver (as the in-process engine
   checks them, before anything loads); each file is then read by a Ray task with the in-process
   readers (c2v_rag.documents.formats). Strings, dicts and framework documents are read on the
   driver and handed to Ray as rows.
2. **Chunk**: CPU tasks holding the decoder's tokenizer alone (no weights) cut documents into
   chunks with their point ids and payloads; chunking is CPU work that would otherwise stall the
   GPU between forward passes, so it scales on its own (``chunk_tasks``).
3. **Embed**: ``map_batches`` over a fixed pool of actors, each holding one model (one GPU per
   actor where there are GPUs; ``cpus_per_actor`` torch threads otherwise). A batch is a set of
   whole documents, so every document's chunks are embedded, checked and written together: each
   actor runs the in-process engine's batch step
   (:class:`~c2v_rag.rag.ingestion.pipeline.BatchEmbedder`) into the run's sink.
4. **Write**: the sink, chosen once on the driver (an :class:`ActorSink`), where the store allows it:

   - a Qdrant **server** (``qdrant_url``): every actor opens its own client and upserts its batches
     itself, in parallel, deleting the stale chunks of the documents it completed
     (:class:`WriteFromActors`): the driver only gathers counts;
   - **embedded** Qdrant (a local path) can be opened by one process only, so the actors return
     their vectors and the driver writes them (:class:`ShipToDriver`, ``write="driver"``, the
     default there). With one actor, ``write="workers"`` lets that actor open the directory itself
     (the driver closes it for the run);
   - ``embed``: the actors return Parquet rows and Ray Data writes the files (:class:`ExportRows`).

Fault tolerance is Ray's: an actor that dies is restarted (``max_restarts``) and its batch is run
again (``max_task_retries``). A retried batch writes the same point ids with the same content,
so the collection holds every chunk exactly once.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from c2v_rag.core.extras import require
from c2v_rag.core.interrupts import sigterm_handler_kept
from c2v_rag.documents.chunking import ChunkContext
from c2v_rag.documents.documents import SourceDocument, iter_documents, names_existing_path
from c2v_rag.documents.files import ReadLog, ReadOptions, list_source, read_file
from c2v_rag.documents.reading import progress_weight
from c2v_rag.rag.ingestion.parquet_folder import with_record
from c2v_rag.rag.ingestion.parquet_rows import chunk_table
from c2v_rag.rag.ingestion.pipeline import BatchEmbedder, ChunkBatch, EmbeddedBatch
from c2v_rag.rag.ingestion.points import (
    PendingChunk,
    PointWriter,
    SeenDocuments,
    document_chunks,
    document_fingerprint,
    document_hash,
    not_in,
)
from c2v_rag.rag.ingestion.sinks import QdrantSink, Retry, retrying_call
from c2v_rag.store.point_id_set import PointIdSet

if TYPE_CHECKING:
    import pyarrow as pa
    from ray.data import Dataset

    from c2v_rag.rag.ingestion.config import IngestConfig
    from c2v_rag.store.collection import QdrantConfig
    from c2v_rag.store.sparse import BM25Config
    from c2v_rag.store.vectors import CollectionVectors

logger = logging.getLogger(__name__)


class RayOptions(BaseModel):
    """Where and how wide the Ray engine runs.

    ``address`` None joins the cluster this process is already connected to (``ray.init`` called
    before), else the one ``$RAY_ADDRESS`` names, else starts a local one for the run.
    """

    model_config = ConfigDict(extra="forbid")

    address: str | None = Field(default=None, description="'auto', 'HOST:6379' or 'ray://HOST:10001'")
    actors: int = Field(default=1, ge=1, description="embedding actors, each holding one model")
    gpus_per_actor: float | None = Field(
        default=None, ge=0, description="None: 1 when the cluster has GPUs, else 0 (CPU actors)"
    )
    cpus_per_actor: float = Field(default=1, gt=0, description="CPUs reserved per actor; its torch threads on CPU")
    docs_per_batch: int = Field(default=16, ge=1, description="documents an actor chunks, embeds and writes at once")
    chunk_tasks: int | None = Field(
        default=None, ge=1, description="tasks reading and chunking at once (None: 2 per actor)"
    )
    chunk_cpus: float | None = Field(
        default=None,
        ge=0,
        description="CPUs per reading/chunking task; None: 1 when the cluster has CPUs beyond "
        "the actors', else 0 (they share the actors' CPUs rather than wait)",
    )
    write: Literal["auto", "driver", "workers"] = Field(
        default="auto", description="who upserts: 'auto' is the actors for a server, the driver for a local path"
    )
    max_restarts: int = Field(default=-1, ge=-1, description="restarts of a dead actor (-1: no limit)")
    max_task_retries: int = Field(default=-1, ge=-1, description="retries of a batch whose actor died (-1: no limit)")
    runtime_env: dict[str, Any] | None = Field(
        default=None, description="ray.init runtime_env when this call connects, e.g. {'pip': ['c2v-rag[qdrant]']}"
    )

    @classmethod
    def resolve(cls, ray: RayOptions | str | None) -> RayOptions:
        """Options from ``RayOptions``, an address string, or None (the defaults)."""
        if isinstance(ray, RayOptions):
            return ray
        if ray is None:
            return cls()
        if isinstance(ray, str):
            return cls(address=ray)
        raise TypeError(f"ray= takes RayOptions, an address string or None, got {type(ray).__name__}")


def require_ray(feature: str) -> Any:
    """Import ``ray`` (with Ray Data) or raise :class:`~c2v_rag.core.errors.MissingPackageError` with the
    install command."""
    require("ray.data", feature, "ray", package="Ray Data")
    import ray

    return ray


class RaySession:
    """Connects to Ray for one run; shuts down only a cluster this run started."""

    def __init__(self, options: RayOptions) -> None:
        self.options = options
        self.started = False
        self.startup_seconds = 0.0

    def __enter__(self):
        ray = require_ray("engine='ray'")
        begin = time.perf_counter()
        if not ray.is_initialized():
            address = self.options.address or os.environ.get("RAY_ADDRESS")
            # ray.init gives the driver a SIGTERM handler of its own (sys.exit mid-run: no clean stop, and the process
            # aborted while Ray tore down); a handler the program chose, such as the CLI's (SIGTERM stops a run as
            # Ctrl-C does: what was embedded written, the line that says how to resume), is put back.
            with sigterm_handler_kept():
                ray.init(
                    address=address,
                    runtime_env=self.options.runtime_env,
                    logging_level=logging.WARNING,
                    include_dashboard=False if address is None else None,
                )
            self.started = address is None
        elif self.options.address is not None:
            logger.info("Ray is already initialized in this process; address=%r is not used", self.options.address)
        self.startup_seconds = time.perf_counter() - begin
        return ray

    def __exit__(self, *exc) -> None:
        if self.started:
            import ray

            ray.shutdown()


# ------------------------------------------------------------------------------------ sources


@dataclass
class SourcePlan:
    """What the driver hands to Ray: files (each with the root it was named through, and its weight on the
    progress bar, :func:`~c2v_rag.documents.reading.progress_weight` of the bytes it holds, as the in-process
    engine's bar weighs it) and documents already in memory (weighed by their characters)."""

    files: list[tuple[str, str, int]] = field(default_factory=list)
    inline: list[SourceDocument] = field(default_factory=list)

    @property
    def weight(self) -> int:
        """All the input's weight on the progress bar: what the rows of its documents add up to."""
        return sum(weight for _, _, weight in self.files) + sum(map(_inline_weight, self.inline))


def _inline_weight(doc: SourceDocument) -> int:
    return progress_weight(len(doc.text))


def plan_sources(docs: Any, options: ReadOptions, log: ReadLog) -> SourcePlan:
    """Check and list the input as the in-process engine would, without reading a file.

    Paths (a top-level existing path, ``Path`` objects alone or in a list) become file tasks; every
    other item is read here, since it is in memory already.
    """
    plan = SourcePlan()

    def add_path(path: Path) -> None:
        listed = len(log.file_sizes)
        root, files = list_source(path, options, log)
        sizes = log.file_sizes[listed:]
        plan.files.extend((str(f), root, progress_weight(size)) for f, size in zip(files, sizes, strict=True))

    if (isinstance(docs, str) and names_existing_path(docs)) or isinstance(docs, os.PathLike):
        add_path(Path(docs))
        return plan
    items = list(docs) if isinstance(docs, (list, tuple)) else None
    if items is not None and any(isinstance(d, os.PathLike) for d in items):
        inline = []
        for item in items:
            if isinstance(item, os.PathLike):
                add_path(Path(item))
            else:
                inline.append(item)
        plan.inline = list(iter_documents(inline, options=options, log=log))
        return plan
    plan.inline = list(iter_documents(docs, options=options, log=log))
    return plan


def _doc_row(doc: SourceDocument, weight: float) -> dict[str, Any]:
    # Metadata travels as JSON: Arrow cannot hold dicts whose keys and types differ between rows. ``weight``: the
    # document's share of the progress bar (SourcePlan).
    return {
        "weight": float(weight),
        "doc_id": doc.doc_id,
        "text": doc.text,
        "metadata": json.dumps(doc.metadata, ensure_ascii=False, default=str),
        "source": doc.source,
        "source_root": doc.source_root,
        "pages": json.dumps(doc.pages),
        "lead": json.dumps(doc.lead),  # JSON, as a column of nulls alone would not join one of strings
        "plain_text": doc.plain_text,
    }


def _row_doc(row: dict[str, Any]) -> SourceDocument:
    pages = tuple((offset, label) for offset, label in json.loads(row["pages"]))
    return SourceDocument(
        row["doc_id"],
        row["text"],
        json.loads(row["metadata"]),
        row["source"],
        row["source_root"],
        pages,
        json.loads(row["lead"]),
        bool(row["plain_text"]),
    )


def _read_file_rows(row: dict[str, Any], options: ReadOptions, skips: Any) -> list[dict[str, Any]]:
    # What a file task skips (on_error="continue") is logged by the task (Ray forwards worker logs) and added to
    # ``skips`` (a SkipTally) for the run's result. Each document weighs its share of the file (its span, as it is
    # handed on: a JSONL line by its bytes, a member by its size).
    import ray

    log = ReadLog()
    docs = []
    for doc in read_file(Path(row["file"]), row["root"], options, log):
        start, end = log.document_span
        docs.append(_doc_row(doc, row["weight"] * (end - start)))
    if log.files_skipped or log.records_skipped:
        logger.warning("%s: skipped %d files and %d records", row["file"], log.files_skipped, log.records_skipped)
        skipped = ReadLog(
            files_skipped=log.files_skipped,
            records_skipped=log.records_skipped,
            skipped=log.skipped,
            incomplete=log.incomplete,
        )
        ray.get(skips.add.remote(skipped))  # waited for: the driver asks for the total once the tasks are done
    return docs


class SkipTally:
    """A Ray actor that adds up what the file tasks skipped, so that a run's result counts and lists the files and
    records skipped as a local run's does."""

    def __init__(self) -> None:
        self.log = ReadLog()

    def add(self, skipped: ReadLog) -> None:
        self.log.take_skips(skipped)

    def total(self) -> ReadLog:
        return self.log


def start_skip_tally(ray: Any) -> Any:
    """A :class:`SkipTally` on the cluster, taking no CPU from the actors (the session must be open)."""
    return ray.remote(num_cpus=0)(SkipTally).remote()


def source_dataset(plan: SourcePlan, read: ReadOptions, job: EmbedJob, options: RayOptions, skips: Any):
    """The documents, chunked: a Ray Dataset of one row per document with its chunks' point ids,
    texts and payloads. Reading and chunking share their tasks (Ray fuses the two steps); what reading skips is
    added to ``skips`` (:func:`start_skip_tally`)."""
    import ray

    cpus = options.chunk_cpus
    if cpus is None:
        spare = ray.cluster_resources().get("CPU", 0) - options.actors * options.cpus_per_actor
        # 0: the tasks share the actors' CPUs; asking for one that the actors hold would wait forever.
        cpus = 1 if spare >= 1 else 0
    compute = ray.data.TaskPoolStrategy(size=options.chunk_tasks or 2 * options.actors)
    chunking = {
        "model": job.model,
        "chunk_size": job.chunk_size,
        "chunk_overlap": job.chunk_overlap,
        "context": job.context,
    }

    def chunked(documents: Dataset) -> Dataset:
        return documents.map_batches(
            _chunk_rows,  # type: ignore[arg-type]  # Ray's annotation of fn leaves out the fn_kwargs it is called with
            fn_kwargs=chunking,
            batch_size=options.docs_per_batch,
            batch_format="pyarrow",
            num_cpus=cpus,
            compute=compute,
        )

    parts = []
    if plan.files:
        files = ray.data.from_items(
            [{"file": f, "root": r, "weight": w} for f, r, w in plan.files],
            override_num_blocks=min(len(plan.files), 1000),
        )
        read_files = files.flat_map(
            _read_file_rows,  # type: ignore[arg-type]  # as above: fn_kwargs are not in Ray's annotation of fn
            fn_kwargs={"options": read, "skips": skips},
            num_cpus=cpus,
            compute=compute,
        )
        parts.append(chunked(read_files))
    if plan.inline:
        rows = [_doc_row(d, _inline_weight(d)) for d in plan.inline]
        parts.append(chunked(ray.data.from_items(rows)))
    if not parts:
        raise ValueError("docs is empty: nothing to ingest")
    return parts[0] if len(parts) == 1 else parts[0].union(*parts[1:])


_chunkers: dict[tuple[str | None, int, int, ChunkContext], Any] = {}

# What a chunked document's row carries through the actors back to the driver (besides its chunks' texts, payloads
# and vectors): its share of the bar, what tells repeats and clashes apart, and where it came from.
DOCUMENT_COLUMNS = ("weight", "doc_id", "fingerprint", "doc_hash", "source", "source_root", "point_ids")


def _document_fields() -> list[tuple[str, Any]]:
    """The Arrow fields of :data:`DOCUMENT_COLUMNS`, in the chunk rows and the actors' rows alike."""
    import pyarrow as pa

    types = {"weight": pa.float64(), "point_ids": pa.list_(pa.string())}
    return [(name, types.get(name, pa.string())) for name in DOCUMENT_COLUMNS]


def _chunk_rows(
    batch: pa.Table, model: str | None, chunk_size: int, chunk_overlap: int, context: ChunkContext
) -> pa.Table:
    """Documents -> one row per document with its chunks: point ids, texts and payloads (JSON)."""
    import pyarrow as pa

    from c2v_rag.documents.chunking import TokenChunker

    key = (model, chunk_size, chunk_overlap, context)
    if key not in _chunkers:  # once per worker process: the tokenizer, never the weights
        _chunkers[key] = TokenChunker.for_variant(model, chunk_size, chunk_overlap, context=context)
    chunker = _chunkers[key]
    rows: dict[str, list[Any]] = {k: [] for k in (*DOCUMENT_COLUMNS, "texts", "payloads")}
    for record in batch.to_pylist():
        doc = _row_doc(record)
        chunks = list(document_chunks(doc, chunker))
        rows["weight"].append(record["weight"])
        rows["doc_id"].append(doc.doc_id)
        rows["fingerprint"].append(document_fingerprint(doc))
        rows["doc_hash"].append(document_hash(doc, chunker))
        rows["source"].append(doc.source)
        rows["source_root"].append(doc.source_root)
        rows["point_ids"].append([c.point_id for c in chunks])
        rows["texts"].append([c.text for c in chunks])
        rows["payloads"].append([json.dumps(c.payload, ensure_ascii=False) for c in chunks])
    strings = pa.list_(pa.string())
    return pa.table(rows, schema=pa.schema([*_document_fields(), ("texts", strings), ("payloads", strings)]))


# ------------------------------------------------------------------------------------ actors


class ActorSink:
    """Where an actor's embedded batches go (a :class:`~c2v_rag.rag.ingestion.pipeline.Sink`), and what the
    actor returns to Ray for each batch.

    Chosen once per run on the driver and sent to every actor in its :class:`EmbedJob`; the actor calls
    :meth:`open` once, where it runs.
    """

    def open(self) -> None:
        """Take what the sink needs in the actor (a store client); nothing by default."""

    # The point ids stored when the run began (a snapshot the driver took), not embedded again; none by default.
    stored: PointIdSet = PointIdSet()

    def not_stored(self, chunks: Sequence[PendingChunk]) -> list[PendingChunk]:
        return not_in(self.stored, chunks)

    def write(self, embedded: EmbeddedBatch) -> None:
        """Nothing by default: the batch goes back to Ray in :meth:`rows`."""

    def rows(self, documents: pa.Table, embedded: EmbeddedBatch) -> pa.Table:
        """What the actor returns for a batch it embedded and wrote."""
        raise NotImplementedError

    def failed(self, documents: pa.Table, batch: ChunkBatch, err: Exception) -> pa.Table:
        """What the actor returns for a batch that failed; by default ``err`` is raised and fails the run."""
        raise err


class RunTally:
    """A Ray actor that adds up what the embedding actors count and the files do not show: the documents they read
    (a repeat of one by its id counted apart) and the chunks they found written already (``embed(engine="ray")``'s
    result, as the local engine counts them). It holds the documents read, as an ingest's driver does
    (:class:`~c2v_rag.rag.ingestion.points.SeenDocuments`), and refuses an id met again with other content, as
    both do, or with ``on_error="continue"`` keeps the first and lists the others (:meth:`clashes`)."""

    def __init__(self, on_error: Literal["raise", "continue"] = "raise") -> None:
        self.seen = SeenDocuments(on_error)
        self.repeats = 0
        self.unchanged = 0
        self.refused: str | None = None
        self.skipped: list[tuple[str, str | None]] = []

    def add(self, doc_ids: list[str], fingerprints: list[str], sources: list[str | None], unchanged: int) -> list[int]:
        """Count a batch's documents (their ids, :func:`document_fingerprint` and sources) and stored chunks; the
        places in the batch of those met for the first time, whose rows are written (a repeat that another batch, on
        any actor, met first is not written twice). Raises ValueError for an id met before with other content, and
        keeps its message for the driver (:meth:`refusal`)."""
        first = []
        for place, (doc_id, print_, source) in enumerate(zip(doc_ids, fingerprints, sources)):
            try:
                met = self.seen.meet(doc_id, print_, source)
            except ValueError as err:
                self.refused = str(err)
                raise
            if met == "new":
                first.append(place)
            elif met == "repeat":
                self.repeats += 1
            else:
                self.skipped.append((doc_id, source))
        self.unchanged += unchanged
        return first

    def refusal(self) -> str | None:
        """Why :meth:`add` failed the run, if it did. The driver raises it as the ValueError it was: passed from the
        tally through the actor that asked, Ray delivers only an error of its own, with the message in its text."""
        return self.refused

    def clashes(self) -> list[tuple[str, str | None]]:
        """The (id, source) of each document skipped for an id met before with other content."""
        return self.skipped

    def totals(self) -> tuple[int, int, int]:
        """(documents, repeated documents, chunks found written already)."""
        return len(self.seen), self.repeats, self.unchanged


def start_tally(ray: Any, on_error: Literal["raise", "continue"] = "raise") -> Any:
    """A :class:`RunTally` on the cluster, taking no CPU from the actors (the session must be open)."""
    return ray.remote(num_cpus=0)(RunTally).remote(on_error)


@dataclass
class ExportRows(ActorSink):
    """``embed(engine="ray")``: the actor returns its chunks' Parquet rows, with the run's ``record`` in their schema,
    and Ray Data writes the files; the first failed batch stops the run, as it does in one process."""

    # The point ids the folder's files held when the run began (earlier runs'): not embedded again.
    stored: PointIdSet = field(default_factory=PointIdSet)
    # What each file records (parquet_folder.embed_record).
    record: dict[str, Any] = field(default_factory=dict)
    # The run's RunTally actor, told each batch's documents and stored chunks before its rows go back (waited for:
    # the driver reads the totals once the last rows are written).
    tally: Any = None

    def rows(self, documents: pa.Table, embedded: EmbeddedBatch) -> pa.Table:
        table = chunk_table(embedded)
        if self.tally is not None:
            import pyarrow as pa
            import pyarrow.compute as pc
            import ray

            ids, prints, sources, points = (
                documents.column(name).to_pylist() for name in ("doc_id", "fingerprint", "source", "point_ids")
            )
            first = ray.get(self.tally.add.remote(ids, prints, sources, embedded.unchanged))
            # By the chunks' point ids, not the documents' ids: a second document under a first one's id (skipped
            # with on_error="continue") may be in the same batch.
            kept = pa.array([point for place in first for point in points[place]], type=pa.string())
            table = table.filter(pc.is_in(table.column("id"), value_set=kept))
        return with_record(table, self.record)


class DocumentRows(ActorSink):
    """``ingest(engine="ray")``: the actor returns one row per document (:func:`document_table`), which
    the driver counts. A failed batch is reported in its documents' rows, to be recorded as the
    in-process engine records it (``on_error``)."""

    # Whether the embedded chunks' payloads and vectors travel back, for the driver to write.
    ship: ClassVar[bool] = False

    def rows(self, documents: pa.Table, embedded: EmbeddedBatch) -> pa.Table:
        return document_table(documents, embedded, ship=self.ship)

    def failed(self, documents: pa.Table, batch: ChunkBatch, err: Exception) -> pa.Table:
        logger.warning("Batch of documents %s failed: %s", batch.doc_ids[:10], err)
        return document_table(documents, None, ship=self.ship, error=f"{type(err).__name__}: {err}")


@dataclass
class ShipToDriver(DocumentRows):
    """``write="driver"``: the actors return what they embed and the driver writes it (an embedded store
    opens in one process only)."""

    # The point ids stored when the run began (a snapshot the driver took): not embedded again.
    stored: PointIdSet = field(default_factory=PointIdSet)
    ship: ClassVar[bool] = True


@dataclass
class WriteFromActors(DocumentRows):
    """``write="workers"``: every actor writes its batches into the collection itself, through the
    in-process engine's :class:`~c2v_rag.rag.ingestion.sinks.QdrantSink` (a server; an embedded store
    with one actor, which the driver hands over for the run)."""

    target: QdrantConfig
    collection: str
    layout: CollectionVectors
    # The run created the collection: nothing in it is stored or stale yet.
    fresh: bool
    retry: Retry
    _store: QdrantSink | None = field(default=None, init=False, repr=False, compare=False)

    def open(self) -> None:
        # No lock: each actor holds its own client.
        writer = PointWriter(
            self.target.connect(), self.collection, self.layout, retrying_call(self.retry), fresh=self.fresh
        )
        self._store = QdrantSink(writer)

    @property
    def store(self) -> QdrantSink:
        if self._store is None:
            raise RuntimeError("WriteFromActors.open() connects to the store first")
        return self._store

    def not_stored(self, chunks: Sequence[PendingChunk]) -> list[PendingChunk]:
        return self.store.not_stored(chunks)

    def write(self, embedded: EmbeddedBatch) -> None:
        self.store.write(embedded)


@dataclass
class EmbedJob:
    """Everything an actor needs to load its model and handle a batch (sent once, at its start)."""

    model: str | None
    device: str | None
    dtype: str | None
    chunk_size: int
    chunk_overlap: int
    # What leads chunks after a document's first (IngestConfig.chunk_context, resolved).
    context: ChunkContext
    batch_size: int
    max_tokens_per_batch: int | None
    task: str | None
    text_instruction: str | None
    threads: int
    sink: ActorSink
    truncate_dim: int | None = None
    # The quantization resolved on the driver (what the collection records); a GPU actor embeds in float.
    quantize: str | None = None
    # The part weights to read the model at, where not its own (an existing collection's record).
    readout: dict[str, Any] | None = None
    bm25: BM25Config | None = None
    # The decoder tokens each chunk is read with (IngestConfig.decoder_max_length, resolved; None: whole chunks).
    decoder_max_length: int | None = None

    @classmethod
    def for_run(
        cls,
        settings: IngestConfig,
        options: RayOptions,
        *,
        model: str | None,
        device: str | None,
        dtype: str | None,
        sink: ActorSink,
        quantize: str | None = None,
        readout: dict[str, Any] | None = None,
        bm25: BM25Config | None = None,
    ) -> EmbedJob:
        """The job of an ingest or embed run: its chunking and embedding settings, one torch thread per
        CPU of an actor, and the run's sink."""
        return cls(
            model=model,
            device=device,
            dtype=dtype,
            quantize=quantize,
            readout=readout,
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
            context=settings.context,
            batch_size=settings.batch_size,
            max_tokens_per_batch=settings.max_tokens_per_batch,
            task=settings.task,
            text_instruction=settings.text_instruction,
            threads=max(1, int(options.cpus_per_actor)),
            sink=sink,
            truncate_dim=settings.prefix_dim,
            decoder_max_length=settings.decoder_max_length,
            bm25=bm25,
        )


class ChunkEmbedActor:
    """A Ray Data actor: loads the model once, then runs the pipeline's batch step
    (:class:`~c2v_rag.rag.ingestion.pipeline.BatchEmbedder`) on batches of whole, chunked documents, into
    the run's sink."""

    def __init__(self, job: EmbedJob) -> None:
        import ray
        import torch

        from c2v_rag.rag.embedding import Embedder, load_model
        from c2v_rag.store.sparse import BM25Encoder

        device = job.device
        if device is None:
            device = "cuda" if ray.get_gpu_ids() else "cpu"
        if device == "cpu":
            torch.set_num_threads(job.threads)
        # int8 runs on CPUs only: a GPU actor embeds in float, whose vectors search int8 ones alike (check_model)
        quantize = job.quantize if torch.device(device).type == "cpu" else None
        model = load_model(job.model, device=device, dtype=job.dtype, quantize=quantize, readout=job.readout)
        self.core = BatchEmbedder(
            Embedder.for_documents(model, job), BM25Encoder(job.bm25) if job.bm25 is not None else None
        )
        self.sink = job.sink
        self.sink.open()

    def __call__(self, documents: pa.Table) -> pa.Table:
        batch = chunk_batch(documents)
        try:
            embedded = self.core.embed(batch, self.sink)
            self.sink.write(embedded)
        except Exception as err:  # the sink says what a failed batch returns (or raises it)
            return self.sink.failed(documents, batch, err)
        return self.sink.rows(documents, embedded)


def chunk_batch(documents: pa.Table) -> ChunkBatch:
    """The pipeline's batch of a Ray batch of chunked documents (:func:`_chunk_rows`' rows): every
    document whole, so every one is completed in it."""
    rows = documents.select(["doc_id", "doc_hash", "source_root", "point_ids", "texts", "payloads"]).to_pylist()
    return ChunkBatch.of_documents(
        (
            row["doc_id"],
            [
                PendingChunk(pid, text, json.loads(payload), row["source_root"])
                for pid, text, payload in zip(row["point_ids"], row["texts"], row["payloads"], strict=True)
            ],
            row["doc_hash"],
        )
        for row in rows
    )


def document_table(
    documents: pa.Table, embedded: EmbeddedBatch | None, *, ship: bool, error: str | None = None
) -> pa.Table:
    """One row per document of a batch: its chunks' point ids, the ones embedded, and (``ship``) their
    payloads and vectors for the driver to write; ``error`` says why the batch failed (``embedded`` None)."""
    import pyarrow as pa

    todo = embedded.chunks if embedded is not None else []
    where = {c.point_id: i for i, c in enumerate(todo)}
    shipped = embedded if ship else None
    sparse = shipped.sparse if shipped is not None else None
    shipped_columns = ("embedded", "payloads", "vectors", "sparse_indices", "sparse_values", "error")
    rows: dict[str, list[Any]] = {k: [] for k in (*DOCUMENT_COLUMNS, *shipped_columns)}
    for doc in documents.select(list(DOCUMENT_COLUMNS)).to_pylist():
        own = [where[pid] for pid in doc["point_ids"] if pid in where]
        for column in DOCUMENT_COLUMNS:
            rows[column].append(doc[column])
        rows["embedded"].append([todo[i].point_id for i in own])
        rows["payloads"].append([json.dumps(todo[i].payload, ensure_ascii=False) for i in own] if shipped else [])
        rows["vectors"].append([[float(x) for x in shipped.vectors[i]] for i in own] if shipped else [])
        rows["sparse_indices"].append([list(sparse[i][0]) for i in own] if sparse else [])
        rows["sparse_values"].append([[float(x) for x in sparse[i][1]] for i in own] if sparse else [])
        rows["error"].append(error)
    schema = pa.schema(
        [
            *_document_fields(),
            ("embedded", pa.list_(pa.string())),
            ("payloads", pa.list_(pa.string())),
            ("vectors", pa.list_(pa.list_(pa.float32()))),
            ("sparse_indices", pa.list_(pa.list_(pa.int64()))),
            ("sparse_values", pa.list_(pa.list_(pa.float32()))),
            ("error", pa.string()),
        ]
    )
    return pa.table(rows, schema=schema)


def embed_stage(dataset, job: EmbedJob, options: RayOptions):
    """``dataset`` of chunked document rows through the actor pool."""
    import ray

    gpus = options.gpus_per_actor
    if gpus is None:
        gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
    # -1 (no limit) is what Ray Data gives actor pools by default; only other values are passed,
    # through the extra remote arguments that Ray deprecates but still has no named parameter for.
    retries = {
        key: value
        for key, value in (("max_restarts", options.max_restarts), ("max_task_retries", options.max_task_retries))
        if value != -1
    }
    return dataset.map_batches(
        ChunkEmbedActor,
        fn_constructor_kwargs={"job": job},
        batch_size=options.docs_per_batch,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=options.actors),
        num_cpus=options.cpus_per_actor,
        num_gpus=gpus or None,
        **retries,
    )


def user_error(err: BaseException) -> BaseException:
    """The exception a Ray task raised in user code (a bad file, a bad record), unwrapped."""
    seen: BaseException | None = err
    while seen is not None:
        if not type(seen).__module__.startswith("ray"):
            return seen
        seen = getattr(seen, "cause", None) or seen.__cause__
    return err
