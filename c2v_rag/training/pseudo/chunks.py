"""A user's documents as the chunks ``ingest`` would store: read the same way, cut the same way.

Each :class:`CorpusChunk` keeps what pseudo-queries are made from besides its text: the document's title and the
heading that opens the chunk, as the document's outline finds them (:mod:`c2v_rag.documents.outline`: CommonMark's
headings, so a ``#`` comment in a code block or a plain-text file is none). Ids are ``<document id>#<chunk index>``,
stable across runs for the same documents and chunking.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from c2v_rag.documents.chunking import TokenChunker
from c2v_rag.documents.outline import Heading, Outline
from c2v_rag.documents.source_document import SourceDocument


@dataclass(frozen=True)
class CorpusChunk:
    """One chunk of a document, with the title and heading pseudo-queries can be made from: ``heading`` opens the
    chunk (a section's heading, or the title where the document opens with it), which ends ``heading_chars``
    characters into ``text``."""

    id: str
    doc_id: str
    text: str
    title: str | None = None
    heading: str | None = None
    heading_chars: int = 0


def document_title(metadata: dict[str, Any], opening: Heading | None) -> str | None:
    """A document's title: its ``title`` metadata (BEIR corpora), else a first-level heading that opens it."""
    title = metadata.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    return opening.text if opening is not None and opening.level == 1 else None


def iter_chunks(documents: Iterable[SourceDocument], chunker: TokenChunker) -> Iterator[CorpusChunk]:
    """The chunks of every document (as :func:`~c2v_rag.documents.documents.iter_documents` reads them from
    whatever ``ingest`` takes), each with the heading it opens with."""
    for document in documents:
        text = document.text
        outline = None if document.plain_text else Outline(text)
        opening = outline.title() if outline is not None else None
        title = document_title(document.metadata, opening)
        for chunk in chunker.iter_chunks(text, document.lead, plain_text=document.plain_text, outline=outline):
            start = chunk.start_char
            heading = None
            if outline is not None and start is not None:
                # A chunk opens with a heading when it starts in the heading's source (the splitter may leave its
                # "#" marks to the chunk before).
                if opening is not None and opening.offset <= start < opening.end:
                    heading = opening
                else:
                    heading = outline.heading_around(start)
            yield CorpusChunk(
                id=f"{document.doc_id}#{chunk.index}",
                doc_id=document.doc_id,
                text=chunk.text,
                title=title,
                heading=heading.text if heading else None,
                heading_chars=chunk.lead_chars + heading.end - start if heading and start is not None else 0,
            )
