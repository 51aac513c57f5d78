"""The file formats ingest, embed and adapt read, by suffix.

A format is a :class:`~c2v_rag.documents.formats.base.FileFormat` subclass and a line in :data:`FORMATS`. Formats
whose reader needs a package outside the core install name the extra that brings it; a folder's files of such a
format are skipped with one warning that names the command, and a file passed on its own is refused before any work.
"""

from __future__ import annotations

from pathlib import Path

from c2v_rag.documents.formats.base import FileFormat
from c2v_rag.documents.formats.docx import Docx
from c2v_rag.documents.formats.epub import Epub
from c2v_rag.documents.formats.html import Html
from c2v_rag.documents.formats.latex import Latex
from c2v_rag.documents.formats.mail import Email, Mbox
from c2v_rag.documents.formats.markup import AsciiDoc, OrgMode
from c2v_rag.documents.formats.notebook import Notebook
from c2v_rag.documents.formats.opendocument import OpenDocumentPresentation, OpenDocumentText
from c2v_rag.documents.formats.pdf import Pdf
from c2v_rag.documents.formats.records import Jsonl, Parquet
from c2v_rag.documents.formats.rtf import Rtf
from c2v_rag.documents.formats.slides import Slides
from c2v_rag.documents.formats.tables import DelimitedTable, LegacyWorkbook, OpenDocumentSpreadsheet, Workbook
from c2v_rag.documents.formats.text import PlainText

FORMATS: tuple[FileFormat, ...] = (
    PlainText(),
    AsciiDoc(),
    OrgMode(),
    Latex(),
    Jsonl(),
    Parquet(),
    DelimitedTable(),
    Workbook(),
    LegacyWorkbook(),
    OpenDocumentSpreadsheet(),
    Html(),
    Pdf(),
    Docx(),
    OpenDocumentText(),
    Rtf(),
    Slides(),
    OpenDocumentPresentation(),
    Epub(),
    Notebook(),
    Email(),
    Mbox(),
)

_BY_SUFFIX = {suffix: fmt for fmt in FORMATS for suffix in fmt.suffixes}
SUPPORTED_SUFFIXES = frozenset(_BY_SUFFIX)


def format_of(path: Path) -> FileFormat | None:
    """The format that reads ``path``, by its suffix (None: not one ingest reads)."""
    return _BY_SUFFIX.get(path.suffix.lower())


def suffixes_in_words() -> str:
    """Every suffix read, for messages: ``.txt, .md, ... and .docx``."""
    names = [s for fmt in FORMATS for s in fmt.suffixes]
    return f"{', '.join(names[:-1])} and {names[-1]}"


__all__ = ["FORMATS", "SUPPORTED_SUFFIXES", "FileFormat", "format_of", "suffixes_in_words"]
