"""Plain text and Markdown (and reStructuredText, read as the text it is): one document per file."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from c2v_rag.documents.formats.base import FileFormat, file_document, within_size
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.sniffing import NotText, decode_text
from c2v_rag.documents.source_document import SourceDocument

logger = logging.getLogger(__name__)


class PlainText(FileFormat):
    name = "text"
    suffixes = (".txt", ".md", ".markdown", ".rst")

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        if not within_size(file, options, log):
            return
        text = decode_text(file.read_bytes(), options.max_undecodable_share)
        if isinstance(text, NotText):
            log.skip_file(file, f"not a text file: {text.reason}")
            return
        if "\ufffd" in text:
            logger.warning("%s is not valid UTF-8 throughout; undecodable bytes were replaced", file)
        yield file_document(file, root, text)
