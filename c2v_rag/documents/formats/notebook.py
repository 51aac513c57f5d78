"""Jupyter notebooks (.ipynb): one document per notebook, its cells in order.

Markdown cells are read as a Markdown file is (as they render: :mod:`c2v_rag.documents.formats.markdown`) and code
cells as fenced code in the notebook's language, so a question finds the prose and the code that does what it asks.
Outputs are left out: plots, tables and logs as a kernel printed them
are rarely what a reader searches for, and they can be most of a notebook's bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from c2v_rag.documents.formats.base import FileFormat, file_document, read_text
from c2v_rag.documents.formats.markdown import shown_markdown
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument


class Notebook(FileFormat):
    name = "Jupyter notebook"
    suffixes = (".ipynb",)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        text = read_text(file, options, log)
        if text is None:
            return
        try:
            notebook = json.loads(text)
            cells, language = notebook_cells(notebook)
        except (ValueError, TypeError, KeyError) as err:
            log.skip_file(file, f"not a Jupyter notebook ({type(err).__name__}: {err})")
            return
        blocks = [block for block in (_cell_text(cell, language) for cell in cells) if block]
        yield file_document(file, root, "\n\n".join(blocks))


def notebook_cells(notebook: Any) -> tuple[list[dict[str, Any]], str]:
    """A parsed notebook's cells and the language of its code cells. nbformat 4 lists the cells; nbformat 3 (before
    2015) lists them in worksheets. A ValueError when ``notebook`` is neither."""
    if not isinstance(notebook, dict) or not isinstance(notebook.get("nbformat"), int):
        raise ValueError("no nbformat version")
    metadata = notebook.get("metadata") or {}
    language = (metadata.get("language_info") or {}).get("name") or (metadata.get("kernelspec") or {}).get(
        "language", ""
    )
    if notebook["nbformat"] >= 4:
        cells = notebook.get("cells")
    else:
        cells = [cell for sheet in notebook.get("worksheets") or [] for cell in sheet.get("cells") or []]
    if not isinstance(cells, list):
        raise ValueError("its cells are not a list")
    return [cell for cell in cells if isinstance(cell, dict)], str(language)


def _cell_text(cell: dict[str, Any], language: str) -> str:
    """A cell as Markdown: a markdown cell's text as it renders (:func:`shown_markdown`), a raw cell's as it is, a
    code cell fenced (empty cells: "")."""
    source = cell.get("source", cell.get("input", ""))  # nbformat 3 names a code cell's source "input"
    text = ("".join(source) if isinstance(source, list) else str(source)).strip("\n")
    if not text.strip():
        return ""
    if cell.get("cell_type") == "code":
        fence = "````" if "```" in text else "```"
        return f"{fence}{language}\n{text}\n{fence}"
    return shown_markdown(text).strip("\n") if cell.get("cell_type") == "markdown" else text
