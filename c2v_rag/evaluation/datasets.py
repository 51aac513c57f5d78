"""Readers for evaluation data, and deterministic dev splits carved out of train files.

The layouts are those of ``../shared/data``: BEIR (corpus.jsonl, queries.jsonl, qrels/*.tsv),
STS-B TSV, Banking77 CSV and Emotion ``text;label`` files. Every reader takes a path.
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RetrievalData:
    """A BEIR-layout retrieval set: ``corpus`` id -> text (title + text), ``queries`` id -> text."""

    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    name: str = "retrieval"
    task: str | None = None
    example_pairs: list[tuple[str, str]] = field(default_factory=list)
    """(query, relevant document) pairs from outside the evaluated queries, for in-context examples."""

    @property
    def doc_ids(self) -> list[str]:
        """The corpus's ids, in its order (the order its vectors are searched in)."""
        return list(self.corpus)

    @property
    def judged_query_ids(self) -> list[str]:
        """The ids of the queries that have judgments and a text: the ones a retrieval score is over."""
        return [q for q in self.qrels if q in self.queries]


@dataclass
class PairScoreData:
    """Sentence pairs with a similarity score (STS)."""

    first: list[str]
    second: list[str]
    scores: list[float]
    name: str = "sts"
    task: str | None = "STSBenchmark"


@dataclass
class LabelledData:
    """Texts with class labels, split into the pool the classifier samples from and the test set."""

    train_texts: list[str]
    train_labels: list[str]
    test_texts: list[str]
    test_labels: list[str]
    name: str = "classification"
    task: str | None = None
    samples_per_label: int = 8
    extra: dict = field(default_factory=dict)


