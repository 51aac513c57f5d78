"""Held-out evaluation during training: dev retrieval nDCG@10 and STS Spearman.

An evaluator is any callable ``model -> {metric: value}``; the trainer calls each before the
first step, every ``evaluation.every`` steps and after the last. These two cover the recipes'
dev sets; a full evaluation module can plug in through the same interface.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from c2v_rag.core.instructions import Instruction
from c2v_rag.encode.loop import encode_texts
from c2v_rag.evaluation.datasets import read_stsb
from c2v_rag.evaluation.evaluators import search
from c2v_rag.evaluation.metrics import ndcg_at_k
from c2v_rag.training.data import RetrievalDev

if TYPE_CHECKING:
    from c2v_rag.model.causal2vec import Causal2Vec

logger = logging.getLogger(__name__)

Evaluator = Callable[["Causal2Vec"], dict[str, float]]


@dataclass
class RetrievalEvaluator:
    """nDCG@10 of dev queries against a corpus (optionally the dev positives plus a seeded sample).

    ``corpus_limit`` trades faithfulness for time on CPU: the corpus becomes every dev positive
    plus ``corpus_limit`` other documents drawn with a fixed seed, so runs compare like with like.
    """

    dev: RetrievalDev
    name: str = "retrieval"
    corpus_limit: int | None = None
    max_length: int | None = None
    batch_size: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        ids = sorted(self.dev.corpus)
        if self.corpus_limit is not None and self.corpus_limit < len(ids):
            positives = sorted({d for docs in self.dev.qrels.values() for d in docs if d in self.dev.corpus})
            others = [d for d in ids if d not in set(positives)]
            ids = positives + random.Random(self.seed).sample(others, self.corpus_limit)
        self.doc_ids = ids

    def __call__(self, model: Causal2Vec) -> dict[str, float]:
        query_ids = list(self.dev.queries)
        previous = model.max_seq_length
        if self.max_length is not None:
            model.max_seq_length = self.max_length
        try:
            q = encode_texts(
                model,
                [self.dev.queries[i] for i in query_ids],
                self.dev.query_instruction,
                batch_size=self.batch_size,
                normalize_embeddings=True,
            )
            d = encode_texts(
                model,
                [self.dev.corpus[i] for i in self.doc_ids],
                self.dev.passage_instruction,
                batch_size=self.batch_size,
                normalize_embeddings=True,
            )
        finally:
            model.max_seq_length = previous
        assert isinstance(q, np.ndarray) and isinstance(d, np.ndarray)  # encode_texts' default output
        rankings = search(q, d, self.doc_ids, top_k=10)
        values = [ndcg_at_k(ranked, self.dev.qrels[qid], 10) for qid, ranked in zip(query_ids, rankings)]
        return {f"{self.name}/ndcg@10": float(np.mean(values))}


@dataclass
class STSEvaluator:
    """Spearman correlation between cosine similarities and gold scores of sentence pairs."""

    pairs: list[tuple[str, str, float]]
    instruction: Instruction
    name: str = "sts"
    batch_size: int = 64

    @classmethod
    def from_tsv(
        cls, path: str | Path, *, instruction: Instruction, limit: int | None = None, name: str = "sts", seed: int = 0
    ) -> STSEvaluator:
        """Read an STS-B style TSV with ``score``, ``sentence1`` and ``sentence2`` columns."""
        data = read_stsb(Path(path).expanduser(), name=name)
        pairs = list(zip(data.first, data.second, data.scores))
        if limit is not None and limit < len(pairs):
            pairs = random.Random(seed).sample(pairs, limit)
        return cls(pairs, instruction, name)

    def __call__(self, model: Causal2Vec) -> dict[str, float]:
        from scipy.stats import spearmanr

        a = encode_texts(
            model, [p[0] for p in self.pairs], self.instruction, batch_size=self.batch_size, normalize_embeddings=True
        )
        b = encode_texts(
            model, [p[1] for p in self.pairs], self.instruction, batch_size=self.batch_size, normalize_embeddings=True
        )
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)  # encode_texts' default output
        cosine = (a * b).sum(1)
        return {f"{self.name}/spearman": float(spearmanr(cosine, [p[2] for p in self.pairs]).statistic)}


def run_evaluators(model: Causal2Vec, evaluators: Sequence[Evaluator]) -> dict[str, float]:
    metrics: dict[str, float] = {}
    for evaluator in evaluators:
        metrics.update(evaluator(model))
    return metrics
