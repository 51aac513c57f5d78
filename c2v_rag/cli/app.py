"""The ``c2v-rag`` command line: the top-level parser, global flags, logging, and dispatch to a command.

Each command is a module of this package with ``add_parser(subparsers)``, which declares its arguments,
and ``run(args)``, which does the work and returns the exit code. :data:`COMMANDS` lists them in the order
``c2v-rag --help`` shows them. Command modules import the library inside ``run`` only, so building the
parser (``--help``, a usage error) imports nothing beyond what ``import c2v_rag`` already has.
"""

from __future__ import annotations

import argparse
import atexit
import difflib
import logging
import os
import signal
import sys
from contextlib import nullcontext
from typing import TYPE_CHECKING, Protocol, cast

from c2v_rag.cli import (
    adapt,
    collections,
    compare,
    delete,
    embed,
    env,
    formats,
    ingest,
    load,
    migrate,
    presets,
    push,
    reindex,
    search,
    serve,
    tasks,
    train,
)
from c2v_rag.cli import eval as evaluate
from c2v_rag.cli.errors import (
    EXIT_INTERRUPTED,
    EXIT_OUTPUT_CLOSED,
    EXIT_TERMINATED,
    flag_wording,
    library_logs_once,
    one_line_warnings,
    output_closed,
    report,
    silence_stdout,
)
from c2v_rag.core.interrupts import ignore_further_interrupts, sigint_kept, sigterm_as_interrupt

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
    load,
    reindex,
    migrate,
    delete,
    collections,
    search,
    serve,
    train,
    push,
    presets,
    tasks,
    formats,
    env,
)


class CommandParser(argparse.ArgumentParser):
    """A command's parser: an unknown flag is refused by the command, with the flag it most likely meant.

    argparse (before Python 3.14) names the unknown flag only, from the top-level parser, which knows none of
    the command's flags; ``--top_k`` or ``--colection`` then left the user to read the whole ``--help``.
    """

    def parse_known_args(self, args=None, namespace=None):
        parsed, extras = super().parse_known_args(args, namespace)
        unknown = [extra.split("=", 1)[0] for extra in extras if extra.startswith("--")]
        if unknown:
            flags = [flag for action in self._actions for flag in action.option_strings if flag.startswith("--")]
            hints = []
            for flag in unknown:
                close = difflib.get_close_matches(flag.replace("_", "-").lower(), flags, n=1, cutoff=0.6)
                if close:
                    hints.append(f"{flag}: did you mean {close[0]}?")
            hint = f" ({'; '.join(hints)})" if hints else ""
            self.error(f"unrecognized arguments: {' '.join(extras)}{hint}; see {self.prog} --help")
        return parsed, extras


def build_parser() -> argparse.ArgumentParser:
    """The whole parser: global flags, and one subparser per command whose ``func`` is its ``run``."""
    parser = argparse.ArgumentParser(prog="c2v-rag", description="Causal2Vec embeddings for retrieval and RAG")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress and details")
    # The commands take it as a maker of ArgumentParsers, which every CommandParser it makes is.
    subparsers = cast("Subparsers", parser.add_subparsers(dest="command", required=True, parser_class=CommandParser))
    for command in COMMANDS:
        command.add_parser(subparsers).set_defaults(func=command.run)
    return parser


class LineFormatter(logging.Formatter):
    """A warning or an error logged by the library as the command's own lines say it, ``warning: ...`` (as Python's
    warnings print); the records below them (``serve``'s request log) keep their level and logger, as ``-v`` keeps
    every record's."""

    def __init__(self) -> None:
        super().__init__(VERBOSE_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        if record.levelno >= logging.WARNING:
            return f"{record.levelname.lower()}: {record.message}"
        return super().formatMessage(record)


VERBOSE_FORMAT = "%(levelname)s %(name)s: %(message)s"


def main(argv: list[str] | None = None) -> int:
    """Run the command line; every failure is one ``error:`` line and an exit code (``errors.py``).

    ``argv`` None means this is the program itself (the ``c2v-rag`` script, ``python -m c2v_rag.cli``): then a
    command that sets ``exit_fast`` ends the process as soon as its output is flushed (:func:`exit_now`), and so
    does one that stopped on a Ctrl-C, after the exit handlers (:func:`exit_interrupted`).
    """
    args = build_parser().parse_args(argv)
    console = logging.StreamHandler()
    console.setFormatter(logging.Formatter(VERBOSE_FORMAT) if args.verbose else LineFormatter())
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, handlers=[console])
    # The library's warnings in flags while the command runs, and only then: main() called in a process that goes
    # on (a test, a notebook) leaves its logging as it found it.
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(flag_wording)
    one_line_warnings()
    with sigint_kept(restore=argv is not None), library_logs_once():
        try:
            # A service manager's stop ends the command as Ctrl-C does, but where the command stops on it itself.
            with nullcontext() if getattr(args, "own_sigterm", False) else sigterm_as_interrupt():
                code = args.func(args)
            sys.stdout.flush()  # a reader gone away shows here, in the handler below, not in the teardown
        except (Exception, KeyboardInterrupt) as err:
            if isinstance(err, KeyboardInterrupt):
                ignore_further_interrupts()  # the command has stopped: only its message and the exit are left
            if output_closed(err):
                silence_stdout()
                code = EXIT_OUTPUT_CLOSED
            else:
                code = report(err, args.verbose, getattr(args, "on_interrupt", None))
        finally:
            for handler in handlers:
                handler.removeFilter(flag_wording)
    if argv is None and code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        exit_interrupted(code)
    if argv is None and getattr(args, "exit_fast", False):
        exit_now(code)
    return code


def exit_interrupted(code: int) -> None:
    """End the process with ``code`` after a Ctrl-C the command has reported: the exit handlers run (worker
    processes, a Ray session), then :func:`exit_now`. After SIGTERM (:data:`EXIT_TERMINATED`) the process ends by
    the signal, as uvicorn and most servers do: a shell still reports 143, and systemd counts a stop it asked for
    as clean, where it would count exit status 143 as a failure.

    The interpreter's own ending cannot be trusted here. Under ``python -m`` CPython ends the process with SIGINT
    after its teardown when a KeyboardInterrupt ever left code that ``exec()`` ran from a string (the methods
    dataclasses and namedtuple write are made so), even one caught afterwards: the message printed, and the exit
    status -2 in place of 130 (seen in CI on a training run's Ctrl-C; CPython 3.10 to 3.13 do so).
    """
    atexit._run_exitfuncs()
    if code == EXIT_TERMINATED and sys.getprofile() is None and sys.gettrace() is None:  # a profiler writes first
        flush_output()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    exit_now(code)


def exit_now(code: int) -> None:
    """End the process with ``code`` once stdout, stderr and the log are flushed, skipping the interpreter's
    teardown.

    Tearing down a process that imported torch and transformers frees tens of thousands of modules and objects
    one by one: about a second of CPU on a small core, longer than a search's own encode and query. A command
    may ask for this only when it has closed what it opened (the embedded Qdrant store, files), so nothing is
    left to the teardown. Under a profiler or a tracer (cProfile, coverage) the normal exit runs, so that they
    can write their results.
    """
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return
    flush_output()
    os._exit(code)


def flush_output() -> None:
    """Flush the log, stdout and stderr, as far as they can still be written."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``| head``) or stream: nothing more can be written to it
            pass
