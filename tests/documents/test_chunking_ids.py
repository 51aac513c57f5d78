"""Chunking sized in the model's own tokens, and deterministic point ids."""

from __future__ import annotations

import uuid

import pytest

# The RAG extras (pip install 'c2v-rag[all]'); without them these tests are skipped, visibly.
for _module in ("llama_index.core",):
    pytest.importorskip(_module)

from rag_helpers import make_text

from c2v_rag.documents.chunking import TokenChunker, encoder_budget
from c2v_rag.encode.splitting import make_splitter
from c2v_rag.store.point_schema import content_hash, point_id


def test_chunks_fit_the_budget_overlap_and_map_back_to_the_text(tiny_model):
    text = make_text(3, sentences=12)
    chunker = TokenChunker(tiny_model, chunk_size=24, chunk_overlap=6)
    chunks = chunker.chunk(text)
    count = lambda s: len(tiny_model.tokenizer(s, add_special_tokens=False)["input_ids"])  # noqa: E731
    assert len(chunks) > 3
    # The splitter sums the tokens of its pieces; joined, a piece boundary can tokenize a token
    # or two longer, which the template allowance under max_length absorbs.
    sizes = [count(c.text) for c in chunks]
    assert max(sizes) <= 24 + 4 and sum(s <= 24 for s in sizes) >= 0.8 * len(sizes)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert text[chunk.start_char : chunk.end_char] == chunk.text
    # Neighbours overlap (by whole pieces of at most chunk_overlap tokens, so not at a boundary
    # after a long sentence): a chunk starts before the previous one ends.
    overlapping = sum(b.start_char < a.end_char for a, b in zip(chunks, chunks[1:]))
    assert overlapping >= (len(chunks) - 1) // 2
    # Every word of the document is in some chunk.
    covered = set().union(*(range(c.start_char, c.end_char) for c in chunks))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def test_empty_text_has_no_chunks_and_oversized_chunks_are_refused(tiny_model):
    assert TokenChunker(tiny_model, 24, 4).chunk("  \n ") == []
    with pytest.raises(ValueError, match="does not fit the model's max_length=128"):
        TokenChunker(tiny_model, 200, 20)
    with pytest.raises(ValueError, match="chunk_overlap=24 must be smaller"):
        TokenChunker(tiny_model, 24, 24)


def test_point_ids_are_deterministic_uuids_of_doc_index_and_content():
    h = content_hash("text", {"a": 1, "b": 2})
    assert h == content_hash("text", {"b": 2, "a": 1})  # key order does not matter
    assert h != content_hash("text", {"a": 1, "b": 3}) and h != content_hash("text!", {"a": 1, "b": 2})
    pid = point_id("doc", 0, h)
    assert uuid.UUID(pid).version == 5 and pid == point_id("doc", 0, h)
    assert len({pid, point_id("doc2", 0, h), point_id("doc", 1, h), point_id("doc", 0, h[::-1])}) == 4


def test_sections_cut_at_the_best_break_and_rejoin_to_the_text():
    from c2v_rag.encode.splitting import sections

    text = "\n\n".join(make_text(i, sentences=4) for i in range(30)) + " " + "x" * 500
    pieces = list(sections(text, 800))
    assert "".join(p for _, p in pieces) == text and len(pieces) > 5
    assert all(text[offset : offset + len(p)] == p and len(p) <= 800 for offset, p in pieces)
    # Every cut but the hard one inside the final 500-character word lands after a paragraph break.
    assert sum(p.endswith("\n\n") for _, p in pieces[:-1]) >= len(pieces) - 3
    assert list(sections("short", 800)) == [(0, "short")] and list(sections("", 800)) == []


