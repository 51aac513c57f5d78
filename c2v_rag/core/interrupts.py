"""Ctrl-C that a long loop never loses.

Python turns SIGINT into a ``KeyboardInterrupt`` raised wherever the main thread happens to be. When that is a
finalizer (an object's ``__del__``, a weakref callback: the ``regex`` module's match groups have one), Python
prints "Exception ignored in ..." and carries on, and a training run that counted on the exception goes on to
its last step (seen on Python 3.12: ``c2v-rag train`` ran past a Ctrl-C). :func:`remembered_interrupts` keeps
Python's behaviour, the exception at once, and remembers the signal too; the loop calls
:meth:`InterruptLatch.check` between its steps, which raises the interrupt a finalizer swallowed.

:func:`sigint_kept` and :func:`ignore_further_interrupts` serve a command that has stopped on a Ctrl-C and has only
its report and its exit left. :func:`sigterm_as_interrupt` makes SIGTERM (a service manager's or a container's stop)
end a command as Ctrl-C does: what was written kept, and the line that says how to resume.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class InterruptLatch:
    """Whether a Ctrl-C came since the last :meth:`check`."""

    def __init__(self) -> None:
        self.pending = False

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` if a Ctrl-C came and was not acted on (a finalizer dropped it)."""
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.pending = True
        raise KeyboardInterrupt


@contextlib.contextmanager
def remembered_interrupts() -> Iterator[InterruptLatch]:
    """Within the block, Ctrl-C raises ``KeyboardInterrupt`` as Python's own handler does and is remembered by the
    latch it yields. Where Python's handler is not the one installed (another thread, a program with its own
    SIGINT handler, SIGINT ignored), nothing changes and the latch stays clear."""
    latch = InterruptLatch()
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield latch
        return
    previous = signal.signal(signal.SIGINT, latch._handler)
    try:
        yield latch
    finally:
        signal.signal(signal.SIGINT, previous)


def ignore_further_interrupts() -> None:
    """From now on Ctrl-C does nothing (in the main thread; elsewhere nothing changes).

    For a command that has stopped on a Ctrl-C and has only its message and its exit left. A second Ctrl-C there
    (a user who presses it again, or holds it) would otherwise raise inside the message, or, once the interpreter's
    teardown has put SIGINT's default action back, kill the process by the signal: the message printed, but the
    exit status 130 that the command documents lost. The interpreter leaves an ignored SIGINT ignored through its
    teardown. :func:`sigint_kept` puts the handler back for a caller that goes on.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def sigint_kept(restore: bool) -> Iterator[None]:
    """Within the block, code may :func:`ignore_further_interrupts`; on leaving, the SIGINT handler the block
    found is put back if ``restore`` (a process that goes on: a test, a notebook calling the CLI's ``main``).
    A program about to exit leaves it as it is, so that its teardown stays out of a second Ctrl-C's reach."""
    main_thread = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGINT) if main_thread else None
    try:
        yield
    finally:
        # None: a handler installed outside Python, which cannot be put back from here (and is not replaced).
        if restore and before is not None and signal.getsignal(signal.SIGINT) is not before:
            signal.signal(signal.SIGINT, before)


class Terminated(KeyboardInterrupt):
    """SIGTERM came (:func:`sigterm_as_interrupt`). A :class:`KeyboardInterrupt`, so that every path that stops a
    run cleanly on Ctrl-C (an ingest writing what it embedded, a training run naming its checkpoint) stops it so."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread, as Ctrl-C raises KeyboardInterrupt;
    on leaving, SIGTERM's handler is put back. Where SIGTERM has a handler already (a program's own) or is ignored,
    or off the main thread, nothing changes."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def sigterm_handler_kept() -> Iterator[None]:
    """A SIGTERM handler this program set in Python (:func:`sigterm_as_interrupt`'s, or a user program's own) is
    put back after the block, for a call that sets one of its own (``ray.init`` gives the driver ``sys.exit``).
    With none set (the default, an ignored signal, a handler from outside Python), or off the main thread, the
    block's handler stays."""
    chosen = None
    if threading.current_thread() is threading.main_thread():
        handler = signal.getsignal(signal.SIGTERM)
        chosen = handler if callable(handler) else None
    try:
        yield
    finally:
        if chosen is not None:
            signal.signal(signal.SIGTERM, chosen)


def caused_by_sigterm(err: BaseException) -> bool:
    """Whether ``err`` is, or was raised because of, a :class:`Terminated` (its cause or context, at any depth)."""
    return any(isinstance(link, Terminated) for link in _chain(err))


def _chain(err: BaseException) -> Iterator[BaseException]:
    """``err``, then what it was raised from or while handling, and so on."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        yield current
        seen.add(id(current))
        current = current.__cause__ or current.__context__


def caused_by_ctrl_c(err: BaseException) -> bool:
    """Whether ``err`` was raised because of a KeyboardInterrupt (its cause or context, at any depth): a library
    that catches every exception in a callback turns Ctrl-C into its own error (pydantic-core's serializer raises
    ``PydanticSerializationError`` from it)."""
    return any(isinstance(link, KeyboardInterrupt) for link in _chain(err))
