"""A roofline of ingest on this CPU: FLOPs per chunk against this machine's matrix-multiply peaks, and where the time goes.

    taskset -c 1 env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python bench/flops_profile.py --data ../shared/data \
        --chunks 64 --json roofline.json
    ... --quantize int8        # the int8 model: its decoder against the int8 peak (no torch.profiler table)

1. Peaks, measured in this run on the threads this process has (best of about 2 CPU seconds per shape), at
   the decoder's own shapes (tokens x 576 x 1536, ...) and a large square: ``torch.mm`` in fp32 and bf16 (on a
   CPU without avx512_bf16 or AMX, bf16 is emulated and said so), and int8 as c2v_rag's int8 decoder computes
   it, ONNX Runtime's ``MatMulInteger`` (u8 x s8 -> s32, weights a constant: ``c2v_rag/cpu/int8.py``); also
   ``torch._int_mm`` where it runs on a CPU. The best shape of each is "the peak".
2. FLOPs, counted analytically from the configs: the linear layers, 2 x in x out per token (the decoder's per
   decoder token, the encoder's per encoder token; the projector per text); attention's score (QK^T) and value
   (PV) products, 4 x L^2 x hidden per layer and sequence as a padded batch computes them (the full square of
   its longest length), and what the real tokens need: 4 x l(l+1)/2 x hidden in the causal decoder,
   4 x l^2 x hidden in the bidirectional encoder. Stated per chunk, per real and per padded token.
3. An ingest-like run: ``c2v_rag.ingest`` of ``--chunks`` texts of about 200 decoder tokens (the first
   200-token chunk, as c2v_rag's chunker cuts it, of each SciFact abstract long enough; or ``--folder``'s
   documents) into an embedded Qdrant store, with the ingest's defaults. Wrappers and module hooks time each
   part on the thread that runs it (thread CPU time): chunking, tokenizing (``prepare``), padding into
   tensors (``collate``), the encoder forward, the projector, the decoder forward, and the writes (points
   and upserts, on the upload thread). The rest of the process's CPU time is the Python around them (the
   ingest loop, embeddings lookup, readout, copies). The decoder forward's FLOPs, from each batch's real and
   padded shape as the hook sees it, over its own time give its achieved rate and its fraction of each peak.
4. ``torch.profiler`` on one encode of the same texts (float only: ONNX Runtime is opaque to it): the top
   operators by self CPU time and their share by kind, and the matrix products' own rate.
"""  # noqa: E501

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from common import load_scifact_docs, recorded_command, single_thread_note, speed_flags
from torch import nn

SMALL = (256, 576, 1536)
SHAPES = ((1024, 576, 1536), (2048, 576, 1536), (2048, 1536, 576), (2048, 576, 576), (2048, 2048, 2048))


def _best(run: Callable[[], object], flops: float, seconds: float, warmup: int = 3) -> float:
    """Best GFLOP/s (or GOP/s) of ``run`` over repeats for about ``seconds`` of CPU time (at least one)."""
    for _ in range(warmup):
        run()
    best, spent = 0.0, 0.0
    while True:
        start = time.process_time()
        run()
        t = time.process_time() - start
        spent += t
        best = max(best, flops / max(t, 1e-9) / 1e9)
        if spent >= seconds:
            return best


def gemm_rate(m: int, k: int, n: int, dtype: torch.dtype, seconds: float = 2.0, warmup: int = 3) -> float:
    """Best GFLOP/s of ``[m,k] @ [k,n]`` in ``dtype`` (``torch.mm``)."""
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    return _best(lambda: torch.mm(a, b), 2 * m * k * n, seconds, warmup)