def test_long_documents_stream_in_sections_and_short_ones_split_as_before(tiny_model):
    text = "\n\n".join(make_text(i, sentences=5) for i in range(40))
    streaming = TokenChunker(tiny_model, chunk_size=24, chunk_overlap=4, section_chars=1500)
    whole = TokenChunker(tiny_model, chunk_size=24, chunk_overlap=4)
    assert len(text) > 4 * 1500 and len(text) < whole.section_chars
    # Shorter than a section: exactly the splitter's own chunks.
    assert [c.text for c in whole.chunk(text)] == whole.splitter.split_text(text)

    calls = []

    class Counting:  # the real splitter, with its calls counted
        def __init__(self, inner):
            self.inner = inner

        def split_text(self, section):
            calls.append(len(section))
            return self.inner.split_text(section)

    streaming.splitter = Counting(streaming.splitter)
    chunks = streaming.iter_chunks(text)
    first = next(chunks)
    assert len(calls) == 1 and calls[0] <= 1500  # the first chunk came after one section's work
    rest = [first, *chunks]
    assert len(calls) > 4 and [c.index for c in rest] == list(range(len(rest)))
    for chunk in rest:
        assert text[chunk.start_char : chunk.end_char] == chunk.text
    covered = set().union(*(range(c.start_char, c.end_char) for c in rest))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def _count(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])


# Text as READMEs hold it: rules, badges and code. SmolLM2's BPE takes "=======" as one token or two,
# all-MiniLM's WordPiece as one per character.
_TECHNICAL = "\n\n".join(
    f"Section {i}\n{'=' * 60}\n[![Build](https://ci.example.org/pkg{i}/badge.svg)](https://ci.example.org/pkg{i})"
    f'\n{"*" * 40}\nvoid test_{i}(const char **b){{ printf("%s\\n", *b); }}\n{"-" * 60}'
    for i in range(40)
)


@pytest.mark.real_weights
def test_default_chunks_fit_the_preset_encoder():
    """Chunks of 200 SmolLM2 tokens held more than the 254 tokens all-MiniLM reads on technical text (43 of
    2,759 chunks of /usr/share/doc's READMEs), so ingest warned on every real folder and the Contextual token
    summarised only each such chunk's start. The default chunks now fit both tokenizers."""
    from c2v_rag.core.config import read_config
    from c2v_rag.hub.presets import resolve_variant_path
    from c2v_rag.hub.sources import load_tokenizer, resolve_reference

    config = read_config(resolve_variant_path(None))
    decoder = load_tokenizer(resolve_reference(config.decoder, config.decoder_revision))
    encoder = load_tokenizer(resolve_reference(config.encoder, config.encoder_revision))
    budget = encoder_budget(encoder, config.encoder_max_length)
    chunks = TokenChunker.for_variant(None, 200, 20).chunk(_TECHNICAL)
    assert max(_count(encoder, c.text) for c in chunks) <= budget
    assert max(_count(decoder, c.text) for c in chunks) <= 200 + 4
    # Counted in decoder tokens alone, the same text overflows the encoder (else this tests nothing).
    decoder_only = make_splitter(decoder, 200, 20).split_text(_TECHNICAL)
    assert max(_count(encoder, text) for text in decoder_only) > budget


def test_prose_is_cut_as_before_when_it_fits_both_tokenizers(tiny_model):
    """The encoder's budget changes only the chunks that needed it: text both tokenizers count alike (the tiny
    encoder never counts more than the tiny decoder) is cut exactly as by the decoder's count alone, so
    re-ingesting an unchanged folder re-embeds nothing."""
    budget = encoder_budget(tiny_model.encoder_tokenizer, tiny_model.encoder_max_length)
    text = make_text(7, sentences=40)
    fitted = TokenChunker(tiny_model, chunk_size=budget - 2, chunk_overlap=4)
    assert [c.text for c in fitted.chunk(text)] == make_splitter(tiny_model.tokenizer, budget - 2, 4).split_text(text)


def test_a_chunk_size_over_the_encoder_budget_is_left_to_the_decoder(tiny_model):
    """Chunks longer than the encoder reads are a deliberate choice: they are not cut down to its budget."""
    budget = encoder_budget(tiny_model.encoder_tokenizer, tiny_model.encoder_max_length)
    chunks = TokenChunker(tiny_model, chunk_size=budget + 30, chunk_overlap=4).chunk(make_text(2, sentences=40))
    assert max(_count(tiny_model.tokenizer, c.text) for c in chunks) > budget


