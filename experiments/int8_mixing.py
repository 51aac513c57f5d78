"""Retrieval with queries and documents embedded by different kinds of the same model (issue 26).

A collection records how its documents were embedded (``quantize``), and whether a query embedded another
way may search it is decided by measurement, not by the per-text cosine alone. This scores SciFact's dev
claims against the dev-1k corpus for every pairing of query kind and document kind: the float default
(``dtype="auto"`` here), ``quantize="int8"`` as shipped, and optionally an int8 decoder graph built by
another recipe (``--graph NAME=PATH``, the decoder run from that ONNX file, e.g. a cached graph of an
earlier recipe). The diagonal is each kind alone; an off-diagonal cell is queries of one kind searching a
collection of another; a last column is a collection holding both kinds (each document drawn at random).

    python experiments/int8_mixing.py --data ../shared/data --graph v3=/path/to/decoder-int8-token-sq.onnx \\
        --json runs/eval/int8_mixing.json

Each kind encodes the queries and the corpus once; every cell reuses those vectors. Also printed: the
per-text cosine between kinds (worst and mean over queries and documents), as a reference for the cells.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from c2v_rag import Causal2Vec
from c2v_rag.core.devices import cpu_class, dtype_name
from c2v_rag.evaluation import load_suite
from c2v_rag.evaluation.evaluators import search
from c2v_rag.evaluation.metrics import evaluate_run


def kinds(graphs: dict[str, Path]) -> dict[str, Causal2Vec]:
    """The float default, shipped int8, and one int8 model per ``--graph`` with its decoder run from that file."""
    from c2v_rag.cpu.onnx_decoder import OnnxDecoder

    models = {"float": Causal2Vec.from_pretrained(None, device="cpu")}
    models["int8"] = Causal2Vec.from_pretrained(None, device="cpu", dtype="float32", quantize="int8")
    for name, path in graphs.items():
        other = Causal2Vec.from_pretrained(None, device="cpu", dtype="float32", quantize="int8")
        # the same word embeddings and config; only the transformer layers come from the file
        other.decoder = OnnxDecoder(other.decoder, path, "file")
        models[name] = other
    return models


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--set", default="scifact-dev-1k", choices=["scifact-dev-1k", "scifact-dev"])
    parser.add_argument("--max-length", type=int, default=256, help="decoder tokens, as in c2v-rag eval")
    parser.add_argument(
        "--graph",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="another int8 decoder graph to pair (repeatable)",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    graphs = dict(item.split("=", 1) for item in args.graph)
    data = load_suite([args.set], args.data)[args.set]
    doc_ids, query_ids = data.doc_ids, data.judged_query_ids
    doc_texts = [data.corpus[d] for d in doc_ids]
    query_texts = [data.queries[q] for q in query_ids]
    qrels = {q: data.qrels[q] for q in query_ids}

    vectors: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    seconds: dict[str, float] = {}
    for name, model in kinds({k: Path(v) for k, v in graphs.items()}).items():
        model.max_seq_length = args.max_length
        start = time.perf_counter()
        queries = model.encode_queries(query_texts, task=data.task)
        docs = model.encode_documents(doc_texts, task=data.task)
        seconds[name] = time.perf_counter() - start
        vectors[name] = (np.asarray(queries, np.float32), np.asarray(docs, np.float32))
        print(
            f"{name}: {len(query_texts)} queries + {len(doc_texts)} documents in {seconds[name]:.0f} s "
            f"({dtype_name(model.dtype)}, quantize={model.quantization})",
            flush=True,
        )

    names = list(vectors)
    cells: dict[str, dict[str, dict[str, float]]] = {}
    for q_kind in names:
        cells[q_kind] = {}
        for d_kind in names:
            run = dict(zip(query_ids, search(vectors[q_kind][0], vectors[d_kind][1], doc_ids, 100)))
            cells[q_kind][d_kind] = evaluate_run(run, qrels)
    # a corpus that holds both kinds: each document's vector drawn from the float default or int8 (seeded)
    mixed_corpus = {}
    if "int8" in vectors and "float" in vectors:
        pick = np.random.default_rng(0).random(len(doc_ids)) < 0.5
        docs = np.where(pick[:, None], vectors["int8"][1], vectors["float"][1])
        for q_kind in names:
            run = dict(zip(query_ids, search(vectors[q_kind][0], docs, doc_ids, 100)))
            mixed_corpus[q_kind] = evaluate_run(run, qrels)
    cosines = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            per_text = np.concatenate([(unit(vectors[a][s]) * unit(vectors[b][s])).sum(1) for s in (0, 1)])
            cosines[f"{a} vs {b}"] = {"worst": float(per_text.min()), "mean": float(per_text.mean())}

    print(f"\nnDCG@10 on {args.set} (rows: queries embedded by; columns: documents embedded by)")
    print("| queries \\ documents | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for q_kind in names:
        print(f"| {q_kind} | " + " | ".join(f"{cells[q_kind][d]['ndcg@10']:.4f}" for d in names) + " |")
    if mixed_corpus:
        print("\nnDCG@10 against one corpus of both kinds (each document float or int8 at random, half each)")
        for q_kind, scores in mixed_corpus.items():
            print(f"| {q_kind} | {scores['ndcg@10']:.4f} |")
    print("\nrecall@100")
    for q_kind in names:
        print(f"| {q_kind} | " + " | ".join(f"{cells[q_kind][d]['recall@100']:.4f}" for d in names) + " |")
    print("\nper-text cosine between kinds (queries and documents):")
    for pair, c in cosines.items():
        print(f"  {pair}: worst {c['worst']:.5f}, mean {c['mean']:.5f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "cpu": platform.processor() or platform.machine(),
                    "cpu_class": cpu_class(),
                    "set": args.set,
                    "max_length": args.max_length,
                    "graphs": graphs,
                    "cells": cells,
                    "mixed_corpus": mixed_corpus,
                    "cosines": cosines,
                    "seconds": seconds,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
