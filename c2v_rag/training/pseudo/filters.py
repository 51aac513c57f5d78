"""Filters that drop pseudo-queries a retriever should not learn from.

Each filter returns the reason it drops a pair, or None to keep it; :func:`apply_filters` counts the
reasons by source for the report. The round trip (GenQ/GPL's consistency check, Alberti et al. 2019)
keeps a query only if BM25 ranks its own chunk in the top ``k`` of the corpus: a question that the text
cannot be found by is as likely to be off-topic as hard.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from c2v_rag.training.pseudo.pairs import PseudoPair

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_-]*")
# Text about the task rather than a question about the text: what small instruction models write when they fail.
_META = re.compile(
    r"^(here\s+(is|are)|here's|sure\b|certainly\b|okay\b|as an ai|i (cannot|can't|am)|the (text|passage|article|"
    r"document|claim|question|answer|following)\b|this (text|passage|article|document)\b|(a |one )?question\b|"
    r"answer\b|query\b|write\b|generate\b|please\b|what(['’]s|\s+is|\s+are)\s+your\b)|"
    r"\b(the (text|passage|document) (says|states|describes|mentions)|"
    r"according to the (text|passage|document|article)|in (this|the) (text|passage|document|article)|"
    r"(the|this|your|my|user's) (search )?(question|answer|query)|search question|"
    r"your (text|passage|document|article))\b",
    re.IGNORECASE,
)


def length_reason(pair: PseudoPair, min_words: int, max_words: int) -> str | None:
    words = len(_WORD.findall(pair.query))
    if words < min_words:
        return "too short"
    if words > max_words:
        return "too long"
    return None


def meta_reason(pair: PseudoPair) -> str | None:
    """Meta text ("Here is a question…") or degenerate text (mostly repeated words, copying the chunk)."""
    query = pair.query.strip()
    if _META.search(query):
        return "meta text"
    words = [w.lower() for w in _WORD.findall(query)]
    if len(words) >= 4 and len(set(words)) < 0.6 * len(words):
        return "repetitive"
    if len(words) >= 8 and " ".join(words) in " ".join(w.lower() for w in _WORD.findall(pair.positive)):
        return "copies the text"
    return None


def logprob_reason(pair: PseudoPair, min_logprob: float | None) -> str | None:
    if min_logprob is None or pair.mean_logprob is None:
        return None
    return "low log-prob" if pair.mean_logprob < min_logprob else None


def round_trip_ranks(pairs: Sequence[PseudoPair], chunk_ids: Sequence[str], chunk_texts: Sequence[str]) -> list[int]:
    """Each pair's chunk's BM25 rank (1 = first) among ``chunk_texts`` for its query; a rank past the search
    depth is ``len(chunk_texts) + 1``."""
    from c2v_rag.training.bm25 import bm25_rankings

    if not pairs:
        return []
    depth = min(100, len(chunk_texts))
    ranked = bm25_rankings([p.query for p in pairs], list(chunk_texts), depth)
    position = {chunk_id: i for i, chunk_id in enumerate(chunk_ids)}
    ranks = []
    for pair, row in zip(pairs, ranked):
        hits = np.flatnonzero(np.asarray(row) == position[pair.chunk_id])
        ranks.append(int(hits[0]) + 1 if hits.size else len(chunk_texts) + 1)
    return ranks


class FilterReport:
    """Pairs made, kept and dropped (by reason), per source."""

    def __init__(self) -> None:
        self.made: Counter[str] = Counter()
        self.kept: Counter[str] = Counter()
        self.dropped: dict[str, Counter[str]] = {}

    def count_made(self, pairs: Iterable[PseudoPair]) -> None:
        self.made.update(p.source for p in pairs)

    def drop(self, pair: PseudoPair, reason: str) -> None:
        self.dropped.setdefault(pair.source, Counter())[reason] += 1

    def as_dict(self) -> dict[str, dict[str, object]]:
        sources = sorted(set(self.made) | set(self.kept))
        return {
            s: {"made": self.made[s], "kept": self.kept[s], "dropped": dict(self.dropped.get(s, {}))} for s in sources
        }


def apply_filters(
    pairs: Sequence[PseudoPair],
    report: FilterReport,
    *,
    min_words: int,
    max_words: int,
    min_logprob: float | None,
    round_trip_k: int | None,
    chunk_ids: Sequence[str],
    chunk_texts: Sequence[str],
) -> list[PseudoPair]:
    """The pairs that pass every filter (cheap ones first), then of each query text its first copy alone.

    Duplicates are judged last, among the pairs that passed the round trip: a copy that failed it (its chunk is not
    where BM25 finds the query) must not cost a copy that passed, and an identical pair twice would be its own
    in-batch negative."""
    report.count_made(pairs)
    survivors: list[PseudoPair] = []
    for pair in pairs:
        reason = length_reason(pair, min_words, max_words) or meta_reason(pair) or logprob_reason(pair, min_logprob)
        if reason is not None:
            report.drop(pair, reason)
            continue
        survivors.append(pair)
    # Crops are cut from their chunk, so BM25 always finds it: the round trip checks the other sources.
    checked = [p for p in survivors if p.source != "crop"]
    if round_trip_k is not None and checked:
        failed = {
            id(p) for p, rank in zip(checked, round_trip_ranks(checked, chunk_ids, chunk_texts)) if rank > round_trip_k
        }
        for pair in checked:
            if id(pair) in failed:
                report.drop(pair, f"own chunk not in BM25 top {round_trip_k}")
        survivors = [p for p in survivors if id(p) not in failed]
    seen: set[str] = set()
    unique: list[PseudoPair] = []
    for pair in survivors:
        key = " ".join(pair.query.lower().split())
        if key in seen:
            report.drop(pair, "duplicate query")
            continue
        seen.add(key)
        unique.append(pair)
    survivors = unique
    report.kept.update(p.source for p in survivors)
    return survivors
