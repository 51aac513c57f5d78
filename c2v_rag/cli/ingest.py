"""``c2v-rag ingest``: chunk, embed and store files in a Qdrant collection, resumably.

Its exit code says what to do next (``errors.py``): 1 when ``--on-error continue`` skipped batches.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from c2v_rag.cli.arguments import (
    FORMATS_LISTED,
    PATHS_HELP,
    add_chunk_context,
    add_chunk_options,
    add_decoder_max_length,
    add_file_selection,
    add_model_options,
    add_payload_index,
    add_qdrant_options,
    add_quiet,
    add_ray_options,
    add_reading_limits,
    add_sparse,
    add_truncate_dim,
    collection_from,
    file_selection,
    max_file_bytes,
    payload_indexes_from,
    ray_args,
)
from c2v_rag.cli.dry_run import print_dry_run
from c2v_rag.cli.errors import EXIT_OK, EXIT_PARTIAL

# How often --watch looks at the files, by default (each look lists the folders and stats every file).
WATCH_SECONDS = 10.0

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers
    from c2v_rag.rag import IngestConfig, IngestResult

logger = logging.getLogger(__name__)


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "ingest",
        help="chunk, embed and store files in Qdrant (re-runs add nothing)",
        description="Chunk, embed and store files (or folders of them) in a Qdrant collection: text, Markdown, "
        f"HTML, PDF, Office, e-mail, tables, archives... ({FORMATS_LISTED}). Re-running skips stored chunks "
        "and replaces changed documents; without --sync nothing is ever deleted. Exit codes: 0 done, 1 some "
        "batches failed (--on-error continue), 2 bad input or setup (a file or record found bad midway stops the "
        "run there, what was embedded before it is kept: fix it and re-run), 3 failed midway (re-run "
        "to resume), 130 interrupted, 143 terminated (SIGTERM; as Ctrl-C).",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help=PATHS_HELP)
    add_qdrant_options(parser)
    add_chunk_options(parser)
    parser.add_argument(
        "--batch-size", type=int, default=None, help="chunks embedded and uploaded together (default 256)"
    )
    parser.add_argument(
        "--on-error",
        choices=["raise", "continue"],
        default=None,
        help="stop at the first failed batch, unreadable file or bad record (default), or report it, skip it and go on",
    )
    parser.add_argument(
        "--sync",
        action="store_true",
        help="make the collection mirror PATHs: delete the points of files gone from them "
        "(never points from other paths; nothing when a PATH is missing or a file unreadable)",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=None,
        metavar="N",
        help="attempts per Qdrant request, reaching the server included (default 5)",
    )
    add_reading_limits(parser, "ingest")
    add_file_selection(parser)
    add_quiet(parser)
    add_sparse(parser)
    add_chunk_context(parser, "what the collection recorded, else lead")
    add_decoder_max_length(parser)
    parser.add_argument(
        "--versioned",
        action="store_true",
        help="--collection is an alias: a new one gets NAME_v1 behind it once written (see c2v-rag reindex)",
    )
    add_payload_index(parser)
    parser.add_argument(
        "--watch",
        nargs="?",
        type=float,
        const=WATCH_SECONDS,
        default=None,
        metavar="SECONDS",
        help="after the ingest, keep watching PATHs and ingest again when a file is added, changed or deleted "
        f"(checked every SECONDS, default {WATCH_SECONDS:g}; with --sync deleted files lose their points); "
        "Ctrl-C stops",
    )
    add_truncate_dim(parser)
    add_ray_options(parser)
    add_model_options(parser)
    parser.set_defaults(on_interrupt="re-run the same command to resume (stored chunks are skipped)")
    return parser


def run(args: argparse.Namespace) -> int:
    """Ingest the paths and print the summary (with --watch, again at each change); exit 1 when some batches
    were skipped."""
    from c2v_rag.rag import IngestConfig

    fields = {"retry_attempts": args.retries, "max_file_bytes": max_file_bytes(args)}
    config = IngestConfig(**{k: v for k, v in fields.items() if v is not None}, **file_selection(args))
    if args.watch is not None and args.watch <= 0:
        raise ValueError(f"--watch {args.watch:g}: pass the seconds between checks, more than 0")
    paths = [Path(p) for p in args.paths]
    if args.dry_run:
        if args.watch is not None:
            raise ValueError("--dry-run lists what one ingest would read; leave --watch out")
        return print_dry_run(paths, config, listed=not args.quiet)
    if args.watch is not None:
        return _watch(args, paths, config)
    collection = collection_from(args)
    result = collection.ingest(paths, **_ingest_keywords(args, config))
    print(f"ingested {result.summary()}")
    if result.chunks:
        _build_reranker(collection, show=not args.quiet)
    return EXIT_OK if result.ok else EXIT_PARTIAL


def _build_reranker(collection: Any, show: bool) -> None:
    """The int8 reranker the next ``c2v-rag search`` loads, built now where it is not yet (once per machine and base
    decoder, seconds, under its own bar) rather than in that search; the model is the one the ingest embedded
    with."""
    from c2v_rag.cpu.build_progress import build_bar_shown
    from c2v_rag.rag.retrieval.reranking import auto_reranker, auto_reranker_unbuilt

    # The ingest has succeeded and its points are stored: a reranker that fails here must not turn that into an
    # error exit, and the first search tries again (and says why, as it would have).
    try:
        if auto_reranker_unbuilt(collection.model):
            with build_bar_shown(show):  # -q: no bar, as for the ingest's own
                auto_reranker(collection.model, None)
    except Exception as err:  # an optimization: any failure of torch, ONNX Runtime or the cache is only reported
        logger.warning("the reranker searches use was not built now (%s); the first search builds it", err)


def _watch(args: argparse.Namespace, paths: list[Path], config: IngestConfig) -> int:
    """Ingest, then again at each change to the files under ``paths`` (:meth:`~c2v_rag.Collection.watch`, every
    ``--watch`` seconds), each re-run's summary stamped with the time, until Ctrl-C. A failed re-run is reported and
    the watch goes on; Ctrl-C during a run stops it as it stops any ingest (exit 130)."""
    from c2v_rag.cli.errors import report

    code = EXIT_OK
    runs = 0

    def done(result: IngestResult) -> None:
        nonlocal code, runs
        stamp = time.strftime("%H:%M:%S ") if runs else ""
        print(f"{stamp}ingested {result.summary()}", flush=True)
        if not runs:
            print(f"watching {', '.join(map(str, paths))} every {args.watch:g} s; Ctrl-C stops", flush=True)
        runs += 1
        code = EXIT_OK if result.ok else EXIT_PARTIAL

    def failed(err: Exception) -> None:
        nonlocal code
        # Stamped as the re-runs' summaries are: a failure an hour into a watch says when it came.
        code = report(err, args.verbose, stamp=time.strftime("%H:%M:%S ") if runs else "")

    keywords = _ingest_keywords(args, config)
    collection_from(args).watch(paths, interval=args.watch, on_result=done, on_failure=failed, **keywords)
    return code


def _ingest_keywords(args: argparse.Namespace, config: IngestConfig) -> dict[str, Any]:
    """The ingest's keywords the flags give (what :meth:`~c2v_rag.Collection.ingest` and ``watch`` take)."""
    return {
        "chunk_size": args.chunk_size,
        "chunk_overlap": args.chunk_overlap,
        "batch_size": args.batch_size,
        "on_error": args.on_error,
        "sync": args.sync,
        "show_progress": not args.quiet,
        "sparse": args.sparse,
        "versioned": args.versioned,
        "payload_indexes": payload_indexes_from(args),
        "config": config,
        "truncate_dim": args.truncate_dim,
        "chunk_context": args.chunk_context,
        "decoder_max_length": args.decoder_max_length,
        **ray_args(args),
    }
