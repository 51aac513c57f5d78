"""How the ``c2v-rag`` command line reports a failure: one ``error:`` line and an exit code.

The exit code tells a script what to do next:

=====  ==================================================================================
0      done
1      done, but some batches failed (``--on-error continue``); a re-run retries them
2      bad input or setup, found before anything was written (a path, a suffix, an option,
       a collection built for other vectors, a locked store, an unreachable server, a request
       the server refused) or a bad file or record (what was read before it is stored):
       fix it and run again
3      failed midway (a batch failed after retries, or an unexpected error): what was
       stored stays stored; re-running the same command resumes
130    interrupted (Ctrl-C); the line says what re-running does where it resumes or finishes
143    terminated (SIGTERM: a service manager's or a container's stop), as Ctrl-C stops it:
       the same line; the process then ends by the signal, which a shell reports as 143
       and systemd counts as a clean stop (``serve`` leaves SIGTERM to uvicorn)
141    the reader of the output went away (``c2v-rag search ... | head -1``): the status a
       shell gives a program that SIGPIPE ends; nothing is printed
=====  ==================================================================================

``-v`` adds the traceback under the line. Messages never contain an API key: errors name the
server by its URL only.
"""

from __future__ import annotations

import logging
import os
import re
import select
import sys
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from c2v_rag.core.errors import C2VError
from c2v_rag.core.interrupts import caused_by_sigterm

EXIT_OK = 0
EXIT_PARTIAL = 1
EXIT_BAD_INPUT = 2
EXIT_FAILED = 3
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process the signal ended
EXIT_OUTPUT_CLOSED = 141  # 128 + SIGPIPE, what `yes | head -1` reports for `yes`


# The library words its messages for Python callers (``pass truncate_dim=384``); on the command line the fix
# must be a flag the parser takes. One table rewrites them, so that each message is written once, in the
# library, and stays right for both. A pattern covers a keyword as the library's messages spell it.
FLAG_WORDING: tuple[tuple[str, str], ...] = (
    (r"\btruncate_dim=None\b", "--truncate-dim full"),
    (r"\bLeave truncate_dim out\b", "Leave --truncate-dim out"),
    (r"\bLeave decoder_max_length out\b", "Leave --decoder-max-length out"),
    (r"\btruncate_dim=(\d+)", r"--truncate-dim \1"),
    (r"\bchunk_size=(\d+)", r"--chunk-size \1"),
    (r"\bchunk_overlap=(\d+)", r"--chunk-overlap \1"),
    (r"\btext_suffixes=\[([^\]]*)\]", r"--text-suffix \1"),
    (r"\btop_k=(\d+)", r"--top-k \1"),
    (r"\btop_k\b", "--top-k"),
    (r"\brerank=(\d+)", r"--rerank \1"),
    (r"\bchunk_context='(\w+)'", r"--chunk-context \1"),
    (r"\bcollection=\.\.\.", "--collection NAME"),
    (r"\bmodel=\.\.\.", "--model MODEL"),
    (r"\bmode='?(dense|sparse|hybrid)'?", r"--mode \1"),
    (r"\bfusion='?(rrf|dbsf)'?", r"--fusion \1"),
    (r"\bsparse='?bm25'?", "--sparse bm25"),
    (r"\bqdrant_url=('[^']*')", r"--qdrant-url \1"),
    (r"\bqdrant_url\b=?", "--qdrant-url URL"),
    (r"\bstore='(\w+)'", r"--store \1"),
    (r"\bon_error='continue'", "--on-error continue"),
    (r"\bsync=True\b", "--sync"),
    (r"\bengine='ray'", "--ray"),
    (r"\bquantize='(\w+)'", r"--quantize \1"),
    (r"\bdevice='([\w:]+)'", r"--device \1"),
    (r"\bdtype='(\w+)'", r"--dtype \1"),
    (r"\binstruction='\.\.\.'", "--instruction '...'"),
    (r"\blist_tasks\(\)", "`c2v-rag tasks`"),
    (r"\bintra_op=(-?\d+) threads: pass 1 or more, or None for torch's default", r"--threads \1: pass 1 or more"),
    (r"\bpass rerank >= ", "pass --rerank >= "),
    (r"\btarget_path/target_url or target_collection\b", "--to-path/--to-url or --to-collection"),
    (
        r"\bc2v_rag\.migrate\(\.\.\., source_path=('[^']*'), target_store='(\w+)'\)",
        r"c2v-rag migrate --path \1 --to-store \2 --to-path NEWDIR",
    ),
    (r"\bc2v_rag\.reindex\b", "c2v-rag reindex"),
    (r"\bc2v_rag\.migrate\b", "c2v-rag migrate"),
)
# A message that gave both spellings, "pass chunk_size=200 (--chunk-size 200)", would read twice after the
# rewrite: the parenthesis that repeats its flag goes.
_REPEATED_FLAG = re.compile(r"(--[\w-]+(?: [^\s(),;]+)?) \(\1\)")


