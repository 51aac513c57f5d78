"""Crops and heading pairs: what they cut, what they pair it with, and what they refuse."""

from __future__ import annotations

import random

import pytest

from c2v_rag.documents.chunking import TokenChunker
from c2v_rag.documents.source_document import SourceDocument
from c2v_rag.training.pseudo.chunks import CorpusChunk, iter_chunks
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


@pytest.fixture
def chunker(tiny_model_factory):
    # Chunks cut at headings, as ingest cuts them with chunk_context="sections": each section below opens one.
    return TokenChunker(
        tiny_model_factory("llama", max_length=1024), chunk_size=360, chunk_overlap=0, context="sections"
    )


def _heading_pairs(text: str, chunker: TokenChunker, **document) -> dict[str, tuple[str, str]]:
    """query -> (chunk id, positive) of every heading pair of one document, through the chunker ingest uses."""
    chunks = iter_chunks([SourceDocument("m", text, **document)], chunker)
    pairs = [heading_pair(c, first_of_document=c.id.endswith("#0")) for c in chunks]
    return {p.query: (p.chunk_id, p.positive) for p in pairs if p is not None}


def test_heading_pairs_from_sections_and_generic_headings_get_the_title(chunker):
    text = f"# fork(2)\n\n{BODY}\n\n## Return value\n\n{BODY}\n\n## `fork()` and open *files*\n\n{BODY}\n"
    pairs = _heading_pairs(text, chunker)
    # The title against the text under it; a generic heading named by the title; a heading as a reader shows it.
    assert set(pairs) == {"fork(2)", "fork(2): Return value", "fork() and open files"}
    for query, (_, positive) in pairs.items():
        assert positive == BODY, query
    assert len({chunk_id for chunk_id, _ in pairs.values()}) == 3
    assert is_generic("SEE ALSO") and not is_generic("Open file descriptions")


def test_setext_headings_pair_and_comments_in_code_or_plain_text_do_not(chunker):
    code = "```sh\n# Install the package from the archive\napt-get install foo\n```"
    text = f"Foo manual\n==========\n\n{BODY}\n\n{code}\n\n{BODY}\n\nOpen file sharing\n-----------------\n\n{BODY}\n"
    for lines in (text, text.replace("\n", "\r\n")):  # either line ending
        pairs = _heading_pairs(lines, chunker)
        assert set(pairs) == {"Foo manual", "Open file sharing"}
        assert all(positive.startswith("The kernel") for _, positive in pairs.values())  # no underline left
    # In a plain-text file, a "#" line is a comment: no heading, and no title.
    plain = f"# Configuration file of the foo daemon\n\n{BODY}\n\n# Lines below set the listening port\n\n{BODY}\n"
    assert _heading_pairs(plain, chunker, plain_text=True) == {}
    assert set(_heading_pairs(plain, chunker)) == {"Configuration file of the foo daemon",
                                                   "Lines below set the listening port"}  # fmt: skip


def test_each_document_is_parsed_into_an_outline_once(chunker, monkeypatch):
    """adapt's chunks ask the outline the chunker cut them by for their headings: one CommonMark parse of a
    document, not one for the chunks and one for their headings."""
    from c2v_rag.documents.outline import Outline

    parsed: list[int] = []
    parse = Outline.__init__

    def counted(self, text, *args, **kwargs):
        parsed.append(len(text))
        parse(self, text, *args, **kwargs)

    monkeypatch.setattr(Outline, "__init__", counted)
    texts = [f"# Page {i}\n\n{BODY}\n\n## Part\n\n{BODY}\n" for i in range(3)]
    chunks = list(iter_chunks([SourceDocument(f"d{i}", t) for i, t in enumerate(texts)], chunker))
    assert parsed == [len(t) for t in texts]
    assert [c.heading for c in chunks] == ["Page 0", "Part", "Page 1", "Part", "Page 2", "Part"]


def test_title_pair_from_a_record_with_a_title():
    title = "Child processes share open file offsets with their parent"
    chunk = CorpusChunk("s#0", "s", f"{title}\n\n{BODY}", title=title)
    pair = heading_pair(chunk, first_of_document=True)
    assert pair is not None and pair.query == title and title not in pair.positive
    # Not the document's first chunk and no heading of its own: no pair.
    assert heading_pair(CorpusChunk("s#1", "s", BODY, title=title), first_of_document=False) is None
