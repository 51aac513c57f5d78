"""Score embedding models on the out-of-domain retrieval benchmarks, beside all-MiniLM-L6-v2 and BM25.

The Causal2Vec rows take a user's path: ``c2v_rag.ingest`` of every document into an embedded Qdrant
(chunked as ingest chunks: 200 decoder tokens, 20 shared), then ``c2v_rag.search_many(...,
group_by_document=True, rerank=None)``, which ranks documents by their best chunk's vector. ``--mode hybrid``
(or ``sparse``) ingests with ``sparse="bm25"`` and searches in that mode, as a user of hybrid search does;
``--rerank N`` reorders each question's top N chunks with the reranker search runs by default where the CPU
allows. Queries get the instruction of ``--task`` / ``--instruction``. The baselines rank the same documents:

- all-minilm-l6-v2: its normalized mean-pooled vectors (as sentence-transformers ships it) of the very
  chunks ingest stored, a document scored by its best chunk, as ``group_by_document`` does;
- BM25: ``bm25s`` over whole documents, English stop words, Snowball stemming (PyStemmer).

Usage (after ``python bench/ood/build.py``)::

    python bench/ood/score.py --model default --task default --task MSMARCO-Passage \
        --truncate-dim full --truncate-dim 384 --truncate-dim 960 --json out.json

Ingested collections are kept under ``--cache`` (default: the user cache, ``c2v_rag/ood-cache``),
one per (model weights, adapters, base models and config, corpus digest, truncate_dim, chunking, library
version), so that scoring another instruction re-embeds only the queries.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: its siblings import by name
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # and bench/common.py

import build
import metrics
import questions
from common import chunker_key, recorded_command

TOP_K = 10
COLLECTION = "ood"
CHUNK_SIZE = 200  # ingest's defaults (IngestConfig), spelled out so that the cache key records them
CHUNK_OVERLAP = 20
CHUNK_CONTEXT = "lead"  # ingest's default for a new collection (IngestConfig.chunk_context), recorded in the key
METRIC_NAMES = ("mrr@10", "ndcg@10", "hit@1", "hit@5", "recall@10")


@dataclass
class Corpus:
    """One benchmark's built documents and committed questions."""

    name: str
    docs: dict[str, str]
    digest: str
    bench: questions.Benchmark


@dataclass
class Row:
    """One system's scores on one benchmark."""

    system: str
    settings: dict[str, Any]
    scores: dict[str, float]
    rankings: dict[str, list[str]]
    seconds: dict[str, float] = field(default_factory=dict)


# ------------------------------------------------------------------------------------ corpus


def load_corpus(name: str, docs_root: Path) -> Corpus:
    """The documents ``build.py`` wrote for ``name`` and the committed questions; every judged
    document must be among them."""
    folder = docs_root / name / "docs"
    if not folder.is_dir():
        raise SystemExit(f"error: no documents in {folder}: run `python bench/ood/build.py --out {docs_root}` first")
    docs = {
        str(p.relative_to(folder).with_suffix("")): p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*.md"))
    }
    digest = build.corpus_digest([build.Document(i, t) for i, t in docs.items()])
    bench = questions.load(name)
    if digest != bench.corpus["digest"]:
        warnings.warn(
            f"{name}: the built corpus differs from the one the questions were judged on "
            f"(other package versions?): scores are not comparable with the README's",
            stacklevel=2,
        )
    missing = sorted({d for judged in bench.qrels.values() for d in judged} - docs.keys())
    if missing:
        raise SystemExit(f"error: {name}: judged documents missing from the built corpus: {missing[:5]}")
    return Corpus(name, docs, digest, bench)


def query_ids(corpus: Corpus) -> list[str]:
    return sorted(corpus.bench.qrels)


# ------------------------------------------------------------------------------------ Causal2Vec


