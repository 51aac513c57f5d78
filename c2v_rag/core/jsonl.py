"""Reading JSON Lines files with errors that point at the line."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path


def iter_jsonl(path: Path, on_error: Callable[[int, ValueError], None] | None = None) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line.

    A bad line (not UTF-8, not JSON, not an object) raises ValueError naming ``path:line``; with
    ``on_error``, that error is passed to it with the line number instead and reading goes on.
    """
    for number, _, record in iter_jsonl_spans(path, on_error):
        yield number, record


def iter_jsonl_spans(
    path: Path, on_error: Callable[[int, ValueError], None] | None = None
) -> Iterator[tuple[int, tuple[int, int], dict]]:
    """:func:`iter_jsonl`, with each line's byte span in the file, ``(start, end)``: how far into the file a
    record lies (an ingest's progress within one file)."""
    # Binary, decoded line by line: one bad byte then costs its line, not the rest of the file.
    end = 0
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            start, end = end, end + len(raw)
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}:{number} is not valid JSON: {err}") from err
                if not isinstance(record, dict):
                    raise ValueError(f"{path}:{number} must be a JSON object, got {type(record).__name__}")
            except UnicodeDecodeError as err:
                error = ValueError(f"{path}:{number} is not valid UTF-8: {err}")
                if on_error is None:
                    raise error from err
                on_error(number, error)
                continue
            except ValueError as err:
                if on_error is None:
                    raise
                on_error(number, err)
                continue
            yield number, (start, end), record
