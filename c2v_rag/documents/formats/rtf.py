"""Rich Text Format files (``.rtf``, as WordPad, TextEdit and older Word write them): their text, one document per
file, led by the title recorded in their ``\\info`` group.

striprtf turns the markup into text (paragraphs a line each, pictures, font and colour tables and other hidden
groups left out, ``\\'e9`` and ``\\u8364`` escapes decoded). What is ours: the code page the file names
(``\\ansicpg1251``), its title, table rows with cells between `` | `` as the other formats give them, and a link's
text without its address.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from pathlib import Path

from c2v_rag.core.extras import Requirement
from c2v_rag.documents.formats.base import FileFormat, SkipFile, parse_file, titled_or_skipped
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

# The code page of the file's \'xx escapes; RTF's default is Windows' Western one.
_CODE_PAGE = re.compile(rb"\\ansicpg(\d+)")
_DEFAULT_ENCODING = "cp1252"
# The title in the \info group: {\title text}, the text up to the group's end (escaped braces aside).
_TITLE = re.compile(r"\{\\title\s?((?:[^{}\\]|\\.)*)\}", re.DOTALL)
# A field's result is followed by its target in quotes and brackets: the port site("https://example.org").
_LINK_TARGET = re.compile(r'(?<=\S)\("(?:https?|mailto|ftp|file):[^"\s]*"\)')


class Rtf(FileFormat):
    name = "RTF"
    suffixes = (".rtf",)
    page_rank = 3
    requires = (Requirement("striprtf", "striprtf", "rtf"),)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        converted = parse_file(file, options, log, "RTF", lambda: rtf_text(file.read_bytes()))
        yield from titled_or_skipped(file, root, log, converted)


def rtf_text(data: bytes) -> tuple[str | None, str]:
    """An RTF file's recorded title (None without one) and its text."""
    from striprtf.striprtf import rtf_to_text

    if not data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{\\rtf"):
        raise SkipFile("not an RTF file (it does not open with {\\rtf)")
    encoding = _encoding(data)
    # RTF is 7-bit text: its other characters are escapes, decoded in the code page it names. Bytes above 127 in the
    # file itself (some writers put them there) are read in that code page too.
    source = data.decode(encoding, errors="replace")
    title_match = _TITLE.search(source)
    # (In a group of its own, as in the file: striprtf decodes escapes only inside one.)
    title = rtf_to_text(f"{{{title_match.group(1)}}}", encoding=encoding, errors="replace") if title_match else ""
    title = " ".join(title.split())
    text = rtf_to_text(source, encoding=encoding, errors="replace")
    return title or None, _tidy(text)


def _encoding(data: bytes) -> str:
    """The Python codec of the code page the RTF header names (``cp1252`` when it names none, or one Python lacks)."""
    match = _CODE_PAGE.search(data[:4096])
    if match is None:
        return _DEFAULT_ENCODING
    name = "utf-8" if match.group(1) == b"65001" else f"cp{int(match.group(1))}"
    try:
        codecs.lookup(name)
    except LookupError:
        return _DEFAULT_ENCODING
    return name


def _tidy(text: str) -> str:
    """striprtf's text with table rows' cells between `` | `` (it ends each cell with ``|``), links without their
    addresses, line-end spaces and runs of blank lines gone."""
    lines = []
    for line in _LINK_TARGET.sub("", text).split("\n"):
        line = line.rstrip()
        if line.endswith("|"):  # a table row
            line = " | ".join(cell.strip() for cell in line.rstrip("|").split("|"))
        lines.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
