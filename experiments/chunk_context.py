"""Does a chunk embed better with its document's head in front of it? Out-of-domain retrieval with the preset.

A chunk past a document's first loses the document's title: the third chunk of ``host.conf(5)`` no longer says
it is about the resolver's configuration file. This re-embeds every chunk but the first of each document of a
collection ``bench/ood/score.py`` ingested, with a context in front of its text (the stored text is kept), and
scores the questions through ``c2v_rag.search_many(group_by_document=True)``, as ``score.py`` does:

- ``title``: the document's first line where it is a Markdown heading (``elf(5)``, ``hacker humor``);
- ``lead``: that heading and the first paragraph under it, cut at 200 characters (``elf(5)`` and ``elf - format
  of Executable and Linking Format (ELF) files``).

The baseline is the collection as ingested. Each context embeds through the ingest's own
:class:`~c2v_rag.rag.Embedder`; a few unchanged chunks are embedded again and checked against their stored
vectors first, so the two sides differ by the context alone.

    taskset -c 1 env OMP_NUM_THREADS=1 python experiments/chunk_context.py --bench manpages --quantize int8 \\
        --json chunk_context_manpages.json

(After ``python bench/ood/score.py --model default --task default --quantize int8 --bench manpages``, whose
collection it copies; the copy is changed, the cache is not.)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "bench" / "ood")]
import build  # noqa: E402  (bench/ood)
import metrics  # noqa: E402
import score  # noqa: E402

CONTEXTS = ("title", "lead")
LEAD_CHARS = 200


def title_of(text: str) -> str | None:
    """The document's first line where it is a Markdown heading, without the hashes."""
    first = text.lstrip().split("\n", 1)[0].strip()
    return first.lstrip("#").strip() or None if first.startswith("#") else None


def lead_of(text: str) -> str | None:
    """The document's opening: its first paragraph (a heading's hashes dropped) and the next one, cut at
    LEAD_CHARS characters on a word boundary. For a Markdown page or a man page, its heading and the line under
    it; for a record with a title, the title and the start of its text."""
    paragraphs = [p.strip() for p in text.strip().split("\n\n") if p.strip()]
    if not paragraphs:
        return None
    lead = "\n".join([paragraphs[0].lstrip("#").strip(), *paragraphs[1:2]])
    return lead[:LEAD_CHARS].rsplit(" ", 1)[0] if len(lead) > LEAD_CHARS else lead


def context_of(kind: str, text: str) -> str | None:
    return title_of(text) if kind == "title" else lead_of(text)


class Bench:
    """Documents, questions and judgements, and a complete ingest of the documents to start from."""

    def __init__(self, name: str, docs: dict[str, str], queries: dict[str, str], qrels: dict, store: Path) -> None:
        self.name, self.docs, self.queries, self.qrels, self.store = name, docs, queries, qrels, store


def ood_bench(args: argparse.Namespace, model) -> Bench:
    """A benchmark of bench/ood, with the collection score.py ingested for this model."""
    from platformdirs import user_cache_dir

    docs_root = (args.docs or build.default_out()).expanduser()
    cache = (args.cache or Path(user_cache_dir("c2v_rag")) / "ood-cache").expanduser()
    corpus = score.load_corpus(args.bench, docs_root)
    source = score.collection_dir(cache, corpus, model, args.model, None)
    if not (source / "complete.json").exists():
        raise SystemExit(f"error: no complete ingest at {source}: run bench/ood/score.py for this model first")
    ids = score.query_ids(corpus)
    return Bench(
        args.bench, corpus.docs, {q: corpus.bench.queries[q] for q in ids}, corpus.bench.qrels, source / "qdrant"
    )


