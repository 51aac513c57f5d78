"""The gate's data and scores: held-out queries (and the user's questions) searched by the start and the variant.

The held-out queries are scored against a fixed set of chunks: their own (less what the query was cut from),
each query's BM25 top 10 (the distractors that make a retriever's ranking matter), and random chunks up to
``corpus_size``; the user's questions against every chunk, up to ``questions_corpus_size``. Both models see the
same set. The scores are kept per query, and given by the source of the
queries: crops share words with their chunk, generated questions less so, and users' questions least. What
decides is :mod:`~c2v_rag.training.adapt.decision`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from c2v_rag.documents.chunking import default_decoder_max_length
from c2v_rag.encode.loop import bar_label
from c2v_rag.evaluation.datasets import RetrievalData, read_stsb
from c2v_rag.evaluation.evaluators import evaluate_sts, retrieval_run
from c2v_rag.evaluation.metrics import Run, evaluate_run, mrr_at_k, ndcg_at_k
from c2v_rag.training.adapt.questions import Question
from c2v_rag.training.adapt.score_cache import ScoreCache, digest, file_digest
from c2v_rag.training.data import gate_corpus
from c2v_rag.training.pseudo.beir_cache import PairSet

_DISTRACTORS_PER_QUERY = 10


def query_sources(pairs: PairSet) -> dict[str, str]:
    """The source (crop, heading, generated) of each of :func:`gate_data`'s query ids."""
    return {f"heldout-{i}": p.source for i, p in enumerate(pairs.heldout)}


def gate_data(pairs: PairSet, *, corpus_size: int, task: str | None, seed: int = 0) -> RetrievalData:
    """The held-out queries, their judgements, and the chunks they are scored against."""
    full = gate_corpus(pairs)
    queries = {f"heldout-{i}": p.query for i, p in enumerate(pairs.heldout)}
    qrels = {f"heldout-{i}": {p.chunk_id: 1} for i, p in enumerate(pairs.heldout)}
    # Each query's own chunk is among its BM25 top 11 most of the time: 10 distractors besides it.
    chosen = _with_distractors(qrels, queries, full, corpus_size, depth=_DISTRACTORS_PER_QUERY + 1, seed=seed)
    return RetrievalData({i: full[i] for i in chosen}, queries, qrels, name="heldout", task=task)


def _with_distractors(
    qrels: dict[str, dict[str, int]], queries: dict[str, str], texts: dict[str, str], size: int, depth: int, seed: int
) -> list[str]:
    """The chunk ids a gate scores against: every judged chunk, then each query's BM25 top ``depth`` (the
    distractors that make a retriever's ranking matter) while there is room, then random ones up to ``size``."""
    from c2v_rag.training.bm25 import bm25_rankings

    chosen: dict[str, None] = {c: None for rels in qrels.values() for c in rels}
    ids = list(texts)
    if size >= len(ids):  # all of them: what a search of the whole collection ranks
        return [*chosen, *(i for i in ids if i not in chosen)]
    if queries and len(ids) > len(chosen):
        for row in bm25_rankings(list(queries.values()), [texts[i] for i in ids], depth):
            for index in row:
                if len(chosen) >= size:
                    break
                chosen.setdefault(ids[index])
    rest = [i for i in ids if i not in chosen]
    random.Random(seed).shuffle(rest)
    for chunk_id in rest[: max(0, size - len(chosen))]:
        chosen.setdefault(chunk_id)
    return list(chosen)


def question_data(
    questions: list[Question], pairs: PairSet, *, corpus_size: int, task: str | None, seed: int = 0
) -> RetrievalData:
    """The user's questions and the chunks they are searched among, whole as ingest stores them: every chunk of the
    documents when there are at most ``corpus_size`` (a search of the collection ranks them all; a sample leaves out
    chunks that rank above an answer, and hid a gain on Valgrind's manual: docs/adapt.md), else every chunk of the
    documents that answer them, each question's BM25 top 10 chunks, and random chunks up to ``corpus_size``. Every
    chunk of an answering document is relevant: a question is answered when any of them ranks."""
    texts = {c.id: c.text for c in pairs.chunks}
    by_doc: dict[str, list[str]] = {}
    for chunk in pairs.chunks:
        by_doc.setdefault(chunk.doc_id, []).append(chunk.id)
    queries = {f"question-{i}": q.query for i, q in enumerate(questions)}
    qrels = {f"question-{i}": {c: 1 for d in q.doc_ids for c in by_doc.get(d, [])} for i, q in enumerate(questions)}
    chosen = _with_distractors(qrels, queries, texts, corpus_size, depth=_DISTRACTORS_PER_QUERY, seed=seed)
    return RetrievalData({i: texts[i] for i in chosen}, queries, qrels, name="questions", task=task)


