"""The Ray ingest engine (``engine="ray"``): the driver's side of an ingest over a Ray cluster.

The cluster reads, chunks and embeds (:mod:`c2v_rag.rag.ingestion.ray_dataflow` has the dataflow); the driver
chooses where the actors' batches go (the run's :class:`~c2v_rag.rag.ingestion.ray_dataflow.ActorSink`),
counts every document, writes the embedded chunks where the actors cannot (``write="driver"``, an
embedded store: through the in-process engine's :class:`~c2v_rag.rag.ingestion.sinks.QdrantSink`), and
hands an embedded store to the one writing actor and back (``write="workers"``).
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from c2v_rag.core.progress_bar import ticking, unsized_terminal
from c2v_rag.documents.files import ReadLog, ReadOptions
from c2v_rag.rag.errors import StoreLockedError
from c2v_rag.rag.ingestion.config import IngestConfig
from c2v_rag.rag.ingestion.engine import IngestPlan, IngestStore, raise_failed
from c2v_rag.rag.ingestion.pipeline import ChunkBatch, EmbeddedBatch, chunks_and_rate, printed_above_bars
from c2v_rag.rag.ingestion.points import PendingChunk, PointWriter, SeenDocuments, skip_clash
from c2v_rag.rag.ingestion.preflight import open_client
from c2v_rag.rag.ingestion.ray_dataflow import (
    ActorSink,
    EmbedJob,
    RayOptions,
    RaySession,
    ShipToDriver,
    SourcePlan,
    WriteFromActors,
    embed_stage,
    plan_sources,
    require_ray,
    source_dataset,
    start_skip_tally,
    user_error,
)
from c2v_rag.rag.ingestion.ray_logs import quiet_ray
from c2v_rag.rag.ingestion.sinks import QdrantSink, Retry, retrying_call
from c2v_rag.rag.results import FailedBatch, IngestResult
from c2v_rag.store.collection import QdrantConfig, config_fingerprint
from c2v_rag.store.point_id_set import PointIdSet
from c2v_rag.store.vectors import CollectionVectors

if TYPE_CHECKING:
    from c2v_rag.store.store_backend import StoreClient

# How long the driver waits for the one writing actor to release an embedded store (write="workers").
HANDOFF_WAIT_S = 60.0


class RayEngine:
    """The :class:`~c2v_rag.rag.ingestion.engine.IngestEngine` that runs on a Ray cluster.

    Made before anything runs: it refuses, at once, what a Ray run cannot do (Ray Data missing,
    ``sync=True``, a loaded model object).
    """

    def __init__(self, *, model: Any, settings: IngestConfig, ray: RayOptions | str | None = None) -> None:
        require_ray("ingest(engine='ray')")
        self.options = RayOptions.resolve(ray)
        check_ray_ingest(model, settings)
        self.plan = SourcePlan()
        self.read = ReadOptions()
        self.log = ReadLog()

    def open_input(self, docs: Any, read: ReadOptions, log: ReadLog) -> None:
        self.plan = plan_sources(docs, read, log)
        self.read = read
        self.log = log  # what the driver's listing skipped and left out; the file tasks' skips are added after the run

    def fingerprint(self, plan: IngestPlan) -> dict[str, Any]:
        # The actors load the model by its reference (a preset name or an absolute variant
        # directory, the same on every node); the driver needs its config alone.
        return config_fingerprint(
            plan.model.config,
            plan.model.reference,
            plan.model.digests,
            truncate_dim=plan.settings.prefix_dim,
            quantize=plan.quantization,
            document_prompt=plan.settings.document_prompt,
            chunk_context=plan.settings.chunk_context,
            decoder_max_length=plan.settings.decoder_max_length,
        )

    def run(self, plan: IngestPlan, store: IngestStore) -> IngestResult:
        ray_run = RayIngestRun(
            store.client,
            store.collection,
            plan.target,
            plan.settings,
            plan.layout,
            model=plan.model.reference,
            device=plan.model.options.device,
            dtype=plan.model.options.dtype,
            quantize=plan.quantization,  # what the collection records (the default resolved on the driver)
            readout=plan.model.readout,  # the part weights an existing collection recorded, where not the model's
            created=store.created,
            options=self.options,
            own_client=store.own_client,
            log=self.log,
        )
        try:
            result = ray_run.execute(self.plan, self.read)
        finally:
            store.client = ray_run.client  # reopened when the one actor held an embedded store
        result.record_reading(self.log)
        raise_failed(result, plan.settings)
        return result


def check_ray_ingest(model: Any, settings: IngestConfig) -> None:
    """What ``engine="ray"`` cannot do, refused before anything runs."""
    if settings.sync:
        raise ValueError(
            "sync=True is not supported with engine='ray': a sync needs one process to see every "
            "document read. Ingest with engine='ray', then run the same ingest with sync=True on "
            "the local engine (every chunk is stored already, so it embeds nothing)"
        )
    if model is not None and not isinstance(model, (str, Path)):
        raise TypeError(
            "engine='ray' loads the model in every actor from its name: pass a preset name or a "
            "variant directory (save a loaded model with save_pretrained(dir)), not a model object"
        )


class RayIngestRun:
    """The driver's side of ``ingest(engine="ray")``: counts every document, and writes them with
    ``write="driver"``."""

    def __init__(
        self,
        client: Any,
        collection: str,
        target: QdrantConfig,
        settings: IngestConfig,
        layout: CollectionVectors,
        *,
        model: str | None,
        device: str | None,
        dtype: str | None,
        created: bool,
        quantize: str | None = None,
        readout: dict[str, Any] | None = None,
        options: RayOptions,
        own_client: bool,
        log: ReadLog | None = None,
    ) -> None:
        self.client = client
        self.collection = collection
        self.target = target
        self.settings = settings
        self.layout = layout
        self.model, self.device, self.dtype, self.quantize, self.readout = model, device, dtype, quantize, readout
        self.created = created
        self.options = options
        self.own_client = own_client
        self.write = options.write if options.write != "auto" else ("workers" if target.is_server else "driver")
        if self.write == "workers" and not target.is_server:
            if options.actors != 1:
                raise ValueError(
                    f"write='workers' with embedded Qdrant ({target.location}) needs actors=1: an embedded "
                    "directory opens in one process only. Use write='driver' (the default there), or a Qdrant "
                    "server (qdrant_url) for parallel writes"
                )
            if not own_client:
                raise ValueError(
                    "write='workers' with embedded Qdrant needs ingest to open the store itself "
                    "(pass path=, not client=)"
                )
        self.result = IngestResult(collection=collection, location=target.location)
        # A second document under an id met before is skipped (on_error="continue") where the driver writes; where
        # the actors write, it may be stored by the time the driver meets it, so the run is refused.
        self.log = log if log is not None else ReadLog()
        self.seen = SeenDocuments(settings.on_error if self.write == "driver" else "raise")
        self.startup_seconds = 0.0
        self._started = time.perf_counter()

    def _actor_sink(self) -> ActorSink:
        """Where the actors' embedded batches go, chosen once for the run."""
        if self.write == "workers":
            return WriteFromActors(
                self.target, self.collection, self.layout, fresh=self.created, retry=Retry.of(self.settings)
            )
        # The ids stored as the run begins, so that the actors embed nothing twice.
        stored = PointIdSet() if self.created else PointIdSet.from_ids(_stored_ids(self.client, self.collection))
        return ShipToDriver(stored=stored)

    def _job(self) -> EmbedJob:
        return EmbedJob.for_run(
            self.settings,
            self.options,
            model=self.model,
            device=self.device,
            dtype=self.dtype,
            quantize=self.quantize,
            readout=self.readout,
            bm25=self.layout.bm25,
            sink=self._actor_sink(),
        )

    def execute(self, plan: SourcePlan, read: ReadOptions) -> IngestResult:
        started = self._started = time.perf_counter()
        job = self._job()
        handoff = self.write == "workers" and not self.target.is_server
        sink = QdrantSink(
            PointWriter(
                self.client, self.collection, self.layout, retrying_call(Retry.of(self.settings)), fresh=self.created
            )
        )
        # The bar weighs every document's share of the input (SourcePlan), as the in-process engine's weighs
        # files, so it has a percentage and an ETA from the start; the actors' rows come back in any order.
        progress = tqdm(
            desc=f"Ingesting into {self.collection} on Ray",
            total=plan.weight or None,
            bar_format="{l_bar}{bar}| [{elapsed}<{remaining}{postfix}]",
            smoothing=0,
            miniters=0,
            disable=not self.settings.show_progress,
            **unsized_terminal(sys.stderr),
        )
        # Until the first batch comes back (Ray starting, then the actors loading the model), the bar's clock runs and
        # its postfix says what is awaited; the first document's count replaces it.
        progress.set_postfix_str("starting Ray", refresh=False)
        try:
            with quiet_ray(bars_off=True), ticking(progress), printed_above_bars(), RaySession(self.options) as ray:
                self.startup_seconds = time.perf_counter() - started
                progress.set_postfix_str(_awaiting_actors(self.options.actors), refresh=False)
                if handoff:
                    self.client.close()  # the one actor opens the embedded directory for the run
                skips = start_skip_tally(ray)
                self._consume(
                    ray,
                    embed_stage(source_dataset(plan, read, job, self.options, skips), job, self.options),
                    sink,
                    progress,
                )
                self.log.take_skips(ray.get(skips.total.remote()))
        finally:
            progress.close()
            if handoff:
                # Ray ends the actor once the driver holds nothing that could rebuild the blocks it
                # returned; _consume has dropped its references, and a collection frees any cycle left.
                gc.collect()
                self.client = self._reopen_after_handoff()
                if self.target.is_edge:
                    # Ray ends the actor without closing its client, so the points it wrote are in Edge's
                    # write-ahead log but not in an HNSW graph (Edge builds one only when asked): build it
                    # here, as the actor's close() would have (searches of unindexed points scan them all).
                    self.client.optimize(self.collection)
        self.result.seconds = time.perf_counter() - started
        return self.result

    def _consume(self, ray: Any, results: Any, sink: QdrantSink, progress: tqdm) -> None:
        """Count every document row of ``results`` (the actors' Dataset), and write them with
        ``write="driver"``.

        Holds the Dataset and its batches only while it runs, also when it raises: an actor pool lives while
        the driver holds a block it returned (Ray keeps the actor to rebuild the block if it is lost),
        and with write="workers" on an embedded store that actor holds the store's lock.
        """
        pending: list[dict[str, Any]] = []
        table = None
        try:
            for table in results.iter_batches(batch_size=None, batch_format="pyarrow"):
                for row in table.to_pylist():
                    if self._count(row, progress) and self.write == "driver":
                        pending.append(row)
                        if sum(len(r["embedded"]) for r in pending) >= self.settings.batch_size:
                            self._write(sink, pending)
                            pending = []
                if self.result.failed and self.settings.on_error == "raise":
                    break
            else:  # every row is in; the documents skipped unread (a bad file or record) never came back
                if progress.total is not None:
                    progress.update(max(0.0, progress.total - progress.n))
        except ray.exceptions.RayError as err:
            cause = user_error(err)
            if cause is err:
                raise
            raise cause from None
        finally:
            if pending:
                self._write(sink, pending)
            results = table = None  # what a raised exception's traceback would otherwise keep

    def _reopen_after_handoff(self) -> StoreClient:
        """The embedded store again, once the actor that wrote into it has let go.

        Ray tears the actor pool down after the last batch has reached the driver, asynchronously:
        the actor's client, and the directory's file lock with it, can outlive the run by a moment
        (seconds on a loaded machine). Every batch is stored by then, so waiting loses nothing.
        """
        s = self.settings
        deadline = time.monotonic() + HANDOFF_WAIT_S
        while True:
            try:
                return open_client(
                    self.target, attempts=s.retry_attempts, initial_wait=s.retry_initial_wait, max_wait=s.retry_max_wait
                )
            except StoreLockedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _count(self, row: dict[str, Any], progress: tqdm) -> bool:
        """Record a document's row; False for a repeat of a document already seen, or one skipped for its id."""
        met = self.seen.meet(row["doc_id"], row["fingerprint"], row["source"])
        new = met == "new"
        if met == "clash":
            skip_clash(self.log, row["doc_id"], row["source"])
        elif new:
            self.result.documents += 1
            self.result.chunks += len(row["point_ids"])
            self.result.empty_documents += not row["point_ids"]
        else:
            self.result.duplicate_documents += 1
        seconds = time.perf_counter() - self._started
        progress.set_postfix_str(chunks_and_rate(self.result.chunks, seconds), refresh=False)
        progress.update(row["weight"])  # a repeat was read too
        if not new:
            return False
        if row["error"] is not None:
            self.result.failed.append(
                FailedBatch(doc_ids=[row["doc_id"]], chunks=len(row["point_ids"]), error=row["error"])
            )
            return False
        if self.write == "workers":
            self.result.chunks_written += len(row["embedded"])
            self.result.chunks_unchanged += len(row["point_ids"]) - len(row["embedded"])
        return True

    def _write(self, sink: QdrantSink, rows: list[dict[str, Any]]) -> None:
        """Write documents the actors embedded (``write="driver"``) through the in-process engine's sink."""
        # Every chunk of these documents: the sink's check claims the source root of the stored ones
        # (which the actors skipped), exactly as in the in-process engine.
        batch = ChunkBatch.of_documents(
            (
                row["doc_id"],
                [PendingChunk(pid, "", {}, row["source_root"]) for pid in row["point_ids"]],
                row["doc_hash"],
            )
            for row in rows
        )
        todo = sink.not_stored(batch.chunks)
        shipped = {pid: (row, i) for row in rows for i, pid in enumerate(row["embedded"])}
        missing = {c.point_id for c in todo} - shipped.keys()
        if missing:
            raise RuntimeError(
                f"{len(missing)} chunks were skipped as stored but are not in {self.collection!r}; "
                "was the collection written by another client during the run? Re-run the ingest"
            )
        where = [shipped[c.point_id] for c in todo]
        chunks = [
            PendingChunk(row["embedded"][i], "", json.loads(row["payloads"][i]), row["source_root"]) for row, i in where
        ]
        vectors = np.asarray([row["vectors"][i] for row, i in where], dtype=np.float32)
        sparse = (
            [(row["sparse_indices"][i], row["sparse_values"][i]) for row, i in where]
            if self.layout.bm25 is not None
            else None
        )
        embedded = EmbeddedBatch(batch, chunks, vectors, sparse)
        sink.write(embedded)
        self.result.chunks_written += len(embedded.chunks)
        self.result.chunks_unchanged += embedded.unchanged


def _stored_ids(client: Any, collection: str) -> Iterator[str]:
    offset = None
    while True:
        records, offset = client.scroll(collection, limit=4096, offset=offset, with_payload=False, with_vectors=False)
        yield from (str(r.id) for r in records)
        if offset is None:
            return


def _awaiting_actors(count: int) -> str:
    """The bar's postfix while the actors start: what the first batch waits for."""
    return "the actor loads the model, then embeds" if count == 1 else f"{count} actors load the model, then embed"
