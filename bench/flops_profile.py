"""Matmul FLOP rate during encode against this machine's measured GEMM peak, and a profile.

    python bench/flops_profile.py --data /work/shared/data                 # 32 abstracts + 32 claims
    python bench/flops_profile.py --data /work/shared/data --dtype float32

1. GEMM peak: ``torch.mm`` at the decoder's own shapes (tokens x 576 x 1536, ...) and at a large
   square, in bf16 and fp32, on the threads this process has; the best is "the peak".
2. Linear-layer FLOPs are counted analytically: 2 x in_features x out_features per token for
   every ``nn.Linear`` of the decoder (per decoder token) and of the encoder (per encoder
   token), plus the projector. Attention score/value products are not linear layers and are
   left out (they are small at these lengths and hidden size 576).
3. The rate is those FLOPs over the encode's CPU seconds, counted two ways: per real token
   (useful work) and per padded token (what the matmuls actually executed).
4. ``torch.profiler`` on one encode: the top operators by self CPU time, their share by kind, and the
   matrix products' own rate (the profiler's FLOPs of each ``mm``/``addmm`` over its time).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from common import measure, mixed_texts, single_thread_note
from torch import nn

from c2v_rag import Causal2Vec
from c2v_rag.encode.batching import plan_batches
from c2v_rag.encode.loop import default_max_tokens


def gemm_rate(m: int, k: int, n: int, dtype: torch.dtype, seconds: float = 2.0) -> float:
    """Best GFLOP/s of ``[m,k] @ [k,n]`` over repeats for about ``seconds`` of CPU time."""
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    for _ in range(3):
        torch.mm(a, b)
    best, spent = 0.0, 0.0
    while spent < seconds:
        start = time.process_time()
        torch.mm(a, b)
        t = time.process_time() - start
        spent += t
        best = max(best, 2 * m * k * n / max(t, 1e-9) / 1e9)
    return best


def linear_params(module: nn.Module | None) -> int:
    """Multiply-accumulates per token of the module's linear layers (weights of nn.Linear)."""
    if module is None:
        return 0
    return sum(m.in_features * m.out_features for m in module.modules() if isinstance(m, nn.Linear))


