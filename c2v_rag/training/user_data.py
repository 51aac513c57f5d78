"""Pointing a recipe at your own data: ``c2v-rag train RECIPE --data PATH``, and what a missing dataset's error says.

``--data PATH`` (repeatable) replaces the recipe's ``datasets:`` with one dataset per path, its format read
from the path itself (:func:`infer_dataset`); the model, loss and schedule stay the recipe's. The layouts::

    a folder with corpus.jsonl, queries.jsonl, qrels/  -> beir (the train split, else the first in qrels/)
    any other folder, or a document file ingest reads  -> corpus (pseudo-queries made from the documents)
    .jsonl of {"query", "positive", "negatives"?}       -> jsonl
    .tsv with a header holding sentence1, sentence2 and score (STS-B) -> scored_pairs, learned with CoSENT
    .tsv/.csv with a header holding text and label (or category)      -> labelled (same-label pairs)
    .tsv of query<TAB>positive                          -> pairs_tsv
    .tsv of query<TAB>positive<TAB>negative...          -> triplets_tsv

The recipe's evaluation of data it no longer trains on (``retrieval_dataset``, and an ``sts_path`` that is not
there) is dropped with it; its mining keeps its method and mines for the new datasets that lack negatives.
"""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

DATA_LAYOUTS = (
    "a folder of documents (or a .txt, .md, .pdf, .html, .docx, .parquet or .jsonl document), a .tsv of "
    "query<TAB>positive[<TAB>negative] "
    "rows, a .jsonl of {query, positive, negatives} records, or a BEIR folder (corpus.jsonl, queries.jsonl, qrels/)"
)

_RETRIEVAL_FORMATS = {"corpus", "beir", "jsonl", "pairs_tsv", "triplets_tsv"}
_TEXT_HEADERS = {"text", "sentence"}
_LABEL_HEADERS = {"label", "label_name", "category", "intent"}


@dataclass(frozen=True)
class KnownData:
    """A public dataset the packaged recipes read from ``../shared/data``: what it is and where to get it."""

    what: str
    source: str


# Keyed by the path under ../shared/data that the recipes use (shared/data/README.md describes the files).
SHARED_DATA: dict[str, KnownData] = {
    "nli/snli_dev_triplets.tsv": KnownData(
        "SNLI dev as triplets (premise, entailed hypothesis, contradicting one), tab-separated with the header "
        "anchor, positive, negative; CC BY-SA 4.0",
        "https://nlp.stanford.edu/projects/snli/ (the 'triplet' subset of sentence-transformers/all-nli on the "
        "Hugging Face Hub has the same columns)",
    ),
    "nli/snli_test_triplets.tsv": KnownData(
        "SNLI test as triplets (premise, entailed hypothesis, contradicting one), tab-separated with the header "
        "anchor, positive, negative; CC BY-SA 4.0",
        "https://nlp.stanford.edu/projects/snli/ (or the 'triplet' subset of sentence-transformers/all-nli)",
    ),
    "stsb/stsb.train.tsv": KnownData(
        "the STS Benchmark train pairs, tab-separated with a header holding score (0-5), sentence1, sentence2; "
        "CC BY-SA 4.0",
        "sentence-transformers/stsb on the Hugging Face Hub (scores 0-1 there: multiply by 5), or "
        "https://ixa2.si.ehu.eus/stswiki",
    ),
    "stsb/stsb.dev.tsv": KnownData(
        "the STS Benchmark dev pairs, tab-separated with a header holding score (0-5), sentence1, sentence2",
        "sentence-transformers/stsb on the Hugging Face Hub (the validation split; scores 0-1 there: multiply by 5)",
    ),
    "scifact": KnownData(
        "BEIR SciFact, a BEIR folder (corpus.jsonl, queries.jsonl, qrels/train.tsv); CC BY 4.0 / ODC-By",
        "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip",
    ),
    "banking77/train.csv": KnownData(
        "Banking77 intents, a CSV with the columns text, category; CC BY 4.0",
        "PolyAI/banking77 on the Hugging Face Hub",
    ),
    "emotion/train.txt": KnownData(
        "the Emotion dataset, 'text;label_name' rows with a header; research and educational use only",
        "dair-ai/emotion on the Hugging Face Hub",
    ),
}


def known_data(path: str) -> KnownData | None:
    """What ``path`` is when it names one of the shared datasets (by its tail under ``shared/data/``)."""
    normalized = Path(path).as_posix().rstrip("/")
    for tail, data in SHARED_DATA.items():
        if normalized == tail or normalized.endswith("/" + tail):
            return data
    return None


# ------------------------------------------------------------------------------------------------ --data


def infer_dataset(path: str | Path) -> dict[str, Any]:
    """A dataset section (as a dict) for ``path``, its format read from the path's layout (see the module doc)."""
    target = Path(path).expanduser()
    if not target.exists():
        raise FileNotFoundError(f"--data {path}: no such file or folder; give {DATA_LAYOUTS}")
    section: dict[str, Any] = {"name": _stem(target), "path": str(path)}
    if target.is_dir():
        if (target / "corpus.jsonl").is_file() and (target / "queries.jsonl").is_file():
            splits = sorted(p.stem for p in (target / "qrels").glob("*.tsv")) if (target / "qrels").is_dir() else []
            if not splits:
                raise ValueError(f"--data {path}: a BEIR folder needs qrels/<split>.tsv with the query-document pairs")
            return {**section, "format": "beir", "split": "train" if "train" in splits else splits[0]}
        return {**section, "format": "corpus"}
    suffix = target.suffix.lower()
    if suffix == ".jsonl":
        first = _first_line(target)
        try:
            record = json.loads(first) if first else None
        except json.JSONDecodeError as err:
            raise ValueError(f"--data {path}: line 1 is not JSON ({err})") from None
        if isinstance(record, dict) and "query" in record and "positive" in record:
            return {**section, "format": "jsonl"}
        return {**section, "format": "corpus"}  # documents as JSONL ({"text", "id"?...}), as ingest reads them
    if suffix in (".tsv", ".csv"):
        return {**section, **_delimited_format(target)}
    return {**section, "format": "corpus"}


