"""Paired differences pooled over several runs: each ``--pair RUN BASE NAME`` takes the per-question scores of rows
``BASE`` and ``NAME`` of a run's JSON (``long_pages/score.py``'s or ``rst_reading/score.py``'s), and the differences
of every pair are resampled as one list of questions (:func:`score.paired`: 95% bootstrap, 5,000 resamples, seed 0).

    python bench/long_pages/pooled.py \\
        --pair bench/results/section_chunks/long_pages_avx512bf16.json "c2v lead" "c2v headings" \\
        --pair bench/results/section_chunks/rst_reading_avx512bf16.json "c2v rst" "c2v rst headings"
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from score import paired


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pair", nargs=3, action="append", default=[], metavar=("RUN", "BASE", "NAME"))
    parser.add_argument(
        "--across",
        nargs=4,
        action="append",
        default=[],
        metavar=("RUN", "BASE", "OTHER_RUN", "NAME"),
        help="row BASE of RUN against row NAME of OTHER_RUN (the same questions, code of two commits)",
    )
    parser.add_argument("--metric", default="mrr@10")
    args = parser.parse_args(argv)
    pairs = [(run, base, run, name) for run, base, name in args.pair] + [tuple(four) for four in args.across]
    if not pairs:
        parser.error("pass at least one --pair or --across")

    bases: list[float] = []
    names: list[float] = []
    for base_run, base, name_run, name in pairs:
        a = _scores(base_run, base, args.metric)
        b = _scores(name_run, name, args.metric)
        if len(a) != len(b):
            raise SystemExit(f"{base!r} has {len(a)} questions and {name!r} {len(b)}: not the same questions")
        one = paired(a, b)
        where = base_run if base_run == name_run else f"{base_run} / {name_run}"
        print(f"{where}: {name} - {base}: {_shown(one)} over {len(a)} questions")
        bases += a
        names += b
    print(f"pooled, {args.metric}: {_shown(paired(bases, names))} over {len(bases)} questions")
    return 0


def _scores(run: str, row: str, metric: str) -> list[float]:
    rows = json.loads(Path(run).read_text(encoding="utf-8"))["rows"]
    if row not in rows:
        raise SystemExit(f"{run} has no row {row!r}; its rows: {', '.join(rows)}")
    return [q[metric] for q in rows[row]["per_question"]]


def _shown(result: dict) -> str:
    low, high = result["ci95"]
    return f"{result['difference']:+.4f} [{low:+.4f}, {high:+.4f}] ({result['better']} better, {result['worse']} worse)"


if __name__ == "__main__":
    raise SystemExit(main())
