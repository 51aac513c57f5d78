"""The same text alone and inside a batch of mixed lengths: the worst cosine, per part of the vector.

    python bench/batch_invariance.py --data ../shared/data --dtype bfloat16 --texts 24
    python bench/batch_invariance.py --data ../shared/data --dtype float32 --texts 200
    python bench/batch_invariance.py --data ../shared/data --quantize int8 --texts 120

The texts are STS-B sentences, SciFact claims and SciFact abstracts in equal shares (``--texts`` in
all). Each is encoded alone, then inside batches of ``--per-batch`` sample texts plus the two longest
SciFact abstracts of the first 500 (``--partners``; so every batch pads the sample texts to 256 encoder
and ~500 decoder tokens), through ``encode`` as a user calls it. Printed: the worst cosine between a text's
two vectors over the sample, for the whole vector and for its parts (the encoder's sentence vector,
and the decoder's readout), with the encoder in the decoder's dtype (what a loaded variant runs) and in float32
(its weights from a float32 load of the same variant, the adapter merged in float32), the projector in float32 in
both, side by side in one run, and the encode time of the sample in each setting, as a ratio.

With ``--quantize int8`` the model is the int8 one as shipped (its encoder runs in ONNX Runtime in float32,
so there is one setting).

Speed in bf16 is only meaningful on a machine with bf16 matmuls (a GPU, or a CPU with avx512_bf16 or
AMX); on others bf16 is emulated, and the script says so.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
import torch

from c2v_rag import Causal2Vec
from c2v_rag.core.devices import QUANTIZE_CHOICES, cpu_has_native_bf16


def sample_texts(data: Path, n: int) -> list[str]:
    third = max(1, n // 3)
    with open(data / "stsb" / "stsb.dev.tsv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    sts = [r["sentence1"] for r in rows[::7]][:third]
    claims = [json.loads(line)["text"] for line in open(data / "scifact" / "queries.jsonl", encoding="utf-8")]
    docs = [json.loads(line) for line in open(data / "scifact" / "corpus.jsonl", encoding="utf-8")]
    abstracts = [d["title"] + " " + d["text"] for d in docs[500 : 500 + 40 * third : 40]]
    return sts + claims[::5][:third] + abstracts[: n - 2 * third]


def long_partners(data: Path, n: int) -> list[str]:
    docs = [json.loads(line) for line in open(data / "scifact" / "corpus.jsonl", encoding="utf-8")][:500]
    return sorted((d["title"] + " " + d["text"] for d in docs), key=len)[-n:]


@contextmanager
def float32_encoder(model: Causal2Vec, name: str | None):
    """Run the encoder of a float32 load of the same variant in the block (its adapter merged in float32)."""
    loaded = model.encoder
    model.encoder = Causal2Vec.from_pretrained(name, device="cpu", dtype="float32").encoder
    try:
        yield
    finally:
        model.encoder = loaded


def measure(model: Causal2Vec, texts: list[str], partners: list[str], per_batch: int) -> dict[str, float]:
    start = time.perf_counter()
    alone = np.stack([model.encode(t, normalize_embeddings=True) for t in texts])
    alone_s = time.perf_counter() - start
    start = time.perf_counter()
    batched = np.zeros_like(alone)
    for i in range(0, len(texts), per_batch):
        chunk = texts[i : i + per_batch]
        out = model.encode(partners + chunk, normalize_embeddings=True, max_tokens_per_batch=10**7)
        batched[i : i + len(chunk)] = out[len(partners) :]
    batched_s = time.perf_counter() - start
    k = model.config.encoder_hidden_size if model.config.encoder_share else 0

    def worst(a: np.ndarray, b: np.ndarray) -> float:
        a = a / np.linalg.norm(a, axis=1, keepdims=True)
        b = b / np.linalg.norm(b, axis=1, keepdims=True)
        return float((a * b).sum(1).min())

    result = {"worst cosine": worst(alone, batched), "alone s": alone_s, "batched s": batched_s}
    if k:
        result["worst cosine, encoder part"] = worst(alone[:, :k], batched[:, :k])
        result["worst cosine, decoder part"] = worst(alone[:, k:], batched[:, k:])
    result["texts under 0.999"] = int(((alone * batched).sum(1) < 0.999).sum())
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", default=None, help="variant or preset (default: the default preset)")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--quantize", default="none", choices=QUANTIZE_CHOICES)
    parser.add_argument("--texts", type=int, default=24)
    parser.add_argument("--per-batch", type=int, default=6)
    parser.add_argument("--partners", type=int, default=2, help="long abstracts in every batch")
    parser.add_argument(
        "--partner-chars",
        type=int,
        default=None,
        help="cut the long abstracts to this many characters (cheaper batches where bf16 is emulated)",
    )
    args = parser.parse_args()
    model = Causal2Vec.from_pretrained(args.model, device="cpu", dtype=args.dtype, quantize=args.quantize)
    texts = sample_texts(args.data, args.texts)
    partners = [p[: args.partner_chars] for p in long_partners(args.data, args.partners)]
    lengths = [p.length(model.config.num_contextual_tokens) for p in model.prepare(texts + partners, None)[0]]
    print(
        f"{len(texts)} texts of {min(lengths)}-{max(lengths[: len(texts)])} decoder tokens, batched {args.per_batch} at "  # noqa: E501
        f"a time with abstracts of {lengths[len(texts) :]} decoder tokens; decoder dtype {model.dtype}"
    )
    if model.dtype == torch.bfloat16 and not cpu_has_native_bf16():
        print("(this CPU has no bf16 matmuls: bf16 is emulated, so its times say nothing about bf16 hardware)")
    settings = {"encoder in float32": model.dtype != torch.float32}  # a float32 model is that already
    if model.quantization != "none":  # the encoder is an ONNX Runtime session: one setting, as shipped
        settings = {f"quantize={model.quantization}": False}
    elif model.dtype != torch.float32:  # in float32 the two settings are the same model
        settings = {"encoder in the decoder's dtype": False, **settings}
    results = {}
    for name, swap in settings.items():
        with float32_encoder(model, args.model) if swap else nullcontext():
            results[name] = measure(model, texts, partners, args.per_batch)
    for name, result in results.items():
        print(
            f"{name}: " + ", ".join(f"{k} {v:.5f}" if isinstance(v, float) else f"{k} {v}" for k, v in result.items())
        )
    if len(results) == 2:
        first, second = results.values()
        print(
            f"time, float32 encoder / decoder-dtype encoder: alone {second['alone s'] / first['alone s']:.2f}x, "
            f"batched {second['batched s'] / first['batched s']:.2f}x"
        )


if __name__ == "__main__":
    main()
