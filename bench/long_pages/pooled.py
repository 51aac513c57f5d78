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
    parser.add_argument("--pair", nargs=3, action="append", required=True, metavar=("RUN", "BASE", "NAME"))
    parser.add_argument("--metric", default="mrr@10")
    args = parser.parse_args(argv)

    bases: list[float] = []
    names: list[float] = []
    for run, base, name in args.pair:
        rows = json.loads(Path(run).read_text(encoding="utf-8"))["rows"]
        missing = [row for row in (base, name) if row not in rows]
        if missing:
            raise SystemExit(f"{run} has no row {missing[0]!r}; its rows: {', '.join(rows)}")
        a = [q[args.metric] for q in rows[base]["per_question"]]
        b = [q[args.metric] for q in rows[name]["per_question"]]
        one = paired(a, b)
        print(f"{run}: {name} - {base}: {_shown(one)} over {len(a)} questions")
        bases += a
        names += b
    print(f"pooled, {args.metric}: {_shown(paired(bases, names))} over {len(bases)} questions")
    return 0


def _shown(result: dict) -> str:
    low, high = result["ci95"]
    return f"{result['difference']:+.4f} [{low:+.4f}, {high:+.4f}] ({result['better']} better, {result['worse']} worse)"


if __name__ == "__main__":
    raise SystemExit(main())
