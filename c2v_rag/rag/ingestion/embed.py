"""``embed``: documents -> chunks -> vectors -> Parquet files, with no vector store.

For lakehouse tables and offline pipelines: the rows carry what a Qdrant point would (the same
point ids, chunk texts, metadata and vectors as :func:`~c2v_rag.rag.ingestion.ingest.ingest`), in the
layout of :mod:`~c2v_rag.rag.ingestion.parquet_rows`; :mod:`~c2v_rag.rag.admin.load_embedded` stores them in a
collection later.

It runs in this process (``engine="local"``, files ``part-00000.parquet``, ...) or on Ray
(``engine="ray"``, Ray Data's ``write_parquet``, files named by Ray). A run into a folder that earlier runs wrote
resumes it: only the chunks no file holds yet are embedded (:mod:`~c2v_rag.rag.ingestion.parquet_folder`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from c2v_rag.core.extras import require
from c2v_rag.core.interrupts import caused_by_ctrl_c
from c2v_rag.documents.chunking import ChunkContext, check_chunk_size
from c2v_rag.documents.files import ReadLog, ReadOptions
from c2v_rag.rag.errors import EmbedInterrupted
from c2v_rag.rag.ingestion.config import IngestConfig
from c2v_rag.rag.ingestion.engine import choose_engine
from c2v_rag.rag.ingestion.parquet_folder import EmbedFolder, embed_record
from c2v_rag.rag.ingestion.ray_dataflow import RayOptions
from c2v_rag.rag.options import ModelOptions
from c2v_rag.rag.results import EmbedResult
from c2v_rag.store.collection import config_fingerprint

logger = logging.getLogger(__name__)


def embed(
    docs: Any,
    out: str | Path,
    *,
    model: str | Path | None = None,
    device: str | None = None,
    dtype: str | None = None,
    quantize: str | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    batch_size: int | None = None,
    on_error: Literal["raise", "continue"] | None = None,
    exclude: list[str] | None = None,
    text_suffixes: list[str] | None = None,
    every_format: bool | None = None,
    show_progress: bool | None = None,
    truncate_dim: int | Literal["full"] | None = None,
    chunk_context: ChunkContext | None = None,
    decoder_max_length: int | None = None,
    config: Any | None = None,
    engine: Literal["local", "ray"] = "local",
    ray: RayOptions | str | None = None,
    rows_per_file: int = 100_000,
) -> EmbedResult:
    """Chunk and embed ``docs`` into Parquet files under ``out``: a new or empty folder, or one earlier runs of
    ``embed`` wrote, which this run resumes.

    Args:
        docs: what :func:`~c2v_rag.ingest` takes: strings, dicts, framework documents, files or
            folders of the formats ingest reads.
        model: a preset name or a variant directory (None: the default preset); ``device``, ``dtype`` and
            ``quantize`` as for ``ingest`` (:class:`~c2v_rag.rag.options.ModelOptions`).
        chunk_size, chunk_overlap, batch_size, on_error, exclude, text_suffixes, every_format, show_progress,
            truncate_dim, chunk_context, decoder_max_length: as for ``ingest`` (``config``: an
            :class:`~c2v_rag.rag.IngestConfig` with the rest).
        engine: ``"local"`` (this process) or ``"ray"`` (:class:`RayOptions` or an address in ``ray``).
        rows_per_file: chunks per Parquet file with the local engine (which also closes a file after 10 minutes,
            so that a run killed outright loses at most that much).

    Point ids, texts, metadata and vectors are the ones ``ingest`` stores for the same input and model. Each file
    records the model and chunking settings; a run into a folder that holds files of earlier runs (one that was
    interrupted, or a folder of more documents) embeds only the chunks none of them holds, with the same settings,
    as a re-run of ``ingest`` does. Other settings, and Parquet files that ``embed`` did not write, are refused
    before any work; nothing is overwritten. A run holds the folder's lock: a second one into it is refused
    (:class:`~c2v_rag.rag.StoreLockedError`) until the first ends.
    """
    chosen = ModelOptions.as_given({"model": model, "device": device, "dtype": dtype, "quantize": quantize})
    settings = IngestConfig.with_overrides(
        config,
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        batch_size=batch_size,
        on_error=on_error,
        exclude=exclude,
        text_suffixes=text_suffixes,
        every_format=every_format,
        show_progress=show_progress,
        truncate_dim=truncate_dim,
        chunk_context=chunk_context,
        decoder_max_length=decoder_max_length,
    )
    if settings.sparse is not None or settings.sync:
        raise ValueError("embed writes dense vectors to Parquet: sparse= and sync= are ingest options")
    write = choose_engine(_WRITERS, engine, ray)
    # before any model loads or document is read: without it, every chunk would be embedded and then lost
    require("pyarrow.parquet", "embed (its Parquet files)", "parquet", distribution="pyarrow")
    if chosen.model is not None and not isinstance(chosen.model, (str, Path)):
        raise TypeError("embed takes the model as a preset name or a variant directory")
    resolved = chosen.resolve()
    check_chunk_size(settings.chunk_size, resolved.config.max_length)
    with EmbedFolder.locked(out) as folder:
        # New vectors get the defaults where none is asked; a folder earlier runs wrote, the settings they recorded.
        settings = settings.for_record(
            folder.recorded, resolved.config, holder=str(folder.path), instead="pass a new folder"
        )
        resolved = resolved.reading(folder.recorded)  # the part weights the folder's vectors were read at
        quantize_as = resolved.quantization(folder.recorded)
        record = embed_record(
            config_fingerprint(
                resolved.config,
                resolved.reference,
                resolved.digests,
                truncate_dim=settings.prefix_dim,
                quantize=quantize_as,
                document_prompt=settings.document_prompt,
                chunk_context=settings.chunk_context,
                decoder_max_length=settings.decoder_max_length,
            ),
            settings.chunk_size,
            settings.chunk_overlap,
        )
        folder.check(record)
        folder.prepare()
        log = ReadLog()
        read = settings.read_options()
        started = time.perf_counter()
        result = write(
            docs,
            folder,
            settings,
            read,
            log,
            model=chosen.model,
            device=chosen.device,
            dtype=chosen.dtype,
            quantize=quantize_as,
            readout=resolved.readout,
            record=record,
            ray=ray,
            rows_per_file=rows_per_file,
        )
    # The local writer counts its own seconds, from its model's load, as ingest does.
    result.seconds = result.seconds or time.perf_counter() - started
    result.record_reading(log)
    return result


def _embed_here(
    docs: Any,
    folder: EmbedFolder,
    settings: IngestConfig,
    read: ReadOptions,
    log: ReadLog,
    *,
    model: Any,
    device: str | None,
    dtype: str | None,
    quantize: str | None,
    readout: dict[str, Any] | None,
    record: dict[str, Any],
    ray: Any,
    rows_per_file: int,
) -> EmbedResult:
    """``engine="local"``: this process embeds, and writes ``part-NNNNN.parquet`` files of
    ``rows_per_file`` chunks after the folder's own (``ray`` is unused). The run's seconds count from the
    model's load on, as an ingest's do, so that a first int8 build does not show as a low chunk rate."""
    from c2v_rag.cpu.build_progress import build_bar_shown
    from c2v_rag.documents.chunking import TokenChunker
    from c2v_rag.documents.documents import input_size, iter_documents
    from c2v_rag.rag.embedding import Embedder, load_model
    from c2v_rag.rag.ingestion.pipeline import (
        BatchEmbedder,
        DocumentBatcher,
        IngestCore,
        IngestProgress,
        StopAtFirstFailure,
    )
    from c2v_rag.rag.ingestion.sinks import ParquetSink

    documents = iter_documents(docs, options=read, log=log)
    size = input_size(docs, log)  # counted before the model loads and anything is read
    with build_bar_shown(settings.show_progress):  # a first int8 load's bar, like the run's
        c2v = load_model(model, device=device, dtype=dtype, quantize=quantize, readout=readout)
    started = time.perf_counter()
    batcher = DocumentBatcher(
        TokenChunker(c2v, settings.chunk_size, settings.chunk_overlap, context=settings.context),
        settings.batch_size,
        log if size.unit == "file" else None,
        clashes=log if settings.on_error == "continue" else None,
    )
    # On the summary's clock, so that the bar's chunk rate is the summary's.
    progress = IngestProgress(f"Embedding into {folder.path}", size, show=settings.show_progress, started=started)
    core = IngestCore(batcher, BatchEmbedder(Embedder.for_documents(c2v, settings)), StopAtFirstFailure(), progress)
    sink = ParquetSink(folder.path, rows_per_file, record=record, stored=folder.stored, first_part=folder.next_part())

    def finish() -> EmbedResult:
        try:
            sink.close()
        finally:
            seconds = time.perf_counter() - started
            # the chunks done, written or found there: the summary's count
            progress.close(sink.rows + sink.unchanged, seconds)
        return EmbedResult(
            out=str(folder.path),
            files=sink.files,
            documents=batcher.documents,
            duplicate_documents=batcher.duplicate_documents,
            chunks=sink.rows,
            unchanged=sink.unchanged,
            seconds=seconds,
        )

    try:
        core.run(documents, sink)
    except BaseException as err:
        done = finish()  # the rows written so far stay readable
        # Ctrl-C, also inside a library that turns it into its own error (pydantic-core's serializer does)
        if caused_by_ctrl_c(err):
            raise EmbedInterrupted(
                f"interrupted; {done.chunks} chunks were written to {done.out}. Re-run the same embed to resume: "
                "chunks already written are skipped.",
                done,
            ) from None
        raise
    return finish()


def _embed_on_ray(
    docs: Any,
    folder: EmbedFolder,
    settings: IngestConfig,
    read: ReadOptions,
    log: ReadLog,
    *,
    model: Any,
    device: str | None,
    dtype: str | None,
    quantize: str | None,
    readout: dict[str, Any] | None,
    record: dict[str, Any],
    ray: RayOptions | str | None,
    rows_per_file: int,
) -> EmbedResult:
    """``engine="ray"``: the actors embed and Ray Data writes the files (named by Ray; ``rows_per_file``
    is unused)."""
    import pyarrow.parquet as pq

    from c2v_rag.rag.ingestion.points import skip_clash
    from c2v_rag.rag.ingestion.ray_dataflow import (
        EmbedJob,
        ExportRows,
        RaySession,
        embed_stage,
        plan_sources,
        source_dataset,
        start_skip_tally,
        start_tally,
        user_error,
    )
    from c2v_rag.rag.ingestion.ray_logs import quiet_ray

    options = RayOptions.resolve(ray)
    plan = plan_sources(docs, read, log)
    reference = ModelOptions.as_given({"model": model}).resolve().reference
    documents = repeated = unchanged = 0
    try:
        # Ray Data's own bars stay: they are the run's progress here.
        with quiet_ray(bars_off=False), RaySession(options) as ray_module:
            tally = start_tally(ray_module, settings.on_error)
            skips = start_skip_tally(ray_module)
            sink = ExportRows(stored=folder.stored, record=record, tally=tally)
            job = EmbedJob.for_run(
                settings,
                options,
                model=reference,
                device=device,
                dtype=dtype,
                quantize=quantize,
                readout=readout,
                sink=sink,
            )
            try:
                # Writing, like reading, asks for no CPU (the actors may hold them all).
                embed_stage(source_dataset(plan, read, job, options, skips), job, options).write_parquet(
                    str(folder.path),
                    ray_remote_args={"num_cpus": 0},
                    concurrency=options.chunk_tasks or 2 * options.actors,
                )
            except ray_module.exceptions.RayError as err:
                refusal = ray_module.get(tally.refusal.remote())
                if refusal is not None:
                    raise ValueError(refusal) from None
                cause = user_error(err)
                if cause is err:
                    raise
                raise cause from None
            documents, repeated, unchanged = ray_module.get(tally.totals.remote())
            log.take_skips(ray_module.get(skips.total.remote()))
            for doc_id, source in ray_module.get(tally.clashes.remote()):
                skip_clash(log, doc_id, source)
    finally:  # the session is closed: no task writes any more
        files = [str(f) for f in folder.drop_cut_files()]
    result = EmbedResult(
        out=str(folder.path), files=files, documents=documents, duplicate_documents=repeated, unchanged=unchanged
    )
    result.chunks = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    return result


# engine= -> the function that embeds and writes the Parquet files.
_WRITERS: dict[str, Callable[..., EmbedResult]] = {"local": _embed_here, "ray": _embed_on_ray}
