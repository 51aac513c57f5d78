"""``c2v-rag migrate``: copy a collection (and its alias) to another store, vectors unchanged."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from c2v_rag.cli.arguments import add_qdrant_options, add_quiet, collection_from

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "migrate",
        help="copy a collection to another store (local mode, Qdrant Edge, a server) without re-embedding",
        description="Copy --collection (or the collection an alias names, and the alias) from the store given by "
        "--path/--qdrant-url to the one given by --to-path/--to-url: ids, payloads and vectors unchanged. "
        "Run it again to resume a stopped copy.",
    )
    add_qdrant_options(parser)  # the source
    parser.add_argument("--to-path", default=None, metavar="LOCALDIR", help="the target embedded store")
    parser.add_argument("--to-url", default=None, metavar="URL", help="the target Qdrant server")
    parser.add_argument(
        "--to-store",
        choices=["local", "edge"],
        default=None,
        help="the target's embedded engine (default: an existing directory's, else local)",
    )
    parser.add_argument("--to-collection", default=None, metavar="NAME", help="the copy's name (default: the same)")
    parser.add_argument("--batch-size", type=int, default=256, help="points copied per request")
    add_quiet(parser)
    parser.set_defaults(on_interrupt="run it again to resume the copy")
    return parser


def run(args: argparse.Namespace) -> int:
    """Copy the collection and print the summary."""
    from c2v_rag.rag.handle import Collection

    if args.to_path is None and args.to_url is None and args.to_collection is None:
        # The default store would be the target: a copy into it is asked for by name, never by leaving it out.
        raise ValueError(
            "name the target: --to-path DIR (an embedded store; --to-store edge for Qdrant Edge) or --to-url URL, "
            "or --to-collection NAME for a copy in the same store"
        )
    source = collection_from(args)
    target = Collection(
        args.to_collection or source.name, path=args.to_path, qdrant_url=args.to_url, store=args.to_store
    )
    result = source.migrate(target, batch_size=args.batch_size, show_progress=not args.quiet)
    print(f"migrated: {result.summary()}")
    return 0
