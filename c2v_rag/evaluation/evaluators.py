"""Evaluators: dense retrieval, STS and few-shot classification (the MTEB protocols)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Protocol, cast

import numpy as np
import torch

from c2v_rag.core.extras import require
from c2v_rag.evaluation.datasets import LabelledData, PairScoreData, RetrievalData
from c2v_rag.evaluation.metrics import Run, evaluate_run


class EmbeddingModel(Protocol):
    """What the evaluators need: Causal2Vec and :class:`~c2v_rag.evaluation.baselines.BiEncoder` both fit."""

    def encode_queries(self, texts: list[str], *, task: str | None = None, **kwargs: Any) -> np.ndarray: ...

    def encode_documents(self, texts: list[str], *, task: str | None = None, **kwargs: Any) -> np.ndarray: ...

    def long_text_windows(self, texts: list[str], *, long_texts: Any = "chunk") -> Any: ...


def check_embedder(model: Any) -> None:
    """Refuse, naming what is missing, a model without the two methods the evaluators call (a
    SentenceTransformer raised ``AttributeError: ... no attribute 'encode_documents'`` half-way)."""
    missing = [name for name in ("encode_queries", "encode_documents") if not callable(getattr(model, name, None))]
    if missing:
        raise TypeError(
            f"{type(model).__name__} has no {' or '.join(missing)}: the evaluators call encode_queries(texts, "
            "task=...) and encode_documents(texts, task=...), as Causal2Vec and c2v_rag.evaluation.BiEncoder do. "
            "Wrap your model in such a class, or score a sentence-transformers model with mteb (docs/frameworks.md)"
        )


def _unit(vectors: np.ndarray) -> torch.Tensor:
    return torch.nn.functional.normalize(torch.as_tensor(np.asarray(vectors, dtype=np.float32)), dim=-1)


def search(
    query_vectors: np.ndarray, doc_vectors: np.ndarray, doc_ids: list[str], top_k: int, chunk: int = 1024
) -> list[list[str]]:
    """Exact cosine top-k, in query chunks so the score matrix stays small."""
    docs = _unit(doc_vectors)
    queries = _unit(query_vectors)
    k = min(top_k, len(doc_ids))
    ranked: list[list[str]] = []
    for start in range(0, len(queries), chunk):
        top = (queries[start : start + chunk] @ docs.T).topk(k, dim=1).indices
        ranked.extend([doc_ids[i] for i in row] for row in top.tolist())
    return ranked


def evaluate_retrieval(
    model: EmbeddingModel,
    data: RetrievalData,
    *,
    top_k: int = 100,
    long_texts: Any = None,
    examples: list[tuple[str, str]] | None = None,
    **encode_kwargs: Any,
) -> dict[str, float]:
    """nDCG@10, recall@100 and MRR@10 of exact dense search over the whole corpus (:func:`retrieval_run`)."""
    run = retrieval_run(model, data, top_k=top_k, long_texts=long_texts, examples=examples, **encode_kwargs)
    return evaluate_run(run, {q: data.qrels[q] for q in data.judged_query_ids}, recall_k=top_k)


def retrieval_run(
    model: EmbeddingModel,
    data: RetrievalData,
    *,
    top_k: int = 100,
    long_texts: Any = None,
    examples: list[tuple[str, str]] | None = None,
    document_max_length: int | None = None,
    **encode_kwargs: Any,
) -> Run:
    """Each judged query's top ``top_k`` document ids, by exact dense search over the whole corpus.

    ``long_texts`` is how long documents are read: ``"truncate"`` (the default) or ``"chunk"`` (one
    pooled vector per document, passed to ``encode_documents``), or ``"maxp"``: each document's
    windows are embedded and the document scores as its best window (what ingest + search do).
    ``examples`` are in-context examples for the queries; documents get none (bge-en-icl).
    ``document_max_length``: the decoder tokens each document is read with (as an ingest reads its chunks,
    ``decoder_max_length``); queries are not cut by it.
    """
    check_embedder(model)
    doc_ids, query_ids = data.doc_ids, data.judged_query_ids
    doc_texts = [data.corpus[d] for d in doc_ids]
    query_kwargs = encode_kwargs if examples is None else {**encode_kwargs, "examples": examples}
    queries = model.encode_queries([data.queries[q] for q in query_ids], task=data.task, **query_kwargs)
    chosen: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if document_max_length is not None:
        from c2v_rag.encode.loop import EncodingModel, decoder_cut_chosen

        encode_kwargs = {**encode_kwargs, "max_length": document_max_length}
        # Read short on purpose, as ingest reads: the documents cut at that length are not reported as truncated.
        # (A decoder length to read documents with is a Causal2Vec model's option.)
        chosen = decoder_cut_chosen(cast("EncodingModel", model))
    maxp_windows = _maxp_windows(long_texts)
    if maxp_windows is not None:
        windows = model.long_text_windows(doc_texts, long_texts=maxp_windows)
        with chosen:
            window_vectors = model.encode_documents(windows.texts, task=data.task, **encode_kwargs)
        return dict(zip(query_ids, search_maxp(queries, window_vectors, windows.owners, doc_ids, top_k)))
    if long_texts is not None:
        encode_kwargs = {**encode_kwargs, "long_texts": long_texts}
    with chosen:
        docs = model.encode_documents(doc_texts, task=data.task, **encode_kwargs)
    return dict(zip(query_ids, search(queries, docs, doc_ids, top_k)))


def _maxp_windows(long_texts: Any) -> dict[str, Any] | None:
    """For ``long_texts="maxp"`` (or ``{"mode": "maxp", ...}``): the chunk policy that cuts the windows; else None."""
    if long_texts == "maxp":
        return {"mode": "chunk"}
    if isinstance(long_texts, dict) and long_texts.get("mode") == "maxp":
        return {**long_texts, "mode": "chunk"}
    return None


def search_maxp(
    query_vectors: np.ndarray, window_vectors: np.ndarray, owners: np.ndarray, doc_ids: list[str], top_k: int
) -> list[list[str]]:
    """Exact cosine top-k of documents, each scored by its best window (MaxP)."""
    queries, windows = _unit(query_vectors), _unit(window_vectors)
    index = torch.as_tensor(owners, dtype=torch.int64)
    k = min(top_k, len(doc_ids))
    ranked: list[list[str]] = []
    for start in range(0, len(queries), 256):
        scores = queries[start : start + 256] @ windows.T
        best = torch.full((scores.size(0), len(doc_ids)), -torch.inf).scatter_reduce(
            1, index.expand_as(scores), scores, reduce="amax"
        )
        ranked.extend([doc_ids[i] for i in row] for row in best.topk(k, dim=1).indices.tolist())
    return ranked


def evaluate_sts(model: EmbeddingModel, data: PairScoreData, **encode_kwargs: Any) -> dict[str, float]:
    """Spearman correlation of cosine similarities with the gold scores (symmetric: both sides instructed)."""
    from scipy.stats import spearmanr

    check_embedder(model)
    a = _unit(model.encode_documents(data.first, task=data.task, **encode_kwargs))
    b = _unit(model.encode_documents(data.second, task=data.task, **encode_kwargs))
    cosine = (a * b).sum(-1).numpy()
    return {"spearman": float(spearmanr(cosine, data.scores).statistic)}


def evaluate_classification(
    model: EmbeddingModel, data: LabelledData, *, seeds: int = 10, max_iter: int = 100, **encode_kwargs: Any
) -> dict[str, float]:
    """MTEB's few-shot protocol: logistic regression on n examples per label, averaged over seeds."""
    from sklearn.linear_model import LogisticRegression

    check_embedder(model)
    labels = sorted(set(data.train_labels))
    train_y = np.array(data.train_labels)
    rng_pool = {label: np.flatnonzero(train_y == label) for label in labels}
    picks = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        picks.append(np.concatenate([rng.permutation(rng_pool[label])[: data.samples_per_label] for label in labels]))
    needed = np.unique(np.concatenate(picks))
    # Symmetric task: every input gets the instruction; each needed text is embedded once.
    pool_vectors = model.encode_documents([data.train_texts[i] for i in needed], task=data.task, **encode_kwargs)
    row_of = {int(i): r for r, i in enumerate(needed)}
    test_vectors = model.encode_documents(data.test_texts, task=data.task, **encode_kwargs)
    scores = []
    for pick in picks:
        clf = LogisticRegression(max_iter=max_iter)
        clf.fit(pool_vectors[[row_of[int(i)] for i in pick]], train_y[pick])
        scores.append(float((clf.predict(test_vectors) == np.array(data.test_labels)).mean()))
    return {"accuracy": float(np.mean(scores)), "accuracy_std": float(np.std(scores))}


