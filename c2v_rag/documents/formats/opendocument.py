"""OpenDocument text (.odt) and presentations (.odp), as LibreOffice and OpenOffice write them, as Markdown: one
document per file; and the rows of spreadsheets (.ods), which :mod:`~c2v_rag.documents.formats.tables` reads as it
reads Excel's.

Headings by their outline level (``#``), paragraphs, list items (``-``, indented by nesting), tables a row a line
with cells between ``|``, text boxes and sections in document order. Left out: comments, footnotes, tracked
deletions, and generated indexes (a table of contents repeats the headings). Led by the recorded title (``meta.xml``),
else a first paragraph in the Title style or a first heading of level 1.

A presentation reads as PowerPoint decks do (:mod:`~c2v_rag.documents.formats.slides`): each slide's title as a
``##`` heading, its text boxes, lists and tables in order, its speaker notes (``Notes: ...``), and each chunk's
``page_label`` the slide it starts on.

All three are zips of XML files; Python's own zip and XML readers read it (its expat refuses entity expansion
attacks), so no package is needed.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

from c2v_rag.documents.formats.base import FileFormat, SkipFile, parse_file, titled_document
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
_STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
_PRESENTATION = "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"
_DC = "http://purl.org/dc/elements/1.1/"


def _t(name: str) -> str:
    return f"{{{_TEXT}}}{name}"


# A presentation's placeholders that a layout repeats on every slide.
_REPEATED_PLACEHOLDERS = {"page-number", "date-time", "header", "footer"}
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
    suffixes = (".odt", ".ott")  # a template holds the same parts
    page_rank = 3

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        parsed = parse_file(file, options, log, file.suffix.lower(), lambda: odt_title_and_blocks(file))
        if parsed is None:
            return
        title, blocks = parsed
        yield titled_document(file, root, title, "\n\n".join(blocks))


class OpenDocumentPresentation(FileFormat):
    name = "OpenDocument presentation"
    suffixes = (".odp", ".otp")

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        from c2v_rag.documents.formats.slides import deck_documents

        parsed = parse_file(file, options, log, file.suffix.lower(), lambda: odp_title_and_slides(file))
        if parsed is not None:
            yield from deck_documents(file, root, log, *parsed)


def odt_title_and_blocks(file: Path) -> tuple[str | None, list[str]]:
    """An .odt's recorded title (else its Title paragraph or first level-1 heading) and its blocks as Markdown."""
    body, content, recorded = _opened(file, "text", "text body (a spreadsheet or a drawing saved as .odt?)")
    reader = _TextReader(content)
    blocks = list(reader.blocks(body))
    return recorded or (reader.titles[0] if reader.titles else None), blocks


def odp_title_and_slides(file: Path) -> tuple[str, list[tuple[str | None, str]]]:
    """An .odp's recorded title ("" without one) and each slide's title and text as Markdown."""
    body, content, recorded = _opened(file, "presentation", "slides (a text document saved as .odp?)")
    reader = _TextReader(content)
    return recorded, [_slide(page, reader) for page in body.iter(f"{{{_DRAW}}}page")]


def ods_sheets(file: Path) -> list[tuple[str, list[ElementTree.Element]]]:
    """An .ods's sheets: each one's name and its row elements (read by :func:`sheet_rows`)."""
    body, _, _ = _opened(file, "spreadsheet", "sheets (a text document saved as .ods?)")
    return [
        (sheet.get(f"{{{_TABLE}}}name") or f"sheet {n}", list(sheet.iter(f"{{{_TABLE}}}table-row")))
        for n, sheet in enumerate(body.findall(f"{{{_TABLE}}}table"), start=1)
    ]