def kind(op: str) -> str:
    if any(s in op for s in ("mm", "linear", "matmul", "addmm", "bmm")):
        return "matmul"
    if "attention" in op or "sdpa" in op or "flash" in op:
        return "attention"
    if op in (
        "aten::copy_",
        "aten::to",
        "aten::_to_copy",
        "aten::contiguous",
        "aten::clone",
        "aten::cat",
        "aten::index",
        "aten::index_put_",
        "aten::embedding",
        "aten::index_select",
    ):
        return "copies/indexing"
    return "elementwise/other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=32)
    parser.add_argument("--queries", type=int, default=32)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--rows", type=int, default=25, help="rows of the profiler table")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(single_thread_note(), flush=True)

    model = Causal2Vec.from_pretrained(None, device="cpu", dtype=args.dtype)
    d, inter = model.decoder.config.hidden_size, model.decoder.config.intermediate_size
    shapes = [(1024, d, inter), (2048, d, inter), (2048, inter, d), (2048, d, d), (2048, 2048, 2048)]
    peaks: dict[str, dict[str, float]] = {}
    for name, dtype in (("bfloat16", torch.bfloat16), ("float32", torch.float32)):
        peaks[name] = {"x".join(map(str, shape)): gemm_rate(*shape, dtype) for shape in shapes}
        print(f"GEMM {name:9s} " + "  ".join(f"{k} {v:6.1f}" for k, v in peaks[name].items()) + "  GFLOP/s", flush=True)
    peak = max(peaks[args.dtype].values())

    texts = mixed_texts(args.data, args.docs, args.queries)
    pieces, enc_ids = model.prepare(texts, None)
    n_ctx = model.config.num_contextual_tokens
    lengths = [p.length(n_ctx) for p in pieces]
    groups = plan_batches(lengths, max_tokens=default_max_tokens(model.device), max_batch_size=256)
    real_dec = sum(len(p.head) + len(p.tail) for p in pieces)
    padded_dec = sum(len(g) * max(lengths[i] for i in g) for g in groups)
    real_enc = sum(len(e) for e in enc_ids)
    padded_enc = sum(len(g) * max(len(enc_ids[i]) for i in g) for g in groups)
    dec_macs, enc_macs = linear_params(model.decoder), linear_params(model.encoder) + linear_params(model.projector)
    useful = 2 * (dec_macs * real_dec + enc_macs * real_enc)
    executed = 2 * (dec_macs * padded_dec + enc_macs * padded_enc)
    print(
        f"\n{len(texts)} texts: decoder tokens {real_dec} real / {padded_dec} padded, encoder tokens "
        f"{real_enc} real / {padded_enc} padded; linear MFLOP per token: decoder {2 * dec_macs / 1e6:.0f}, "
        f"encoder+projector {2 * enc_macs / 1e6:.1f}",
        flush=True,
    )

    model.encode(texts[:8], show_progress_bar=False)  # warm-up
    m = measure(lambda: model.encode(texts, show_progress_bar=False))
    rate, rate_exec = useful / m.cpu_seconds / 1e9, executed / m.cpu_seconds / 1e9
    print(
        f"encode: {m.cpu_seconds:.1f} cpu s ({m.seconds:.1f} wall s); linear-layer rate {rate:.1f} GFLOP/s on real "
        f"tokens ({100 * rate / peak:.0f}% of the {args.dtype} GEMM peak {peak:.0f}), {rate_exec:.1f} GFLOP/s "
        f"executed incl. padding ({100 * rate_exec / peak:.0f}%)",
        flush=True,
    )

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_flops=True) as prof:
        model.encode(texts, show_progress_bar=False)
    averages = prof.key_averages()
    print("\n" + averages.table(sort_by="self_cpu_time_total", row_limit=args.rows))
    by_kind: dict[str, float] = {}
    for event in averages:
        by_kind[kind(event.key)] = by_kind.get(kind(event.key), 0.0) + event.self_cpu_time_total
    total = sum(by_kind.values())
    print(
        "self CPU time by kind: "
        + ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]))
    )
    # The matmuls' own rate: the profiler's FLOP count of each GEMM call over that call's time, i.e.
    # how close the matrix products run to the GEMM peak while the encode spends time in them.
    gemms = [e for e in averages if e.key in ("aten::mm", "aten::addmm", "aten::bmm") and e.flops]
    gemm_flops, gemm_us = sum(e.flops for e in gemms), sum(e.self_cpu_time_total for e in gemms)
    in_gemm = gemm_flops / (gemm_us * 1e-6) / 1e9
    print(
        f"matmuls during encode: {gemm_flops / 1e9:.0f} GFLOP in {gemm_us / 1e6:.1f} s of their own time = "
        f"{in_gemm:.0f} GFLOP/s ({100 * in_gemm / peak:.0f}% of the {args.dtype} GEMM peak {peak:.0f}); "
        f"{100 * gemm_us / total:.0f}% of the encode's time",
        flush=True,
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "dtype": args.dtype,
                    "gemm_gflops": peaks,
                    "peak_gflops": peak,
                    "texts": len(texts),
                    "decoder_tokens": {"real": real_dec, "padded": padded_dec},
                    "encoder_tokens": {"real": real_enc, "padded": padded_enc},
                    "cpu_seconds": m.cpu_seconds,
                    "wall_seconds": m.seconds,
                    "gflops_real": rate,
                    "gflops_executed": rate_exec,
                    "profile_share": {k: v / total for k, v in by_kind.items()},
                    "matmul_gflops_in_matmuls": in_gemm,
                    "matmul_share": gemm_us / total,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
