"""``c2v-rag collections``: the collections of a store, with their aliases, sizes and the model each was built with."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from c2v_rag.cli.arguments import add_store_options

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "collections",
        help="list the collections of a store",
        description="List the collections of a Qdrant store: aliases, points, and the model, vector size, "
        "quantization and BM25 vectors each recorded when it was ingested.",
    )
    add_store_options(parser)
    parser.add_argument("--json", action="store_true", help="print them as JSON")
    return parser


def run(args: argparse.Namespace) -> int:
    """One line a collection (or ``--json``); a store with none says so."""
    import json

    from c2v_rag.rag.admin.listing import list_collections
    from c2v_rag.rag.options import ConnectionOptions

    target = ConnectionOptions.as_given(
        {"qdrant_url": args.qdrant_url, "path": args.path, "prefer_grpc": args.grpc or None, "store": args.store}
    ).resolve()
    found = list_collections(target)
    if args.json:
        print(json.dumps([c.model_dump() for c in found], ensure_ascii=False, indent=2))
    elif not found:
        print(f"no collections at {target.location}: 'c2v-rag ingest PATH' makes one")
    else:
        for summary in found:
            print(summary.line())
    return 0