def in_flags(message: str) -> str:
    """``message`` with the library's Python keywords (:data:`FLAG_WORDING`) written as the CLI's flags."""
    for pattern, flag in FLAG_WORDING:
        message = re.sub(pattern, flag, message)
    return _REPEATED_FLAG.sub(r"\1", message)


def flag_wording(record: logging.LogRecord) -> bool:
    """A logging filter: the library's warnings, as the CLI prints them, in flags (:func:`in_flags`)."""
    if record.levelno >= logging.WARNING:
        record.msg, record.args = in_flags(record.getMessage()), None
    return True


def classify(err: BaseException, on_interrupt: str | None = None) -> tuple[str, int]:
    """The one-line message and the exit code for ``err`` (``on_interrupt``: :func:`report`'s)."""
    from c2v_rag.rag.errors import IngestError, RunInterrupted

    if isinstance(err, KeyboardInterrupt):
        code = interrupted_exit(err)
        if isinstance(err, RunInterrupted):
            return str(err), code
        return f"interrupted; {on_interrupt}" if on_interrupt else "interrupted", code
    if isinstance(err, IngestError):
        return str(err), EXIT_FAILED
    if isinstance(err, (C2VError, ValueError, TypeError, KeyError, OSError)):
        # Expected input and setup problems: the message names the input and the fix. (OSError
        # covers missing and unreadable paths; the store's own errors are C2VErrors.)
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        return validation_messages(err) or str(message), EXIT_BAD_INPUT
    upstream = _qdrant_response(err)
    if upstream is not None:
        return upstream, EXIT_FAILED
    return f"{type(err).__name__}: {err} (run with -v for the traceback)", EXIT_FAILED


def interrupted_exit(err: KeyboardInterrupt) -> int:
    """The exit code of a command that ``err`` stopped: SIGTERM's or Ctrl-C's."""
    return EXIT_TERMINATED if caused_by_sigterm(err) else EXIT_INTERRUPTED


def validation_messages(err: BaseException, model: type | None = None) -> str | None:
    """A pydantic ValidationError (an options class checking what the command built from its flags) as its
    messages alone, without pydantic's header, input dump and link; None for any other error. Our validators'
    messages name the option and the fix; pydantic's own (a wrong type) get the field's name in front. A key the
    options do not have gets the likeliest one it meant and the keys there are, where ``model`` (the validated
    class) is given: ``--set training.stepz=2``."""
    from pydantic import ValidationError

    if not isinstance(err, ValidationError):
        return None
    parts = []
    for error in err.errors():
        text = str(error["msg"]).removeprefix("Value error, ")
        field = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden" and model is not None:
            text = _unknown_key(model, error["loc"]) or text
        parts.append(text if error["type"] == "value_error" or not field else f"{field}: {text}")
    return "; ".join(parts)


