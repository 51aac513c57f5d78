"""What a shorter vector costs to compute: each trained Matryoshka size against the whole vector, side by side.

    python bench/matryoshka_cost.py --data ../shared/data                     # the default preset, 64 abstracts + 64 claims
    python bench/matryoshka_cost.py --data ../shared/data --model runs/preset/stage5-parts --rounds 3

The preset's layout is ``[MiniLM 384; h_C 576; h_EOS 576]``. A prefix inside MiniLM's part runs no decoder; one
inside ``[MiniLM; h_C]`` runs the decoder over the instruction and the Contextual token only (causal attention:
the text after C cannot change h_C). Each size is timed on the same texts, round-robin in a rotating order, and
ranked by its best round in process CPU seconds (``common.measure``); the vectors are checked against the whole
vector cut to the same size (cosine of each row).
"""  # noqa: E501

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from common import load, measure, mixed_texts, single_thread_note, speed_flags_note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", default="default")
    parser.add_argument("--docs", type=int, default=64)
    parser.add_argument("--queries", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    model = load(args.model)
    sizes = model.config.vector_sizes
    if len(sizes) == 1:
        raise SystemExit(f"{args.model} was trained for no shorter size (matryoshka_dims is empty)")
    texts = mixed_texts(args.data, args.docs, args.queries)
    full = model.encode_documents(texts, normalize_embeddings=True)  # warm-up, and the reference
    best: dict[int, float] = {}
    for round_ in range(args.rounds):
        order = sizes[round_ % len(sizes) :] + sizes[: round_ % len(sizes)]
        for size in order:
            run = measure(lambda: model.encode_documents(texts, truncate_dim=size, normalize_embeddings=True))  # noqa: B023
            best[size] = min(best.get(size, float("inf")), run.cpu_seconds)
            cut = full[:, :size] / np.linalg.norm(full[:, :size], axis=1, keepdims=True)
            worst = float((run.result * cut).sum(axis=1).min())
            print(
                f"round {round_ + 1} size {size}: {run.cpu_seconds:.2f} CPU s, {run.seconds:.2f} wall s, "
                f"worst cosine to the cut whole vector {worst:.6f}",
                flush=True,
            )
    whole = best[max(sizes)]
    print(
        f"\n{args.model}, {len(texts)} texts (SciFact: {args.docs} abstracts, {args.queries} claims), dtype "
        f"{model.dtype}; {single_thread_note()}; CPU flags: {speed_flags_note()}"
    )
    print("| truncate_dim | what runs | best CPU s | speed vs the whole vector |\n|---|---|---|---|")
    for size in sizes:
        runs = {"encoder": "MiniLM only", "contextual": "MiniLM + decoder up to C", "all": "everything"}
        print(
            f"| {size} | {runs[model.needs_for(None if size == max(sizes) else size)]} | {best[size]:.2f} | "
            f"{whole / best[size]:.2f}x |"
        )


if __name__ == "__main__":
    main()
