"""int8 vs the float default on a CPU, side by side in one run: speed ratios and vector agreement.

    python bench/int8.py --data ../shared/data --docs 24 --claims 8 --repeats 3
    python bench/int8.py --data ../shared/data --docs 24 --claims 8 --candidates torchao   # also torchao

Every candidate is the shipped preset loaded once, then quantized (or not) in place:

- ``float``: what ``dtype="auto"`` picks here (float32 without native bf16, bfloat16 with it);
- ``fp32``: the preset in torch float32, for CPUs where ``float`` is bfloat16 (int8 computes around float32,
  so its cosines to float32 separate int8's error from bf16's); every candidate's vectors are then also
  compared with these (``cos_to_fp32_*``);
- ``int8``: ``quantize="int8"`` as shipped (``c2v_rag.cpu.int8``: the decoder's linear layers as per-token int8
  with SmoothQuant in ONNX Runtime, calibrated on the packaged texts; the first run builds it into
  ``--onnx-cache``);
- ``torch-dynamic``: torch's dynamic int8 (``torch.ao.quantization.quantize_dynamic``, one activation scale
  per batch tensor) on the decoder's and encoder's linear layers: the method ``quantize="int8"`` applied
  before 2026-11-24, kept here as the measured reference;
- ``torchao`` (optional, needs ``pip install torchao``): torchao's ``Int8DynamicActivationInt8WeightConfig``
  (per-row activation scales) on both models;
- ``ort-<method>`` (needs ``pip install 'c2v-rag[int8]'``): the decoder exported to ONNX and run by ONNX
  Runtime (``c2v_rag.cpu.onnx_decoder``), one of ``ort-fp32``, ``ort-nbits8-b32``, ``ort-nbits8-b128``,
  ``ort-nbits4-b32``, ``ort-dynamic-qint8``; the encoder, projector and readout stay in torch float32.
  The first run exports (and quantizes) into ``--onnx-cache``; later runs read the files;
- ``ort-file:<path>``: the decoder run from an ONNX file made elsewhere with the same inputs and output
  (``experiments/int8_rowwise_onnx.py`` writes per-token int8 variants);
- ``int8-file:<path>``: ``int8`` as shipped (encoder in ONNX Runtime, C row by row) but with the decoder graph
  read from ``<path>``: an earlier recipe's cached graph, to compare recipes side by side;
- ``int8-intra-op``: ``int8`` with each batch split across ``--threads`` intra-op threads, one batch at a time,
  instead of that many batches side by side on one thread each; ``int8-intra-op-spinning``: the same with the
  pool threads spinning between kernels (ONNX Runtime's default; both as shipped before 2026-11-25). For
  ``--threads`` above 1.

Texts: SciFact abstracts and claims shuffled together (``common.mixed_texts``). Each repeat encodes
the whole set once with every candidate, in alternating order, so background load falls on all alike.
The ratios are of medians of process CPU seconds by default (``--clock cpu``: with one intra-op thread,
the work done; on a shared machine the wall clock also counts the time other processes held the core:
one run here saw float take 48 s and then 490 s of wall clock for the same texts). ``--clock wall``
divides wall seconds instead, for ``--threads`` above 1 on an otherwise idle machine, as a user waits
(CPU seconds would also count threads spinning between kernels). Both are printed. Real tokens count
each text's own decoder tokens (instruction, Contextual token and padding excluded), the same numerator
for all. Then single-text latency: each of ``--single``
claims encoded alone, candidates interleaved per text, medians. Quality: per text, the cosine of each
candidate's vector to the float one (worst and mean, whole vector and per part), and for each candidate
the worst cosine between a text alone and the same text in the mixed batch. Absolute times are printed
but only the ratios mean anything on a shared machine; the CPU's flags are printed with them.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from common import load_scifact_queries, mixed_texts, recorded_command, speed_flags

from c2v_rag import Causal2Vec
from c2v_rag.core.devices import cpu_class, dtype_name


def build(candidates: list[str], onnx_cache: Path | None = None, threads: int = 1) -> dict[str, Causal2Vec]:
    base = Causal2Vec.from_pretrained(None, device="cpu")
    models = {"float": base}
    for name in candidates:
        if name.startswith("ort-"):
            from c2v_rag.cpu.onnx_decoder import OnnxDecoder, onnx_decoder

            if base.dtype != torch.float32:
                raise SystemExit("the ort- candidates compare against float32: run where dtype='auto' is float32")
            if name.startswith("ort-file:"):
                decoder = OnnxDecoder(base.decoder, Path(name.removeprefix("ort-file:")), "file", threads)
            else:
                decoder = onnx_decoder(base.decoder, name.removeprefix("ort-"), cache_dir=onnx_cache, threads=threads)
            # the same encoder, projector and tokenizers, the decoder's layers in ONNX Runtime
            models[name] = Causal2Vec(
                base.config, decoder, base.tokenizer, base.encoder, base.encoder_tokenizer, base.projector
            ).eval()
            continue
        model = (
            copy.deepcopy(base) if base.dtype == torch.float32 else Causal2Vec.from_pretrained(None, dtype="float32")
        )
        if name == "fp32":
            if base.dtype == torch.float32:
                raise SystemExit("fp32 is the float candidate here already (dtype='auto' is float32 on this CPU)")
        elif name == "int8":
            model.apply_quantization("int8", cache_dir=onnx_cache)
        elif name in ("int8-intra-op", "int8-intra-op-spinning"):
            from c2v_rag.cpu.ort_session import cpu_session

            model.apply_quantization("int8", cache_dir=onnx_cache)
            for part in (model.decoder, model.encoder):
                part.session = cpu_session(part.path, threads, spinning=name.endswith("spinning"))
            model.decoder.threads = 1  # one batch at a time
        elif name.startswith("int8-file:"):
            from c2v_rag.cpu.onnx_decoder import OnnxDecoder

            model.apply_quantization("int8", cache_dir=onnx_cache)
            model.decoder = OnnxDecoder(model.decoder, Path(name.removeprefix("int8-file:")), "file", threads)
        elif name == "torch-dynamic":
            from torch.ao.quantization import quantize_dynamic

            for module in (model.decoder, model.encoder):
                quantize_dynamic(module, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
        elif name == "torchao":
            from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

            quantize_(model.decoder, Int8DynamicActivationInt8WeightConfig())
            quantize_(model.encoder, Int8DynamicActivationInt8WeightConfig())
        else:
            raise SystemExit(
                f"unknown candidate {name!r}: fp32, int8, int8-intra-op, int8-intra-op-spinning, int8-file:<path>, torch-dynamic, torchao, "  # noqa: E501
                "ort-<method>, ort-file:<path>"
            )
        models[name] = model
    return models


def real_tokens(model: Causal2Vec, texts: list[str]) -> int:
    pieces, _ = model.prepare(texts, None)
    return sum(len(p.head) + len(p.tail) for p in pieces)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=24, help="SciFact abstracts in the mixed set")
    parser.add_argument("--claims", type=int, default=8, help="SciFact claims in the mixed set")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--single", type=int, default=8, help="claims timed alone (latency)")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads; under int8, batches run side by side"
    )
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="what the speed ratios divide: process CPU seconds (the work done; the default, for one "
        "thread) or wall seconds (what a user waits for with several threads on an idle machine)",
    )
    parser.add_argument("--candidates", nargs="+", default=["int8", "ort-fp32"])
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--onnx-cache",
        type=Path,
        default=None,
        help="where int8 and the ort- candidates keep their ONNX files (default: C2V_RAG_CACHE/onnx or ~/.cache)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    texts = mixed_texts(args.data, args.docs, args.claims)
    models = build(args.candidates, args.onnx_cache, args.threads)
    names = list(models)
    tokens = real_tokens(models["float"], texts)
    for model in models.values():  # warm-up: allocator and kernel selection
        model.encode(texts[:2])

    seconds: dict[str, list[float]] = {n: [] for n in names}
    wall: dict[str, list[float]] = {n: [] for n in names}
    vectors: dict[str, np.ndarray] = {}
    for r in range(args.repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            start, cpu = time.perf_counter(), time.process_time()
            vectors[name] = models[name].encode(texts, normalize_embeddings=True)
            seconds[name].append(time.process_time() - cpu)
            wall[name].append(time.perf_counter() - start)
        print(
            f"repeat {r + 1} (CPU s / wall s): "
            + ", ".join(f"{n} {seconds[n][-1]:.1f} / {wall[n][-1]:.1f}" for n in names),
            flush=True,
        )

    singles = load_scifact_queries(args.data, args.single)
    latency: dict[str, list[float]] = {n: [] for n in names}
    for i, text in enumerate(singles):
        for name in names if i % 2 == 0 else names[::-1]:
            start, cpu = time.perf_counter(), time.process_time()
            models[name].encode_queries(text)
            latency[name].append(time.process_time() - cpu if args.clock == "cpu" else time.perf_counter() - start)

    parts = models["float"].config.parts
    report: dict = {
        "command": recorded_command("bench/int8.py", sys.argv[1:]),
        "cpu": platform.processor() or platform.machine(),
        "cpu_class": cpu_class(),
        "flags": speed_flags(),
        "float_dtype": dtype_name(models["float"].dtype),
        "threads": args.threads,
        "clock": args.clock,
        "texts": len(texts),
        "real_tokens": tokens,
        "candidates": {},
    }
    timed = seconds if args.clock == "cpu" else wall
    t_float = statistics.median(timed["float"])
    l_float = statistics.median(latency["float"])
    for name in names:
        med = statistics.median(timed[name])
        row = {
            "median_cpu_s": round(statistics.median(seconds[name]), 3),
            "median_wall_s": round(statistics.median(wall[name]), 3),
            "real_tokens_per_s": round(tokens / med, 1),
            "speed_vs_float": round(t_float / med, 3),
            f"single_text_median_{args.clock}_ms": round(1000 * statistics.median(latency[name]), 1),
            "single_text_speed_vs_float": round(l_float / statistics.median(latency[name]), 3),
        }
        if name != "float":
            cos = cosines(vectors[name], vectors["float"])
            row.update(
                cos_to_float_worst=round(float(cos.min()), 5),
                cos_to_float_mean=round(float(cos.mean()), 5),
                cos_to_float_worst_by_part={
                    p: round(float(cosines(vectors[name][:, s], vectors["float"][:, s]).min()), 5)
                    for p, s in parts.items()
                },
            )
        if "fp32" in vectors and name != "fp32":
            cos = cosines(vectors[name], vectors["fp32"])
            row.update(cos_to_fp32_worst=round(float(cos.min()), 5), cos_to_fp32_mean=round(float(cos.mean()), 5))
        n_alone = min(12, len(texts))
        alone = np.stack([models[name].encode(t, normalize_embeddings=True) for t in texts[:n_alone]])
        row["alone_vs_batch_worst"] = round(float(cosines(alone, vectors[name][:n_alone]).min()), 6)
        report["candidates"][name] = row
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
