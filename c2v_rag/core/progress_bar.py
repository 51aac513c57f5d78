"""What c2v_rag's progress bars share: the size tqdm is given where the terminal reports none, a bar whose
percentage and ETA follow the work done while it counts whole items, and a bar whose clock runs between updates."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tqdm.auto import tqdm


def unsized_terminal(stream: Any) -> dict[str, int]:
    """tqdm's ``ncols`` and ``nrows`` where ``stream`` is a terminal that reports no size, else none (tqdm measures).

    A pseudo-terminal nobody sized (``script`` or ``docker exec -t`` run from a pipe, some CI runners) reports
    0 or -1 columns and rows: tqdm then cuts each line of its bar to nothing and counts the bar as below the
    screen, so the user saw blank lines and no bar at all.
    """
    try:
        if not stream.isatty():
            return {}
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return {}
    if size.columns > 0 and size.lines > 0:
        return {}
    fallback = shutil.get_terminal_size((100, 24))
    return {"ncols": fallback.columns, "nrows": fallback.lines}


class CountingBar(tqdm):
    """tqdm whose position (``n`` of ``total``, so the percentage and the ETA) is work done, in whatever unit
    predicts time (bytes, characters), while it shows whole items done of all (:attr:`count` of ``items``, as
    ``3/7 files``; the count alone where ``items`` is None, beside the bar where ``total`` is known, as the documents
    of one JSONL file). Items of unequal size make a count a poor clock: the longest go first in an encode, and one
    large file among small ones is most of an ingest. The ETA follows the average rate of the whole run
    (``smoothing=0``), not the last burst."""

    def __init__(self, *args: Any, items: int | None, noun: str, **kwargs: Any) -> None:
        self.count, self.items = 0, items  # before tqdm's first draw
        if kwargs.get("total") is None:
            shown = "{desc}: {count_fmt} " + noun + " [{elapsed}{postfix}]"
        elif items is None:
            shown = "{l_bar}{bar}| {count_fmt} " + noun + " [{elapsed}<{remaining}{postfix}]"
        else:
            shown = "{l_bar}{bar}| {count_fmt}/{items_fmt} " + noun + " [{elapsed}<{remaining}{postfix}]"
        kwargs.setdefault("bar_format", shown)
        kwargs.setdefault("smoothing", 0)
        super().__init__(*args, **kwargs)

    @property
    def format_dict(self) -> dict[str, Any]:
        shown = super().format_dict
        shown["count_fmt"] = str(self.count)
        shown["items_fmt"] = str(self.items)
        return shown


@contextmanager
def ticking(bar: tqdm, interval: float = 1.0) -> Iterator[None]:
    """Redraw ``bar`` every ``interval`` seconds while the block runs, so that its elapsed time and postfix move
    when no update comes: tqdm draws only on updates, and a Ray run waiting for its actors' first batch (a minute
    on a cluster that loads the model) showed one frozen line, which reads as hung."""
    if bar.disable:
        yield
        return
    stop = threading.Event()

    def redraw() -> None:
        while not stop.wait(interval):
            bar.refresh()

    clock = threading.Thread(target=redraw, name="c2v-rag-bar-clock", daemon=True)
    clock.start()
    try:
        yield
    finally:
        stop.set()
        clock.join()