def load_model(reference: str, quantize: str = "none") -> Any:
    from c2v_rag import DEFAULT_PRESET, Causal2Vec

    return Causal2Vec.from_pretrained(DEFAULT_PRESET if reference == "default" else reference, quantize=quantize)


def model_key(model: Any, reference: str) -> str:
    """What identifies a model's document vectors: its weights' digest, its adapters' (how their weights apply) and
    its base models' contents (what the adapters apply to), its whole configuration and, when it is quantized, how
    (a variant without a digest, as a base model has, is keyed by its reference instead)."""
    weights = (
        model.weights_digest or f"reference:{Path(reference).resolve() if Path(reference).exists() else reference}"
    )
    adapters = f"adapters:{model.adapters_digest}" if model.adapters_digest else ""
    bases = f"bases:{json.dumps(model.bases_digests, sort_keys=True)}" if model.bases_digests else ""
    quantized = "" if model.quantization == "none" else f"quantization:{model.quantization}"
    key = weights + adapters + bases + model.config.key_json() + quantized
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def decoder_cap(model: Any, asked: int | None) -> int | None:
    """The decoder_max_length an ingest of ``model`` into a new collection reads its chunks with (``asked``, else
    ingest's default; None: whole chunks): part of a cached collection's key, so that the key says what its chunks
    were read with."""
    import c2v_rag

    return c2v_rag.IngestConfig(decoder_max_length=asked).for_model(model.config).decoder_max_length


def collection_dir(
    cache: Path,
    corpus: Corpus,
    model: Any,
    reference: str,
    truncate_dim: int | None,
    decoder_max_length: int | None = None,
    chunking: tuple[int, int] = (CHUNK_SIZE, CHUNK_OVERLAP),
    sparse: str | None = None,
    chunk_context: str = CHUNK_CONTEXT,
) -> Path:
    """The embedded Qdrant folder for these document vectors (``decoder_max_length``: ingest's, None: whole chunks;
    ``chunking``: ingest's chunk size and overlap; ``sparse``: ingest's sparse vectors, None for dense alone;
    ``chunk_context``: ingest's)."""
    import c2v_rag

    key = json.dumps(
        {
            "model": model_key(model, reference),
            "corpus": corpus.digest,
            "truncate_dim": truncate_dim,
            "chunk": list(chunking),
            # Collections cut before chunk_context existed (no leads) keep their keys.
            **({"chunk_context": chunk_context} if chunk_context != "none" else {}),
            **chunker_key(chunk_context),
            **({"decoder_max_length": decoder_max_length} if decoder_max_length is not None else {}),
            **({"sparse": sparse} if sparse is not None else {}),  # dense collections keep their keys
            "c2v_rag": c2v_rag.__version__,
        },
        sort_keys=True,
    )
    return cache / corpus.name / hashlib.sha256(key.encode()).hexdigest()[:20]


def ensure_ingested(
    folder: Path,
    corpus: Corpus,
    model: Any,
    truncate_dim: int | None,
    decoder_max_length: int | None = None,
    chunking: tuple[int, int] = (CHUNK_SIZE, CHUNK_OVERLAP),
    sparse: str | None = None,
    chunk_context: str = CHUNK_CONTEXT,
) -> float:
    """Ingest the corpus into ``folder`` unless a complete ingest is there; the seconds it took (0 if cached).
    A run stopped half-way is resumed by ingest itself (its point ids are deterministic)."""
    import c2v_rag

    done = folder / "complete.json"
    if done.exists():
        return 0.0
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    result = c2v_rag.ingest(
        [{"id": i, "text": t} for i, t in corpus.docs.items()],
        collection=COLLECTION,
        path=folder / "qdrant",
        model=model,
        truncate_dim=truncate_dim,
        chunk_size=chunking[0],
        chunk_overlap=chunking[1],
        chunk_context=chunk_context,
        sparse=sparse,
        show_progress=True,
        config=c2v_rag.IngestConfig(decoder_max_length=decoder_max_length or 0),
    )
    seconds = time.perf_counter() - started
    done.write_text(json.dumps({"seconds": seconds, "result": str(result)}) + "\n", encoding="utf-8")
    return seconds


