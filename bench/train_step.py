"""Time one training step on this machine, fp32 vs bf16, side by side.

    python bench/train_step.py --data ../shared/data/nli/snli_dev_triplets.tsv [--batch-size 32] [--steps 3]
        [--hard-negatives 0] [--no-checkpointing]

Each precision builds the real training setup (LoRA r=64/alpha=128 on the decoder and encoder,
projector, gradient checkpointing) through ``Trainer`` and times full optimizer steps of
``batch-size`` (anchor, positive[, hard negative]) examples: forward, InfoNCE, backward, AdamW.
Reported: median seconds per step, examples (queries) per second, texts per second.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time

import torch

from c2v_rag.training import TrainConfig, Trainer

PRECISIONS = ["fp32", "bf16-autocast", "bf16"]


def measure(args, precision: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        config = TrainConfig.model_validate(
            {
                "model": {"decoder": args.decoder, "encoder": args.encoder, "max_length": args.max_length},
                "datasets": [{"name": "nli", "format": "triplets_tsv", "path": args.data, "task": "NLI"}],
                "training": {
                    "steps": 1000,
                    "batch_size": args.batch_size,
                    "mini_batch_size": args.mini_batch_size,
                    "hard_negatives": args.hard_negatives,
                    "precision": precision,
                    "gradient_checkpointing": not args.no_checkpointing,
                    "warmup_steps": 10,
                    "progress_bar": False,
                    "device": "cpu",
                    "save_every": 0,
                },
                "output": {"dir": tmp},
            }
        )
        trainer = Trainer(config)
        trainer.setup()
        times, texts = [], 0
        for step in range(args.warmup + args.steps):
            start = time.perf_counter()
            record = trainer._train_step(step)
            if step >= args.warmup:
                times.append(time.perf_counter() - start)
                texts = record["texts_per_s"] * record["seconds"]
        del trainer
        gc.collect()
    median = statistics.median(times)
    return {
        "precision": precision,
        "s_per_step": median,
        "examples_per_s": args.batch_size / median,
        "texts_per_s": texts / median,
        "all": times,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="triplet TSV (anchor, positive, negative)")
    parser.add_argument("--decoder", default="smollm2-135m-instruct")
    parser.add_argument("--encoder", default="all-minilm-l6-v2")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--mini-batch-size", type=int, default=None)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--hard-negatives", type=int, default=1, choices=[0, 1], help="0: plain pairs")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--no-checkpointing", action="store_true")
    parser.add_argument("--precisions", nargs="+", default=PRECISIONS, choices=PRECISIONS)
    args = parser.parse_args()
    shape = "triplets (anchor, positive, hard negative)" if args.hard_negatives else "pairs (anchor, positive)"
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch_size} {shape}, "
        f"max_length {args.max_length}, gradient checkpointing {'off' if args.no_checkpointing else 'on'}"
    )
    rows = [measure(args, p) for p in args.precisions]
    print(f"{'precision':<15}{'s/step':>9}{'examples/s':>12}{'texts/s':>10}   steps (s)")
    for r in rows:
        print(
            f"{r['precision']:<15}{r['s_per_step']:>9.2f}{r['examples_per_s']:>12.2f}{r['texts_per_s']:>10.1f}   "
            + " ".join(f"{t:.2f}" for t in r["all"])
        )


if __name__ == "__main__":
    main()
