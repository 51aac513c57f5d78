"""The encoder-only prefix against a MiniLM pipeline, side by side: where no decoder runs, is it MiniLM's pace?

    taskset -c 0 env OMP_NUM_THREADS=1 python bench/encoder_only.py --data ../shared/data --texts 1000
    ... --budgets 1024 4096      # the prefix at other encoder budgets too, side by side

Embeds the same SciFact abstracts (title + text) three ways in one process, each run ``--repeats`` times in
rotating order, the best time kept:

- ``minilm``: sentence-transformers' all-MiniLM-L6-v2 from the packaged copy, its defaults (fp32, batch 32,
  sorted by length, padded to each batch's longest), as a MiniLM ingest embeds;
- ``c2v-384``: the default preset's ``encode_documents(..., truncate_dim=384)``: its encoder part, which runs no
  decoder (the same values as the first 384 of the whole vector);
- ``c2v-full``: the whole 1,536-value vector, for scale (``--full-texts`` of the texts only: it is slow).

Prints seconds, texts/s and each row's time per text as a multiple of MiniLM's, and the CPU flags. The 384 prefix
is checked against the whole vector's first 384 values on the ``--full-texts`` texts, so a speed-up that changed
the vectors shows.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def cpu_flags() -> list[str]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    line = next((line for line in text.splitlines() if line.startswith("flags")), "flags:")
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")
    return [flag for flag in wanted if flag in line.split(":", 1)[1].split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--full-texts", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--budgets",
        type=int,
        nargs="*",
        default=[],
        help="also time the 384 prefix at these padded encoder tokens a batch (max_tokens_per_batch)",
    )
    parser.add_argument("--out", type=Path, default=None, help="write the table as JSON here too")
    args = parser.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    from c2v_rag import Causal2Vec
    from c2v_rag.encode.loop import default_encoder_max_tokens
    from c2v_rag.hub.sources import resolve_reference

    corpus = [json.loads(line) for line in (args.data / "scifact" / "corpus.jsonl").open(encoding="utf-8")]
    texts = [f"{d['title']}\n\n{d['text']}" for d in corpus[: args.texts]]
    minilm = SentenceTransformer(str(resolve_reference("all-minilm-l6-v2").location), device="cpu")
    model = Causal2Vec.from_pretrained(device="cpu")
    runs = {
        "minilm": lambda: minilm.encode(texts, batch_size=32, normalize_embeddings=True),
        "c2v-384": lambda: model.encode_documents(texts, truncate_dim=384, normalize_embeddings=True),
    }
    for budget in args.budgets:
        runs[f"c2v-384 at {budget} tokens"] = lambda budget=budget: model.encode_documents(
            texts, truncate_dim=384, normalize_embeddings=True, max_tokens_per_batch=budget
        )
    minilm.encode(texts[:32])  # warm: the first calls allocate and pick kernels
    model.encode_documents(texts[:32], truncate_dim=384)
    best: dict[str, float] = {}
    for r in range(args.repeats):
        for name in list(runs)[r % len(runs) :] + list(runs)[: r % len(runs)]:
            start = time.perf_counter()
            runs[name]()
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
    few = texts[: args.full_texts]
    start = time.perf_counter()
    full = model.encode_documents(few, normalize_embeddings=False)
    full_s = (time.perf_counter() - start) * len(texts) / len(few)
    prefix = model.encode_documents(few, truncate_dim=384, normalize_embeddings=False)
    gap = float(np.abs(prefix - full[:, :384]).max())
    rows = {**best, f"c2v-full (timed on {len(few)}, scaled)": full_s}
    print(f"CPU flags: {' '.join(cpu_flags())}; torch threads {torch.get_num_threads()}; {len(texts)} texts")
    print(f"c2v-384 runs at default_encoder_max_tokens: {default_encoder_max_tokens(model.device)} tokens")
    print(f"{'pipeline':40s} {'seconds':>9s} {'texts/s':>9s} {'x MiniLM':>9s}")
    for name, seconds in rows.items():
        print(f"{name:40s} {seconds:9.2f} {len(texts) / seconds:9.1f} {seconds / rows['minilm']:9.2f}")
    print(f"384 prefix vs the whole vector's first 384 values: max |diff| {gap:.2e}")
    if args.out is not None:
        args.out.write_text(
            json.dumps({"flags": cpu_flags(), "texts": len(texts), "seconds": rows, "prefix_max_diff": gap}, indent=2)
        )


if __name__ == "__main__":
    main()