def _unknown_key(model: type, loc: tuple[Any, ...]) -> str | None:
    """What to say of the key ``loc[-1]`` that ``model``'s section at ``loc[:-1]`` does not have, or None where
    that section's class cannot be followed (a union of several)."""
    import difflib

    section = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue  # an item of a list: its class is the list's item class, found with the field
        field = getattr(section, "model_fields", {}).get(part)
        inner = _model_class(field.annotation) if field is not None else None
        if inner is None:
            return None
        section = inner
    names = sorted(getattr(section, "model_fields", {}))
    if not names:
        return None
    close = difflib.get_close_matches(str(loc[-1]), names, n=1)
    meant = f"did you mean {close[0]!r}? " if close else ""
    return f"no such setting: {meant}it takes {', '.join(names)}"


def _model_class(annotation: Any) -> type | None:
    """The one pydantic model class inside ``annotation`` (``X``, ``X | None``, ``list[X]``), else None."""
    import typing

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    found = {c for arg in typing.get_args(annotation) if (c := _model_class(arg)) is not None}
    return found.pop() if len(found) == 1 else None


def _qdrant_response(err: BaseException) -> str | None:
    try:
        from qdrant_client.http.exceptions import UnexpectedResponse
    except ImportError:
        return None
    if not isinstance(err, UnexpectedResponse):
        return None
    detail = " ".join(err.content.decode("utf-8", errors="replace").split())[:300] if err.content else ""
    return f"Qdrant answered {err.status_code} {err.reason_phrase}{f': {detail}' if detail else ''}"


def output_closed(err: BaseException) -> bool:
    """Whether ``err`` is stdout's reader having gone away (a pipe into ``head``), not another broken pipe
    (a server's socket): a pipe with no reader polls as an error."""
    if not isinstance(err, BrokenPipeError):
        return False
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), or stdout is no file
        return False


def silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's last flush does not fail again, loudly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def report(err: BaseException, verbose: bool, on_interrupt: str | None = None, *, stamp: str = "") -> int:
    """Print ``err`` as one ``error:`` line (and the traceback when ``verbose``); its exit code.

    ``on_interrupt`` is what the command says after a plain Ctrl-C: what running it again does, for a command that
    resumes or finishes its work (set by its parser); a command that only reads says nothing more. ``stamp`` goes
    before the line (a watch's time of day, as its summaries have).
    """
    message, code = classify(err, on_interrupt)
    if verbose:
        traceback.print_exception(err, file=sys.stderr)
    print(stamp + "error: " + in_flags(" ".join(str(message).split())), file=sys.stderr)
    return code


# Libraries that log through a stderr handler of their own and pass each record on to the root logger's too: with the
# CLI's handler on the root, each of their messages showed twice (an offline hub's six retry warnings, twelve lines).
SELF_HANDLED_LOGGERS = ("huggingface_hub",)


@contextmanager
def library_logs_once() -> Iterator[None]:
    """While the command runs, the :data:`SELF_HANDLED_LOGGERS` keep their records to their own handler (which they
    add on import, perhaps during the command); as they were after."""
    loggers = [logging.getLogger(name) for name in SELF_HANDLED_LOGGERS]
    kept = [logger.propagate for logger in loggers]
    for logger in loggers:
        logger.propagate = False
    try:
        yield
    finally:
        for logger, propagate in zip(loggers, kept):
            logger.propagate = propagate


def one_line_warnings() -> None:
    """Library warnings as one ``warning:`` line each, each said once a command, and none for what the CLI reports
    itself."""
    # qdrant-client's background version check warns when the server does not answer; the
    # reachability check says that, with the URL, as the error.
    warnings.filterwarnings("ignore", message="Failed to obtain server version")
    # Python dedups a warning by where it is raised; the same words from two places (search -'s checks before its
    # prompt, then its first search) said twice are noise.
    said: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = in_flags(str(message))
        if text not in said:
            said.add(text)
            print(f"warning: {text}", file=sys.stderr)

    warnings.showwarning = show
