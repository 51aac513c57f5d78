"""Crops and heading pairs: what they cut, what they pair it with, and what they refuse."""

from __future__ import annotations

import random

from c2v_rag.training.pseudo.chunks import CorpusChunk, document_title, headings_before
from c2v_rag.training.pseudo.crops import inverse_cloze, sentences
from c2v_rag.training.pseudo.headings import heading_pair, is_generic

BODY = (
    "The kernel keeps a table of open files for every process. Each entry records the offset and the flags "
    "given when the file was opened. A child created by fork shares these entries with its parent, so a read "
    "in one moves the offset seen by the other. Closing a descriptor in the child leaves the parent's open."
)


def test_sentences_split_at_stops_and_lines():
    text = "First one here. Second one?\nA third line"
    assert [text[s:e] for s, e in sentences(text)] == ["First one here.", "Second one?", "A third line"]


def test_inverse_cloze_removes_the_sentence_it_asks_with():
    chunk = CorpusChunk("d#0", "d", BODY)
    pair = inverse_cloze(chunk, random.Random(0))
    assert pair is not None and pair.source == "crop" and pair.chunk_id == "d#0"
    assert pair.query in BODY and pair.query not in pair.positive
    # What remains is the rest of the chunk, in order.
    assert pair.positive.replace(" ", "") == BODY.replace(pair.query, "").replace(" ", "")


def test_inverse_cloze_skips_headings_code_and_short_chunks():
    assert (
        inverse_cloze(CorpusChunk("a#0", "a", "# A heading line\n\nint main(void) { return 0; }"), random.Random(0))
        is None
    )
    assert inverse_cloze(CorpusChunk("b#0", "b", "Too short to crop from. Really."), random.Random(0)) is None


def test_heading_pair_from_a_section_and_generic_headings_get_the_title():
    text = "# fork(2)\n\n## Return value\n\n" + BODY
    heads = headings_before(text)
    assert [h for _, h in heads] == ["fork(2)", "Return value"]
    title = document_title(text, {}, heads)
    assert title == "fork(2)"
    section = CorpusChunk("m#1", "m", "## Return value\n\n" + BODY, title=title, heading="Return value")
    pair = heading_pair(section, first_of_document=False)
    assert pair is not None and pair.query == "fork(2): Return value"
    assert "Return value" not in pair.positive and pair.positive.startswith("The kernel")
    assert is_generic("SEE ALSO") and not is_generic("Open file descriptions")


def test_title_pair_from_a_record_with_a_title():
    title = "Child processes share open file offsets with their parent"
    chunk = CorpusChunk("s#0", "s", f"{title}\n\n{BODY}", title=title)
    pair = heading_pair(chunk, first_of_document=True)
    assert pair is not None and pair.query == title and title not in pair.positive
    # Not the document's first chunk and no heading of its own: no pair.
    assert heading_pair(CorpusChunk("s#1", "s", BODY, title=title), first_of_document=False) is None
