"""Handing memory the allocator keeps back to the system, between phases of a long run."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable
from typing import Any


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], Any] | None:
    """glibc's ``malloc_trim``, None elsewhere (macOS, musl, Windows)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return getattr(libc, "malloc_trim", None) if libc is not None else None


def release_freed_memory() -> bool:
    """Return the memory glibc keeps after it was freed to the system; whether there was a way to ask.

    glibc keeps freed heap memory for reuse: after training, the process holds what the steps freed, and the next
    phase's peak lands on top of it (adapt's gate, docs/adapt.md "What it costs")."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
