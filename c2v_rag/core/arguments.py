"""Checks of plain keyword arguments, worded once: a wrong type or value named with the keyword, before any work
(a ``batch_size="8"`` failed deep in the batching with ``'<' not supported between 'str' and 'int'``)."""

from __future__ import annotations

from typing import Any


def check_count(name: str, value: Any, *, optional: bool = False) -> None:
    """Refuse ``value`` unless it is a positive int (or None, where ``optional``), naming ``name``."""
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        hint = " (a number given as text: pass it as an int)" if isinstance(value, str) and value.isdigit() else ""
        raise ValueError(f"{name} must be a positive integer{' or None' if optional else ''}, got {value!r}{hint}")


def check_unicode(text: str, where: str) -> None:
    """Refuse a string the tokenizers cannot take: one holding a lone surrogate (U+D800-U+DFFF).

    Python strings can (from ``errors="surrogateescape"`` decoding, or a JSON ``"\\ud800"``
    escape); the Rust tokenizers fail on them with an error that names neither text nor cause.
    """
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"{where} holds a lone surrogate (U+{ord(text[err.start]):04X} at character {err.start}), which is "
            "not valid Unicode text: decode the source bytes with errors='replace', or drop it"
        ) from None
