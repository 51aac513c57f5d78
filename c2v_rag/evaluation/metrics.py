"""Ranking metrics with trec_eval's definitions (linear gains, ideal ranking from the qrels)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Sequence[str]]
"""Ranked document ids per query, best first."""


def ndcg_at_k(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    gains = [max(judged.get(doc, 0), 0) for doc in ranking[:k]]
    dcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(gains))
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    relevant = {doc for doc, g in judged.items() if g > 0}
    return len(relevant.intersection(ranking[:k])) / len(relevant) if relevant else 0.0


def mrr_at_k(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    for rank, doc in enumerate(ranking[:k]):
        if judged.get(doc, 0) > 0:
            return 1.0 / (rank + 1)
    return 0.0


def evaluate_run(run: Run, qrels: Qrels, *, ndcg_k: int = 10, recall_k: int = 100, mrr_k: int = 10) -> dict[str, float]:
    """Mean nDCG@k, recall@k and MRR@k over the judged queries (a query missing from ``run`` scores 0)."""
    judged = [q for q, rels in qrels.items() if any(g > 0 for g in rels.values())]
    if not judged:
        raise ValueError("qrels hold no query with a relevant document")
    totals = {f"ndcg@{ndcg_k}": 0.0, f"recall@{recall_k}": 0.0, f"mrr@{mrr_k}": 0.0}
    for q in judged:
        ranking = list(run.get(q, ()))
        totals[f"ndcg@{ndcg_k}"] += ndcg_at_k(ranking, qrels[q], ndcg_k)
        totals[f"recall@{recall_k}"] += recall_at_k(ranking, qrels[q], recall_k)
        totals[f"mrr@{mrr_k}"] += mrr_at_k(ranking, qrels[q], mrr_k)
    return {name: value / len(judged) for name, value in totals.items()}
