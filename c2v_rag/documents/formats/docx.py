"""Word documents (.docx) as Markdown: headings by their paragraph style, list items, tables as rows of cells.
One document per file; headers, footers and comments are left out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from c2v_rag.core.extras import Requirement
from c2v_rag.documents.formats.base import FileFormat, file_document, led_by_title, within_size
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument


class Docx(FileFormat):
    name = "Word"
    suffixes = (".docx",)
    requires = (Requirement("docx", "python-docx", "docx"),)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        import docx

        if not within_size(file, options, log):
            return
        try:
            document = docx.Document(str(file))
            blocks = [b for b in (_block_markdown(item) for item in document.iter_inner_content()) if b]
            title = " ".join((document.core_properties.title or "").split()) or _first_heading(blocks)
        except OSError:
            raise  # the file itself unreadable: the caller's on_error decides
        except Exception as err:  # noqa: BLE001 - a damaged package fails in python-docx or lxml, in many ways
            log.skip_file(file, f"not a readable .docx file ({type(err).__name__}: {err})")
            return
        yield file_document(file, root, led_by_title(title, "\n\n".join(blocks)), {"title": title} if title else None)


def _block_markdown(item: Any) -> str:
    from docx.table import Table

    if isinstance(item, Table):
        rows = []
        for row in item.rows:
            cells = [" ".join(cell.text.split()) for cell in row.cells]
            # A merged cell is repeated in each column it spans; its text once is enough.
            rows.append(" | ".join(c for n, c in enumerate(cells) if c and (n == 0 or c != cells[n - 1])))
        return "\n".join(r for r in rows if r)
    text = item.text.strip()
    if not text:
        return ""
    style = (item.style.name if item.style is not None else "") or ""
    if style == "Title":
        return f"# {text}"
    if style.startswith("Heading") and style[7:].strip().isdigit():
        return f"{'#' * min(int(style[7:]), 6)} {text}"
    if style.startswith("List"):
        return f"- {text}"
    return text


def _first_heading(blocks: list[str]) -> str | None:
    first = blocks[0] if blocks else ""
    return first.lstrip("#").strip() or None if first.startswith("# ") else None