def _delimited_format(path: Path) -> dict[str, Any]:
    from c2v_rag.training.tables import read_rows

    header, rows = read_rows(path, None, None)
    names = {cell.strip().lower() for cell in header or []}
    if {"sentence1", "sentence2", "score"} <= names:
        # Graded pairs learn their order of similarity (CoSENT), with no threshold to choose.
        return {"format": "scored_pairs", "loss": "cosent"}
    if names & _TEXT_HEADERS and names & _LABEL_HEADERS:
        return {"format": "labelled"}
    if path.suffix.lower() != ".tsv":
        raise ValueError(
            f"--data {path}: a .csv is read as labelled texts and needs a header with a text column and a label "
            "column (text, label); pairs and triplets go in a .tsv"
        )
    width = len(rows[0]) if rows else 0
    if width < 2:
        raise ValueError(f"--data {path}: a .tsv needs query<TAB>positive[<TAB>negative...] rows; row 1 has {width}")
    return {"format": "pairs_tsv" if width == 2 else "triplets_tsv"}


def _first_line(path: Path) -> str:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                return line
    return ""


def _stem(path: Path) -> str:
    name = path.resolve().name if path.name in ("", ".", "..") else path.name
    return (name.split(".", 1)[0] or "data").replace(" ", "_")


def replace_datasets(raw: dict[str, Any], paths: list[str]) -> None:
    """Point the recipe ``raw`` (a dict read from YAML) at ``paths``: its datasets become one per path.

    A ``corpus`` dataset keeps the recipe's own way of making pseudo-pairs and its task when the recipe has a
    corpus dataset; otherwise it makes them from crops and headings only (no LLM: minutes, not hours, on a CPU).
    Query-passage data gets the recipe's ``output.default_task`` as its task.
    """
    old = [d for d in raw.get("datasets") or [] if isinstance(d, dict)]
    output = raw.get("output")
    default_task = output.get("default_task") if isinstance(output, dict) else None
    recipe_corpus = next((d for d in old if d.get("format") == "corpus"), None)
    datasets = []
    names: set[str] = set()
    for path in paths:
        section = infer_dataset(path)
        base, number = section["name"], 2
        while section["name"] in names:  # two files with the same stem: keep both, under distinct names
            section["name"], number = f"{base}_{number}", number + 1
        names.add(section["name"])
        if section["format"] == "corpus":
            if recipe_corpus is not None:
                for key in ("pseudo_pairs", "task"):
                    if key in recipe_corpus:
                        section.setdefault(key, recipe_corpus[key])
            section.setdefault("pseudo_pairs", {"generator": "none"})
        if default_task is not None and section["format"] in _RETRIEVAL_FORMATS:
            # Queries train with the instruction the variant gives them by default at search time.
            section.setdefault("task", default_task)
        datasets.append(section)
    raw["datasets"] = datasets
    replaced = [str(d.get("name") or Path(str(d.get("path", ""))).stem) for d in old]
    mining = raw.get("mining")
    if isinstance(mining, dict) and mining.get("datasets") is not None:
        mining["datasets"] = None  # mine for every new dataset that lacks negatives
    evaluation = raw.get("evaluation")
    if isinstance(evaluation, dict):
        if evaluation.get("retrieval_dataset") is not None and evaluation["retrieval_dataset"] not in names:
            logger.warning(
                "--data: the recipe's retrieval evaluation on %r is dropped with that dataset",
                evaluation["retrieval_dataset"],
            )
            evaluation["retrieval_dataset"] = None
        sts = evaluation.get("sts_path")
        if sts is not None and not Path(str(sts)).expanduser().is_file():
            logger.warning("--data: the recipe's STS evaluation is dropped: %s is not there", sts)
            evaluation["sts_path"] = None
    logger.info("--data: training on %s instead of the recipe's datasets %s", sorted(names), replaced)


# ------------------------------------------------------------------------------------------------ errors


def missing_dataset_message(
    index: int, name: str, path: str, recipe: str | Path, *, key: str | None = None, data_given: bool = False
) -> str:
    """The error for a dataset whose path is not there: what it is, where to get it, how to train without it.

    ``key`` is the recipe key that holds the path (default ``datasets.INDEX.path``).
    """
    key = key or f"datasets.{index}.path"
    command = f"c2v-rag train {shlex.quote(str(recipe))}"
    known = known_data(path)
    what = f"It is {known.what}; get it from {known.source}." if known else ""
    if key.startswith("datasets."):
        replace = (
            f"To train on your own data instead: {command} --data PATH (PATH: {DATA_LAYOUTS}; repeat --data for "
            f"several), or replace this one only with --set {key}=PATH."
        )
        if data_given:
            replace = f"Check the --data path, or set this one with --set {key}=PATH."
    else:
        replace = f"Point it elsewhere with --set {key}=PATH, or turn it off with --set {key}=null."
    return f"dataset {name!r} ({key}): {path} does not exist. {what} {replace}".replace("  ", " ")
