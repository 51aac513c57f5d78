"""The file formats ingest, embed and adapt read, by suffix.

A format is a :class:`~c2v_rag.documents.formats.base.FileFormat` subclass and a line in :data:`FORMATS`. Formats
whose reader needs a package outside the core install name the extra that brings it; a folder's files of such a
format are skipped with one warning that names the command, and a file passed on its own is refused before any work.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from c2v_rag.documents.formats.archives import CompressedFile, TarArchive, ZipArchive
from c2v_rag.documents.formats.base import FileFormat
from c2v_rag.documents.formats.docx import Docx
from c2v_rag.documents.formats.epub import Epub
from c2v_rag.documents.formats.html import Html
from c2v_rag.documents.formats.info import InfoManual
from c2v_rag.documents.formats.latex import Latex
from c2v_rag.documents.formats.legacy_slides import LegacyPowerPoint
from c2v_rag.documents.formats.legacy_word import LegacyWord
from c2v_rag.documents.formats.mail import Email, Mbox
from c2v_rag.documents.formats.markdown import Markdown
from c2v_rag.documents.formats.markup import AsciiDoc, OrgMode
from c2v_rag.documents.formats.notebook import Notebook
from c2v_rag.documents.formats.opendocument import OpenDocumentPresentation, OpenDocumentText
from c2v_rag.documents.formats.outlook import OutlookMessage
from c2v_rag.documents.formats.pdf import Pdf
from c2v_rag.documents.formats.records import Jsonl, Parquet
from c2v_rag.documents.formats.registry import AS_TEXT, format_for_suffix, format_of, register
from c2v_rag.documents.formats.restructuredtext import ReStructuredText
from c2v_rag.documents.formats.rtf import Rtf
from c2v_rag.documents.formats.slides import Slides
from c2v_rag.documents.formats.tables import DelimitedTable, LegacyWorkbook, OpenDocumentSpreadsheet, Workbook

FORMATS: tuple[FileFormat, ...] = (
    AS_TEXT,
    Markdown(),
    ReStructuredText(),
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
    LegacyWord(),
    OpenDocumentText(),
    Rtf(),
    Slides(),
    LegacyPowerPoint(),
    OpenDocumentPresentation(),
    Epub(),
    Notebook(),
    InfoManual(),
    Email(),
    Mbox(),
    OutlookMessage(),
    ZipArchive(),
    TarArchive(),
    CompressedFile(),
)

register(FORMATS)
SUPPORTED_SUFFIXES = frozenset(suffix for fmt in FORMATS for suffix in fmt.suffixes)
# The text_suffixes entry of files named without a suffix (INTRO, NEWS, Makefile; NEWS.gz compressed): beyond the
# documentation read by its name (registry.DOCUMENTATION_NAMES), read as plain text only when asked.
NO_SUFFIX = ""


def checked_text_suffixes(suffixes: list[str]) -> list[str]:
    """``text_suffixes`` as format_of matches them (lower case, with their dot: ``py`` and ``*.py`` are ``.py``;
    ``""`` for files without a suffix, :data:`NO_SUFFIX`); one that a format reads already, or that is not a suffix
    (``src/``), is refused with the fix."""
    checked = []
    for given in suffixes:
        suffix = given.strip().lower().removeprefix("*")  # *.py is .py
        if suffix in ("", "."):  # files named without a suffix: INTRO, NEWS, Makefile
            checked.append(NO_SUFFIX)
            continue
        suffix = suffix if suffix.startswith(".") else f".{suffix}"
        if len(suffix) < 2 or any(c.isspace() or c in "/\\*?." for c in suffix[1:]):
            raise ValueError(
                f"text_suffixes={suffixes!r}: {given!r} is not a file suffix; name suffixes such as '.py' or '.log', "
                "or '' for files without one"
            )
        fmt = format_for_suffix(suffix)
        if fmt is not None and suffix not in fmt.shared_suffixes:
            raise ValueError(
                f"text_suffixes={suffixes!r}: {suffix} files are read as {fmt.name} already; leave {given!r} out"
            )
        checked.append(suffix)
    return list(dict.fromkeys(checked))


# A config's ``text_suffixes`` field: more suffixes a folder's files are read with, as plain text.
TextSuffixes = Annotated[list[str], AfterValidator(checked_text_suffixes)]


__all__ = [
    "AS_TEXT",
    "FORMATS",
    "SUPPORTED_SUFFIXES",
    "NO_SUFFIX",
    "FileFormat",
    "TextSuffixes",
    "checked_text_suffixes",
    "format_of",
]