@dataclass
class GateScores:
    ndcg_at_10: float
    mrr_at_10: float
    sts_spearman: float | None
    """STS-B dev's Spearman; None where the run had no general data."""
    by_source: dict[str, dict[str, float]] = field(default_factory=dict)
    """Source -> {"queries", "ndcg@10", "mrr@10"} over that source's held-out queries."""
    questions: dict[str, float] = field(default_factory=dict)
    """{"queries", "ndcg@10", "mrr@10", "chunks"} on the user's own questions, when given (``chunks``: how many
    they were searched among)."""
    per_query: dict[str, float] = field(default_factory=dict)
    """Held-out query id -> its nDCG@10: what the paired test compares."""
    per_question: dict[str, float] = field(default_factory=dict)
    """The user's question id -> its MRR@10, when given."""

    def as_dict(self) -> dict[str, float]:
        scores = {"ndcg@10": self.ndcg_at_10, "mrr@10": self.mrr_at_10}
        if self.sts_spearman is not None:
            scores["stsb_dev_spearman"] = self.sts_spearman
        for source, row in sorted(self.by_source.items()):
            scores[f"ndcg@10 {source} ({int(row['queries'])} queries)"] = row["ndcg@10"]
        if self.questions:
            scores[f"mrr@10 your questions ({int(self.questions['queries'])})"] = self.questions["mrr@10"]
            scores[f"ndcg@10 your questions ({int(self.questions['queries'])})"] = self.questions["ndcg@10"]
        return scores


def score(
    model: Any,
    data: RetrievalData,
    sts_path: Path | None,
    *,
    sts_limit: int | None,
    sources: dict[str, str] | None = None,
    questions: RetrievalData | None = None,
    batch_size: int = 32,
    cache: ScoreCache | None = None,
    name: str = "model",
) -> GateScores:
    """A model's held-out retrieval and STS-B dev scores (STS-B's only with ``sts_path``), of the whole embedding
    as search uses it, its chunks read as an ingest into a new collection reads them
    (:func:`~c2v_rag.documents.chunking.default_decoder_max_length`); with ``sources`` (query id -> source), the
    retrieval scores of each source's queries too; with ``questions`` (:func:`question_data`), the scores on the
    user's questions. With ``cache``, each part a model was already scored on with the same data is taken from it
    (``name`` says which model in its :attr:`~ScoreCache.reused`)."""
    read = default_decoder_max_length(model.config)
    sources = sources or {}

    def kept(part: str, inputs: dict[str, Any], compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        def labelled() -> dict[str, Any]:
            with bar_label(f"Gate, {name}: {part}"):
                return compute()

        if cache is None:
            return labelled()
        return cache.scores(model, name, part, {**inputs, "batch_size": batch_size}, labelled)

    def heldout() -> dict[str, Any]:
        run = retrieval_run(model, data, batch_size=batch_size, show_progress_bar=True, document_max_length=read)
        qrels = {q: data.qrels[q] for q in data.judged_query_ids}
        retrieval = evaluate_run(run, qrels)
        return {
            "ndcg@10": retrieval["ndcg@10"],
            "mrr@10": retrieval["mrr@10"],
            "by_source": scores_by_source(run, qrels, sources),
            "per_query": {q: ndcg_at_k(list(run.get(q, ())), rels, 10) for q, rels in qrels.items()},
        }

    def sts() -> dict[str, Any]:
        assert sts_path is not None
        pairs = read_stsb(sts_path, name="stsb-dev")
        if sts_limit is not None:
            pairs.first, pairs.second = pairs.first[:sts_limit], pairs.second[:sts_limit]
            pairs.scores = pairs.scores[:sts_limit]
        return {"spearman": evaluate_sts(model, pairs, batch_size=batch_size, show_progress_bar=True)["spearman"]}

    def asked() -> dict[str, Any]:
        assert questions is not None
        judged = {q: questions.qrels[q] for q in questions.judged_query_ids}
        run = retrieval_run(model, questions, batch_size=batch_size, show_progress_bar=True, document_max_length=read)
        return {
            "scores": scores_by_source(run, judged, dict.fromkeys(judged, "questions"))["questions"],
            "per_question": {q: mrr_at_k(list(run.get(q, ())), rels, 10) for q, rels in judged.items()},
        }

    held = kept("held-out queries", {"data": _data_inputs(data), "read": read, "sources": sources}, heldout)
    spearman = None
    if sts_path is not None:
        spearman = kept("STS-B dev", {"file": file_digest(sts_path), "limit": sts_limit}, sts)["spearman"]
    on_questions: dict[str, Any] = {"scores": {}, "per_question": {}}
    if questions is not None:
        on_questions = kept("your questions", {"data": _data_inputs(questions), "read": read}, asked)
        on_questions["scores"] = {**on_questions["scores"], "chunks": float(len(questions.corpus))}
    return GateScores(
        held["ndcg@10"],
        held["mrr@10"],
        spearman,
        held["by_source"],
        on_questions["scores"],
        held["per_query"],
        on_questions["per_question"],
    )


def _data_inputs(data: RetrievalData) -> str:
    """What a retrieval score reads of ``data``, as a digest: the chunks, the queries, the judgements, the task."""
    return digest({"corpus": data.corpus, "queries": data.queries, "qrels": data.qrels, "task": data.task})


def scores_by_source(
    run: Run, qrels: dict[str, dict[str, int]], sources: dict[str, str]
) -> dict[str, dict[str, float]]:
    """Source -> {"queries", "ndcg@10", "mrr@10"} over the queries of ``qrels`` that ``sources`` gives that source."""
    groups: dict[str, dict[str, dict[str, int]]] = {}
    for query, rels in qrels.items():
        if query in sources:
            groups.setdefault(sources[query], {})[query] = rels
    scored = {}
    for source, subset in sorted(groups.items()):
        scores = evaluate_run(run, subset)
        scored[source] = {"queries": float(len(subset)), "ndcg@10": scores["ndcg@10"], "mrr@10": scores["mrr@10"]}
    return scored
