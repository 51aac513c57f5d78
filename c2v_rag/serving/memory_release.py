"""Handing the memory a server's forward passes freed back to the system when its model work pauses."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from c2v_rag.core.memory import release_freed_memory
from c2v_rag.serving.metrics import ServerMetrics

logger = logging.getLogger(__name__)


class MemoryReleaser:
    """Calls ``release`` (glibc's ``malloc_trim``) once model work has paused for ``idle_s`` after some work, and
    at most every ``busy_every_s`` while it goes on.

    A CPU model keeps what its forward passes free for the next one (:func:`~c2v_rag.core.memory.keep_freed_memory`),
    and every request of a new size lands some of its blocks among the holes others left, so a long-lived server's
    resident memory grows by free memory it touched once (bench/results/server_memory_release/). A release costs
    10-20 ms and the next forward pass faults its pages in again: paid once a pause, not once a request.
    ``idle_s=0`` switches it off.
    """

    def __init__(
        self,
        idle_s: float,
        busy_every_s: float,
        metrics: ServerMetrics | None = None,
        release: Callable[[], bool] = release_freed_memory,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle_s = idle_s
        self.busy_every_s = busy_every_s
        self.metrics = metrics
        self.release = release
        self.clock = clock
        self._in_flight = 0
        self._worked = False  # model work since the last release
        self._last_end = clock()
        self._last_release = clock()
        self._task: asyncio.Task | None = None

    @contextmanager
    def working(self) -> Iterator[None]:
        """Around one request's model work: while any is in flight, the server is not idle."""
        self._in_flight += 1
        try:
            yield
        finally:
            self._in_flight -= 1
            self._worked = True
            self._last_end = self.clock()

    def start(self) -> None:
        """Start watching; call from the event loop that serves the requests. Does nothing when switched off."""
        if self.idle_s > 0:
            self._task = asyncio.create_task(self._watch(), name="c2v-memory-release")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def due(self, now: float) -> bool:
        """Whether memory should go back now: work happened since the last release, and it has paused for
        ``idle_s``, or ``busy_every_s`` have passed while it went on."""
        if not self._worked:
            return False
        idle = self._in_flight == 0 and now - self._last_end >= self.idle_s
        return idle or now - self._last_release >= self.busy_every_s

    async def _watch(self) -> None:
        tick = min(self.idle_s, self.busy_every_s) / 2
        while True:
            await asyncio.sleep(tick)
            if not self.due(self.clock()):
                continue
            self._worked = False
            # A worker thread, so that the event loop answers requests meanwhile; glibc takes each heap's own lock.
            if not await asyncio.to_thread(self.release):
                logger.debug("No way to hand freed memory back here (not glibc); the server stops trying")
                return
            if self.metrics is not None:
                self.metrics.memory_releases.inc()
            self._last_release = self.clock()
