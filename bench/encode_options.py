"""Each encode optimization against the default, measured side by side on the same texts.

    python bench/encode_options.py --data ../shared/data                  # 32 abstracts + 32 claims
    python bench/encode_options.py --data ../shared/data --only compile   # torch.compile alone

Variants (Causal2Vec, default preset, bf16 unless named):

- ``default``: ``encode`` as shipped: length-sorted token-budget batches (on CPU now 2,048 padded
  tokens in bf16, 1,024 in float32; 8,192 and then 2,048 when earlier tables in docs/performance.md
  were measured);
- ``budget-512`` / ``budget-1024`` / ``budget-2048`` / ``budget-4096`` / ``budget-8192`` /
  ``budget-16384``: explicit token budgets;
- ``fixed-32``: length-sorted, fixed batches of 32 texts (sentence-transformers' scheme);
- ``input-order-32``: batches of 32 in input order (the naive loop's scheme), same model;
- ``float32``: the same model in fp32;
- ``prefetch``: tokenization and collation of the next batch in a background thread;
- ``encoder-ahead``: the encoder + projector of batch k+1 in a background thread while the
  decoder runs batch k;
- ``compile``: ``torch.compile(dynamic=True)`` on the decoder and the encoder; its first call
  (compilation) is reported apart and the best later round is compared.

The variants run round-robin in a rotating order for ``--rounds`` rounds; each is ranked by its
best round in CPU seconds of the process (see ``common.measure``), wall seconds beside. With one
core, a background thread can only win by filling idle time, and there is none in this loop:
the threaded variants show what they cost here; on more cores they are worth re-measuring.
"""

from __future__ import annotations

import argparse
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
from common import measure, mixed_texts, single_thread_note

from c2v_rag import Causal2Vec
from c2v_rag.encode.batching import Causal2VecBatch, plan_batches
from c2v_rag.encode.loop import model_max_tokens


def batches(
    model: Causal2Vec, texts: list[str], *, max_tokens: int | None = None, sort: bool = True, batch_size: int = 256
) -> Iterator[tuple[list[int], Causal2VecBatch]]:
    """The encode loop's batches, tokenized lazily batch by batch (so a thread can run ahead); ``max_tokens``: the
    library's default for this model when None."""
    pieces, enc_ids = model.prepare(texts, None) if sort else (None, None)
    if sort:
        groups = plan_batches(
            [p.length(model.config.num_contextual_tokens) for p in pieces],
            max_tokens=max_tokens or model_max_tokens(model),
            max_batch_size=batch_size,
        )
        for rows in groups:
            yield (
                rows,
                model.collate([pieces[r] for r in rows], None if enc_ids is None else [enc_ids[r] for r in rows]),
            )
        return
    for start in range(0, len(texts), batch_size):
        rows = list(range(start, min(start + batch_size, len(texts))))
        p, e = model.prepare([texts[r] for r in rows], None)
        yield rows, model.collate(p, e)


def run_batches(model: Causal2Vec, texts: list[str], source: Iterator) -> np.ndarray:
    out = np.zeros((len(texts), model.embedding_dim), dtype=np.float32)
    with torch.inference_mode():
        for rows, batch in source:
            out[rows] = model(batch).float().numpy()
    return out


