"""AsciiDoc and Org files: plain text with a header that names the document.

Both are read as the text they are, as reStructuredText is; only their header is read apart. Its title leads the
text as a Markdown heading (so a chunk from the middle of the file is led by it, as a Markdown page's is), and its
other lines, which set options for the tools that render the file (``:toc:``, ``#+OPTIONS:``), are left out.

- AsciiDoc (``.adoc``, ``.asciidoc``): the document title is a first line ``= Title``; the header under it runs
  to the first blank line, and its ``:name: value`` attribute entries and ``//`` comments are left out (its author
  and revision lines are kept). A file without a title loses only the attribute entries it opens with.
- Org (``.org``): ``#+TITLE:`` among the keyword lines (``#+KEY: value``) at the top of the file.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Iterator
from pathlib import Path

from c2v_rag.documents.formats.base import FileFormat, file_document, led_by_title, read_text
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

# An AsciiDoc attribute entry (:name: value, :name!:) and an Org keyword line (#+KEY: value).
_ATTRIBUTE = re.compile(r"^:!?[\w][\w-]*!?:(?:[ \t].*)?$")
_ORG_KEYWORD = re.compile(r"^#\+(\w[\w-]*):[ \t]*(.*)$")


def asciidoc_header(text: str) -> tuple[str | None, str]:
    """An AsciiDoc text's document title (None without one), and the text after its header."""
    lines = text.lstrip("\ufeff").split("\n")
    start = 0
    while start < len(lines) and (not lines[start].strip() or lines[start].startswith("//")):
        start += 1  # blank lines and line comments may come before the title
    title = None
    if start < len(lines) and re.match(r"^=[ \t]+\S", lines[start]):
        title = lines[start][1:].strip()
        start += 1
    # The header's attribute entries and comments, up to its first blank line (its author and revision lines stay:
    # they are text a reader may search for).
    end = start
    kept: list[str] = []
    while end < len(lines) and lines[end].strip():
        line = lines[end].strip()
        if not (_ATTRIBUTE.match(line) or line.startswith("//")):
            if title is None:
                break  # no header: the text starts here
            kept.append(lines[end])
        end += 1
    return title, "\n".join([*kept, *lines[end:]]).strip("\n")


def org_header(text: str) -> tuple[str | None, str]:
    """An Org text's ``#+TITLE:`` (None without one), and the text after the keyword lines that open it."""
    lines = text.lstrip("\ufeff").split("\n")
    title = None
    end = 0
    while end < len(lines):
        line = lines[end].strip()
        keyword = _ORG_KEYWORD.match(line)
        if line and keyword is None:
            break  # the text starts here
        if keyword and keyword.group(1).upper() == "TITLE" and keyword.group(2).strip():
            title = keyword.group(2).strip()
        end += 1
    return title, "\n".join(lines[end:]).strip("\n")


class _HeadedText(FileFormat):
    """Text read as it is, less the header that ``header`` splits off, its title leading the rest."""

    @staticmethod
    @abstractmethod
    def header(text: str) -> tuple[str | None, str]:
        """The text's title (None without one) and the text after its header."""

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        text = read_text(file, options, log)
        if text is not None:
            title, body = self.header(text)
            yield file_document(file, root, led_by_title(title, body))


class AsciiDoc(_HeadedText):
    name = "AsciiDoc"
    suffixes = (".adoc", ".asciidoc")
    page_rank = 0
    header = staticmethod(asciidoc_header)


class OrgMode(_HeadedText):
    name = "Org"
    suffixes = (".org",)
    page_rank = 0
    header = staticmethod(org_header)
