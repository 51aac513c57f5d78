"""Keeping a collection current: ingest, then ingest again whenever the watched files change.

A look lists the paths as ingest lists them (:func:`~c2v_rag.documents.files.snapshot`: each file's size and
modification time) every ``interval`` seconds; when it differs from the last, the same ingest runs again. Each run
is an ordinary ingest, so it chunks and embeds only what changed, and a model loaded for the first stays loaded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from c2v_rag.documents.files import snapshot
from c2v_rag.documents.reading import ReadOptions
from c2v_rag.rag.results import IngestResult

logger = logging.getLogger(__name__)


def watch(
    ingest: Callable[[], IngestResult],
    paths: Sequence[Path],
    read: ReadOptions,
    *,
    interval: float,
    stop: threading.Event | None = None,
    on_result: Callable[[IngestResult], None] | None = None,
    on_failure: Callable[[Exception], None] | None = None,
) -> IngestResult:
    """Run ``ingest`` now, then again each time the files under ``paths`` (read with ``read``) change, until
    ``stop`` is set or Ctrl-C comes between runs; the last successful run's result.

    The first run's errors are raised: nothing is watched that cannot be ingested. A later run's error goes to
    ``on_failure`` (default: logged as a warning) and the watch goes on, so that a file caught half written is read
    again once it changes. Ctrl-C during a run stops that run as it stops any ingest
    (:class:`~c2v_rag.IngestInterrupted`, raised); between runs it ends the watch.
    """
    if interval <= 0:
        raise ValueError(f"interval={interval!r}: pass the seconds between looks, more than 0")
    stop = stop or threading.Event()
    seen = snapshot(paths, read)  # before the first run: a change during it is caught by the first look
    last = ingest()
    if on_result is not None:
        on_result(last)
    running = False
    try:
        while not stop.wait(interval):
            now = snapshot(paths, read)
            if now == seen:
                continue
            seen, running = now, True
            try:
                last = ingest()
            except Exception as err:  # noqa: BLE001 - a watch outlives a failed run; the next change runs again
                (on_failure or _log_failure)(err)
            else:
                if on_result is not None:
                    on_result(last)
            running = False
    except KeyboardInterrupt:
        if running:
            raise
    return last


def _log_failure(err: Exception) -> None:
    logger.warning("a watched ingest failed, the watch goes on: %s", err)