def threaded(source: Iterator, depth: int = 2) -> Iterator:
    """Yield from ``source`` while a background thread produces up to ``depth`` items ahead."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()

    def fill() -> None:
        with torch.inference_mode():
            for item in source:
                q.put(item)
        q.put(done)

    threading.Thread(target=fill, daemon=True).start()
    while (item := q.get()) is not done:
        yield item


def encoder_ahead(model: Causal2Vec, texts: list[str]) -> np.ndarray:
    """Forward split in two: the encoder side of batch k+1 runs in a thread during decoder(k)."""

    def contextual(item):
        rows, batch = item
        return rows, batch, model.contextual_tokens(batch.encoder_input_ids, batch.encoder_attention_mask)

    out = np.zeros((len(texts), model.embedding_dim), dtype=np.float32)
    ahead = threaded(map(contextual, batches(model, texts)), depth=1)
    with torch.inference_mode():
        for rows, batch, c in ahead:
            hidden = model.decoder(
                inputs_embeds=model.decoder_inputs(batch, c),
                attention_mask=batch.attention_mask,
                position_ids=batch.position_ids,
                use_cache=False,
            ).last_hidden_state
            out[rows] = (
                model.readout.read(
                    hidden, batch.context_positions, batch.last_positions, model.config.num_contextual_tokens, c
                )
                .float()
                .numpy()
            )
    return out


def _budget(model: Causal2Vec, texts: list[str], max_tokens: int) -> Callable[[], np.ndarray]:
    return lambda: model.encode(texts, max_tokens_per_batch=max_tokens, show_progress_bar=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=32)
    parser.add_argument("--queries", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", nargs="+", help="run only these variants (default is always run)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    texts = mixed_texts(args.data, args.docs, args.queries)
    model = Causal2Vec.from_pretrained(None, device="cpu", dtype="bfloat16")
    pieces, _ = model.prepare(texts, None)
    tokens = sum(len(p.head) + len(p.tail) for p in pieces)
    print(f"{len(texts)} texts, {tokens} real decoder tokens; {single_thread_note()}", flush=True)

    variants: dict[str, Callable[[], np.ndarray]] = {
        "default": lambda: model.encode(texts, show_progress_bar=False),
        **{f"budget-{n}": _budget(model, texts, n) for n in (512, 1024, 2048, 4096, 8192, 16384)},
        "fixed-32": lambda: model.encode(texts, batch_size=32, max_tokens_per_batch=10**9, show_progress_bar=False),
        "input-order-32": lambda: run_batches(model, texts, batches(model, texts, sort=False, batch_size=32)),
        "prefetch": lambda: run_batches(model, texts, threaded(batches(model, texts))),
        "encoder-ahead": lambda: encoder_ahead(model, texts),
    }
    if not args.only or "float32" in args.only:
        fp32 = Causal2Vec.from_pretrained(None, device="cpu", dtype="float32")
        variants["float32"] = lambda: fp32.encode(texts, show_progress_bar=False)
    compile_seconds = None
    if not args.only or "compile" in args.only:
        compiled = Causal2Vec.from_pretrained(None, device="cpu", dtype="bfloat16")
        compiled.decoder = torch.compile(compiled.decoder, dynamic=True)
        compiled.encoder = torch.compile(compiled.encoder, dynamic=True)
        start = time.perf_counter()
        compiled.encode(texts, show_progress_bar=False)  # compiles (and may recompile per shape)
        compile_seconds = time.perf_counter() - start
        print(f"compile: first encode {compile_seconds:.1f} s wall (compilation included)", flush=True)
        variants["compile"] = lambda: compiled.encode(texts, show_progress_bar=False)
    if args.only:
        variants = {n: f for n, f in variants.items() if n == "default" or n in args.only}

    reference = model.encode(texts, show_progress_bar=False)  # also the warm-up
    # The most any prefetching can save, on any number of cores: the host-side work it hides.
    host = measure(lambda: list(batches(model, texts)))
    print(f"tokenize + collate alone: {host.cpu_seconds:.2f} cpu s", flush=True)
    results: dict[str, dict] = {n: {"cpu_seconds": [], "seconds": [], "working_mib": []} for n in variants}
    names = list(variants)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            m = measure(variants[name])
            for key in ("cpu_seconds", "seconds", "working_mib"):
                results[name][key].append(getattr(m, key))
            unit = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)
            results[name]["max_cos_diff"] = float(np.abs(unit(m.result) - unit(reference)).max())
            print(f"  round {r + 1} {name:15s} cpu {m.cpu_seconds:6.1f} s  wall {m.seconds:6.1f} s", flush=True)

    base = min(results["default"]["cpu_seconds"])
    print(
        f"\n{'variant':15s} {'cpu s':>7s} {'wall s':>7s} {'tok/cpu-s':>9s} {'vs default':>10s} "
        f"{'working MiB':>11s} {'max |unit diff|':>15s}"
    )
    for name, r in results.items():
        best = min(r["cpu_seconds"])
        r.update(best_cpu_seconds=best, speedup_vs_default=base / best)
        print(
            f"{name:15s} {best:7.1f} {min(r['seconds']):7.1f} {tokens / best:9.0f} {base / best:9.2f}x "
            f"{max(r['working_mib']):11.0f} {r['max_cos_diff']:15.2e}"
        )
    print(
        f"tokenize + collate: {100 * host.cpu_seconds / base:.1f}% of the default encode's CPU time "
        "(the ceiling on what prefetching can hide)"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "texts": len(texts),
                    "real_tokens": tokens,
                    "compile_first_s": compile_seconds,
                    "tokenize_collate_cpu_s": host.cpu_seconds,
                    "results": results,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
