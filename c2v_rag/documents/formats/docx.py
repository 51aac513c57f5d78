"""Word documents (.docx, and the macro-enabled .docm and templates .dotx/.dotm, which hold the same parts) as
Markdown: headings by their paragraph style, list items, tables as rows of cells. One document per file; headers,
footers and comments are left out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from c2v_rag.core.extras import Requirement
from c2v_rag.documents.formats.base import FileFormat, office_main_part, parse_file, titled_document
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument


class Docx(FileFormat):
    name = "Word"
    suffixes = (".docx", ".docm", ".dotx", ".dotm")
    page_rank = 3
    requires = (Requirement("docx", "python-docx", "docx"),)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        parsed = parse_file(file, options, log, file.suffix.lower(), lambda: _title_and_blocks(file))
        if parsed is None:
            return
        title, blocks = parsed
        yield titled_document(file, root, title, "\n\n".join(blocks))


# The main part's content type in a macro-enabled document and in the two templates. python-docx maps only a
# .docx's to its document part (and docx.Document refuses the others); their XML is the same.
_WORD_VARIANTS = (
    "application/vnd.ms-word.document.macroEnabled.main+xml",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml",
    "application/vnd.ms-word.template.macroEnabledTemplate.main+xml",
)


def _title_and_blocks(file: Path) -> tuple[str | None, list[str]]:
    from docx.opc.part import PartFactory
    from docx.package import Package
    from docx.parts.document import DocumentPart

    document = office_main_part(file, Package, PartFactory, DocumentPart, _WORD_VARIANTS, "Word document").document
    blocks = [b for b in (_block_markdown(item) for item in document.iter_inner_content()) if b]
    return " ".join((document.core_properties.title or "").split()) or _first_heading(blocks), blocks


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
