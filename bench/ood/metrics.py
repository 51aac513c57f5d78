"""Ranking metrics for the out-of-domain benchmarks, on graded relevance judgements.

Definitions follow trec_eval (and BEIR, which calls it through pytrec_eval), so the numbers compare
with published retrieval scores:

- nDCG@k: gains are the grades themselves (linear), discounted by log2(rank + 1); the ideal ranking
  sorts every judged document by grade.
- MRR@k: 1 / rank of the first document with a grade above 0 in the top k, else 0.
- hit@k: 1 if any document with a grade above 0 is in the top k.
- recall@k: the share of documents with a grade above 0 that are in the top k.

Each is averaged over queries; a query with no relevant document is an error, not a zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Qrels = Mapping[str, Mapping[str, int]]  # query id -> document id -> grade (0 = judged not relevant)
Run = Mapping[str, Sequence[str]]  # query id -> document ids, best first


def dcg(grades: Sequence[int]) -> float:
    """Discounted cumulative gain of grades in rank order (rank 1 first)."""
    return sum(grade / math.log2(rank + 2) for rank, grade in enumerate(grades))


def query_metrics(ranking: Sequence[str], judged: Mapping[str, int], k: int = 10) -> dict[str, float]:
    """One query's metrics from its ranking (document ids, best first) and its judgements."""
    relevant = {doc for doc, grade in judged.items() if grade > 0}
    if not relevant:
        raise ValueError("a query needs at least one document with a grade above 0")
    if len(set(ranking)) != len(ranking):
        raise ValueError("a ranking must not repeat a document")
    top = list(ranking[:k])
    first = next((rank for rank, doc in enumerate(top, start=1) if doc in relevant), None)
    ideal = dcg(sorted((g for g in judged.values() if g > 0), reverse=True)[:k])
    return {
        f"mrr@{k}": 0.0 if first is None else 1.0 / first,
        f"ndcg@{k}": dcg([judged.get(doc, 0) for doc in top]) / ideal,
        "hit@1": float(first == 1),
        "hit@5": float(first is not None and first <= 5),
        f"recall@{k}": len(relevant.intersection(top)) / len(relevant),
    }


def evaluate(run: Run, qrels: Qrels, k: int = 10) -> dict[str, float]:
    """Every metric averaged over the queries of ``qrels`` (a query missing from ``run`` scores 0)."""
    if not qrels:
        raise ValueError("no judged queries")
    totals: dict[str, float] = {}
    for query, judged in qrels.items():
        for name, value in query_metrics(run.get(query, []), judged, k).items():
            totals[name] = totals.get(name, 0.0) + value
    return {name: value / len(qrels) for name, value in totals.items()}
