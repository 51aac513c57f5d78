"""Encode throughput of Causal2Vec vs the plain decoder forward, on the same texts and batches.

    python bench/encode_throughput.py --data ../shared/data --n 1000 --dtypes float32 bfloat16

For each dtype, the first N SciFact documents (title + text, as BEIR does) are tokenized once,
grouped into length-sorted token-budget batches from Causal2Vec's sequence lengths, and the same
groups are run through (a) the plain decoder with last-token pooling and (b) Causal2Vec
(encoder + projector + decoder with the Contextual token). The two alternate batch by batch, so
background load falls on both alike. Real tokens/s counts the document's own decoder tokens
(template included, padding and the Contextual token excluded), the same numerator for both.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from common import load_scifact_docs

from c2v_rag import Causal2Vec
from c2v_rag.encode.batching import plan_batches


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_dtype(texts: list[str], dtype: str, max_tokens: int, decoder: str, encoder: str) -> dict:
    c2v = Causal2Vec.from_components(decoder, encoder, device="cpu", dtype=dtype)
    plain = Causal2Vec.from_components(
        decoder, None, num_contextual_tokens=0, representation="last_token", device="cpu", dtype=dtype
    )
    c_pieces, enc_ids = c2v.prepare(texts, None)
    p_pieces, _ = plain.prepare(texts, None)
    groups = plan_batches([p.length(1) for p in c_pieces], max_tokens=max_tokens, max_batch_size=256)
    totals = {"plain": 0.0, "causal2vec": 0.0, "encoder+projector": 0.0}
    real_tokens = sum(len(p.head) + len(p.tail) for p in p_pieces)
    encoder_tokens = sum(len(e) for e in enc_ids)
    with torch.inference_mode():
        # warm-up: first calls pay for allocator and kernel selection
        warm = groups[-1]
        c2v(c2v.collate([c_pieces[i] for i in warm], [enc_ids[i] for i in warm]))
        plain(plain.collate([p_pieces[i] for i in warm], None))
        for k, group in enumerate(groups):
            cb = c2v.collate([c_pieces[i] for i in group], [enc_ids[i] for i in group])
            pb = plain.collate([p_pieces[i] for i in group], None)
            runs = [
                ("plain", lambda: plain(pb)),  # noqa: B023
                ("causal2vec", lambda: c2v(cb)),  # noqa: B023
                ("encoder+projector", lambda: c2v.contextual_tokens(cb.encoder_input_ids, cb.encoder_attention_mask)),  # noqa: B023
            ]
            for name, fn in runs if k % 2 == 0 else runs[::-1]:
                totals[name] += timed(fn)
    return {
        "dtype": dtype,
        "batches": len(groups),
        "real_tokens": real_tokens,
        "encoder_tokens": encoder_tokens,
        **totals,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the shared data folder (holds scifact/)")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--max-tokens", type=int, default=8192, help="padded tokens per batch")
    parser.add_argument("--decoder", default="smollm2-135m-instruct")
    parser.add_argument("--encoder", default="all-minilm-l6-v2")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    texts = load_scifact_docs(args.data, args.n)
    print(
        f"{len(texts)} SciFact documents, torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"budget {args.max_tokens} padded tokens/batch"
    )
    header = (
        f"\n{'dtype':9} {'real tok':>9} {'plain s':>8} {'plain tok/s':>11} {'c2v s':>8} {'c2v tok/s':>10} "
        f"{'c2v/plain':>9} {'enc+proj s':>10}"
    )
    results = []
    for dtype in args.dtypes:
        # Printed (and saved) as each dtype finishes: a long run that is stopped keeps what it measured.
        r = bench_dtype(texts, dtype, args.max_tokens, args.decoder, args.encoder)
        results.append(r)
        print(header if len(results) == 1 else "", end="")
        print(
            f"\n{r['dtype']:9} {r['real_tokens']:9d} {r['plain']:8.1f} {r['real_tokens'] / r['plain']:11.0f} "
            f"{r['causal2vec']:8.1f} {r['real_tokens'] / r['causal2vec']:10.0f} "
            f"{r['causal2vec'] / r['plain']:9.3f} {r['encoder+projector']:10.1f}",
            flush=True,
        )
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
    print()
    if len(results) > 1:
        base = results[0]
        for r in results[1:]:
            print(
                f"{r['dtype']} vs {base['dtype']}: Causal2Vec {base['causal2vec'] / r['causal2vec']:.2f}x faster, "
                f"plain decoder {base['plain'] / r['plain']:.2f}x faster"
            )


if __name__ == "__main__":
    main()