def sheet_rows(rows: list[ElementTree.Element]) -> Iterator[tuple[int, list[str]]]:
    """A sheet's rows as the texts its cells show, repeats expanded (``table:number-rows-repeated``,
    ``table:number-columns-repeated``) up to the last cell and row holding text: a sheet saved by LibreOffice repeats
    an empty row or cell to the sheet's edge, a million rows or 16,384 columns. Each with the row elements read so
    far, for progress."""
    blank = 0
    for read, row in enumerate(rows, start=1):
        runs: list[tuple[str, int]] = []
        for cell in row:
            if cell.tag in (f"{{{_TABLE}}}table-cell", f"{{{_TABLE}}}covered-table-cell"):
                text = _cell_text(cell)
                runs.append((text, int(cell.get(f"{{{_TABLE}}}number-columns-repeated", "1") or "1")))
        while runs and not runs[-1][0]:
            runs.pop()
        times = int(row.get(f"{{{_TABLE}}}number-rows-repeated", "1") or "1")
        if not runs:
            blank += times  # counted, and given only if a row with text follows
            continue
        for _ in range(blank):
            yield read, []
        blank = 0
        cells = [text for text, count in runs for _ in range(count)]
        for _ in range(times):
            yield read, cells


def _cell_text(cell: ElementTree.Element) -> str:
    """What a cell shows (its paragraphs), a date as ISO 8601 (``2024-05-01``, as Excel's are read) whatever its
    display format."""
    if cell.get(f"{{{_OFFICE}}}value-type") == "date":
        value = cell.get(f"{{{_OFFICE}}}date-value") or ""
        return value.removesuffix("T00:00:00")
    return "\n".join(_line(p) for p in cell.findall(_t("p"))).strip()


def _opened(file: Path, kind: str, expected: str) -> tuple[ElementTree.Element, ElementTree.Element, str]:
    """An OpenDocument file's body of ``kind`` (``office:text``, ``office:presentation``), its whole content, and
    its recorded title ("" without one); :class:`SkipFile` saying it holds no ``expected`` when it has no such body."""
    with zipfile.ZipFile(file) as archive:
        content = _xml(archive, "content.xml")
        meta = _xml(archive, "meta.xml") if "meta.xml" in archive.namelist() else None
    body = content.find(f"{{{_OFFICE}}}body/{{{_OFFICE}}}{kind}")
    if body is None:
        raise SkipFile(f"it holds no {expected}")
    recorded = meta.findtext(f"{{{_OFFICE}}}meta/{{{_DC}}}title") if meta is not None else None
    return body, content, " ".join((recorded or "").split())


def _slide(page: ElementTree.Element, reader: _TextReader) -> tuple[str | None, str]:
    """A slide's title and its text: the title frame's text as a ``##`` heading, then the other frames in order (the
    placeholders a layout repeats on every slide, a page number, date, header or footer, left out), then its notes."""
    title = None
    blocks: list[str] = []
    for frame in page.findall(f"{{{_DRAW}}}frame"):
        kind = frame.get(f"{{{_PRESENTATION}}}class")
        if kind in _REPEATED_PLACEHOLDERS:
            continue
        if kind == "title" and title is None:
            title = " ".join(_line(p) for p in frame.iter(_t("p"))).strip() or None
            continue
        blocks.extend(reader.blocks(frame))
    notes = page.find(f"{{{_PRESENTATION}}}notes")
    if notes is not None:
        said = " ".join(
            _line(p)
            for frame in notes.findall(f"{{{_DRAW}}}frame")
            if frame.get(f"{{{_PRESENTATION}}}class") == "notes"
            for p in frame.iter(_t("p"))
        ).strip()
        if said:
            blocks.append(f"Notes: {said}")
    heading = [f"## {title}"] if title else []
    return title, "\n\n".join([*heading, *blocks])


def _xml(archive: zipfile.ZipFile, name: str) -> ElementTree.Element:
    size = archive.getinfo(name).file_size
    if size > MAX_UNPACKED_BYTES:
        raise SkipFile(f"its {name} unpacks to {size:,} bytes, over {MAX_UNPACKED_BYTES:,}")
    return ElementTree.fromstring(archive.read(name))


class _TextReader:
    """One document's body as Markdown blocks; ``titles`` collects the texts of its Title paragraphs and level-1
    headings, in order, for a file with no recorded title."""

    def __init__(self, content: ElementTree.Element) -> None:
        # An edited paragraph's style is an automatic one (P1, P2...) whose parent is the style the user chose; the
        # automatic styles are listed at the content's top, so the body need not be walked for them.
        self.parents = {
            style.get(f"{{{_STYLE}}}name"): style.get(f"{{{_STYLE}}}parent-style-name")
            for style in content.iterfind(f"{{{_OFFICE}}}automatic-styles/{{{_STYLE}}}style")
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
