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


def size_in_words(size: int) -> str:
    """``512 bytes``, ``1.2 kB``, ``38.2 MB``, ``1.5 GB``: a byte count as ``du -h`` would round it (units of 1024,
    as ``--max-file-mb`` counts them)."""
    if size < 1024:
        return counted(size, "byte")
    value, unit = size / 1024, "kB"
    for larger in ("MB", "GB", "TB"):
        if round(value, 1) < 1024:
            break
        value, unit = value / 1024, larger
    return f"{value:.1f} {unit}"


def one_line(name: str) -> str:
    """``name`` with its control characters escaped (``\n`` for a newline), the rest as it is: a file name on one
    line of a listing, as ``ls -b`` shows it."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in name)
