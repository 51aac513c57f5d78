"""Named dev sets built from ../shared/data, and running several of them into one table."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from c2v_rag.evaluation.datasets import banking77_dev, emotion_dev, scifact_dev, stsb_dev
from c2v_rag.evaluation.evaluators import evaluate, require_scorers

LOADERS: dict[str, Callable[[Path], Any]] = {
    "scifact-dev": scifact_dev,
    "scifact-dev-1k": lambda root: scifact_dev(root, corpus_size=1000),
    "stsb-dev": stsb_dev,
    "emotion-val": emotion_dev,
    "banking77-dev": banking77_dev,
}
MAIN_METRIC = {
    "scifact-dev": "ndcg@10",
    "scifact-dev-1k": "ndcg@10",
    "stsb-dev": "spearman",
    "emotion-val": "accuracy",
    "banking77-dev": "accuracy",
}
DEV_SUITE = ("stsb-dev", "scifact-dev", "emotion-val")
"""The dev sets of the ablations: STS-B dev, held-out SciFact train claims, Emotion val."""


def load_suite(names: list[str] | tuple[str, ...], data_root: str | Path) -> dict[str, Any]:
    unknown = [n for n in names if n not in LOADERS]
    if unknown:
        raise KeyError(f"unknown dev set(s) {unknown}; choose from {sorted(LOADERS)}")
    suite = {name: LOADERS[name](Path(data_root)) for name in names}
    require_scorers(suite)  # what scoring them imports, checked before any model loads
    return suite


class SharedDocuments:
    """Wraps a model so that a list of documents encoded with the same arguments is encoded once.

    Runs of one model at several in-context example counts share their retrieval corpora this way: a
    retrieval set's documents get no examples, so their vectors are the same at every count (and the
    corpus is most of the cost). Inputs that do get examples (queries; every input of a symmetric task)
    carry them in their arguments, so they are never shared across counts. Everything else is the model's.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self._documents: dict[tuple, Any] = {}

    def encode_documents(self, texts: list[str], **kwargs: Any) -> Any:
        key = (tuple(texts), repr(sorted(kwargs.items(), key=lambda item: item[0])))
        if key not in self._documents:
            self._documents[key] = self.model.encode_documents(texts, **kwargs)
        return self._documents[key]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


def run_suite(model, suite: dict[str, Any], *, examples: int = 0, **encode_kwargs: Any) -> dict[str, dict[str, float]]:
    """Scores per dev set, each with its main metric under ``"main"`` and the seconds it took; ``examples``
    in-context examples per input (Causal2Vec w/ ICL; 0: none). To score several counts at one cost of the
    retrieval corpora, pass the same :class:`SharedDocuments` wrapper to each call."""
    require_scorers(suite)
    results = {}
    for name, data in suite.items():
        start = time.perf_counter()
        scores = evaluate(model, data, examples=examples, **encode_kwargs)
        scores["main"] = scores[MAIN_METRIC[name]]
        scores["seconds"] = time.perf_counter() - start
        results[name] = scores
    return results


def format_table(rows: dict[str, dict[str, dict[str, float]]]) -> str:
    """Markdown table: one row per model, the main metric per dev set, and their average."""
    sets = list(next(iter(rows.values())))
    header = "| model | " + " | ".join(f"{s} ({MAIN_METRIC[s]})" for s in sets) + " | average |"
    lines = [header, "|" + "---|" * (len(sets) + 2)]
    for model_name, results in rows.items():
        mains = [results[s]["main"] for s in sets]
        lines.append(
            f"| {model_name} | " + " | ".join(f"{m:.4f}" for m in mains) + f" | {sum(mains) / len(mains):.4f} |"
        )
    return "\n".join(lines)
