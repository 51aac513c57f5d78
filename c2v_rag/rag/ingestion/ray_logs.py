"""What Ray itself prints during an ingest or embed run: its warnings, not its notes.

Ray writes to the terminal through its own handlers. Left alone, a one-minute ingest on a local Ray printed four
lines of its own between the command and its summary: that token authentication is on for the cluster the run
started, when Ray Data starts a dataset, the dataset's execution plan, and when it is done. With the run's bar and
summary they read as noise, and they scroll the bar away. :func:`quiet_ray` keeps Ray's console to warnings and
errors for the run (a worker's warning about a skipped file still shows), unless ``c2v_rag`` logs at INFO (the CLI's
``-v``, or a program's own logging config). Ray's log files under its session directory keep every line.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator

# The loggers Ray prints to the terminal through (propagation off, each with a handler of its own).
_RAY_LOGGERS = ("ray", "ray.data")
# Ray's note that it turned on token authentication for a cluster this run started, which is all it says; a
# cluster that refuses the run's token fails with an error, which shows.
_TOKEN_NOTE = "Token authentication is enabled for this Ray cluster"
# Ray Data's warning when its bars are off, which tells the user to turn them on: the run's own bar is on.
_BARS_OFF_NOTE = "Progress bars disabled"
# Where Ray Data logs its progress at INFO, every 10 s, in place of its bars when stdout is no terminal: a run that
# keeps Ray's bars (embed's, which has none of its own) keeps these lines too.
_PROGRESS_LOGGERS = "ray.data._internal.progress"
# Ray Data's warning when a run's input makes fewer blocks than the writing tasks it may run (embed's write_parquet),
# with advice on repartitioning: a small folder makes one block, and a big one keeps every writer busy.
_WRITE_CONCURRENCY_NOTE = "The maximum number of concurrent tasks for 'Write'"


class _RayConsoleFilter(logging.Filter):
    """Ray's console records to show: warnings and errors, but for its notes, and Ray Data's progress lines where its
    bars stay on; every record when ``verbose``."""

    def __init__(self, *, verbose: bool, bars_off: bool) -> None:
        super().__init__()
        self.verbose = verbose
        self.bars_off = bars_off

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.bars_off and message.startswith(_BARS_OFF_NOTE):
            return False
        if not self.bars_off and record.name.startswith(_PROGRESS_LOGGERS):
            return True
        return self.verbose or (record.levelno >= logging.WARNING and not message.startswith(_TOKEN_NOTE))


def ray_console_handlers() -> list[logging.StreamHandler]:
    """Ray's own console handlers on its loggers: not its log files', nor one that a program or pytest added to
    Ray's loggers, which stay as their owner set them."""
    return [
        handler
        for name in _RAY_LOGGERS
        for handler in logging.getLogger(name).handlers
        if type(handler).__module__.split(".")[0] == "ray" and isinstance(handler, logging.StreamHandler)
    ]


@contextlib.contextmanager
def quiet_ray(*, bars_off: bool) -> Iterator[None]:
    """Ray's console kept to warnings for the run, less the notes above, and with ``bars_off`` Ray Data's progress
    bars off too (the run draws its own, and Ray's, on the same terminal, garbled it; without a terminal Ray logs
    them every few seconds instead). Everything is as it was after. Enter it before Ray starts (``ray.init`` prints
    the token note) and before :func:`~c2v_rag.rag.ingestion.pipeline.printed_above_bars`, which wraps the console
    handlers it filters."""
    from ray.data import DataContext

    context = DataContext.get_current()
    shown = context.enable_progress_bars
    if bars_off:
        context.enable_progress_bars = False
    verbose = logging.getLogger("c2v_rag").isEnabledFor(logging.INFO)
    console_filter = _RayConsoleFilter(verbose=verbose, bars_off=bars_off)
    consoles = ray_console_handlers()
    for handler in consoles:
        handler.addFilter(console_filter)
    try:
        with warnings.catch_warnings():
            if not verbose:
                warnings.filterwarnings("ignore", message=_WRITE_CONCURRENCY_NOTE)
            yield
    finally:
        for handler in consoles:
            handler.removeFilter(console_filter)
        context.enable_progress_bars = shown
