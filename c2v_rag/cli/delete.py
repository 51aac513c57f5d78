"""``c2v-rag delete``: take documents out of a collection, every chunk of each, by id, by file or by filter."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from c2v_rag.cli.arguments import add_filter, add_qdrant_options, add_quiet, collection_from, filter_from
from c2v_rag.cli.errors import EXIT_OK, EXIT_PARTIAL
from c2v_rag.core.wording import counted

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "delete",
        help="take documents out of a collection (every chunk of each), by id, file or filter",
        description="Delete the chunks of the documents named by id (a hit's doc_id: `c2v-rag search ... --json`), "
        "by --file, or matched by --filter; given ids or files and a filter, those of them it matches. An ingest "
        "only adds and updates, and --sync deletes only files gone from the folders it mirrors: this deletes "
        "anything else (records, texts, a file you no longer want found). Exit code 1 when an id or file matched no "
        "document (the others are deleted).",
    )
    parser.add_argument("doc_ids", nargs="*", metavar="DOC_ID", help="document ids, as stored (a hit's doc_id)")
    parser.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="PATH",
        help="a file or folder ingested (it may be gone from the disk): the documents read from it (a JSONL file's "
        "records, an archive's members, a message's attachments too); repeat for more",
    )
    add_filter(parser, "metadata conditions of the documents to delete")
    add_qdrant_options(parser)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_quiet(parser)
    parser.set_defaults(on_interrupt="run it again to delete the rest")
    return parser


def run(args: argparse.Namespace) -> int:
    """Delete the documents and print what went; exit 1 when some named nothing."""
    conditions = filter_from(args.filter)
    if not args.doc_ids and not args.file and not conditions:  # an empty filter matches every document
        raise ValueError("name the documents to delete: DOC_ID... (a hit's doc_id), --file PATH or --filter JSON")
    result = collection_from(args).delete_documents(
        args.doc_ids or None, files=args.file or None, filter=conditions, show_progress=not args.quiet
    )
    if args.json:
        print(result.model_dump_json())
    else:
        print(
            f"deleted {counted(result.documents_deleted, 'document')} ({counted(result.chunks_deleted, 'chunk')}) "
            f"from {result.collection!r}"
        )
    for doc_id in result.not_found:
        print(
            f"not found: {doc_id!r} (no document of {result.collection!r} has this id or came from there)",
            file=sys.stderr,
        )
    return EXIT_PARTIAL if result.not_found else EXIT_OK
