"""``c2v-rag compare``: rank a few documents against one query, to try a variant by hand."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from c2v_rag.cli.arguments import add_model_options, add_query_options

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("compare", help="rank documents against a query by cosine similarity")
    parser.add_argument("query")
    parser.add_argument("documents", nargs="+")
    add_query_options(parser, task_help="registered task name, e.g. SciFact (see 'c2v-rag tasks')")
    parser.add_argument(
        "--long-texts",
        default="truncate",
        choices=["truncate", "chunk"],
        help="documents longer than the model reads: truncate them (default) or embed overlapping "
        "windows, mean-pooled into one vector",
    )
    add_model_options(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Print the query, then each document's cosine similarity to it, best first."""
    model = _load(args)
    query = model.encode_queries([args.query], task=args.task, instruction=args.instruction, examples=args.example)
    docs = model.encode_documents(args.documents, task=args.task, long_texts=args.long_texts)
    scores = model.similarity(query, docs)[0].tolist()
    print(f"query: {args.query}")
    for score, doc in sorted(zip(scores, args.documents), reverse=True):
        print(f"  {score:+.4f}  {doc[:100]}")
    return 0


def _load(args: argparse.Namespace) -> Any:
    from c2v_rag.model.causal2vec import Causal2Vec

    return Causal2Vec.from_pretrained(args.model, device=args.device, dtype=args.dtype, quantize=args.quantize)
