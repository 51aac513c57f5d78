"""nDCG@10 on SciFact dev for each way of storing the vectors, with the bytes per vector.

    python bench/vector_storage.py --data ../shared/data                     # 250-abstract corpus
    python bench/vector_storage.py --data ../shared/data --corpus-size 1000 --model PATH

The documents and the dev claims are embedded once (cached in ``--cache`` by corpus size and
model), then searched five ways:

- ``qdrant float32`` and ``qdrant float16``: embedded Qdrant collections made through
  :class:`c2v_rag.rag.QdrantConfig` (``datatype=``); embedded Qdrant accepts ``float16`` but
  stores float32 (it applies neither ``datatype`` nor ``quantization``), so the float16 row is
  also computed by rounding the vectors to float16, which is what a server stores;
- ``int8 scalar``: Qdrant's scalar quantization (one global range from the 0.99 quantile,
  256 levels), searched on the quantized codes alone (no rescoring);
- ``binary``: Qdrant's binary quantization (one sign bit per dimension), searched on the
  bits alone (no rescoring);
- ``binary + rescore x4``: binary candidates (4 x 10), reordered with the float32 vectors, as a
  server does with ``rescore=True, oversampling=4`` when the originals are kept.

The default preset's projector is untrained, so absolute nDCG is low: what matters is the loss
against float32. A trained preset reruns with ``--model``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from pathlib import Path

import numpy as np

from c2v_rag.evaluation import scifact_dev
from c2v_rag.evaluation.metrics import evaluate_run


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _fingerprint(model: str | None) -> str:
    """Names the variant's contents, so a retrained preset or variant never reuses stale vectors."""
    from c2v_rag.hub.presets import resolve_variant_path

    root = resolve_variant_path(model)
    files = sorted(f for f in root.rglob("*") if f.is_file())
    stamp = "|".join(f"{f.relative_to(root)}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files)
    return f"{root.name}-{hashlib.sha1(stamp.encode()).hexdigest()[:12]}"


def embed(args) -> tuple[np.ndarray, np.ndarray, list[str], list[str], dict]:
    data = scifact_dev(args.data, corpus_size=args.corpus_size)
    doc_ids, query_ids = data.doc_ids, data.judged_query_ids
    cache = args.cache / f"scifact-vectors-{_fingerprint(args.model)}-{args.corpus_size}.npz"
    if cache.is_file():
        saved = np.load(cache)
        return saved["docs"], saved["queries"], doc_ids, query_ids, data.qrels
    from c2v_rag import Causal2Vec

    model = Causal2Vec.from_pretrained(args.model, device="cpu")
    docs = model.encode_documents([data.corpus[d] for d in doc_ids], task=data.task, show_progress_bar=True)
    queries = model.encode_queries([data.queries[q] for q in query_ids], task=data.task)
    args.cache.mkdir(parents=True, exist_ok=True)
    np.savez(cache, docs=docs, queries=queries)
    return docs, queries, doc_ids, query_ids, data.qrels


def qdrant_search(docs: np.ndarray, queries: np.ndarray, datatype: str, k: int) -> list[list[int]]:
    """Top-k document indices from an embedded Qdrant collection built by the library's config."""
    from qdrant_client.http import models

    from c2v_rag.store.collection import QdrantConfig

    with tempfile.TemporaryDirectory() as tmp:
        config = QdrantConfig(path=Path(tmp), datatype=datatype)
        client = config.connect()
        client.create_collection("bench", **config.create_collection_kwargs(docs.shape[1]))
        client.upsert("bench", [models.PointStruct(id=i, vector=v.tolist()) for i, v in enumerate(docs)], wait=True)
        ranked = [[p.id for p in client.query_points("bench", query=q.tolist(), limit=k).points] for q in queries]
        client.close()
    return ranked


def top_k(scores: np.ndarray, k: int) -> list[list[int]]:
    return np.argsort(-scores, axis=1, kind="stable")[:, :k].tolist()


def int8_scalar(docs: np.ndarray, queries: np.ndarray, k: int, quantile: float = 0.99) -> list[list[int]]:
    """Qdrant-style scalar quantization: one range for all dimensions, from the quantile."""
    d = unit(docs)  # cosine collections normalise on insert
    low, high = np.quantile(d, 1 - quantile), np.quantile(d, quantile)
    codes = np.clip(np.round((d - low) / (high - low) * 255), 0, 255)
    decoded = codes * (high - low) / 255 + low
    return top_k(unit(queries) @ decoded.T, k)


def binary(docs: np.ndarray, queries: np.ndarray, k: int) -> list[list[int]]:
    """Sign bits on both sides; the score is the count of agreeing bits (Hamming similarity)."""
    d, q = np.where(docs > 0, 1.0, -1.0), np.where(queries > 0, 1.0, -1.0)
    return top_k(q @ d.T, k)


def binary_rescored(docs: np.ndarray, queries: np.ndarray, k: int, oversampling: int = 4) -> list[list[int]]:
    candidates = binary(docs, queries, k * oversampling)
    exact = unit(queries) @ unit(docs).T
    return [sorted(c, key=lambda j: -exact[i, j])[:k] for i, c in enumerate(candidates)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--corpus-size", type=int, default=250)
    parser.add_argument("--model", default=None, help="variant directory or preset (default preset)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "c2v-bench")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    docs, queries, doc_ids, query_ids, qrels = embed(args)
    dim, k = docs.shape[1], 10
    rows = {
        "qdrant float32": (qdrant_search(docs, queries, "float32", k), 4 * dim),
        "qdrant float16 (embedded)": (qdrant_search(docs, queries, "float16", k), 4 * dim),
        "float16 (server storage)": (
            top_k(unit(queries) @ unit(docs.astype(np.float16).astype(np.float32)).T, k),
            2 * dim,
        ),
        "int8 scalar": (int8_scalar(docs, queries, k), dim),
        "binary": (binary(docs, queries, k), dim // 8),
        "binary + rescore x4": (binary_rescored(docs, queries, k), dim // 8),
    }
    judged = {q: qrels[q] for q in query_ids}
    results = {}
    print(f"SciFact dev: {len(query_ids)} claims, {len(doc_ids)} abstracts, {dim} dims")
    print(f"\n{'storage':27s} {'bytes/vector':>12s} {'nDCG@10':>8s} {'vs float32':>10s}")
    for name, (ranked, size) in rows.items():
        run = {q: [doc_ids[i] for i in r] for q, r in zip(query_ids, ranked)}
        ndcg = evaluate_run(run, judged)["ndcg@10"]
        results[name] = {"bytes_per_vector": size, "ndcg@10": ndcg}
        base = results["qdrant float32"]["ndcg@10"]
        print(f"{name:27s} {size:12d} {ndcg:8.4f} {ndcg - base:+10.4f}")
    print("\nbinary + rescore keeps the float32 vectors as well (on disk or in RAM) for the reorder.")
    if args.json:
        args.json.write_text(
            json.dumps({"queries": len(query_ids), "docs": len(doc_ids), "dim": dim, "results": results}, indent=2)
            + "\n"
        )


if __name__ == "__main__":
    main()
