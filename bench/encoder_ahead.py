"""The encoder's cost inside the decoder's batches against in batches of its own, on a folder's ingest chunks.

    taskset -c 0 env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python bench/encoder_ahead.py --folder /tmp/kernel-docs-500 \
        --quantize int8 --budgets 256 512 1024 2048 4096 --json encoder_ahead.json

An ingest embeds its chunks in groups of ``--ingest-batch`` (256), the decoder reading ``--decoder-max-length`` (96)
tokens of each and the encoder all of them. The decoder's batches (``plan_batches`` over the decoder lengths, at
the default decoder budget of the model) hold texts of one decoder length wherever the cap ties them, whatever their
encoder lengths. This times the encoder forward alone (``Causal2Vec.encoder_pass``: the encoder, its pooling and the
projector), CPU seconds of this process, over every group: once in the decoder's batches (how the encoder ran
before it ran ahead) and once per encoder budget in batches planned by the encoder's own lengths (how it runs now,
at :func:`~c2v_rag.encode.loop.default_encoder_max_tokens`). Rounds alternate the candidates; the best round of
each is kept. Prints padded encoder tokens per real one and each candidate's time against the decoder's batches.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from common import recorded_command, speed_flags

from c2v_rag import Causal2Vec
from c2v_rag.documents.chunking import TokenChunker
from c2v_rag.documents.documents import iter_documents
from c2v_rag.encode.batching import plan_batches
from c2v_rag.encode.loop import PreparedTexts, default_encoder_max_tokens, model_max_tokens, prepare_texts


def encoder_seconds(model: Causal2Vec, groups: list[tuple[PreparedTexts, list[list[int]]]]) -> tuple[float, int]:
    """CPU seconds of the encoder over every group's batches, and the padded encoder tokens they held."""
    padded = 0
    start = time.process_time()
    with torch.inference_mode():
        for prepared, plan in groups:
            assert prepared.encoder_ids is not None
            for batch in plan:
                ids = [prepared.encoder_ids[i] for i in batch]
                padded += len(ids) * max(len(x) for x in ids)
                model.encoder_pass(ids)
    return time.process_time() - start, padded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--quantize", default="int8", choices=["none", "int8"])
    parser.add_argument("--budgets", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    parser.add_argument("--ingest-batch", type=int, default=256, help="chunks per ingest batch (IngestConfig)")
    parser.add_argument("--decoder-max-length", type=int, default=96)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    model = Causal2Vec.from_pretrained(quantize=args.quantize).eval()
    chunker = TokenChunker.for_variant(None, 200, 20)
    texts = [c.text for doc in iter_documents(args.folder) for c in chunker.chunk(doc.text)]
    prepared = []
    for start in range(0, len(texts), args.ingest_batch):
        group = sorted(texts[start : start + args.ingest_batch], key=len, reverse=True)  # as encode sorts
        prepared.append(prepare_texts(model, group, None, max_length=args.decoder_max_length))
    real = sum(len(ids) for p in prepared for ids in p.encoder_ids or ())
    decoder_budget = model_max_tokens(model)
    candidates = {
        f"inside the decoder's batches ({decoder_budget} decoder tokens)": [
            (p, plan_batches(p.lengths, max_tokens=decoder_budget, max_batch_size=256)) for p in prepared
        ]
    }
    for budget in args.budgets:
        candidates[f"ahead, {budget} encoder tokens"] = [
            (p, plan_batches([len(x) for x in p.encoder_ids or ()], max_tokens=budget, max_batch_size=256))
            for p in prepared
        ]
    encoder_seconds(model, list(candidates.values())[0][:1])  # warm-up
    best: dict[str, float] = {}
    padded: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, groups in candidates.items():
            seconds, padded[name] = encoder_seconds(model, groups)
            best[name] = min(best.get(name, float("inf")), seconds)
    base = next(iter(best.values()))
    print(f"CPU flags: {' '.join(speed_flags())}; quantize={args.quantize}")
    print(f"{len(texts)} chunks, {real} real encoder tokens")
    print(f"default_encoder_max_tokens here: {default_encoder_max_tokens(model.device)}")
    rows = []
    for name, seconds in best.items():
        rows.append({"candidate": name, "cpu_s": round(seconds, 2), "padded_per_real": round(padded[name] / real, 3)})
        print(f"{name:55s} {seconds:7.2f} CPU s  padded/real {padded[name] / real:.3f}  {base / seconds:.2f}x")
    if args.json:
        result = {
            "command": recorded_command("bench/encoder_ahead.py", sys.argv[1:]),
            "flags": speed_flags(),
            "chunks": len(texts),
            "real_encoder_tokens": real,
            "rows": rows,
        }
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
