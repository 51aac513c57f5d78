"""OpenDocument text (.odt, as LibreOffice and OpenOffice write it) as Markdown: one document per file.

Headings by their outline level (``#``), paragraphs, list items (``-``, indented by nesting), tables a row a line
with cells between ``|``, text boxes and sections in document order. Left out: comments, footnotes, tracked
deletions, and generated indexes (a table of contents repeats the headings). Led by the recorded title (``meta.xml``),
else a first paragraph in the Title style or a first heading of level 1.

An .odt is a zip of XML files; Python's own zip and XML readers read it (its expat refuses entity expansion
attacks), so no package is needed.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

from c2v_rag.documents.formats.base import FileFormat, SkipFile, file_document, led_by_title, parse_or_skip, within_size
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
_STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
_DC = "http://purl.org/dc/elements/1.1/"


def _t(name: str) -> str:
    return f"{{{_TEXT}}}{name}"


# Unpacked XML beyond this is refused: a small file that unpacks to gigabytes is a zip bomb, not a document.
MAX_UNPACKED_BYTES = 256 * 1024 * 1024
# Inline elements whose text is not the document's running text.
_LEFT_OUT_INLINE = {_t("note"), f"{{{_OFFICE}}}annotation", _t("tracked-changes")}
# Block elements left out whole: generated indexes, change records, field declarations.
_LEFT_OUT_BLOCKS = {
    _t(name)
    for name in (
        "table-of-content",
        "alphabetical-index",
        "illustration-index",
        "table-index",
        "object-index",
        "user-index",
        "bibliography",
        "tracked-changes",
        "sequence-decls",
        "variable-decls",
        "user-field-decls",
    )
} | {f"{{{_OFFICE}}}annotation", f"{{{_OFFICE}}}forms"}


class OpenDocumentText(FileFormat):
    name = "OpenDocument text"
    suffixes = (".odt",)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        if not within_size(file, options, log):
            return
        parsed = parse_or_skip(file, log, ".odt", lambda: odt_title_and_blocks(file))
        if parsed is None:
            return
        title, blocks = parsed
        yield file_document(file, root, led_by_title(title, "\n\n".join(blocks)), {"title": title} if title else None)


def odt_title_and_blocks(file: Path) -> tuple[str | None, list[str]]:
    """An .odt's recorded title (else its Title paragraph or first level-1 heading) and its blocks as Markdown."""
    with zipfile.ZipFile(file) as archive:
        content = _xml(archive, "content.xml")
        meta = _xml(archive, "meta.xml") if "meta.xml" in archive.namelist() else None
    body = content.find(f"{{{_OFFICE}}}body/{{{_OFFICE}}}text")
    if body is None:
        raise SkipFile("it holds no text body (not a text document: a spreadsheet or a drawing saved as .odt?)")
    reader = _TextReader(content)
    blocks = list(reader.blocks(body))
    recorded = meta.findtext(f"{{{_OFFICE}}}meta/{{{_DC}}}title") if meta is not None else None
    title = " ".join((recorded or "").split()) or (reader.titles[0] if reader.titles else None)
    return title, blocks


def _xml(archive: zipfile.ZipFile, name: str) -> ElementTree.Element:
    size = archive.getinfo(name).file_size
    if size > MAX_UNPACKED_BYTES:
        raise SkipFile(f"its {name} unpacks to {size:,} bytes, over {MAX_UNPACKED_BYTES:,}")
    return ElementTree.fromstring(archive.read(name))


class _TextReader:
    """One document's body as Markdown blocks; ``titles`` collects the texts of its Title paragraphs and level-1
    headings, in order, for a file with no recorded title."""

    def __init__(self, content: ElementTree.Element) -> None:
        # An edited paragraph's style is an automatic one (P1, P2...) whose parent is the style the user chose.
        self.parents = {
            style.get(f"{{{_STYLE}}}name"): style.get(f"{{{_STYLE}}}parent-style-name")
            for style in content.iter(f"{{{_STYLE}}}style")
        }
        self.titles: list[str] = []

    def blocks(self, container: ElementTree.Element, depth: int = 0) -> Iterator[str]:
        """The blocks of ``container``'s children, in order (``depth``: list nesting)."""
        for element in container:
            yield from self.block(element, depth)

    def block(self, element: ElementTree.Element, depth: int) -> Iterator[str]:
        tag = element.tag
        if tag in _LEFT_OUT_BLOCKS:
            return
        if tag == _t("h"):
            text = _line(element)
            level = min(max(int(element.get(_t("outline-level"), "1") or "1"), 1), 6)
            if text:
                if level == 1:
                    self.titles.append(text)
                yield f"{'#' * level} {text}"
        elif tag == _t("p"):
            text = _line(element)
            style = element.get(_t("style-name"))
            if text and "Title" in (style, self.parents.get(style)):
                self.titles.append(text)
            if text:
                yield text
            for box in _boxes(element):  # text boxes anchored in the paragraph, after it
                yield from self.blocks(box, depth)
        elif tag == _t("list"):
            yield from self.list_items(element, depth)
        elif tag == f"{{{_TABLE}}}table":
            rows = [_row(row) for row in element.iter(f"{{{_TABLE}}}table-row")]
            table = "\n".join(r for r in rows if r)
            if table:
                yield table
        else:  # sections, frames, text boxes and other containers: their blocks in order
            yield from self.blocks(element, depth)

    def list_items(self, element: ElementTree.Element, depth: int) -> Iterator[str]:
        for item in element:
            for child in item if item.tag in (_t("list-item"), _t("list-header")) else ():
                if child.tag == _t("list"):
                    yield from self.list_items(child, depth + 1)
                    continue
                heading = child.tag == _t("h")  # a heading numbered by a list stays a heading
                for block in self.block(child, depth):
                    yield block if heading else f"{'  ' * depth}- {block}"


def _boxes(element: ElementTree.Element) -> Iterator[ElementTree.Element]:
    """The text boxes under ``element``, not those inside another text box (read with the box around them)."""
    for child in element:
        if child.tag == f"{{{_DRAW}}}text-box":
            yield child
        else:
            yield from _boxes(child)


def _row(row: ElementTree.Element) -> str:
    cells = [" ".join(_line(p) for p in cell.iter(_t("p"))).strip() for cell in row.findall(f"{{{_TABLE}}}table-cell")]
    return " | ".join(c for c in cells if c)


def _line(element: ElementTree.Element) -> str:
    """A paragraph's or heading's text on one line (spaces, tabs and line breaks as single spaces), without its
    footnotes, comments and text boxes."""
    return " ".join(_inline(element).split())


def _inline(element: ElementTree.Element) -> str:
    parts = [element.text or ""]
    for child in element:
        tag = child.tag
        if tag in (_t("s"), _t("tab"), _t("line-break")):
            parts.append(" ")
        elif tag not in _LEFT_OUT_INLINE and not tag.startswith(f"{{{_DRAW}}}"):
            parts.append(_inline(child))
        parts.append(child.tail or "")
    return "".join(parts)
