"""How should adapt's gate decide on a user's own questions? Replays the rule on half of them, judged on the rest.

A user's questions are a sample of what they will ask. Each adapt report given (run with ``--questions``, so that
it holds every question's MRR@10 before and after, ``per_question``) is split at random into two halves many
times: the gate decides on one half (A), the other (B) stands for the questions the user will ask later. For
each rule: how often it keeps the variant, the mean gain the user then gets on B (0 where not kept), and how
often it keeps a variant that is worse on B, or refuses one that is better there.

The rules: ``mean`` keeps on any rise of A's mean (the rule before 2026-12-02); ``interval`` needs the 95% bootstrap
interval of A's gain above 0, ``interval 80%`` the 80% one; ``interval+sign`` is the shipped rule, run through
``decide`` with the default gate settings (since 2026-12-02: the 95% interval and the held-out pseudo-queries'
one-sided sign test).

    python bench/adapt/questions_rule.py OUT1/adapt_report.json OUT2/adapt_report.json ... --json RESULT.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from c2v_rag.evaluation.paired import PairedDifference, paired_bootstrap  # noqa: E402
from c2v_rag.training.adapt.config import AdaptGate  # noqa: E402
from c2v_rag.training.adapt.decision import decide  # noqa: E402
from c2v_rag.training.adapt.gate import GateScores  # noqa: E402

RULES = ("mean", "interval 80%", "interval", "interval+sign")


def verdicts(before: dict[str, float], after: dict[str, float], gate: AdaptGate) -> dict[str, bool]:
    """Each rule's verdict on the questions of ``before``/``after`` (id -> MRR@10)."""
    ids = sorted(before)

    def interval(confidence: float) -> PairedDifference:
        first, second = [before[i] for i in ids], [after[i] for i in ids]
        return paired_bootstrap(first, second, confidence=confidence, resamples=gate.resamples)

    wide, loose = interval(gate.confidence), interval(0.8)
    # The shipped rule, through the shipped code: held-out scores are needed by the type, not read.
    held = {"heldout-0": 0.0}
    first = GateScores(0, 0, 0.8, per_query=held, per_question=before)
    second = GateScores(0, 0, 0.8, per_query=held, per_question=after)
    return {
        "mean": wide.mean > 0,
        "interval 80%": loose.low > 0 and loose.mean > 0,
        "interval": wide.low > 0 and wide.mean > 0,
        "interval+sign": decide(first, second, gate, {}).kept,
    }


def replay(report: dict, splits: int, seed: int, gate: AdaptGate) -> dict:
    rows = report["per_question"]
    if not rows:
        raise SystemExit(f"{report.get('output')}: no per_question scores (run adapt with --questions)")
    before = {r["id"]: r["before"] for r in rows}
    after = {r["id"]: r["after"] for r in rows}
    ids = sorted(before)
    # The whole set as the gate scores it (its resamples), whatever the halvings use.
    whole = paired_bootstrap([before[i] for i in ids], [after[i] for i in ids], resamples=AdaptGate().resamples)
    rng = random.Random(seed)
    tally = {rule: {"kept": 0, "gain": 0.0, "kept_worse": 0, "refused_better": 0} for rule in RULES}
    for _ in range(splits):
        order = ids[:]
        rng.shuffle(order)
        first, second = order[: len(order) // 2], order[len(order) // 2 :]
        later = sum(after[i] - before[i] for i in second) / len(second)
        for rule, kept in verdicts({i: before[i] for i in first}, {i: after[i] for i in first}, gate).items():
            row = tally[rule]
            row["kept"] += kept
            row["gain"] += later if kept else 0.0
            row["kept_worse"] += kept and later < 0
            row["refused_better"] += (not kept) and later > 0
    return {
        "output": Path(report.get("output") or "?").name,
        "questions": len(ids),
        "chunks": report.get("evidence", {}).get("chunks"),
        "whole": whole.as_dict(),
        "rules": {
            rule: {
                "keep_rate": row["kept"] / splits,
                "mean_gain_later": row["gain"] / splits,
                "kept_but_worse_later": row["kept_worse"] / splits,
                "refused_but_better_later": row["refused_better"] / splits,
            }
            for rule, row in tally.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", type=Path, help="adapt_report.json files of runs with --questions")
    parser.add_argument("--splits", type=int, default=500, help="random halvings per report")
    parser.add_argument("--resamples", type=int, default=2_000, help="bootstrap resamples per verdict")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    gate = AdaptGate(resamples=args.resamples)
    results = [replay(json.loads(p.read_text()), args.splits, args.seed, gate) for p in args.reports]
    for result in results:
        whole = result["whole"]
        print(
            f"{result['output']}: {result['questions']} questions among {result['chunks']} chunks; all of them: "
            f"MRR@10 {whole['mean']:+.4f} [{whole['low']:+.4f}, {whole['high']:+.4f}], "
            f"{whole['better']} better, {whole['worse']} worse"
        )
        print(f"  {'rule':<14} {'kept':>6} {'gain later':>11} {'kept, worse later':>18} {'refused, better later':>22}")
        for rule, row in result["rules"].items():
            print(
                f"  {rule:<14} {row['keep_rate']:>6.2f} {row['mean_gain_later']:>+11.4f} "
                f"{row['kept_but_worse_later']:>18.2f} {row['refused_but_better_later']:>22.2f}"
            )
    if args.json:
        settings = {"splits": args.splits, "resamples": args.resamples, "seed": args.seed}
        args.json.write_text(json.dumps({"settings": settings, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
