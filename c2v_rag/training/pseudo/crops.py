"""Queries cut from the chunk itself: inverse cloze (Lee et al. 2019), a sentence against the rest of its chunk.

The sentence is removed from the passage it is paired with, so that the pair teaches what surrounds a
statement rather than string matching. Sentences that are headings, code or list fragments are skipped.
"""

from __future__ import annotations

import random
import re

from c2v_rag.training.pseudo.chunks import CorpusChunk
from c2v_rag.training.pseudo.pairs import PseudoPair

# A sentence ends at . ! ? followed by whitespace and an upper-case letter, a digit or a quote, or at a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])|\n+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


def sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) character spans of ``text``'s sentences (lines count as sentence breaks)."""
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        if match.start() > start:
            spans.append((start, match.start()))
        start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def is_prose(sentence: str, min_words: int, max_words: int) -> bool:
    """Whether ``sentence`` reads as a sentence of prose: enough words, mostly letters, not a heading or code."""
    stripped = sentence.strip()
    if stripped.startswith(("#", "|", "```", "    ")) or stripped.endswith(":"):
        return False
    words = _WORD.findall(stripped)
    if not min_words <= len(words) <= max_words:
        return False
    letters = sum(ch.isalpha() for ch in stripped)
    return letters >= 0.6 * len(stripped)


def inverse_cloze(
    chunk: CorpusChunk, rng: random.Random, *, min_words: int = 6, max_words: int = 40, min_rest_words: int = 20
) -> PseudoPair | None:
    """A random prose sentence of ``chunk`` as the query, the chunk without it as the positive; None when the
    chunk has no such sentence or too little text would remain."""
    spans = [(s, e) for s, e in sentences(chunk.text) if is_prose(chunk.text[s:e], min_words, max_words)]
    if chunk.title:  # the title line is what heading pairs use; as a crop it is no sentence of the body
        spans = [(s, e) for s, e in spans if chunk.text[s:e].strip() != chunk.title]
    if not spans:
        return None
    start, end = rng.choice(spans)
    rest = (chunk.text[:start].rstrip() + " " + chunk.text[end:].lstrip()).strip()
    if len(_WORD.findall(rest)) < min_rest_words:
        return None
    return PseudoPair(" ".join(chunk.text[start:end].split()), chunk.id, "crop", rest)
