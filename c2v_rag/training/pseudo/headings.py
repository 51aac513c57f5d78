"""Queries from a document's own structure: its title, or the heading of a section, against the text under it.

A heading is a short statement of what the text below is about, written by the author: the kind of
pair GenQ and title-body pre-training rely on. A generic heading ("Introduction", "SYNOPSIS") is
prefixed with the document's title so that it names something.
"""

from __future__ import annotations

import re

from c2v_rag.training.pseudo.chunks import CorpusChunk
from c2v_rag.training.pseudo.pairs import PseudoPair

GENERIC_HEADINGS = frozenset(
    """abstract background conclusion conclusions contents description details discussion example examples faq
    history introduction license methods name notes options overview references related results see also
    summary synopsis usage bugs authors files environment errors return value versions standards attributes
    installation getting started table of contents""".split()
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_-]*")


def is_generic(heading: str) -> bool:
    """Whether every word of ``heading`` is a generic section word (it names no subject of its own)."""
    words = [w.lower() for w in _WORD.findall(heading)]
    return not words or all(w in GENERIC_HEADINGS for w in words)


def _without_line(text: str, line: str) -> str:
    """``text`` less the first line that is ``line`` (a heading, possibly with Markdown ``#`` marks)."""
    for raw in text.splitlines():
        if raw.strip().lstrip("#").strip() == line:
            return text.replace(raw, "", 1).strip()
    return text


def heading_pair(chunk: CorpusChunk, *, first_of_document: bool, min_rest_words: int = 20) -> PseudoPair | None:
    """The pair of a chunk that opens a section (its heading as the query) or a document (its title);
    None for other chunks, or when the heading names nothing and the document has no title."""
    if chunk.heading:
        heading, positive = chunk.heading, chunk.text[chunk.heading_chars :]
    elif first_of_document and chunk.title:  # a record's title (metadata), which its text may repeat
        heading, positive = chunk.title, _without_line(chunk.text, chunk.title)
    else:
        return None
    query = heading
    if is_generic(heading):
        if not chunk.title or chunk.title == heading:
            return None
        query = f"{chunk.title}: {heading}"
    positive = positive.strip()
    if chunk.title and chunk.title != heading:
        positive = _without_line(positive, chunk.title)
    if len(_WORD.findall(positive)) < min_rest_words or len(_WORD.findall(query)) < 2:
        return None
    return PseudoPair(query, chunk.id, "heading", positive)
