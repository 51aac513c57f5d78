"""``c2v-rag collections``: the collections of a store, with their aliases, sizes and the model each was built with;
``c2v-rag collections delete NAME...``: remove whole collections, after saying what goes."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from c2v_rag.cli.arguments import add_store_options
from c2v_rag.cli.errors import EXIT_OK, EXIT_PARTIAL

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers
    from c2v_rag.rag.admin.delete_collection import CollectionDeletion
    from c2v_rag.store.collection import QdrantConfig


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "collections",
        help="list the collections of a store, or delete some",
        description="List the collections of a Qdrant store: aliases, points, and the model, vector size, "
        "quantization and BM25 vectors each recorded when it was ingested. 'delete NAME...' deletes each named "
        "collection (an alias: the collection it points at) with its aliases, after showing what goes and asking "
        "(--yes: without asking; needed where no terminal can answer). Earlier versions a reindex kept stay. "
        "Exit code 1 when a name matched nothing (the others are deleted).",
    )
    parser.add_argument(
        "action", nargs="?", choices=["list", "delete"], default="list", help="list (the default) or delete"
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help="delete: the collections or aliases to delete")
    add_store_options(parser)
    parser.add_argument("-y", "--yes", action="store_true", help="delete: do not ask first")
    parser.add_argument("--json", action="store_true", help="print them (list) or what was deleted (delete) as JSON")
    return parser


def run(args: argparse.Namespace) -> int:
    """List (one line a collection, or ``--json``; a store with none says so), or delete the named collections."""
    import json

    from c2v_rag.rag.admin.listing import list_collections
    from c2v_rag.rag.options import ConnectionOptions

    if args.action == "list" and args.names:
        raise ValueError(
            "'collections' lists a whole store and takes no names; to delete them: 'collections delete NAME...'"
        )
    if args.action == "delete" and not args.names:
        raise ValueError(
            "name the collections to delete: c2v-rag collections delete NAME... ('c2v-rag collections' lists them)"
        )
    target = ConnectionOptions.as_given(
        {"qdrant_url": args.qdrant_url, "path": args.path, "prefer_grpc": args.grpc or None, "store": args.store}
    ).resolve()
    if args.action == "delete":
        return _delete(target, args.names, yes=args.yes, as_json=args.json)
    found = list_collections(target)
    if args.json:
        print(json.dumps([c.model_dump() for c in found], ensure_ascii=False, indent=2))
    elif not found:
        print(f"no collections at {target.location}: 'c2v-rag ingest PATH' makes one")
    else:
        for summary in found:
            print(summary.line())
    return 0


def _delete(target: QdrantConfig, names: list[str], *, yes: bool, as_json: bool) -> int:
    """Delete each of ``names`` in turn, asking first unless ``yes``; exit 1 when one matched nothing."""
    import json

    from c2v_rag.rag.admin.delete_collection import delete_collections
    from c2v_rag.store.collection import check_collection_name

    for name in names:
        check_collection_name(name)
    if not yes and not sys.stdin.isatty():
        raise ValueError(
            "deleting a collection asks first, and no terminal can answer here: add --yes to delete without asking"
        )
    results = delete_collections(target, names, confirm=None if yes else _confirmed)
    missing = [name for name, result in results.items() if result is None]
    for name, result in results.items():
        if result is None:
            print(f"not found: {name!r} (no collection or alias of that name at {target.location})", file=sys.stderr)
        elif not as_json:
            kept = result.kept_line()
            print(f"deleted {result.line()}" if result.deleted else f"not deleted: {result.collection!r}")
            if result.deleted and kept:
                print(kept)
    if as_json:
        found = [result.model_dump() for result in results.values() if result is not None]
        print(json.dumps({"collections": found, "not_found": missing}, ensure_ascii=False, indent=2))
    return EXIT_PARTIAL if missing else EXIT_OK


def _confirmed(plan: CollectionDeletion) -> bool:
    """Ask on the terminal whether to delete what ``plan`` names (and say what stays); yes only on y or yes."""
    kept = plan.kept_line()
    question = f"delete {plan.line()}?" + (f" ({kept})" if kept else "") + " [y/N] "
    print(question, end="", file=sys.stderr, flush=True)  # a prompt on stderr leaves stdout to the results
    return sys.stdin.readline().strip().lower() in ("y", "yes")