def int8_ort_rate(m: int, k: int, n: int, seconds: float = 2.0) -> float:
    """Best GOP/s of ONNX Runtime's ``MatMulInteger`` (u8 activations x constant s8 weights, 7-bit as c2v_rag's)
    on one intra-op thread, as c2v_rag's int8 sessions run."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = numpy_helper.from_array(rng.integers(-64, 65, size=(k, n), dtype=np.int8), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "w"], ["y"])],
        "matmul_integer",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])],
        [weights],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    a = rng.integers(0, 256, size=(m, k), dtype=np.uint8)
    return _best(lambda: session.run(None, {"a": a}), 2 * m * k * n, seconds)


def int8_torch_rate(m: int, k: int, n: int, seconds: float = 2.0) -> float | str:
    """Best GOP/s of ``torch._int_mm`` (s8 x s8 -> s32) on the CPU, or why it does not run."""
    a = torch.randint(-64, 64, (m, k), dtype=torch.int8)
    b = torch.randint(-64, 64, (k, n), dtype=torch.int8)
    try:
        torch._int_mm(a, b)
    except (RuntimeError, NotImplementedError, AttributeError) as err:
        return f"not on this build: {str(err).splitlines()[0][:120]}"
    return _best(lambda: torch._int_mm(a, b), 2 * m * k * n, seconds, warmup=1)


def bf16_status(flags: list[str]) -> str:
    if "amx_bf16" in flags:
        return "native (AMX tiles, through oneDNN)"
    if "avx512_bf16" in flags:
        return "native (avx512_bf16)"
    return "emulated: this CPU has neither avx512_bf16 nor AMX (bf16 is converted and computed in fp32)"


def linear_params(module: nn.Module | None) -> int:
    """Multiply-accumulates per token of the module's linear layers (weights of nn.Linear)."""
    if module is None:
        return 0
    return sum(m.in_features * m.out_features for m in module.modules() if isinstance(m, nn.Linear))


def decoder_macs(config) -> int:
    """Multiply-accumulates per token of a Llama-style decoder's linear layers (q, k, v, o, gate, up, down)."""
    d, heads = config.hidden_size, config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or d // heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    per_layer = d * heads * head_dim * 2 + d * kv * head_dim * 2 + 3 * d * config.intermediate_size
    return config.num_hidden_layers * per_layer


def encoder_macs(config) -> int:
    """Multiply-accumulates per token of a BERT-style encoder's linear layers (q, k, v, o, intermediate, output)."""
    d = config.hidden_size
    return config.num_hidden_layers * (4 * d * d + 2 * d * config.intermediate_size)


@dataclass
class Part:
    """One part of the ingest: its thread CPU and wall seconds and calls, and (for the forwards) its work."""

    cpu_s: float = 0.0
    wall_s: float = 0.0
    calls: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0
    linear_real: float = 0.0
    linear_padded: float = 0.0
    attention_real: float = 0.0
    attention_padded: float = 0.0

    def add_work(self, lengths: list[int], padded: int, macs: int, layers: int, hidden: int, causal: bool) -> None:
        """A batch of sequences of ``lengths`` real tokens, padded to ``padded`` each."""
        self.real_tokens += sum(lengths)
        self.padded_tokens += padded * len(lengths)
        self.linear_real += 2.0 * macs * sum(lengths)
        self.linear_padded += 2.0 * macs * padded * len(lengths)
        square = [(n * (n + 1) / 2 if causal else n * n) for n in lengths]
        self.attention_real += 4.0 * layers * hidden * sum(square)
        self.attention_padded += 4.0 * layers * hidden * padded * padded * len(lengths)

    @property
    def flops_real(self) -> float:
        return self.linear_real + self.attention_real

    @property
    def flops_padded(self) -> float:
        return self.linear_padded + self.attention_padded


class Timed:
    """Accumulates thread CPU and wall time into named :class:`Part` s, around calls or module forwards."""

    def __init__(self) -> None:
        self.parts: dict[str, Part] = {}
        self._undo: list[Callable[[], None]] = []
        self._open: dict[int, tuple[float, float]] = {}

    def part(self, name: str) -> Part:
        return self.parts.setdefault(name, Part())

    def _add(self, name: str, cpu: float, wall: float) -> None:
        part = self.part(name)
        part.cpu_s += time.thread_time() - cpu
        part.wall_s += time.perf_counter() - wall
        part.calls += 1

    def method(self, owner: type, attr: str, name: str, generator: bool = False) -> None:
        original = getattr(owner, attr)
        timed = self

        if generator:

            def wrapper(*args, **kwargs):
                cpu, wall = time.thread_time(), time.perf_counter()
                items = list(original(*args, **kwargs))
                timed._add(name, cpu, wall)
                yield from items
        else:

            def wrapper(*args, **kwargs):
                cpu, wall = time.thread_time(), time.perf_counter()
                try:
                    return original(*args, **kwargs)
                finally:
                    timed._add(name, cpu, wall)

        setattr(owner, attr, wrapper)
        self._undo.append(lambda: setattr(owner, attr, original))

    def module(self, module: nn.Module | None, name: str, work: Callable[[Part, dict], None] | None = None) -> None:
        if module is None:
            return

        def before(mod, args, kwargs):
            if work is not None:
                work(self.part(name), kwargs)
            self._open[id(mod)] = (time.thread_time(), time.perf_counter())

        def after(mod, args, kwargs, output):
            self._add(name, *self._open.pop(id(mod)))

        handles = [
            module.register_forward_pre_hook(before, with_kwargs=True),
            module.register_forward_hook(after, with_kwargs=True),
        ]
        self._undo.extend(h.remove for h in handles)

    def close(self) -> None:
        for undo in reversed(self._undo):
            undo()


