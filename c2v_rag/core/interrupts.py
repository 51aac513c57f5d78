"""Ctrl-C that a long loop never loses.

Python turns SIGINT into a ``KeyboardInterrupt`` raised wherever the main thread happens to be. When that is a
finalizer (an object's ``__del__``, a weakref callback: the ``regex`` module's match groups have one), Python
prints "Exception ignored in ..." and carries on, and a training run that counted on the exception goes on to
its last step (seen on Python 3.12: ``c2v-rag train`` ran past a Ctrl-C). :func:`remembered_interrupts` keeps
Python's behaviour, the exception at once, and remembers the signal too; the loop calls
:meth:`InterruptLatch.check` between its steps, which raises the interrupt a finalizer swallowed.
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
