"""A user's documents as the chunks ``ingest`` would store: read the same way, cut the same way.

Each :class:`CorpusChunk` keeps what pseudo-queries are made from besides its text: the document's title
and the Markdown heading its text sits under. Ids are ``<document id>#<chunk index>``, stable across runs
for the same documents and chunking.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from c2v_rag.documents.chunking import TokenChunker
from c2v_rag.documents.source_document import SourceDocument

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


@dataclass(frozen=True)
class CorpusChunk:
    """One chunk of a document, with the title and heading pseudo-queries can be made from."""

    id: str
    doc_id: str
    text: str
    title: str | None = None
    heading: str | None = None


def headings_before(text: str) -> list[tuple[int, str]]:
    """(character offset, heading text) of every Markdown ATX heading of ``text``, in order."""
    return [(m.start(), m.group(2).strip()) for m in _HEADING.finditer(text)]


def document_title(text: str, metadata: dict[str, Any], headings: list[tuple[int, str]]) -> str | None:
    """A document's title: its ``title`` metadata (BEIR corpora), else a first-level heading at its top."""
    title = metadata.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    first = text.lstrip()
    if first.startswith("# ") and headings:
        return headings[0][1]
    return None


def iter_chunks(documents: Iterable[SourceDocument], chunker: TokenChunker) -> Iterator[CorpusChunk]:
    """The chunks of every document (as :func:`~c2v_rag.documents.documents.iter_documents` reads them from
    whatever ``ingest`` takes), each under the last heading that starts before it."""
    for document in documents:
        headings = headings_before(document.text)
        title = document_title(document.text, document.metadata, headings)
        for chunk in chunker.iter_chunks(document.text, document.lead, plain_text=document.plain_text):
            start = chunk.start_char if chunk.start_char is not None else 0
            # The heading that opens the chunk counts as its own: a section's first chunk starts with it.
            above = [text for offset, text in headings if offset <= start + 1]
            yield CorpusChunk(
                id=f"{document.doc_id}#{chunk.index}",
                doc_id=document.doc_id,
                text=chunk.text,
                title=title,
                heading=above[-1] if above else None,
            )
