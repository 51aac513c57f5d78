"""Compare models question by question on the out-of-domain benchmarks, from the rankings ``score.py --json`` wrote.

For each candidate against the reference, on each benchmark both scored: the mean difference of nDCG@10 over the
questions with its standard error, how many questions each model ranks better, and how alike the two rankings are
(the share of their top-10 documents in common, and of questions with the same first document). With 60-76
questions a benchmark, a difference of nDCG@10 inside one or two standard errors is noise; the agreement says how
far a candidate meant to equal the reference (a cut or distilled decoder, int8) is from doing so.

    python bench/ood/paired.py bench/results/decoder_depth/ood_preset_int8_avx512bf16.json \\
        bench/results/decoder_depth/ood_untrained20_int8_avx512bf16.json \\
        bench/results/decoder_depth/ood_distilled20_int8_avx512bf16.json

Each file's first Causal2Vec row is read (``--system`` picks another by the start of its name).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: its siblings import by name

import metrics
import questions

Rankings = dict[str, dict[str, list[str]]]  # benchmark -> question id -> document ids, best first


@dataclass(frozen=True)
class Paired:
    """One candidate against the reference on one benchmark."""

    benchmark: str
    questions: int
    ndcg_difference: float
    standard_error: float
    better: int
    worse: int
    top10_overlap: float
    same_first: float


def rankings(path: Path, system: str = "c2v") -> tuple[str, Rankings]:
    """The name and rankings of the first row of ``path`` whose system name starts with ``system``."""
    report = json.loads(path.read_text(encoding="utf-8"))
    name, found = "", {}
    for bench, scored in report["benchmarks"].items():
        row = next((r for r in scored["rows"] if r["system"].startswith(system)), None)
        if row is not None:
            name, found[bench] = row["system"], row["rankings"]
    if not found:
        raise SystemExit(f"{path}: no row whose system starts with {system!r}")
    return name, found


def compare(reference: dict[str, list[str]], candidate: dict[str, list[str]], bench: str) -> Paired:
    """``candidate`` against ``reference`` on the questions of ``bench`` both ranked."""
    qrels = questions.load(bench).qrels
    ids = sorted(set(reference) & set(candidate))
    diffs = [
        metrics.query_metrics(candidate[q], qrels[q])["ndcg@10"]
        - metrics.query_metrics(reference[q], qrels[q])["ndcg@10"]
        for q in ids
    ]
    n = len(diffs)
    mean = sum(diffs) / n
    error = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1) / n) if n > 1 else float("nan")
    overlap = sum(len(set(reference[q][:10]) & set(candidate[q][:10])) / 10 for q in ids) / n
    first = sum(bool(reference[q]) and bool(candidate[q]) and reference[q][0] == candidate[q][0] for q in ids) / n
    return Paired(bench, n, mean, error, sum(d > 0 for d in diffs), sum(d < 0 for d in diffs), overlap, first)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reference", type=Path, help="score.py --json output of the model compared against")
    parser.add_argument("candidates", type=Path, nargs="+", help="score.py --json outputs of the other models")
    parser.add_argument("--system", default="c2v", help="the row read from each file: its system name's start")
    args = parser.parse_args(argv)
    ref_name, reference = rankings(args.reference, args.system)
    print(f"reference: {ref_name} ({args.reference.name})\n")
    print("| candidate | benchmark | questions | nDCG@10 diff. (s.e.) | better / worse | top-10 shared | same first |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for path in args.candidates:
        name, candidate = rankings(path, args.system)
        for bench in [b for b in reference if b in candidate]:
            p = compare(reference[bench], candidate[bench], bench)
            print(
                f"| {name} | {bench} | {p.questions} | {p.ndcg_difference:+.4f} ({p.standard_error:.4f}) | "
                f"{p.better} / {p.worse} | {p.top10_overlap:.3f} | {p.same_first:.3f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
