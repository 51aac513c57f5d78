"""Reading JSON Lines files with errors that point at the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line; a bad line raises ValueError naming ``path:line``."""
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{number} is not valid JSON: {err}") from err
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{number} must be a JSON object, got {type(record).__name__}")
            yield number, record
