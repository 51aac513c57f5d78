"""Would plain all-MiniLM-L6-v2 beside the preset's LoRA'd encoder help out of domain? An output ensemble.

The preset's encoder part (MiniLM with its encoder LoRA) costs the man pages and pays on the Jargon File
(bench/results/notes/encoder-lora-ood.md). This scores a vector that would carry both: plain MiniLM's sentence
vector (sentence-transformers' own, queries without an instruction) as a fourth part next to the preset's
encoder, h_EOS and h_C, each mix a weighted sum of the parts' cosines. No re-embedding: the documents are the
chunks ``bench/ood/score.py`` ingested (its cached collection) and its cached MiniLM vectors of them.

    python bench/ood/score.py --model default --task default --truncate-dim full     # once, if not cached
    python experiments/encoder_ensemble.py --json bench/results/ood/encoder_ensemble_avx512bf16.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / p) for p in ("bench/ood", "bench")]
import build  # noqa: E402  (bench/ood)
import metrics  # noqa: E402
import mixes  # noqa: E402
import score  # noqa: E402
from common import recorded_command  # noqa: E402  (bench)

from c2v_rag.evaluation.readout_mixes import unit_rows  # noqa: E402

# (plain MiniLM, the preset's encoder, h_EOS, h_C): the shipped weights with the encoder's 0.8 moved to plain
# MiniLM in steps, and the decoder's share raised once.
MIXES: tuple[tuple[float, float, float, float], ...] = (
    (0.0, 0.8, 0.15, 0.05),
    (0.3, 0.5, 0.15, 0.05),
    (0.4, 0.4, 0.15, 0.05),
    (0.5, 0.3, 0.15, 0.05),
    (0.8, 0.0, 0.15, 0.05),
    (0.35, 0.35, 0.2, 0.1),
    (0.4, 0.4, 0.2, 0.0),
    (0.5, 0.5, 0.0, 0.0),
    (1.0, 0.0, 0.0, 0.0),
    (0.0, 1.0, 0.0, 0.0),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", action="append", choices=build.BENCHMARKS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    base = score.parse_args(["--model", "default"])
    model = score.load_model("default")
    report: dict[str, Any] = {
        "command": recorded_command("experiments/encoder_ensemble.py", sys.argv[1:]),
        "cpu_flags": score.cpu_flags(),
        "benchmarks": {},
    }
    for name in args.bench or build.BENCHMARKS:
        corpus = score.load_corpus(name, base.docs)
        folder = score.collection_dir(base.cache, corpus, model, "default", None, score.decoder_cap(model, None))
        if not (folder / "qdrant").exists():
            raise SystemExit(f"no cached collection of the preset on {name}: run bench/ood/score.py first")
        doc_ids, texts, vectors = score.stored_points(folder)
        minilm, plain = score.minilm_vectors(corpus, texts, base.cache)
        doc_parts = mixes.part_views(model, vectors) | {"plain": unit_rows(plain)}
        ids = score.query_ids(corpus)
        queries = [corpus.bench.queries[q] for q in ids]
        query_parts = mixes.part_views(model, np.asarray(model.encode_queries(queries)))
        query_parts["plain"] = unit_rows(minilm.encode(queries))
        rows = {}
        for weights in MIXES:
            named = dict(zip(("plain", "encoder", "eos", "contextual"), weights))
            found = metrics.evaluate(mixes.rankings(query_parts, doc_parts, named, doc_ids, ids), corpus.bench.qrels)
            label = "plain MiniLM {} / encoder {} / h_EOS {} / h_C {}".format(*weights)
            rows[label] = found
            print(f"{name:9s} {label:52s} " + " ".join(f"{k}={v:.3f}" for k, v in found.items()), flush=True)
        report["benchmarks"][name] = rows
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