def chunk_texts(model, data: Path, count: int, size: int = 200) -> list[str]:
    """The first ``size``-token chunk (c2v_rag's chunker, overlap 20) of each SciFact abstract that fills one
    to at least 90%, until ``count``."""
    from c2v_rag.documents.chunking import TokenChunker

    chunker = TokenChunker(model, size, 20)
    texts = []
    for doc in load_scifact_docs(data, None):
        first = chunker.chunk(doc)[0].text
        if len(model.tokenizer(first, add_special_tokens=False)["input_ids"]) >= 0.9 * size:
            texts.append(first)
            if len(texts) == count:
                break
    return texts


def ingest_parts(model, docs, quantize: str) -> tuple[dict[str, Part], dict]:
    """``c2v_rag.ingest(docs)`` into a fresh embedded store, every part timed; (parts, totals)."""
    import c2v_rag
    from c2v_rag.documents.chunking import TokenChunker
    from c2v_rag.model.causal2vec import Causal2Vec
    from c2v_rag.rag.ingestion.points import PointWriter

    dec, enc = model.decoder.config, model.encoder.config if model.encoder is not None else None
    dec_macs, enc_macs = decoder_macs(dec), encoder_macs(enc) if enc is not None else 0

    def decoder_work(part: Part, kwargs: dict) -> None:
        mask = kwargs["attention_mask"]
        part.add_work(mask.sum(1).tolist(), mask.shape[1], dec_macs, dec.num_hidden_layers, dec.hidden_size, True)

    def encoder_work(part: Part, kwargs: dict) -> None:
        mask = kwargs["attention_mask"]
        part.add_work(mask.sum(1).tolist(), mask.shape[1], enc_macs, enc.num_hidden_layers, enc.hidden_size, False)

    timed = Timed()
    timed.method(TokenChunker, "iter_chunks", "chunking", generator=True)
    timed.method(Causal2Vec, "prepare", "tokenizing")
    timed.method(Causal2Vec, "collate", "padding (collate)")
    timed.module(model.encoder, "encoder forward", encoder_work)
    timed.module(model.projector, "projector")
    timed.module(model.decoder, "decoder forward", decoder_work)
    timed.method(PointWriter, "points", "writes")
    timed.method(PointWriter, "write", "writes")
    try:
        with tempfile.TemporaryDirectory(prefix="c2v-roofline-") as store:
            cpu, wall = time.process_time(), time.perf_counter()
            result = c2v_rag.ingest(
                docs, path=store, collection="roofline", device="cpu", quantize=quantize, show_progress=False
            )
            totals = {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall, "chunks": result.chunks}
    finally:
        timed.close()
    if "decoder forward" not in timed.parts:
        raise RuntimeError("the ingest did not run the hooked model: it loaded another copy")
    return timed.parts, totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=None, help="the shared data (SciFact) for the 200-token chunks")
    parser.add_argument("--folder", type=Path, default=None, help="ingest this folder instead of SciFact chunks")
    parser.add_argument("--chunks", type=int, default=64)
    # "none" is passed to the ingest as well: its own default for new vectors is int8 on many CPUs, which would
    # load a second model past the hooks.
    parser.add_argument("--quantize", default="none", choices=["none", "int8"], help="the model: float or int8")
    parser.add_argument("--peak-seconds", type=float, default=2.0, help="CPU seconds per peak shape")
    parser.add_argument("--rows", type=int, default=25, help="rows of the profiler table")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if (args.data is None) == (args.folder is None):
        parser.error("pass --data (SciFact chunks) or --folder")
    from c2v_rag.core.devices import cpu_flags
    from c2v_rag.rag import load_model

    flags = speed_flags()
    print(f"CPU flags: {' '.join(flags)}; {single_thread_note()}", flush=True)

    peaks: dict[str, dict[str, float | str]] = {"float32": {}, "bfloat16": {}, "int8 (ORT MatMulInteger)": {}}
    peaks["int8 (torch._int_mm)"] = {}
    native_bf16 = not bf16_status(flags).startswith("emulated")
    for shape in SHAPES:
        key = "x".join(map(str, shape))
        peaks["float32"][key] = gemm_rate(*shape, torch.float32, args.peak_seconds)
        peaks["int8 (ORT MatMulInteger)"][key] = int8_ort_rate(*shape, args.peak_seconds)
        if native_bf16:
            peaks["bfloat16"][key] = gemm_rate(*shape, torch.bfloat16, args.peak_seconds)
    # Emulated bf16 and torch's CPU int8 GEMM run at about 1 GFLOP/s on AVX2 (a reference loop): one small shape,
    # once, says so without minutes of waiting.
    small = "x".join(map(str, SMALL))
    if not native_bf16:
        peaks["bfloat16"][small] = gemm_rate(*SMALL, torch.bfloat16, 0.0, warmup=1)
    peaks["int8 (torch._int_mm)"][small] = int8_torch_rate(*SMALL, 0.0)
    peak = {k: max((x for x in v.values() if isinstance(x, float)), default=0.0) for k, v in peaks.items()}
    for name, rates in peaks.items():
        shown = "  ".join(f"{k} {v:6.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in rates.items())
        print(f"peak {name:25s} {shown}  G(FL)OP/s", flush=True)
    print(f"bf16: {bf16_status(flags)}", flush=True)

    model = load_model(None, device="cpu", quantize=args.quantize)
    model.encode(["warm up"], show_progress_bar=False)
    docs = [args.folder] if args.folder is not None else chunk_texts(model, args.data, args.chunks)
    parts, totals = ingest_parts(model, docs, args.quantize)
    chunks = totals["chunks"]
    dec, encp = parts["decoder forward"], parts.get("encoder forward", Part())
    projector = 2.0 * linear_params(model.projector) * chunks  # once per text, on its pooled encoder states
    useful = dec.flops_real + encp.flops_real + projector
    executed = dec.flops_padded + encp.flops_padded + projector
    gflop = {
        "decoder linear": (dec.linear_real, dec.linear_padded),
        "decoder attention (QK^T, PV)": (dec.attention_real, dec.attention_padded),
        "encoder linear": (encp.linear_real, encp.linear_padded),
        "encoder attention (QK^T, PV)": (encp.attention_real, encp.attention_padded),
        "projector": (projector, projector),
    }
    print(
        f"\ningest of {chunks} chunks: {totals['cpu_s']:.1f} CPU s, {totals['wall_s']:.1f} wall s; decoder tokens "
        f"{dec.real_tokens} real / {dec.padded_tokens} padded, encoder tokens {encp.real_tokens} real / "
        f"{encp.padded_tokens} padded"
    )
    print(f"{'GFLOP per chunk':32s} {'real':>8s} {'padded':>8s}   per real token   per padded token (MFLOP)")
    for name, (real, padded) in gflop.items():
        tokens = (dec if name.startswith("decoder") else encp).real_tokens or 1
        ptokens = (dec if name.startswith("decoder") else encp).padded_tokens or 1
        print(
            f"{name:32s} {real / chunks / 1e9:8.3f} {padded / chunks / 1e9:8.3f}   {real / tokens / 1e6:14.1f}   "
            f"{padded / ptokens / 1e6:16.1f}"
        )
    print(f"{'all':32s} {useful / chunks / 1e9:8.3f} {executed / chunks / 1e9:8.3f}")

    dtype = "int8" if args.quantize == "int8" else str(model.dtype).removeprefix("torch.")
    rates = {"real": dec.flops_real / dec.cpu_s / 1e9, "padded": dec.flops_padded / dec.cpu_s / 1e9}
    print(
        f"\ndecoder forward ({dtype}): {dec.cpu_s:.1f} CPU s, {rates['real']:.1f} GFLOP/s on real tokens, "
        f"{rates['padded']:.1f} executed (padding included)"
    )
    # Fractions of the peaks c2v_rag can run at: not of emulated bf16, nor of torch's CPU int8 GEMM (a reference loop).
    usable = {n: p for n, p in peak.items() if p and n != "int8 (torch._int_mm)" and (n != "bfloat16" or native_bf16)}
    fractions = {name: {k: v / p for k, v in rates.items()} for name, p in usable.items()}
    for name, p in usable.items():
        if p:
            print(
                f"  of the {name} peak {p:7.1f}: {100 * rates['real'] / p:5.1f}% real, "
                f"{100 * rates['padded'] / p:5.1f}% executed"
            )
    whole = useful / totals["cpu_s"] / 1e9
    print(f"whole ingest: {whole:.1f} GFLOP/s of useful work over its CPU time")

    named = sum(p.cpu_s for p in parts.values())
    shares = {name: p.cpu_s for name, p in parts.items()}
    shares["other (Python around them: ingest loop, embeddings, readout, copies)"] = totals["cpu_s"] - named
    print(f"\nwhere the ingest's {totals['cpu_s']:.1f} CPU s go:")
    for name, seconds in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"  {name:70s} {seconds:7.2f} s {100 * seconds / totals['cpu_s']:5.1f}%")
    if dec.padded_tokens:
        pad = 1 - dec.linear_real / dec.linear_padded
        print(f"  (padding: {100 * pad:.1f}% of the decoder's linear FLOPs are on pad tokens)")

    profile: dict = {}
    if args.quantize != "int8":
        texts = docs if args.folder is None else None
        if texts is not None:
            profile = torch_profile(model, texts, args.rows, peak["float32" if dtype == "float32" else "bfloat16"])
    if args.json:
        report = {
            "command": recorded_command("bench/flops_profile.py", sys.argv[1:]),
            "cpu_flags": " ".join(sorted(cpu_flags())),
            "speed_flags": flags,
            "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")},
            "torch_threads": torch.get_num_threads(),
            "bf16": bf16_status(flags),
            "peaks_gflops": peaks,
            "peak_gflops": peak,
            "model_dtype": dtype,
            "chunks": chunks,
            "ingest": totals,
            "gflop_per_chunk": {
                k: {"real": r / chunks / 1e9, "padded": p / chunks / 1e9} for k, (r, p) in gflop.items()
            },
            "mflop_per_decoder_token": {
                "linear": 2 * decoder_macs(model.decoder.config) / 1e6,
                "attention_real": dec.attention_real / max(dec.real_tokens, 1) / 1e6,
                "attention_padded": dec.attention_padded / max(dec.padded_tokens, 1) / 1e6,
            },
            "decoder_gflops": rates,
            "decoder_fraction_of_peak": fractions,
            "whole_ingest_gflops": whole,
            "parts": {name: asdict(p) for name, p in parts.items()},
            "cpu_seconds_by_part": shares,
            "profile": profile,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")


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


def torch_profile(model, texts: list[str], rows: int, peak: float) -> dict:
    """``torch.profiler`` on one encode of ``texts``: top operators, shares by kind, the matmuls' own rate."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_flops=True) as prof:
        model.encode_documents(texts, show_progress_bar=False)
    averages = prof.key_averages()
    print("\n" + averages.table(sort_by="self_cpu_time_total", row_limit=rows))
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
    in_gemm = gemm_flops / max(gemm_us * 1e-6, 1e-9) / 1e9
    print(
        f"matmuls during encode: {gemm_flops / 1e9:.0f} GFLOP in {gemm_us / 1e6:.1f} s of their own time = "
        f"{in_gemm:.0f} GFLOP/s ({100 * in_gemm / peak:.0f}% of the GEMM peak {peak:.0f}); "
        f"{100 * gemm_us / total:.0f}% of the encode's time",
        flush=True,
    )
    return {
        "share_by_kind": {k: v / total for k, v in by_kind.items()},
        "matmul_gflops_in_matmuls": in_gemm,
        "matmul_share": gemm_us / total,
    }


if __name__ == "__main__":
    main()
