"""Would fusing BM25 (or MiniLM) into the preset's ranking help on the out-of-domain benchmarks? A first look.

Reciprocal-rank fusion (k=60, the second list weighted by ``--weight``) of the top-10 document rankings that
``bench/ood/score.py --json`` wrote. Only the top 10 of each list are kept there, so this is a rough bound
on what a hybrid search (which fuses deeper lists, ``max(50, 4k)``) would do, not a measurement of it.

    python experiments/ood_fusion.py --dense bench/results/ood/preset_int8_avx2.json \\
        --baselines bench/results/ood/gpu-broad_avx2.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "bench" / "ood")]
import metrics  # noqa: E402  (bench/ood)
import questions  # noqa: E402

Run = dict[str, list[str]]


def rrf(first: Run, second: Run, weight: float = 1.0, k: int = 60, depth: int = 10) -> Run:
    """Each query's documents by reciprocal-rank fusion of two rankings."""
    fused: Run = {}
    for query in first:
        scores: dict[str, float] = {}
        for w, ranking in ((1.0, first[query]), (weight, second.get(query, []))):
            for rank, doc in enumerate(ranking):
                scores[doc] = scores.get(doc, 0.0) + w / (k + rank + 1)
        fused[query] = sorted(scores, key=lambda d: -scores[d])[:depth]
    return fused


def rankings(path: Path, bench: str, prefix: str) -> Run:
    rows = json.loads(path.read_text(encoding="utf-8"))["benchmarks"][bench]["rows"]
    return next(r["rankings"] for r in rows if r["system"].startswith(prefix))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dense", type=Path, required=True, help="score.py --json with the model's row first")
    parser.add_argument("--baselines", type=Path, required=True, help="score.py --json with the BM25 and MiniLM rows")
    parser.add_argument("--weight", type=float, nargs="+", default=[1.0, 0.5])
    args = parser.parse_args()
    for bench in ("manpages", "jargon"):
        qrels = questions.load(bench).qrels
        dense = rankings(args.dense, bench, "c2v")
        others = {"BM25": rankings(args.baselines, bench, "BM25"), "MiniLM": rankings(args.baselines, bench, "all-")}
        runs = {"preset": dense, **others}
        for name, other in others.items():
            for weight in args.weight:
                runs[f"preset + {name} (RRF, weight {weight})"] = rrf(dense, other, weight)
        for name, run in runs.items():
            scores = metrics.evaluate(run, qrels)
            print(f"{bench:9s} {name:38s} nDCG@10 {scores['ndcg@10']:.4f}  MRR@10 {scores['mrr@10']:.4f}")


if __name__ == "__main__":
    main()