def _require(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: pass the folder that holds the data (e.g. ../shared/data)")
    return path


def read_beir_corpus(folder: str | Path) -> dict[str, str]:
    """A BEIR folder's documents, id -> ``title + " " + text`` as BEIR evaluates them, in file order."""
    corpus = {}
    with open(_require(Path(folder) / "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            corpus[str(row["_id"])] = f"{row.get('title', '')} {row['text']}".strip()
    return corpus


def read_beir_queries(folder: str | Path) -> dict[str, str]:
    """A BEIR folder's queries, id -> text, in file order."""
    with open(_require(Path(folder) / "queries.jsonl"), encoding="utf-8") as f:
        return {str(row["_id"]): row["text"] for row in map(json.loads, f)}


def read_beir(folder: str | Path, split: str = "train") -> RetrievalData:
    """Read a BEIR folder; document text is ``title + " " + text`` as BEIR evaluates it."""
    folder = Path(folder)
    corpus = read_beir_corpus(folder)
    queries = read_beir_queries(folder)
    qrels: dict[str, dict[str, int]] = {}
    with open(_require(folder / "qrels" / f"{split}.tsv"), encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            qrels.setdefault(str(row["query-id"]), {})[str(row["corpus-id"])] = int(row["score"])
    return RetrievalData(corpus, queries, qrels, name=folder.name)


def split_queries(
    data: RetrievalData, *, dev_fraction: float = 0.2, seed: int = 0
) -> tuple[RetrievalData, RetrievalData]:
    """Hold out a seeded fraction of the judged queries: ``(train, dev)`` share the corpus.

    The split is by query text, not id: one text judged under two ids must not sit on both
    sides. Training (``c2v_rag.training``) holds out exactly these queries, so a dev set built
    here never overlaps what a recipe with the same fraction and seed trained on.
    """
    judged = sorted(q for q, rels in data.qrels.items() if q in data.queries and any(g > 0 for g in rels.values()))
    texts = sorted({data.queries[q] for q in judged})
    random.Random(seed).shuffle(texts)
    held = set(texts[: round(len(texts) * dev_fraction)])
    parts = []
    for keep in ({q for q in judged if data.queries[q] not in held}, {q for q in judged if data.queries[q] in held}):
        parts.append(
            RetrievalData(
                data.corpus,
                {q: t for q, t in data.queries.items() if q in keep},
                {q: {d: g for d, g in data.qrels[q].items() if g > 0} for q in sorted(keep)},
                name=data.name,
                task=data.task,
            )
        )
    return parts[0], parts[1]


def scifact_dev(
    data_root: str | Path, *, dev_fraction: float = 0.2, seed: int = 0, corpus_size: int | None = None
) -> RetrievalData:
    """SciFact dev: a seeded 20% of the train claims, searched against the 5,183-abstract corpus.

    ``corpus_size`` shrinks the corpus for CPU-sized runs: every document judged for a dev claim
    stays, and seeded random abstracts fill up the rest as distractors.
    """
    train, dev = split_queries(read_beir(Path(data_root) / "scifact"), dev_fraction=dev_fraction, seed=seed)
    dev.name, dev.task = "scifact-dev", "SciFact"
    # In-context examples come from the train claims only, never from the held-out ones.
    dev.example_pairs = [
        (train.queries[q], train.corpus[d])
        for q, rels in train.qrels.items()
        for d in sorted(rels)[:1]
        if d in train.corpus
    ]
    if corpus_size is not None and corpus_size < len(dev.corpus):
        judged = {d for rels in dev.qrels.values() for d in rels if d in dev.corpus}
        others = sorted(set(dev.corpus) - judged)
        random.Random(seed).shuffle(others)
        keep = judged | set(others[: max(0, corpus_size - len(judged))])
        dev.corpus = {d: t for d, t in dev.corpus.items() if d in keep}
        dev.name = f"scifact-dev-{corpus_size}"
    return dev


def read_stsb(path: str | Path, name: str = "stsb") -> PairScoreData:
    first, second, scores = [], [], []
    with open(_require(Path(path)), encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        missing = {"score", "sentence1", "sentence2"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{path} lacks column(s) {sorted(missing)}; expected score, sentence1, sentence2")
        for row in reader:
            first.append(row["sentence1"])
            second.append(row["sentence2"])
            scores.append(float(row["score"]))
    return PairScoreData(first, second, scores, name=name)


def read_labelled(path: str | Path) -> tuple[list[str], list[str]]:
    """Texts and labels from Banking77's ``text,category`` CSV or Emotion's ``text;label_name`` file."""
    path = _require(Path(path))
    with open(path, encoding="utf-8") as f:
        header = f.readline()
        delimiter = ";" if ";" in header and "," not in header else ","
        f.seek(0)
        rows = list(csv.reader(f, delimiter=delimiter))
    return [r[0] for r in rows[1:]], [r[1] for r in rows[1:]]


def holdout_indices(n: int, *, fraction: float, seed: int = 0) -> tuple[list[int], list[int]]:
    """Seeded split of row indices ``0..n-1`` into ``(pool, test)``; training holds out the same test rows."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    n_test = round(n * fraction)
    return order[n_test:], order[:n_test]


def holdout(texts: list[str], labels: list[str], *, fraction: float, seed: int = 0):
    """Seeded split into ``(pool_texts, pool_labels, test_texts, test_labels)``."""
    pool, test = holdout_indices(len(texts), fraction=fraction, seed=seed)
    return [texts[i] for i in pool], [labels[i] for i in pool], [texts[i] for i in test], [labels[i] for i in test]


def emotion_dev(data_root: str | Path) -> LabelledData:
    """Emotion: the classifier samples 16 per label from train, and is scored on val (MTEB protocol)."""
    root = Path(data_root) / "emotion"
    tx, ty = read_labelled(root / "train.txt")
    vx, vy = read_labelled(root / "val.txt")
    return LabelledData(tx, ty, vx, vy, name="emotion-val", task="EmotionClassification", samples_per_label=16)


def banking77_dev(data_root: str | Path, *, fraction: float = 0.2, seed: int = 0) -> LabelledData:
    """Banking77: a seeded 20% of train is the test set; 8 per label are sampled from the rest."""
    texts, labels = read_labelled(Path(data_root) / "banking77" / "train.csv")
    px, py, tx, ty = holdout(texts, labels, fraction=fraction, seed=seed)
    return LabelledData(px, py, tx, ty, name="banking77-dev", task="Banking77Classification", samples_per_label=8)


def stsb_dev(data_root: str | Path) -> PairScoreData:
    return read_stsb(Path(data_root) / "stsb" / "stsb.dev.tsv", name="stsb-dev")


def pick_examples(data, k: int, *, seed: int = 0) -> list[tuple[str, str]]:
    """``k`` seeded in-context ``(query, response)`` examples for a dev set, from outside what it scores.

    Retrieval: train claims with a relevant document. Classification: pool texts with their label as
    the response, each of another label (bge-en-icl's classification examples). Both are shortened with
    :func:`~c2v_rag.core.instructions.shorten_example`. The same examples serve every input, as in bge-en-icl's
    evaluation.
    """
    from c2v_rag.core.instructions import shorten_example

    if k < 0:
        raise ValueError(f"examples={k}: pass 0 or more")
    if k == 0:
        return []
    rng = random.Random(seed)
    if isinstance(data, RetrievalData):
        pool = list(data.example_pairs)
    elif isinstance(data, LabelledData):
        order = list(range(len(data.train_texts)))
        rng.shuffle(order)
        seen, pool = set(), []
        for i in order:
            if data.train_labels[i] not in seen:
                seen.add(data.train_labels[i])
                pool.append((data.train_texts[i], data.train_labels[i]))
    else:
        pool = []
    if len(pool) < k:
        raise ValueError(
            f"{data.name!r} has {len(pool)} in-context example(s) to draw from, fewer than {k}: "
            "in-context examples work on retrieval sets with train queries and on classification sets"
        )
    if isinstance(data, RetrievalData):
        pool = rng.sample(pool, k)
    return [(shorten_example(q), shorten_example(r)) for q, r in pool[:k]]
