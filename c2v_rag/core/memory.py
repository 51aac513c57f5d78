"""glibc's allocator around a model: keeping what a forward pass frees for the next one, and handing memory back to
the system between phases of a long run."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
from collections.abc import Callable
from typing import Any

from c2v_rag.core.cache import switched_off

logger = logging.getLogger(__name__)

KEEP_ENV = "C2V_RAG_KEEP_FREED_MEMORY"
# mallopt's parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks up to glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX) come from the heap: an
# activation of a 2,048-token batch is a few MB. The heap keeps up to 256 MiB free before it gives memory back,
# several forward passes' worth at the CPU token budgets, so a long-lived process still returns a larger excess.
MMAP_THRESHOLD = 32 * 1024 * 1024
TRIM_THRESHOLD = 256 * 1024 * 1024
# The user's own settings of glibc's allocator, which are theirs to keep (docs/adapt.md gives one for training).
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    """The C library, where ctypes finds one."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def _glibc_function(name: str) -> Callable[..., Any] | None:
    """A function of glibc's allocator, None elsewhere (macOS, musl, Windows)."""
    libc = _libc()
    return getattr(libc, name, None) if libc is not None else None


def release_freed_memory() -> bool:
    """Return the memory glibc keeps after it was freed to the system; whether there was a way to ask.

    glibc keeps freed heap memory for reuse: after training, the process holds what the steps freed, and the next
    phase's peak lands on top of it (adapt's gate, docs/adapt.md "What it costs")."""
    trim = _glibc_function("malloc_trim")
    if trim is None:
        return False
    trim(0)
    return True


def _user_set_malloc() -> str | None:
    """The environment variable by which the user set glibc's allocator, if any."""
    for name in _USER_SETTINGS:
        if os.environ.get(name):
            return name
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return "GLIBC_TUNABLES"
    return None


@functools.lru_cache(maxsize=1)
def keep_freed_memory() -> bool:
    """Set glibc's allocator to keep the memory a forward pass frees for the next one; whether it was set.

    A forward pass on a CPU allocates and frees its activations layer by layer, each of a few MB. glibc's
    defaults hand such blocks back to the system as they are freed (blocks it maps on their own, and the top
    of its heap beyond twice the largest freed block), so the next layer faults its memory in again, page by
    page (docs/performance.md, "Memory between forward passes", has the counts and what they cost). Called when
    a model is loaded for inference on a CPU; it changes the whole process's allocator, once.
    ``$C2V_RAG_KEEP_FREED_MEMORY=0`` turns it off, and it leaves alone an allocator the user set
    (``MALLOC_MMAP_THRESHOLD_`` and the like, ``GLIBC_TUNABLES``).
    """
    if switched_off(KEEP_ENV):
        return False
    user = _user_set_malloc()
    if user is not None:
        logger.debug("glibc's allocator left as $%s sets it", user)
        return False
    mallopt = _glibc_function("mallopt")
    if mallopt is None:
        return False
    # mallopt returns 1 on success; musl's stub returns 0. The mmap threshold goes first: setting either turns
    # off glibc's dynamic thresholds, and a trim threshold alone would leave every block over 128 KiB mapped.
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)


# oneDNN's and ideep's caches of compiled CPU kernels (torch's bf16 and fp16 matrix products), 1,024 entries each
# by default. Each is read when the first kernel is built.
KERNEL_CACHE_ENV = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")


def bound_kernel_caches(shapes: int) -> dict[str, str]:
    """Keep at most ``shapes`` compiled CPU kernels in each of torch's two kernel caches, where the user set neither
    variable; the variables as they now are.

    torch's bf16 matrix products on a CPU compile a kernel for every new matrix shape and keep it, about 0.6 MB
    each: a long-lived process that sees texts of every length fills both caches, over a GB (docs/serving.md,
    "Memory over time"). Call it before the first forward pass; later calls change nothing torch reads. A cache of
    0 is not offered: ideep's crashes torch 2.13 (``LRU_CACHE_CAPACITY=0``).
    """
    if shapes < 1:
        raise ValueError(f"shapes={shapes}: at least 1 compiled kernel a cache (torch crashes with none)")
    if not any(os.environ.get(name) for name in KERNEL_CACHE_ENV):
        for name in KERNEL_CACHE_ENV:
            os.environ[name] = str(shapes)
    return {name: os.environ.get(name, "") for name in KERNEL_CACHE_ENV}
