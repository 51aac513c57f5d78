"""Lists put into words for messages."""

from __future__ import annotations

from collections.abc import Sequence


def in_words(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c`` (empty: ``""``)."""
    if len(names) < 2:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"