_PAGE = "# Tides\n\nTides - the rise and fall of the sea, and what moves it.\n\n"


def test_a_lead_starts_every_chunk_after_a_documents_first(tiny_model):
    """chunk_context="lead": a chunk from the middle of a page still says what the page is about. The chunks are
    cut as without it; the document's opening goes before each but the first, and ``lead_chars`` counts it."""
    text = _PAGE + make_text(3, sentences=14)
    plain = TokenChunker(tiny_model, chunk_size=48, chunk_overlap=6).chunk(text)
    led = TokenChunker(tiny_model, chunk_size=48, chunk_overlap=6, context="lead").chunk(text)
    lead = "Tides\nTides - the rise and fall of the sea, and what moves it."
    assert len(plain) > 2 and len(led) == len(plain)
    assert led[0] == plain[0] and led[0].lead_chars == 0
    for before, after in zip(plain[1:], led[1:]):
        assert after.text == f"{lead}\n\n{before.text}" and after.lead_chars == len(lead) + 2
        assert after.text[after.lead_chars :] == text[after.start_char : after.end_char]


def test_a_lead_is_shortened_where_a_chunk_leaves_it_too_little_room(tiny_model):
    """A chunk near the model's budget keeps all of its own text; its lead is cut to the words that fit the
    decoder's room beside the template and the encoder's budget, or left out."""
    budget = encoder_budget(tiny_model.encoder_tokenizer, tiny_model.encoder_max_length)
    limit = min(tiny_model.config.max_length - 16, budget)
    text = "# Tides\n\n" + " ".join(f"word{i}" for i in range(60)) + "\n\n" + make_text(4, sentences=40)
    chunks = TokenChunker(tiny_model, chunk_size=limit - 8, chunk_overlap=4, context="lead").chunk(text)
    decoder = [_count(tiny_model.tokenizer, c.text) for c in chunks]
    encoder = [_count(tiny_model.encoder_tokenizer, c.text) for c in chunks]
    assert max(decoder) <= tiny_model.config.max_length - 16 and max(encoder) <= budget
    full = "Tides\n" + " ".join(f"word{i}" for i in range(60))
    shortened = [c for c in chunks[1:] if 0 < c.lead_chars < len(full) + 2]
    assert shortened, "no lead was shortened: the test would not see a lead overflow the budget"
    for chunk in chunks[1:]:
        assert full.startswith(chunk.text[: max(0, chunk.lead_chars - 2)])
        assert chunk.text[chunk.lead_chars :] == text[chunk.start_char : chunk.end_char]


def test_document_lead_is_the_opening_cut_on_a_word():
    from c2v_rag.documents.chunking import document_lead

    assert document_lead("# elf(5)\n\nelf - format of ELF files\n\n## SYNOPSIS\n\n...") == (
        "elf(5)\nelf - format of ELF files"
    )
    assert document_lead("A title\n\nIts text.") == "A title\nIts text." and document_lead(" \n") == ""
    # A page that opens with a section: its later chunks are not all in that section, so the title alone.
    assert document_lead("# Git User Manual\n\n## Introduction\n\nGit is fast.") == "Git User Manual"
    assert document_lead("Manual\n======\n\nIntroduction\n------------\n\nText.") == "Manual"
    assert document_lead("# Build\n\n#include <x.h> first.\n\nMore.") == "Build\n#include <x.h> first."
    # A text that opens with prose has no title to lead with.
    assert document_lead(make_text(1, sentences=8) + "\n\nMore.") == ""
    assert document_lead("Two lines\nof prose.\n\nMore.") == "" and document_lead("One paragraph.") == ""
    long = document_lead("Title\n\n" + "abcdefghi " * 40)
    assert len(long) <= 200 and long.endswith("abcdefghi") and long.startswith("Title\nabcdefghi")