def c2v_rankings(
    folder: Path,
    corpus: Corpus,
    model: Any,
    task: str | None,
    instruction: str | None,
    mode: str = "dense",
    rerank: int | None = None,
) -> dict[str, list[str]]:
    """Each question's top documents through ``search_many(group_by_document=True)`` in ``mode``, reranked from the
    top ``rerank`` chunks or (None) by the first stage alone."""
    import c2v_rag

    ids = query_ids(corpus)
    hits = c2v_rag.search_many(
        [corpus.bench.queries[q] for q in ids],
        top_k=TOP_K,
        collection=COLLECTION,
        path=folder / "qdrant",
        model=model,
        task=task,
        instruction=instruction,
        group_by_document=True,
        mode=mode,
        rerank=rerank,  # None: the first stage's ranking (search reranks by default where the CPU allows)
        show_progress=True,
    )
    return {q: [hit.doc_id for hit in found] for q, found in zip(ids, hits)}


def stored_points(folder: Path) -> tuple[list[str], list[str], np.ndarray]:
    """(document ids, texts, vectors) of every chunk in an ingested collection, in (document, chunk)
    order: the chunks the baselines embed, so that they see exactly what the model saw."""
    from qdrant_client import QdrantClient

    from c2v_rag.store.point_schema import HYBRID_DENSE_NAME

    client = QdrantClient(path=str(folder / "qdrant"))
    try:
        rows: list[tuple[str, int, str, list[float]]] = []
        offset = None
        while True:
            points, offset = client.scroll(COLLECTION, limit=1024, offset=offset, with_payload=True, with_vectors=True)
            for point in points:
                payload = point.payload or {}
                rows.append(
                    (
                        str(payload["doc_id"]),
                        int(payload.get("metadata", {}).get("chunk_index", 0)),
                        str(payload["page_content"]),
                        # a hybrid collection's points hold named vectors: the dense one is the model's
                        list(point.vector[HYBRID_DENSE_NAME] if isinstance(point.vector, dict) else point.vector),
                    )
                )
            if offset is None:
                break
    finally:
        client.close()
    rows.sort(key=lambda r: (r[0], r[1]))
    return [r[0] for r in rows], [r[2] for r in rows], np.asarray([r[3] for r in rows], dtype=np.float32)


def prefix_rankings(
    points: tuple[list[str], list[str], np.ndarray],
    corpus: Corpus,
    model: Any,
    dim: int,
    task: str | None,
    instruction: str | None,
) -> dict[str, list[str]]:
    """The ranking ``ingest(truncate_dim=dim)`` + ``search_many`` gives, from the full collection's stored
    vectors: a Matryoshka vector is the full one's first ``dim`` values, so their cosines are the
    prefixes'. (Measured on 345 chunks of both benchmarks: cosine >= 0.999998 to the vectors an
    ingest at 384 stores; ``--truncate-ingest`` ingests at each size instead.)"""
    model.config.check_truncate_dim(dim)
    ids = query_ids(corpus)
    queries = model.encode_queries(
        [corpus.bench.queries[q] for q in ids],
        task=task,
        instruction=instruction,
        truncate_dim=dim,
        normalize_embeddings=True,
    )
    docs = points[2][:, :dim]
    docs = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    return {q: best_documents(row, points[0]) for q, row in zip(ids, np.asarray(queries) @ docs.T)}


def task_label(model: Any, task: str | None, instruction: str | None) -> str:
    """The query prompt as the table shows it: the instruction literal, or the task's name (the
    variant's default task for none, as search applies it)."""
    if instruction is not None:
        return f"instruction: {instruction}"
    return task or f"{model.config.default_task or 'MSMARCO-Passage'} (default)"


# ------------------------------------------------------------------------------------ baselines


