"""Score passage retrieval in long manuals: which chunk of a long page answers a question (bench/long_pages).

Each ``--chunk-context`` is ingested as a user ingests the manuals' folder (``c2v_rag.ingest(folder,
chunk_context=...)``, every other setting the default), then every question is searched with
``c2v_rag.search_many(top_k=10)``: the first stage alone (``rerank=None``) and, with ``--rerank N``, reranked
as search does by default where the CPU allows. A hit is relevant where it holds at least half of an answer
quote's characters (its span ``start_char:end_char`` in the page as read), so chunk boundaries need not match
the judgement. The chunk contexts cut the same chunks and differ only in what leads them, so their scores pair
question by question. all-MiniLM-L6-v2 ranks the first context's stored chunks (lead included) as a reference.

    python bench/long_pages/build.py
    python bench/long_pages/score.py --chunk-context lead --chunk-context headings --rerank 20 \\
        --json bench/results/long_pages/RUN.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # run as a script: its siblings import by name
sys.path.insert(1, str(HERE.parent))  # and bench/common.py

import build
from common import chunker_key, recorded_command, speed_flags_note

if TYPE_CHECKING:
    from c2v_rag.documents.chunking import ChunkContext

TOP_K = 10
COLLECTION = "long_pages"


def load_questions(path: Path = HERE / "questions.jsonl") -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def answer_spans(questions: list[dict[str, Any]], texts: dict[str, str]) -> dict[str, list[tuple[str, int, int]]]:
    """Each question's answers as ``(page, start, end)`` spans of the page as read; a quote not found exactly once
    is an error (the pages differ from those judged)."""
    spans = {}
    for question in questions:
        page = texts[question["page"]]
        found = []
        for quote in question["answers"]:
            if page.count(quote) != 1:
                raise SystemExit(f"{question['id']}: its quote is in {question['page']} {page.count(quote)} times")
            start = page.index(quote)
            found.append((question["page"], start, start + len(quote)))
        spans[question["id"]] = found
    return spans


def relevant(hit: dict[str, Any], spans: list[tuple[str, int, int]]) -> bool:
    """Whether a hit holds at least half of one answer quote's characters."""
    for page, start, end in spans:
        if hit["page"] == page and hit["start"] is not None:
            overlap = min(end, hit["end"]) - max(start, hit["start"])
            if overlap * 2 >= end - start:
                return True
    return False


def question_metrics(ranking: Sequence[dict[str, Any]], spans: list[tuple[str, int, int]]) -> dict[str, float]:
    first = next((rank for rank, hit in enumerate(ranking[:TOP_K], 1) if relevant(hit, spans)), None)
    return {
        "mrr@10": 0.0 if first is None else 1.0 / first,
        "hit@1": float(first == 1),
        "hit@3": float(first is not None and first <= 3),
        "hit@10": float(first is not None),
    }


def hit_record(hit: Any) -> dict[str, Any]:
    """A hit as its page, span and chunk."""
    return {"page": hit.metadata.get("file_name"), "start": hit.start_char, "end": hit.end_char,
            "chunk_index": hit.chunk_index}  # fmt: skip


def collection_dir(cache: Path, digest: str, context: str) -> Path:
    import c2v_rag

    fields = {"pages": digest, "chunk_context": context, "c2v_rag": c2v_rag.__version__, **chunker_key(context)}
    key = json.dumps(fields, sort_keys=True)
    return cache / hashlib.sha256(key.encode()).hexdigest()[:20]


def ensure_ingested(folder: Path, pages: Path, context: ChunkContext) -> float:
    import c2v_rag

    done = folder / "complete.json"
    if done.exists():
        return float(json.loads(done.read_text())["seconds"])
    started = time.perf_counter()
    result = c2v_rag.ingest(pages, collection=COLLECTION, path=folder / "qdrant", chunk_context=context)
    seconds = time.perf_counter() - started
    done.write_text(json.dumps({"seconds": seconds, "result": str(result)}) + "\n", encoding="utf-8")
    return seconds


def stored_chunks(folder: Path) -> list[dict[str, Any]]:
    """Every stored chunk: its page, span, lead length and text, in (page, chunk) order."""
    from qdrant_client import QdrantClient

    from c2v_rag.store.point_schema import payload_char_span, payload_metadata, payload_text

    client = QdrantClient(path=str(folder / "qdrant"))
    try:
        points, offset = [], None
        while True:
            batch, offset = client.scroll(COLLECTION, limit=512, offset=offset, with_payload=True)
            points.extend(batch)
            if offset is None:
                break
    finally:
        client.close()
    chunks = []
    for point in points:
        metadata = payload_metadata(point.payload or {})
        start, end = payload_char_span(point.payload or {})
        chunks.append(
            {
                "page": metadata.get("file_name"),
                "start": start,
                "end": end,
                "chunk_index": metadata.get("chunk_index"),
                "lead_chars": metadata.get("lead_chars", 0),
                "text": payload_text(point.payload or {}),
            }
        )
    return sorted(chunks, key=lambda c: (c["page"], c["chunk_index"]))


def c2v_rankings(folder: Path, queries: list[str], rerank: int | None) -> tuple[list[list[dict[str, Any]]], float]:
    import c2v_rag

    started = time.perf_counter()
    hits = c2v_rag.search_many(queries, top_k=TOP_K, collection=COLLECTION, path=folder / "qdrant", rerank=rerank)
    return [[hit_record(hit) for hit in found] for found in hits], time.perf_counter() - started


