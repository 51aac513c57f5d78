"""Filters drop the junk a small generator writes and keep real questions; the round trip ranks with real BM25."""

from __future__ import annotations

import pytest

from c2v_rag.training.pseudo.filters import FilterReport, apply_filters, meta_reason, round_trip_ranks
from c2v_rag.training.pseudo.pairs import PseudoPair

pytest.importorskip("bm25s")

CHUNKS = {
    "a#0": "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen inside chloroplasts.",
    "b#0": "The stock market fell sharply after the central bank raised interest rates again.",
    "c#0": "Glaciers carve U-shaped valleys as they slide downhill under their own weight over centuries.",
}


def pair(query: str, chunk: str = "a#0", source: str = "generated", logprob: float | None = -0.8) -> PseudoPair:
    return PseudoPair(query, chunk, source, CHUNKS[chunk], logprob)


def filtered(pairs: list[PseudoPair], min_logprob: float | None) -> tuple[list[PseudoPair], FilterReport]:
    """The pairs kept over :data:`CHUNKS`, with the round trip at top 1, and the report."""
    report = FilterReport()
    kept = apply_filters(
        pairs,
        report,
        min_words=3,
        max_words=40,
        min_logprob=min_logprob,
        round_trip_k=1,
        chunk_ids=list(CHUNKS),
        chunk_texts=list(CHUNKS.values()),
    )
    return kept, report


@pytest.mark.parametrize(
    "query",
    [
        "Here is a more detailed explanation of the process.",
        "The claim supports the claim.",
        "What's your question?",
        "What’s your text?",
        "What are your thoughts on it?",
        "Could you paste your passage again?",
        "What is the search question?",
        "What is the answer to this question?",
        "According to the text, what happens?",
        "sugar sugar sugar sugar sugar",
    ],
)
def test_meta_and_degenerate_text_is_dropped(query):
    assert meta_reason(pair(query)) is not None


@pytest.mark.parametrize(
    "query",
    ["How do plants make sugar from sunlight?", "How do I set your editor's tab width?", "Which text encodings work?"],
)
def test_a_real_question_is_kept(query):
    assert meta_reason(pair(query)) is None


def test_round_trip_rank_is_the_own_chunks_bm25_rank():
    ids, texts = list(CHUNKS), list(CHUNKS.values())
    ranks = round_trip_ranks(
        [pair("how do valleys form under glaciers", "c#0"), pair("glaciers valleys", "a#0")], ids, texts
    )
    assert ranks[0] == 1 and ranks[1] > 1


def test_apply_filters_counts_every_drop_by_source_and_reason():
    pairs = [
        pair("How do plants make sugar from sunlight?"),
        pair("How do plants make sugar from sunlight?", "b#0"),  # the same question for another chunk: not its own
        pair("Why?"),
        pair("What slides downhill and carves valleys?", "c#0", logprob=-3.0),
        pair("Which bank decision made share prices drop?", "a#0"),  # its own chunk is not where BM25 looks
        PseudoPair("Photosynthesis turns light into sugar.", "a#0", "crop", "rest", None),
    ]
    kept, report = filtered(pairs, min_logprob=-1.5)
    assert [p.query for p in kept] == [
        "How do plants make sugar from sunlight?",
        "Photosynthesis turns light into sugar.",
    ]
    counts = report.as_dict()
    assert counts["generated"]["made"] == 5 and counts["generated"]["kept"] == 1
    assert counts["generated"]["dropped"] == {"too short": 1, "low log-prob": 1, "own chunk not in BM25 top 1": 2}
    assert counts["crop"] == {"made": 1, "kept": 1, "dropped": {}}


def test_duplicates_are_judged_among_the_pairs_that_pass_the_round_trip():
    bank, plants = "Which bank decision made share prices drop?", "How do plants make sugar from sunlight?"
    pairs = [
        pair(bank, "a#0"),  # BM25 finds the bank's chunk, not this one: it fails the round trip...
        pair(bank, "b#0"),  # ...so this later copy, which passes, is the one kept
        pair(plants),
        pair(plants),  # the same pair again: it would be its own in-batch negative
        pair(plants, "c#0"),
    ]
    kept, report = filtered(pairs, min_logprob=None)
    assert [(p.query, p.chunk_id) for p in kept] == [(bank, "b#0"), (plants, "a#0")]
    assert report.as_dict()["generated"]["dropped"] == {"own chunk not in BM25 top 1": 2, "duplicate query": 1}
