"""``c2v-rag embed``: chunk and embed files into Parquet, with no vector store."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from c2v_rag.cli.arguments import (
    FORMATS_LISTED,
    PATHS_HELP,
    add_chunk_context,
    add_chunk_options,
    add_decoder_max_length,
    add_file_selection,
    add_model_options,
    add_quiet,
    add_ray_options,
    add_reading_limits,
    add_truncate_dim,
    file_selection,
    max_file_bytes,
    ray_args,
)
from c2v_rag.cli.dry_run import print_dry_run
from c2v_rag.cli.errors import EXIT_OK

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "embed",
        help="chunk and embed files into Parquet (ids, text, metadata, vector), with no vector store",
        description="Chunk and embed files (or folders of them: text, Markdown, HTML, PDF, Office, e-mail, "
        f"tables, archives...; {FORMATS_LISTED}) into Parquet files under --out: one row per chunk with the "
        "point id ingest would give it, the document id, chunk index, text, metadata (JSON) and the vector. On "
        "this machine, or on Ray with --ray. `c2v-rag load DIR` stores them in a collection later, with no model.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help=PATHS_HELP)
    parser.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="the folder for the Parquet files: a new or empty one, or one an earlier embed wrote, which this run "
        "resumes (only chunks no file holds are embedded; the model and chunk settings must be the same)",
    )
    add_chunk_options(parser)
    add_chunk_context(parser, "what the folder's files recorded, else lead")
    add_decoder_max_length(
        parser, "what the folder's files recorded, else 96 for a model with a Contextual token (the presets)"
    )
    parser.add_argument("--batch-size", type=int, default=None, help="chunks embedded together (default 256)")
    parser.add_argument(
        "--on-error",
        choices=["raise", "continue"],
        default=None,
        help="stop at the first unreadable file or bad record (default), or skip it and go on",
    )
    add_reading_limits(parser, "embed")
    add_file_selection(parser)
    add_quiet(parser)
    add_truncate_dim(parser)
    add_ray_options(parser)
    add_model_options(parser)
    parser.set_defaults(on_interrupt="re-run the same command to resume (chunks already written are skipped)")
    return parser


def run(args: argparse.Namespace) -> int:
    """Embed the paths into ``--out`` and print the summary."""
    from pathlib import Path

    from c2v_rag.rag.ingestion.config import IngestConfig
    from c2v_rag.rag.ingestion.embed import embed

    limit = max_file_bytes(args)
    config = IngestConfig(**({"max_file_bytes": limit} if limit is not None else {}), **file_selection(args))
    paths = [Path(p) for p in args.paths]
    if args.dry_run:
        return print_dry_run(paths, config, listed=not args.quiet)
    result = embed(
        paths,
        args.out,
        model=args.model,
        device=args.device,
        dtype=args.dtype,
        quantize=args.quantize,
        chunk_size=args.chunk_size,
        chunk_overlap=args.chunk_overlap,
        batch_size=args.batch_size,
        on_error=args.on_error,
        show_progress=not args.quiet,
        truncate_dim=args.truncate_dim,
        chunk_context=args.chunk_context,
        decoder_max_length=args.decoder_max_length,
        config=config,
        **ray_args(args),
    )
    print(f"embedded {result.summary()}")
    return EXIT_OK