def minilm_rankings(chunks: list[dict[str, Any]], queries: list[str]) -> list[list[dict[str, Any]]]:
    from c2v_rag.evaluation.baselines import BiEncoder

    encoder = BiEncoder("all-minilm-l6-v2")
    docs = encoder.encode([c["text"] for c in chunks])
    scores = encoder.encode(queries) @ docs.T
    return [[chunks[i] for i in np.argsort(-row, kind="stable")[:TOP_K]] for row in scores]


def paired(a: list[float], b: list[float], resamples: int = 5000, seed: int = 0) -> dict[str, Any]:
    """``b - a`` averaged over questions, its 95% bootstrap interval, and how many questions each wins."""
    diff = np.asarray(b) - np.asarray(a)
    draws = np.random.default_rng(seed).integers(0, len(diff), size=(resamples, len(diff)))
    means = diff[draws].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {
        "difference": float(diff.mean()),
        "ci95": [float(low), float(high)],
        "better": int((diff > 0).sum()),
        "worse": int((diff < 0).sum()),
    }


def compared(rows: dict[str, dict[str, Any]], base: str, name: str) -> dict[str, dict[str, Any]]:
    """Row ``name`` against row ``base``, question by question (:func:`paired`), for MRR@10, hit@1 and hit@10; the
    MRR@10 line printed."""
    by_metric = {
        m: paired([p[m] for p in rows[base]["per_question"]], [p[m] for p in rows[name]["per_question"]])
        for m in ("mrr@10", "hit@1", "hit@10")
    }
    mrr = by_metric["mrr@10"]
    print(
        f"{name} - {base}: MRR@10 {mrr['difference']:+.4f} [{mrr['ci95'][0]:+.4f}, {mrr['ci95'][1]:+.4f}] "
        f"({mrr['better']} better, {mrr['worse']} worse)",
        flush=True,
    )
    return by_metric


def write_run(path: Path, script: str, argv: Sequence[str], **fields: Any) -> None:
    """A run's results as JSON at ``path``, with the command that made them and the machine's CPU flags."""
    record = {
        "command": recorded_command(script, argv),
        "machine": {"processor": platform.processor(), "cpu_flags": speed_flags_note()},
        **fields,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    from c2v_rag.documents.chunking import ChunkContext

    parser.add_argument("--chunk-context", action="append", choices=get_args(ChunkContext))
    parser.add_argument("--rerank", type=int, default=None, help="also score search reranking its top N chunks")
    parser.add_argument("--pages", type=Path, default=build.DEFAULT_OUT, help="the folder build.py wrote")
    parser.add_argument("--cache", type=Path, default=None, help="ingested collections (default: the user cache)")
    parser.add_argument("--no-minilm", action="store_true", help="skip the all-MiniLM-L6-v2 reference row")
    parser.add_argument("--json", type=Path, help="write every score and ranking here")
    args = parser.parse_args(argv)
    contexts = args.chunk_context or ["lead", "headings"]

    from c2v_rag.core.cache import cache_dir

    texts = build.read_pages(args.pages)
    digest = build.check_digests(texts)
    questions = load_questions()
    spans = answer_spans(questions, texts)
    queries = [q["query"] for q in questions]
    cache = args.cache or cache_dir() / "long-pages-cache"

    reference = contexts[0]
    rows: dict[str, dict[str, Any]] = {}
    against: dict[str, str] = {}  # a row -> the row of the reference context it is paired with

    def add(name: str, rankings: list[list[dict[str, Any]]], base: str | None = None, **extra: Any) -> None:
        if base is not None and base != name:
            against[name] = base
        per_question = [question_metrics(r, spans[q["id"]]) for r, q in zip(rankings, questions)]
        means = {m: float(np.mean([p[m] for p in per_question])) for m in per_question[0]}
        # Each ranking as "page#chunk_index", best first: the stored chunks' spans are the collection's.
        shown = [[f"{hit['page']}#{hit['chunk_index']}" for hit in ranking] for ranking in rankings]
        rows[name] = {"scores": means, "per_question": per_question, "rankings": shown, **extra}
        print(f"{name:<28} " + "  ".join(f"{m} {v:.4f}" for m, v in means.items()), flush=True)

    chunks_of: dict[str, list[dict[str, Any]]] = {}
    for context in contexts:
        folder = collection_dir(cache, digest, context)
        seconds = ensure_ingested(folder, args.pages, context)
        chunks_of[context] = stored_chunks(folder)
        led = sum(1 for c in chunks_of[context] if c["lead_chars"])
        ranked, took = c2v_rankings(folder, queries, None)
        add(
            f"c2v {context}",
            ranked,
            f"c2v {reference}",
            ingest_seconds=seconds,
            search_seconds=took,
            chunks=len(chunks_of[context]),
            led_chunks=led,
            lead_characters=sum(c["lead_chars"] for c in chunks_of[context]),
        )
        if args.rerank:
            ranked, took = c2v_rankings(folder, queries, args.rerank)
            add(
                f"c2v {context} rerank{args.rerank}",
                ranked,
                f"c2v {reference} rerank{args.rerank}",
                search_seconds=took,
            )
    cut = [[(x["page"], x["start"], x["end"]) for x in chunks_of[c]] for c in contexts]
    if any(other != cut[0] for other in cut[1:]):
        print("note: the contexts' chunks are not the same spans; their pairing is looser", flush=True)
    if not args.no_minilm:
        add(
            f"all-minilm-l6-v2 ({reference} chunks)", minilm_rankings(chunks_of[reference], queries), f"c2v {reference}"
        )

    comparisons = {f"{name} - {base}": compared(rows, base, name) for name, base in against.items()}
    if args.json:
        write_run(
            args.json,
            "bench/long_pages/score.py",
            sys.argv[1:] if argv is None else argv,
            pages_digest=digest,
            questions=len(questions),
            rows=rows,
            comparisons=comparisons,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
