"""Handing freed memory back to the system: glibc keeps it otherwise, and a run's next phase lands on top of it."""

from __future__ import annotations

import resource
import sys

import numpy as np
import pytest

from c2v_rag.core.memory import release_freed_memory


def rss_mib() -> float:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize() / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim; elsewhere a no-op")
def test_memory_freed_between_kept_blocks_goes_back_to_the_system():
    # 4,000 blocks of 64 KiB come from the heap (below glibc's mmap threshold); every other one is freed, so the
    # heap's top stays in use and glibc's own trimming cannot hand the holes back.
    blocks = [np.ones(8192) for _ in range(4000)]
    kept = blocks[1::2]
    del blocks
    before = rss_mib()
    assert release_freed_memory()
    assert before - rss_mib() > 60  # of the 125 MiB freed
    assert len(kept) == 2000
