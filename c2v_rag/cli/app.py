"""The ``c2v-rag`` command line: the top-level parser, global flags, logging, and dispatch to a command.

Each command is a module of this package with ``add_parser(subparsers)``, which declares its arguments,
and ``run(args)``, which does the work and returns the exit code. :data:`COMMANDS` lists them in the order
``c2v-rag --help`` shows them. Command modules import the library inside ``run`` only, so building the
parser (``--help``, a usage error) imports nothing beyond what ``import c2v_rag`` already has.
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Protocol

from c2v_rag.cli import adapt, compare, embed, ingest, migrate, presets, push, reindex, search, serve, tasks, train
from c2v_rag.cli import eval as evaluate
from c2v_rag.cli.errors import one_line_warnings, report

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


class Command(Protocol):
    """What a command module provides."""

    def add_parser(self, subparsers: Subparsers) -> argparse.ArgumentParser:
        """Add the command's subparser, with its arguments, and return it."""

    def run(self, args: argparse.Namespace) -> int:
        """Do the command; the exit code (a failure may raise instead: :func:`main` reports it)."""


COMMANDS: tuple[Command, ...] = (
    adapt,
    compare,
    evaluate,
    ingest,
    embed,
    reindex,
    migrate,
    search,
    serve,
    train,
    push,
    presets,
    tasks,
)


def build_parser() -> argparse.ArgumentParser:
    """The whole parser: global flags, and one subparser per command whose ``func`` is its ``run``."""
    parser = argparse.ArgumentParser(prog="c2v-rag", description="Causal2Vec embeddings for retrieval and RAG")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress and details")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers).set_defaults(func=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; every failure is one ``error:`` line and an exit code (``errors.py``)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    one_line_warnings()
    try:
        return args.func(args)
    except (Exception, KeyboardInterrupt) as err:
        return report(err, args.verbose)
