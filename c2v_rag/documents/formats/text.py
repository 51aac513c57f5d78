"""Plain text, read as the text it is: one document per file. Markdown and reStructuredText have formats of their
own (:mod:`c2v_rag.documents.formats.markdown`, :mod:`c2v_rag.documents.formats.restructuredtext`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from c2v_rag.documents.formats.base import FileFormat, file_document, read_text
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument


class PlainText(FileFormat):
    name = "text"
    suffixes = (".txt",)
    page_rank = 2

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        text = read_text(file, options, log)
        if text is not None:
            yield file_document(file, root, text, plain_text=True)
