"""SciFact dev nDCG@10 with long abstracts truncated, chunked and pooled (max, mean), or scored by MaxP.

    python bench/long_texts.py --data ../shared/data --set scifact-dev-1k --model default \\
        --model all-minilm-l6-v2 --json runs/long_texts.json

``--model`` is a Causal2Vec variant or preset (``default`` for the default preset) or, for a name
that is neither, a bi-encoder alone (:class:`c2v_rag.evaluation.BiEncoder`, e.g.
``all-minilm-l6-v2``). Each model embeds the corpus once as windows (``long_text_windows``: a
document that fits stays whole, a longer one becomes overlapping windows that each fit) and once
more only the documents that were split, truncated. From these two passes come the four rows, each
equal to what its own ``c2v-rag eval --long-texts ...`` run scores (a text gets the same vector
alone or in any batch):

- ``truncate``: whole documents, the model reads their first tokens (``--long-texts truncate``);
- ``chunk, max``/``chunk, mean``: a split document's window unit vectors max- or mean-pooled
  (``encode(..., long_texts="chunk")``, ``--long-texts chunk --chunk-pooling max|mean``);
- ``maxp``: a document scores as its best window (``--long-texts maxp``; ingest + search).

It first counts the documents over each tokenizer's limit, since only those can change.

``--cache DIR`` keeps the vectors in slices of 64 texts as they are computed, keyed by model and
texts: a run stopped midway (a busy machine, a deadline) resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from common import cached, load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="folder holding scifact/ (BEIR layout)")
    parser.add_argument("--set", default="scifact-dev-1k", choices=["scifact-dev-1k", "scifact-dev"])
    parser.add_argument(
        "--model",
        action="append",
        required=True,
        help="a variant, a preset, 'default', or a bi-encoder such as all-minilm-l6-v2 (repeatable)",
    )
    parser.add_argument("--overlap", type=int, default=None, help="tokens shared by neighbouring windows")
    parser.add_argument("--json", type=Path, default=None, help="also write the scores here")
    parser.add_argument("--cache", type=Path, default=None, help="keep computed vectors here, to resume a stopped run")
    args = parser.parse_args()

    from c2v_rag.evaluation.suites import load_suite

    data = load_suite([args.set], args.data)[args.set]
    doc_ids, query_ids = data.doc_ids, data.judged_query_ids
    docs = [data.corpus[d] for d in doc_ids]
    queries = [data.queries[q] for q in query_ids]
    qrels = {q: data.qrels[q] for q in query_ids}
    print(f"{data.name}: {len(docs)} abstracts, {len(query_ids)} dev claims")
    results = {}
    for name in args.model:
        results[name] = score_model(name, data, docs, doc_ids, queries, query_ids, qrels, args.overlap, args.cache)
    print("\n| model | long texts | nDCG@10 | recall@100 | MRR@10 |\n|---|---|---:|---:|---:|")
    for name, rows in results.items():
        for row, scores in rows["scores"].items():
            print(f"| {name} | {row} | {scores['ndcg@10']:.4f} | {scores['recall@100']:.4f} | {scores['mrr@10']:.4f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


def score_model(name, data, docs, doc_ids, queries, query_ids, qrels, overlap, cache=None) -> dict:
    from c2v_rag.encode.long_texts import LongTexts, pool_windows
    from c2v_rag.evaluation.evaluators import search, search_maxp
    from c2v_rag.evaluation.metrics import evaluate_run

    model = load(name)
    policy = LongTexts(mode="chunk", **({} if overlap is None else {"overlap": overlap}))
    started = time.perf_counter()
    windows = model.long_text_windows(docs, long_texts=policy)
    counts = np.bincount(windows.owners, minlength=len(docs))
    split = np.flatnonzero(counts > 1)
    assert len(split) == windows.split_inputs
    judged = {d for rels in qrels.values() for d in rels}
    split_judged = sum(doc_ids[i] in judged for i in split)
    print(
        f"{name}: {len(split)} of {len(docs)} abstracts exceed the model's limit ({split_judged} of them judged "
        f"relevant to a dev claim); {len(windows.texts)} windows, {counts[split].mean():.2f} per split abstract"
    )

    tag = f"{Path(name).name}-{data.name}"
    query_vectors = cached(lambda t: model.encode_queries(t, task=data.task), queries, cache, f"{tag}-queries")
    window_vectors = cached(lambda t: model.encode_documents(t, task=data.task), windows.texts, cache, f"{tag}-windows")
    # Truncation differs from the windows only for the split documents: a whole one is its own window.
    truncated = pool_windows(window_vectors, windows, "max")
    if len(split):
        truncated[split] = cached(
            lambda t: model.encode_documents(t, task=data.task), [docs[i] for i in split], cache, f"{tag}-truncated"
        )
    seconds = time.perf_counter() - started

    def run_of(ranked):
        return evaluate_run(dict(zip(query_ids, ranked)), qrels, recall_k=100)

    scores = {
        "truncate": run_of(search(query_vectors, truncated, doc_ids, 100)),
        "chunk, max": run_of(search(query_vectors, pool_windows(window_vectors, windows, "max"), doc_ids, 100)),
        "chunk, mean": run_of(search(query_vectors, pool_windows(window_vectors, windows, "mean"), doc_ids, 100)),
        "maxp": run_of(search_maxp(query_vectors, window_vectors, windows.owners, doc_ids, 100)),
    }
    for row, s in scores.items():
        print(f"  {row:12s} nDCG@10 {s['ndcg@10']:.4f}  recall@100 {s['recall@100']:.4f}  MRR@10 {s['mrr@10']:.4f}")
    print(f"  embedded in {seconds:.0f} s")
    return {
        "split_documents": int(len(split)),
        "split_judged": int(split_judged),
        "documents": len(docs),
        "windows": len(windows.texts),
        "seconds": seconds,
        "scores": scores,
    }


if __name__ == "__main__":
    main()