def minilm_vectors(corpus: Corpus, chunk_texts: list[str], cache: Path) -> tuple[Any, np.ndarray]:
    """all-MiniLM-L6-v2 and its vectors of the stored chunks (cached on disk, by the chunks' digest)."""
    from tqdm import tqdm

    from c2v_rag.evaluation.baselines import BiEncoder

    digest = hashlib.sha256("\x00".join(chunk_texts).encode()).hexdigest()[:20]
    path = cache / corpus.name / f"minilm-{digest}.npy"
    encoder = BiEncoder("all-minilm-l6-v2")
    if path.exists():
        return encoder, np.load(path)
    batch = 64
    parts = [
        encoder.encode(chunk_texts[i : i + batch], batch_size=batch)
        for i in tqdm(range(0, len(chunk_texts), batch), desc=f"{corpus.name}: all-minilm-l6-v2", unit="batch")
    ]
    vectors = np.concatenate(parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return encoder, vectors


def minilm_rankings(corpus: Corpus, chunk_docs: list[str], chunk_texts: list[str], cache: Path) -> dict[str, list[str]]:
    """all-MiniLM-L6-v2 on the stored chunks, each document scored by its best chunk."""
    encoder, vectors = minilm_vectors(corpus, chunk_texts, cache)
    ids = query_ids(corpus)
    scores = encoder.encode([corpus.bench.queries[q] for q in ids]) @ vectors.T
    return {q: best_documents(row, chunk_docs) for q, row in zip(ids, scores)}


def best_documents(chunk_scores: np.ndarray, chunk_docs: Sequence[str], k: int = TOP_K) -> list[str]:
    """The ``k`` documents whose best chunk scores highest (ties broken by chunk order)."""
    ranking: list[str] = []
    for index in np.argsort(-chunk_scores, kind="stable"):
        doc = chunk_docs[index]
        if doc not in ranking:
            ranking.append(doc)
            if len(ranking) == k:
                break
    return ranking


def bm25_rankings(corpus: Corpus) -> dict[str, list[str]]:
    """BM25 (bm25s defaults: Lucene's variant, k1=1.5, b=0.75) over whole documents."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    doc_ids = list(corpus.docs)
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(list(corpus.docs.values()), stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    ids = query_ids(corpus)
    tokens = bm25s.tokenize(
        [corpus.bench.queries[q] for q in ids], stopwords="en", stemmer=stemmer, show_progress=False
    )
    found, _ = retriever.retrieve(tokens, k=TOP_K, show_progress=False)
    return {q: [doc_ids[i] for i in row] for q, row in zip(ids, found)}


# ------------------------------------------------------------------------------------ running


def parse_dim(text: str) -> int | None:
    return None if text in ("full", "none", "0") else int(text)


def prompts(args: argparse.Namespace) -> list[tuple[str | None, str | None]]:
    """(task, instruction) pairs to score each model with; "default" is the variant's default task."""
    pairs: list[tuple[str | None, str | None]] = [(None if t == "default" else t, None) for t in args.task or []]
    pairs += [(None, text) for text in args.instruction or []]
    return pairs or [(None, None)]


def score_model(
    corpus: Corpus,
    args: argparse.Namespace,
    reference: str,
    model: Any,
    points: list[tuple[list[str], list[str], np.ndarray]],
) -> list[Row]:
    """One model's rows: every size of ``--truncate-dim`` under every query prompt. The full-size
    collection is always ingested (its chunks feed the baselines; its vectors the derived prefixes);
    ``points`` receives its stored chunks the first time."""

    rows: list[Row] = []
    cap = decoder_cap(model, args.decoder_max_length)
    chunking = (args.chunk_size, args.chunk_overlap)
    sparse = None if args.mode == "dense" else "bm25"
    context = args.chunk_context
    full = collection_dir(args.cache, corpus, model, reference, None, cap, chunking, sparse, context)
    full_seconds = ensure_ingested(full, corpus, model, None, cap, chunking, sparse, context)
    stored = stored_points(full)
    if not points:
        points.append(stored)
    for dim in args.truncate_dim or [None]:
        folder, seconds, how = full, full_seconds, "ingest + search_many"
        if dim is not None and args.truncate_ingest:
            folder = collection_dir(args.cache, corpus, model, reference, dim, cap, chunking, sparse, context)
            seconds = ensure_ingested(folder, corpus, model, dim, cap, chunking, sparse, context)
        elif dim is not None:
            if args.mode != "dense" or args.rerank is not None:
                raise SystemExit("error: --mode and --rerank score a whole collection: add --truncate-ingest")
            how = "prefix of the full collection's vectors"
        for task, instruction in prompts(args):
            started = time.perf_counter()
            if how.startswith("prefix"):
                rankings = prefix_rankings(stored, corpus, model, dim, task, instruction)
            else:
                rankings = c2v_rankings(folder, corpus, model, task, instruction, args.mode, args.rerank)
            settings = {
                "model": reference,
                "truncate_dim": dim,
                "query_prompt": task_label(model, task, instruction),
                "scored_by": how,
                "quantization": model.quantization,
                "chunking": list(chunking),
                "chunk_context": context,
                "decoder_max_length": cap,
                "mode": args.mode,
                "rerank": args.rerank,
            }
            label = "" if args.mode == "dense" else f" {args.mode}"
            label += "" if args.rerank is None else f" rerank {args.rerank}"
            rows.append(
                Row(
                    f"c2v {reference}" + ("" if model.quantization == "none" else f" ({model.quantization})") + label,
                    settings,
                    metrics.evaluate(rankings, corpus.bench.qrels),
                    rankings,
                    {"ingest": round(seconds, 1), "queries": round(time.perf_counter() - started, 1)},
                )
            )
    return rows


def score_benchmark(corpus: Corpus, args: argparse.Namespace, models: dict[str, Any]) -> list[Row]:
    """Every requested model's rows, then the baselines' on the first model's chunks."""
    rows: list[Row] = []
    points: list[tuple[list[str], list[str], np.ndarray]] = []
    for reference, model in models.items():
        rows += score_model(corpus, args, reference, model, points)
    if not args.no_baselines:
        chunk_docs, chunk_texts, _ = points[0]
        rankings = minilm_rankings(corpus, chunk_docs, chunk_texts, args.cache)
        rows.append(
            Row(
                "all-minilm-l6-v2",
                {"chunks": len(chunk_texts)},
                metrics.evaluate(rankings, corpus.bench.qrels),
                rankings,
            )
        )
        rankings = bm25_rankings(corpus)
        rows.append(
            Row("BM25 (bm25s)", {"unit": "whole document"}, metrics.evaluate(rankings, corpus.bench.qrels), rankings)
        )
    return rows


def table(corpus: Corpus, rows: list[Row]) -> str:
    """A Markdown table of the rows' scores."""
    head = f"**{corpus.name}**: {len(corpus.docs)} documents, {len(corpus.bench.qrels)} questions\n\n"
    lines = [
        "| system | query prompt | dims | " + " | ".join(METRIC_NAMES) + " |",
        "|---|---|---|" + "---|" * len(METRIC_NAMES),
    ]
    for row in rows:
        prompt = row.settings.get("query_prompt", "-")
        dims = row.settings.get("truncate_dim") or ("full" if row.system.startswith("c2v") else "-")
        lines.append(
            f"| {row.system} | {prompt} | {dims} | " + " | ".join(f"{row.scores[m]:.4f}" for m in METRIC_NAMES) + " |"
        )
    return head + "\n".join(lines)


def cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from c2v_rag.documents.chunking import ChunkContext

    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model",
        action="append",
        help="'default' (the default preset), a preset name or a variant directory; repeatable (default: default)",
    )
    parser.add_argument(
        "--task",
        action="append",
        help="query task for the c2v rows ('default': the variant's default task); repeatable, each a row",
    )
    parser.add_argument("--instruction", action="append", help="a literal query instruction; repeatable, each a row")
    parser.add_argument(
        "--truncate-dim",
        action="append",
        type=parse_dim,
        help="'full' or a Matryoshka size the variant was trained for (384, 960); repeatable",
    )
    parser.add_argument(
        "--truncate-ingest",
        action="store_true",
        help="ingest a collection at each --truncate-dim size (the user's path, slower) instead of "
        "scoring prefixes of the full collection's vectors",
    )
    parser.add_argument(
        "--bench", action="append", choices=build.BENCHMARKS, help="benchmark(s) to score (default: all)"
    )
    parser.add_argument("--docs", type=Path, default=None, help="the folder build.py wrote (default: its default)")
    parser.add_argument("--cache", type=Path, default=None, help="ingested collections and baseline vectors")
    parser.add_argument("--no-baselines", action="store_true", help="skip the all-minilm-l6-v2 and BM25 rows")
    parser.add_argument(
        "--quantize",
        default="none",
        choices=["none", "int8", "auto"],
        help="from_pretrained's quantize: 'int8' scores the int8 vectors, in collections of their own",
    )
    parser.add_argument(
        "--decoder-max-length",
        type=int,
        default=None,
        help="ingest's decoder_max_length: the decoder reads this many tokens of each chunk, 0 whole chunks "
        "(default: ingest's for a new collection)",
    )
    parser.add_argument("--chunk-size", type=int, default=CHUNK_SIZE, help="ingest's chunk_size (default: ingest's)")
    parser.add_argument(
        "--chunk-overlap", type=int, default=CHUNK_OVERLAP, help="ingest's chunk_overlap (default: ingest's)"
    )
    parser.add_argument(
        "--chunk-context",
        default=CHUNK_CONTEXT,
        choices=get_args(ChunkContext),
        help="ingest's chunk_context: chunks after a document's first led by its title, and with headings by the "
        "headings above them (default: ingest's)",
    )
    parser.add_argument(
        "--mode",
        default="dense",
        choices=["dense", "sparse", "hybrid"],
        help="search's mode; sparse and hybrid ingest with sparse='bm25', into collections of their own",
    )
    parser.add_argument(
        "--rerank",
        type=int,
        default=None,
        metavar="N",
        help="rerank each question's top N chunks as search(rerank=N) does (default: the first stage alone)",
    )
    parser.add_argument("--json", type=Path, help="write every score, setting and ranking here")
    args = parser.parse_args(argv)
    args.model = args.model or ["default"]
    args.docs = (args.docs or build.default_out()).expanduser()
    if args.cache is None:
        from platformdirs import user_cache_dir

        args.cache = Path(user_cache_dir("c2v_rag")) / "ood-cache"
    args.cache = args.cache.expanduser()
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    corpora = [load_corpus(name, args.docs) for name in args.bench or build.BENCHMARKS]
    models = {reference: load_model(reference, args.quantize) for reference in args.model}
    report: dict[str, Any] = {
        "command": recorded_command("bench/ood/score.py", argv or sys.argv[1:]),
        "cpu_flags": cpu_flags(),
        "benchmarks": {},
    }
    import torch

    import c2v_rag

    report["versions"] = {
        "c2v_rag": c2v_rag.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    for corpus in corpora:
        rows = score_benchmark(corpus, args, models)
        print(table(corpus, rows), "\n", flush=True)
        report["benchmarks"][corpus.name] = {
            "documents": len(corpus.docs),
            "questions": len(corpus.bench.qrels),
            "corpus_digest": corpus.digest,
            "rows": [
                {"system": r.system, **r.settings, "scores": r.scores, "seconds": r.seconds, "rankings": r.rankings}
                for r in rows
            ],
        }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
