"""What in-context examples cost a query encode: 0, 1 and 3 examples (Causal2Vec w/ ICL), side by side.

    python bench/icl_cost.py --data ../shared/data                       # the default preset, 64 SciFact dev claims
    python bench/icl_cost.py --data ../shared/data --queries 128 --rounds 5

The queries are SciFact dev claims; the examples are those ``c2v-rag eval --examples K`` uses (train claims with
a relevant abstract, each cut to 64 words: :func:`c2v_rag.evaluation.datasets.pick_examples`). Every count is
timed on the same queries, round-robin in a rotating order, and ranked by its best round in process CPU seconds
(``common.measure``). The decoder tokens per query are counted from the prepared inputs (what token-budget
batching plans with); the examples lengthen every query's decoder input, the encoder input not at all.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from common import load, measure, single_thread_note, speed_flags_note


def main() -> None:
    from c2v_rag.core.instructions import resolve_instruction
    from c2v_rag.encode.loop import prepare_texts
    from c2v_rag.evaluation.datasets import pick_examples, scifact_dev

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", default="default")
    parser.add_argument("--queries", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--counts", type=int, nargs="+", default=[0, 1, 3])
    args = parser.parse_args()

    model = load(args.model)
    data = scifact_dev(args.data, corpus_size=1000)
    queries = [data.queries[q] for q in sorted(data.qrels)][: args.queries]
    examples = {k: pick_examples(data, k) for k in args.counts}
    tokens = {}
    for k in args.counts:
        prompt = resolve_instruction(task=data.task, instruction=None, is_query=True, examples=examples[k])
        tokens[k] = float(np.mean(prepare_texts(model, queries, prompt).lengths))
        print(f"examples {k}: {tokens[k]:.1f} decoder tokens per query", flush=True)
    model.encode_queries(queries, task=data.task)  # warm-up
    best: dict[int, float] = {}
    for round_ in range(args.rounds):
        order = args.counts[round_ % len(args.counts) :] + args.counts[: round_ % len(args.counts)]
        for k in order:
            run = measure(lambda: model.encode_queries(queries, task=data.task, examples=examples[k]))  # noqa: B023
            best[k] = min(best.get(k, float("inf")), run.cpu_seconds)
            print(f"round {round_ + 1} examples {k}: {run.cpu_seconds:.2f} CPU s, {run.seconds:.2f} wall s", flush=True)
    base = best[args.counts[0]]
    print(
        f"\n{args.model}, {len(queries)} SciFact dev claims, dtype {model.dtype}; {single_thread_note()}; "
        f"CPU flags: {speed_flags_note()}"
    )
    print("| examples | decoder tokens per query | best CPU s | cost vs 0 examples |\n|---|---|---|---|")
    for k in args.counts:
        print(f"| {k} | {tokens[k]:.1f} | {best[k]:.2f} | {best[k] / base:.2f}x |")


if __name__ == "__main__":
    main()
