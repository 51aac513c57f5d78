"""Lists and counts put into words for messages."""

from __future__ import annotations

from collections.abc import Sequence


def in_words(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c`` (empty: ``""``)."""
    if len(names) < 2:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 chunk``, ``2 chunks``, ``0 chunks`` (``plural``: where adding an s is wrong)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
