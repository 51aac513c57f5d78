"""nDCG@10 on SciFact dev for dense, sparse (BM25) and hybrid (RRF and DBSF) search through Qdrant.

    python bench/hybrid_retrieval.py --data ../shared/data                      # 5,183 abstracts
    python bench/hybrid_retrieval.py --data ../shared/data --corpus-size 1000   # scifact-dev-1k

    python bench/hybrid_retrieval.py --data ../shared/data --corpus-size 1000 --model default \
        --max-length 256 --cache runs/hybrid_cache                                 # the preset as dense side

The dense side is ``--model``: all-MiniLM-L6-v2 alone by default (cheap on a CPU), or a Causal2Vec
variant or preset (``default``), loaded as ``bench/long_texts.py`` loads them. Each abstract is one
point (as in ``c2v-rag eval``: no chunking), laid out as ``ingest(..., sparse="bm25")`` lays a
hybrid collection out (:class:`c2v_rag.store.vectors.CollectionVectors`), in embedded Qdrant, and
every query goes through the request that ``c2v_rag.search(mode=...)`` sends
(:func:`c2v_rag.store.query.query_request`). The dense row is therefore comparable with
``c2v-rag eval --baseline all-minilm-l6-v2`` (or ``c2v-rag eval VARIANT --max-length N``) on the same set.

BM25 runs twice: with the default ``avg_length`` (90 terms, sized for 200-token chunks) and with
the corpus' own mean length, since whole abstracts are longer than chunks.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from common import cached, load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="folder holding scifact/ (BEIR layout)")
    parser.add_argument("--corpus-size", type=int, default=None, help="shrink the corpus (judged docs kept)")
    parser.add_argument(
        "--model",
        default="all-minilm-l6-v2",
        help="the dense side: a bi-encoder, or a Causal2Vec variant or preset ('default')",
    )
    parser.add_argument("--max-length", type=int, default=None, help="bound a Causal2Vec model's decoder sequence")
    parser.add_argument("--cache", type=Path, default=None, help="keep computed vectors here, to resume a stopped run")
    args = parser.parse_args()

    from qdrant_client import QdrantClient
    from qdrant_client.http import models

    from c2v_rag.evaluation.datasets import scifact_dev
    from c2v_rag.evaluation.metrics import evaluate_run
    from c2v_rag.store.query import query_request
    from c2v_rag.store.sparse import BM25Config, BM25Encoder
    from c2v_rag.store.vectors import CollectionVectors

    data = scifact_dev(args.data, corpus_size=args.corpus_size)
    doc_ids, query_ids = data.doc_ids, data.judged_query_ids
    texts = [data.corpus[d] for d in doc_ids]
    queries = [data.queries[q] for q in query_ids]
    print(f"{data.name}: {len(doc_ids)} abstracts, {len(query_ids)} dev claims")

    started = time.perf_counter()
    model = load(args.model)
    if args.max_length is not None:
        model.max_seq_length = args.max_length
    tag = f"{args.model}-{args.max_length}"
    dense_docs = _normalized(
        cached(lambda t: model.encode_documents(t, task=data.task), texts, args.cache, f"{tag}-docs")
    )
    dense_queries = _normalized(
        cached(lambda t: model.encode_queries(t, task=data.task), queries, args.cache, f"{tag}-queries")
    )
    print(f"embedded with {args.model} in {time.perf_counter() - started:.0f} s")

    mean_terms = float(np.mean([len(t) for t in BM25Encoder().terms(texts)]))
    configs = {"default": BM25Config(), "corpus mean": BM25Config(avg_length=mean_terms)}
    print(f"mean terms per abstract after stopwords: {mean_terms:.1f}")

    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        client = QdrantClient(path=tmp)
        for label, bm25 in configs.items():
            layout = CollectionVectors(dense="text-dense", sparse="text-sparse-new", bm25=bm25)
            sparse = BM25Encoder(bm25)
            name = f"scifact_{label.replace(' ', '_')}"
            client.create_collection(
                name,
                vectors_config={
                    "text-dense": models.VectorParams(size=dense_docs.shape[1], distance=models.Distance.COSINE)
                },
                sparse_vectors_config=layout.sparse_vectors_config(),
            )
            doc_sparse = sparse.encode_documents(texts)
            for start in range(0, len(doc_ids), 512):
                client.upsert(
                    name,
                    [
                        models.PointStruct(
                            id=i,
                            vector=layout.point_vector(dense_docs[i], doc_sparse[i]),
                            payload={"doc_id": doc_ids[i]},
                        )
                        for i in range(start, min(start + 512, len(doc_ids)))
                    ],
                )
            query_sparse = sparse.encode_queries(queries)
            modes = (("dense", "rrf"), ("sparse", "rrf"), ("hybrid", "rrf"), ("hybrid", "dbsf"))
            for mode, fusion in modes if label == "default" else modes[1:]:
                requests = [
                    query_request(layout, mode, 100, dense=dense_queries[i], sparse=query_sparse[i], fusion=fusion)
                    for i in range(len(queries))
                ]
                responses = client.query_batch_points(name, requests)
                run = {q: [p.payload["doc_id"] for p in r.points] for q, r in zip(query_ids, responses)}
                key = mode if mode == "dense" else f"{mode} (BM25 avg_length {label}: {bm25.avg_length:.0f})"
                key += f", {fusion.upper()}" if mode == "hybrid" else ""
                rows[key] = evaluate_run(run, {q: data.qrels[q] for q in query_ids})
        client.close()

    print(f"\n| {data.name}, dense = {args.model} | nDCG@10 | recall@100 | MRR@10 |")
    print("|---|---:|---:|---:|")
    for key, scores in rows.items():
        print(f"| {key} | {scores['ndcg@10']:.4f} | {scores['recall@100']:.4f} | {scores['mrr@10']:.4f} |")


def _normalized(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)


if __name__ == "__main__":
    main()
