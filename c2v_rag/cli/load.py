"""``c2v-rag load``: store the chunks and vectors an ``embed`` folder holds in a collection, without embedding them
again."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from c2v_rag.cli.arguments import (
    add_payload_index,
    add_qdrant_options,
    add_quiet,
    add_sparse,
    collection_from,
    payload_indexes_from,
)
from c2v_rag.cli.errors import EXIT_OK

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "load",
        help="store the chunks and vectors `c2v-rag embed` wrote in a collection, without embedding them again",
        description="Store the rows of the Parquet files `c2v-rag embed --out DIR` wrote (on this machine, on a Ray "
        "cluster, or copied here) in --collection: the points an ingest of the same documents with the same model "
        "stores, the collection recording that model (no model loads; a collection of another model's vectors is "
        "refused). Chunks already stored are skipped: run it again to resume, or after embed added files.",
    )
    parser.add_argument("folder", metavar="DIR", help="the folder embed wrote (its --out)")
    add_qdrant_options(parser)
    add_sparse(parser)
    add_payload_index(parser)
    parser.add_argument("--batch-size", type=int, default=256, help="rows read and stored together (default 256)")
    parser.add_argument(
        "--versioned",
        action="store_true",
        help="--collection is an alias: vectors of another model than its collection's go into a new NAME_vN, and "
        "the alias moves to it once every chunk is stored (a switch without downtime; the previous version is kept)",
    )
    add_quiet(parser)
    parser.set_defaults(on_interrupt="run it again to resume (chunks already stored are skipped)")
    return parser


def run(args: argparse.Namespace) -> int:
    """Load the folder and print the summary."""
    result = collection_from(args).load_embedded(
        args.folder,
        sparse=args.sparse,
        payload_indexes=payload_indexes_from(args),
        batch_size=args.batch_size,
        show_progress=not args.quiet,
        versioned=args.versioned,
    )
    print(f"loaded {result.summary()}")
    return EXIT_OK
