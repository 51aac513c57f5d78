"""What a terminal tells a progress bar: the size tqdm is given where the terminal reports none."""

from __future__ import annotations

import os
import shutil
from typing import Any


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
