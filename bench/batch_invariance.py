"""Largest difference between batched and one-at-a-time encoding, over 50 mixed-length texts.

    python bench/batch_invariance.py [--dtype float32] [--data ../shared/data]

With --data, the texts are 50 SciFact documents and claims of mixed lengths; without it, 50
synthetic texts from 1 to ~400 tokens. Prints the max absolute difference on raw vectors, on
unit-normalised vectors, and the largest raw entry for scale.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from c2v_rag import Causal2Vec


def mixed_texts(data: Path | None) -> list[str]:
    if data is None:
        return [("word " * (i * 8)) + f"sample {i}: vitamin D and bone loss." for i in range(50)]
    docs = [json.loads(line) for line in open(data / "scifact" / "corpus.jsonl", encoding="utf-8")][:25]
    claims = [json.loads(line)["text"] for line in open(data / "scifact" / "queries.jsonl", encoding="utf-8")][:25]
    return [(d["title"] + " " + d["text"])[: 200 * (i + 1)] for i, d in enumerate(docs)] + claims


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--data", type=Path)
    args = parser.parse_args()
    model = Causal2Vec.from_components("smollm2-135m-instruct", "all-minilm-l6-v2", device="cpu", dtype=args.dtype)
    texts = mixed_texts(args.data)
    instruction = "Retrieve semantically similar text."
    batched = model.encode(texts, instruction=instruction)
    single = np.stack([model.encode(t, instruction=instruction) for t in texts])
    unit = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)
    lengths = [p.length(1) for p in model.prepare(texts, instruction)[0]]
    print(f"{len(texts)} texts, {min(lengths)}-{max(lengths)} decoder tokens, dtype {args.dtype}")
    print(f"max |batched - single|, raw vectors:        {np.abs(batched - single).max():.3e}")
    print(f"max |batched - single|, normalised vectors: {np.abs(unit(batched) - unit(single)).max():.3e}")
    print(f"largest raw entry: {np.abs(single).max():.1f}")


if __name__ == "__main__":
    main()
