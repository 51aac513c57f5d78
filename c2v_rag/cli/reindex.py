"""``c2v-rag reindex``: re-embed the collection behind an alias with another model, then switch the alias."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Literal

from c2v_rag.cli.arguments import (
    add_decoder_max_length,
    add_model_options,
    add_qdrant_options,
    add_quiet,
    collection_from,
)

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers

# --sparse's words as reindex's ``sparse`` argument: keep the old collection's setting, BM25, or none.
_SPARSE: dict[str, Literal["keep", "bm25"] | None] = {"keep": "keep", "bm25": "bm25", "none": None}


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "reindex",
        help="re-embed the collection behind an alias with another model, then switch the alias",
        description="Fill NAME_v(n+1) from the chunks behind the alias --collection, embedded with --model, then "
        "point the alias at it in one step; searches keep running on the old one meanwhile. A plain collection "
        "becomes an alias with --convert.",
    )
    add_qdrant_options(parser)
    parser.add_argument(
        "--sparse",
        choices=["keep", "bm25", "none"],
        default="keep",
        help="BM25 sparse vectors: keep the old collection's setting (default), add or drop them",
    )
    parser.add_argument("--batch-size", type=int, default=256, help="chunks embedded and uploaded together")
    parser.add_argument("--drop-previous", action="store_true", help="delete the old collection after the switch")
    parser.add_argument(
        "--convert",
        action="store_true",
        help="--collection is a plain collection (an ingest without --versioned): keep its points as NAME_v1, "
        "re-embed into NAME_v2 and put the alias NAME in its place (searches on NAME fail for a moment)",
    )
    add_decoder_max_length(parser, default="what the collection recorded")
    add_quiet(parser)
    add_model_options(parser, "the new variant directory or preset (default: the default preset)")
    parser.set_defaults(on_interrupt="the alias was not switched and the new collection is dropped; run it again")
    return parser


def run(args: argparse.Namespace) -> int:
    """Reindex and print the summary."""
    result = collection_from(args).reindex(
        sparse=_SPARSE[args.sparse],
        batch_size=args.batch_size,
        drop_previous=args.drop_previous,
        convert=args.convert,
        show_progress=not args.quiet,
        decoder_max_length=args.decoder_max_length,
    )
    print(f"reindexed: {result.summary()}")
    return 0
