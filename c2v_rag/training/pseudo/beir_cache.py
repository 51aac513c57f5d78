"""Pseudo-pairs on disk, as a BEIR folder a user can read, reuse and train on.

- ``corpus.jsonl``: every chunk, ``{"_id", "text", "metadata": {"doc_id", "split"}}`` (``split``: ``train`` or
  ``heldout``);
- ``queries.jsonl``: ``{"_id", "text", "metadata": {"source", "positive", "mean_logprob"}}``, ``positive``
  being the text the query is trained against (its chunk less what the query was cut from);
- ``qrels/train.tsv`` and ``qrels/heldout.tsv``: ``query-id  corpus-id  score``;
- ``settings.json``: what made them (the settings and a digest of the chunks), so that a run with the same
  documents and settings reuses them, and ``report.json``: pairs made and kept by source.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from c2v_rag.core.files import replacing
from c2v_rag.core.jsonl import iter_jsonl
from c2v_rag.training.pseudo.chunks import CorpusChunk
from c2v_rag.training.pseudo.pairs import PseudoPair

SETTINGS_FILE = "settings.json"
REPORT_FILE = "report.json"


@dataclass
class PairSet:
    """Chunks and their pseudo-pairs, split into training and held-out."""

    chunks: list[CorpusChunk]
    heldout_chunks: set[str]
    train: list[PseudoPair]
    heldout: list[PseudoPair]
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def train_corpus(self) -> dict[str, str]:
        """Chunk id -> text of the chunks training may see (positives and the negatives' pool)."""
        return {c.id: c.text for c in self.chunks if c.id not in self.heldout_chunks}


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    with replacing(path) as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def write_pairs(folder: Path, pairs: PairSet, settings: dict[str, Any]) -> None:
    """Write ``pairs`` as a BEIR folder; ``settings.json`` goes last, so a folder cut short is never reused."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / SETTINGS_FILE).unlink(missing_ok=True)
    _write_jsonl(
        folder / "corpus.jsonl",
        [
            {
                "_id": c.id,
                "text": c.text,
                "metadata": {
                    "doc_id": c.doc_id,
                    "split": "heldout" if c.id in pairs.heldout_chunks else "train",
                    "title": c.title,
                    "heading": c.heading,
                    "heading_chars": c.heading_chars,
                },
            }
            for c in pairs.chunks
        ],
    )
    queries: list[dict[str, Any]] = []
    qrels: dict[str, list[str]] = {"train": [], "heldout": []}
    for split, split_pairs in (("train", pairs.train), ("heldout", pairs.heldout)):
        for i, p in enumerate(split_pairs):
            qid = f"{split}-{i}"
            queries.append(
                {
                    "_id": qid,
                    "text": p.query,
                    "metadata": {"source": p.source, "positive": p.positive, "mean_logprob": p.mean_logprob},
                }
            )
            qrels[split].append(f"{qid}\t{p.chunk_id}\t1\n")
    _write_jsonl(folder / "queries.jsonl", queries)
    for split, lines in qrels.items():
        (folder / "qrels" / f"{split}.tsv").write_text(
            "query-id\tcorpus-id\tscore\n" + "".join(lines), encoding="utf-8"
        )
    (folder / REPORT_FILE).write_text(json.dumps(pairs.report, indent=2) + "\n", encoding="utf-8")
    (folder / SETTINGS_FILE).write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_settings(folder: Path) -> dict[str, Any] | None:
    path = folder / SETTINGS_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None


def read_pairs(folder: Path) -> PairSet:
    """Read a folder :func:`write_pairs` wrote."""
    if not (folder / "corpus.jsonl").is_file():
        raise FileNotFoundError(f"{folder} holds no pseudo-pairs (no corpus.jsonl); make them with c2v-rag adapt")
    chunks, heldout_chunks = [], set()
    for _, r in iter_jsonl(folder / "corpus.jsonl"):
        meta = r.get("metadata") or {}
        chunks.append(
            CorpusChunk(
                r["_id"],
                meta.get("doc_id", r["_id"]),
                r["text"],
                meta.get("title"),
                meta.get("heading"),
                meta.get("heading_chars", 0),
            )
        )
        if meta.get("split") == "heldout":
            heldout_chunks.add(r["_id"])
    queries = {r["_id"]: r for _, r in iter_jsonl(folder / "queries.jsonl")}
    splits: dict[str, list[PseudoPair]] = {}
    for split in ("train", "heldout"):
        out = []
        lines = (folder / "qrels" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[1:]
        for line in lines:
            qid, chunk_id, _ = line.split("\t")
            q = queries[qid]
            meta = q["metadata"]
            out.append(PseudoPair(q["text"], chunk_id, meta["source"], meta["positive"], meta.get("mean_logprob")))
        splits[split] = out
    report = {}
    if (folder / REPORT_FILE).is_file():
        report = json.loads((folder / REPORT_FILE).read_text(encoding="utf-8"))
    return PairSet(chunks, heldout_chunks, splits["train"], splits["heldout"], report)
