"""What the Office 97-2003 readers share of the compound (OLE) files they are stored in: opening one, and the title
and code page in the summary information."""

from __future__ import annotations

import codecs
import contextlib
import struct
from collections.abc import Iterator
from typing import Any

from c2v_rag.documents.formats.base import SkipFile

# The first bytes of every compound file.
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

# Property types in the summary information: a 16-bit integer (the code page), 8-bit and UTF-16 strings.
_VT_I2, _VT_LPSTR, _VT_LPWSTR = 2, 30, 31


@contextlib.contextmanager
def compound_file(data: bytes, kind: str) -> Iterator[Any]:
    """olefile's view of a compound file's bytes; a damaged one (olefile says so with an ``OSError``, opening it or
    reading a stream in the ``with`` body: the bytes were read already) is skipped, naming ``kind`` (``.doc``)."""
    import olefile

    try:
        with olefile.OleFileIO(data) as ole:
            yield ole
    except OSError as err:
        raise SkipFile(f"not a readable {kind} file ({err})") from err


def summary_title(ole: Any) -> tuple[str | None, int | None]:
    """The title in the document's summary information, decoded in the code page it names, and that code page.

    Read here rather than with olefile's ``get_metadata``, whose parser loops over a damaged vector's count (up to
    2**32 entries) and catches ``BaseException`` (Ctrl-C) around each property."""
    if not ole.exists("\x05SummaryInformation"):
        return None, None
    data = ole.openstream("\x05SummaryInformation").read()
    if len(data) < 48:
        return None, None
    (section,) = struct.unpack_from("<I", data, 44)
    if section + 8 > len(data):
        return None, None
    (count,) = struct.unpack_from("<I", data, section + 4)
    values: dict[int, int] = {}
    for i in range(min(count, (len(data) - section - 8) // 8)):
        prop, offset = struct.unpack_from("<II", data, section + 8 + 8 * i)
        values[prop] = section + offset
    codepage = None
    if 1 in values and values[1] + 6 <= len(data) and data[values[1]] == _VT_I2:
        codepage = struct.unpack_from("<H", data, values[1] + 4)[0]
    title = ""
    at = values.get(2)
    if at is not None and at + 8 <= len(data):
        kind, size = data[at], struct.unpack_from("<I", data, at + 4)[0]
        raw = data[at + 8 : at + 8 + min(size * (2 if kind == _VT_LPWSTR else 1), 4096)]
        if kind == _VT_LPSTR:
            title = raw.decode("utf-8" if codepage == 65001 else single_byte_codec(codepage), "replace")
        elif kind == _VT_LPWSTR:
            title = raw.decode("utf-16-le", "replace")
    title = " ".join(title.replace("\x00", " ").split())
    return title or None, codepage


def single_byte_codec(codepage: int | None) -> str:
    """The Python codec of a Windows code page of one byte a character (cp1251...), else cp1252."""
    if codepage is None or not 874 <= codepage <= 1258:
        return "cp1252"
    try:
        codecs.lookup(f"cp{codepage}")
    except LookupError:
        return "cp1252"
    return f"cp{codepage}"