def scifact_bench(args: argparse.Namespace, model, work: Path) -> Bench:
    """SciFact dev (1,000 abstracts) ingested as records with a title, as a user would ingest them."""
    import c2v_rag
    from c2v_rag.evaluation.datasets import scifact_dev

    dev = scifact_dev(args.scifact, corpus_size=1000)
    with open(args.scifact / "scifact" / "corpus.jsonl", encoding="utf-8") as f:
        titles = {str(r["_id"]): r for r in map(json.loads, f)}
    records = [{"id": d, "title": titles[d]["title"], "text": titles[d]["text"]} for d in dev.corpus]
    store = args.scifact_store or work / "scifact"
    if not (store / "complete").exists():
        c2v_rag.ingest(
            records,
            collection=score.COLLECTION,
            path=store,
            model=model,
            chunk_size=score.CHUNK_SIZE,
            chunk_overlap=score.CHUNK_OVERLAP,
            show_progress=True,
        )
        (store / "complete").write_text("")
    from c2v_rag.documents.source_document import from_record

    docs = {r["id"]: from_record(r, "scifact").text for r in records}
    return Bench("scifact-dev-1k", docs, dev.queries, dev.qrels, store)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", choices=build.BENCHMARKS)
    parser.add_argument("--scifact", type=Path, help="the data folder (with scifact/): SciFact dev instead of --bench")
    parser.add_argument("--scifact-store", type=Path, help="keep SciFact's ingest here (default: a temporary folder)")
    parser.add_argument("--model", default="default")
    parser.add_argument("--quantize", default="none")
    parser.add_argument("--contexts", nargs="+", choices=CONTEXTS, default=list(CONTEXTS))
    parser.add_argument("--docs", type=Path, default=None, help="build.py's folder (default: its default)")
    parser.add_argument("--cache", type=Path, default=None, help="score.py's cache (default: its default)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if (args.bench is None) == (args.scifact is None):
        parser.error("pass --bench or --scifact")

    import c2v_rag
    from c2v_rag.documents.payload_keys import CHUNK_INDEX_KEY, CONTENT_KEY, DOC_ID_KEY
    from c2v_rag.rag import Embedder

    model = score.load_model(args.model, args.quantize)
    work = Path(tempfile.mkdtemp(prefix="chunk-context-"))
    bench = scifact_bench(args, model, work) if args.scifact else ood_bench(args, model)
    embedder = Embedder(model)
    ids = sorted(bench.qrels)
    queries = [bench.queries[q] for q in ids]

    def rankings(store: Path) -> dict[str, list[str]]:
        hits = c2v_rag.search_many(
            queries,
            top_k=score.TOP_K,
            collection=score.COLLECTION,
            path=store,
            model=model,
            group_by_document=True,
            rerank=None,  # the vectors' ranking, as score.py's
        )
        return {q: [h.doc_id for h in found] for q, found in zip(ids, hits)}

    report: dict = {"bench": bench.name, "model": args.model, "quantize": model.quantization, "rows": []}
    try:
        base = rankings(bench.store)
        report["rows"].append({"context": "none", "scores": metrics.evaluate(base, bench.qrels), "rankings": base})
        print(f"none: {report['rows'][-1]['scores']}", flush=True)
        for kind in args.contexts:
            store = work / kind
            shutil.copytree(bench.store, store)
            from qdrant_client import QdrantClient
            from qdrant_client.http import models

            client = QdrantClient(path=str(store))
            points, offset = [], None
            while True:
                page, offset = client.scroll(
                    score.COLLECTION, limit=1000, offset=offset, with_payload=True, with_vectors=True
                )
                points += page
                if offset is None:
                    break
            later = [p for p in points if p.payload[CHUNK_INDEX_KEY] > 0]
            texts, changed = [], []
            for p in later:
                context = context_of(kind, bench.docs[p.payload[DOC_ID_KEY]])
                if context:
                    texts.append(f"{context}\n\n{p.payload[CONTENT_KEY]}")
                    changed.append(p)
            # The same embedding as the ingest's: a few stored chunks embedded again match their stored vectors.
            check = [p for p in points if p.payload[CHUNK_INDEX_KEY] == 0][:8]
            again = embedder.embed_documents([p.payload[CONTENT_KEY] for p in check])
            stored = np.asarray([p.vector for p in check], dtype=np.float32)
            worst = float(np.min(np.sum(again * stored, axis=1)))
            assert worst > 0.999, f"re-embedded chunks differ from the stored ones (cosine {worst:.5f})"
            started = time.perf_counter()
            vectors = embedder.embed_documents(texts)
            seconds = time.perf_counter() - started
            client.upsert(
                score.COLLECTION,
                [models.PointStruct(id=p.id, vector=v.tolist(), payload=p.payload) for p, v in zip(changed, vectors)],
            )
            client.close()
            found = rankings(store)
            row = {
                "context": kind,
                "chunks_changed": len(changed),
                "chunks_later": len(later),
                "chunks": len(points),
                "check_cosine_min": worst,
                "embed_seconds": round(seconds, 1),
                "scores": metrics.evaluate(found, bench.qrels),
                "rankings": found,
            }
            report["rows"].append(row)
            print(f"{kind}: {len(changed)} of {len(points)} chunks re-embedded in {seconds:.0f} s: {row['scores']}")
            if args.json:
                args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