# What scoring a kind of dev set imports beyond the core install (the eval extra): what it is, the module, pip's name.
_SCORERS = {
    PairScoreData: ("STS sets (Spearman correlation)", "scipy.stats", "scipy"),
    LabelledData: ("classification sets (logistic regression)", "sklearn.linear_model", "scikit-learn"),
}


def require_scorers(suite: Mapping[str, Any]) -> None:
    """Import what scoring ``suite``'s dev sets takes, or raise naming the eval extra: checked before any model
    loads, rather than after the first model has been loaded and its first set embedded."""
    for kind, (what, module, distribution) in _SCORERS.items():
        if any(isinstance(data, kind) for data in suite.values()):
            require(module, f"scoring {what}", "eval", distribution=distribution)


def evaluate(model: EmbeddingModel, data, *, examples: int = 0, **kwargs: Any) -> dict[str, float]:
    """Dispatch on the data's type; ``examples`` in-context examples (:func:`~c2v_rag.evaluation.datasets.pick_examples`)
    go on the queries of a retrieval set and on every input of a symmetric one."""  # noqa: E501
    if examples:
        from c2v_rag.evaluation.datasets import pick_examples

        kwargs = {**kwargs, "examples": pick_examples(data, examples)}
    if isinstance(data, RetrievalData):
        return evaluate_retrieval(model, data, **kwargs)
    if _maxp_windows(kwargs.get("long_texts")) is not None:
        raise ValueError(
            f"long_texts='maxp' scores a document by its best window, so it applies to retrieval "
            f"sets only, not to {data.name!r}: use 'truncate' or 'chunk' there"
        )
    if isinstance(data, PairScoreData):
        return evaluate_sts(model, data, **kwargs)
    if isinstance(data, LabelledData):
        return evaluate_classification(model, data, **kwargs)
    raise TypeError(f"no evaluator for {type(data).__name__}")
