"""How the out-of-domain scores move with the mix of the preset's parts: each part re-weighted, no re-embedding.

The preset stores ``[sqrt(w_e) * unit(encoder); sqrt(w_c) * unit(h_C); sqrt(w_h) * unit(h_EOS)]`` with weights
that sum to 1 (``encoder_share`` s gives w_e = s and w_c = w_h = (1 - s) / 2), so a cosine between two of its
vectors is ``w_e cos_e + w_c cos_c + w_h cos_h``: every mix of the three parts is scored from one ingest (the
cached full collection of ``score.py``) and one query encode per instruction. A document scores as its best chunk,
as ``search_many(group_by_document=True)`` ranks it.

    python bench/ood/mixes.py --model default --task default --task MSMARCO-Passage \
        --share 0.5 0.6 0.7 0.8 0.9 1.0 --eos-fraction 0 0.5 0.75 1 --json bench/results/ood/mixes.json

``--eos-fraction f`` splits the decoder's weight 1 - s between h_EOS (f) and h_C (1 - f), the
``part_weights`` a variant's readout can set.

Run ``score.py`` on the model first: this reads its cached collection and refuses to ingest.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: its siblings import by name
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # and bench/common.py

import build
import metrics
import score
from common import recorded_command

from c2v_rag.evaluation.readout_mixes import mix_label, mix_weights, unit_rows


def part_views(model: Any, vectors: np.ndarray) -> dict[str, np.ndarray]:
    """Each part of the stored vectors [N, D], re-normalized: what each part scores alone."""
    parts = model.config.parts
    names = [name for name in ("encoder", "contextual", "eos") if name in parts]
    if len(names) != 3:
        raise SystemExit(f"mixes are defined for the [encoder; h_C; h_EOS] layout, not {sorted(parts)}")
    return {name: unit_rows(vectors[:, parts[name]]) for name in names}


def mixes(shares: list[float], eos_fractions: list[float]) -> dict[str, dict[str, float]]:
    """The weights to score: the encoder's weight s with the decoder's 1 - s split between h_EOS (a fraction f)
    and h_C (1 - f); f = 0.5 is ``encoder_share`` s. Beside them the prefix [encoder; h_C] of each equal split
    (what ``truncate_dim=960`` gives the preset), re-normalized, and each decoder part alone at an even share."""
    out = {mix_label(s, f): mix_weights(s, f) for s in shares for f in eos_fractions}
    # The prefix [encoder; h_C] (truncate_dim=960 for the preset) of each share's vector, re-normalized.
    out |= {
        f"encoder_share={s:g}, prefix [encoder; h_C]": {
            "encoder": s / (s + (1 - s) / 2),
            "contextual": (1 - s) / 2 / (s + (1 - s) / 2),
            "eos": 0.0,
        }
        for s in shares
    }
    out["encoder 0.5 + h_C 0.5"] = {"encoder": 0.5, "contextual": 0.5, "eos": 0.0}
    out["encoder 0.5 + h_EOS 0.5"] = {"encoder": 0.5, "contextual": 0.0, "eos": 0.5}
    return out


def rankings(
    query_parts: dict[str, np.ndarray],
    doc_parts: dict[str, np.ndarray],
    weights: dict[str, float],
    doc_ids: list[str],
    ids: list[str],
) -> dict[str, list[str]]:
    scores = sum(w * (query_parts[name] @ doc_parts[name].T) for name, w in weights.items() if w)
    return {q: score.best_documents(row, doc_ids) for q, row in zip(ids, np.asarray(scores))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--task", action="append", help="'default' or a task name; repeatable")
    parser.add_argument("--share", type=float, nargs="+", default=[0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    split = "h_EOS's fraction of the decoder's weight 1 - share (h_C has the rest); 0.5 is encoder_share"
    parser.add_argument("--eos-fraction", type=float, nargs="+", default=[0.5], help=split)
    parser.add_argument("--bench", action="append", choices=build.BENCHMARKS)
    parser.add_argument("--docs", type=Path, default=None)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument(
        "--decoder-max-length",
        type=int,
        default=None,
        help="the decoder_max_length score.py ingested with (default: ingest's for a new collection, as score.py's)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    base = score.parse_args(
        ["--model", args.model]
        + (["--docs", str(args.docs)] if args.docs else [])
        + (["--cache", str(args.cache)] if args.cache else [])
    )
    model = score.load_model(args.model)
    report: dict[str, Any] = {
        "command": recorded_command("bench/ood/mixes.py", sys.argv[1:]),
        "cpu_flags": score.cpu_flags(),
        "benchmarks": {},
    }
    for name in args.bench or build.BENCHMARKS:
        corpus = score.load_corpus(name, base.docs)
        cap = score.decoder_cap(model, args.decoder_max_length)
        folder = score.collection_dir(base.cache, corpus, model, args.model, None, cap)
        if not (folder / "qdrant").exists():
            again = "" if args.decoder_max_length is None else f" --decoder-max-length {args.decoder_max_length}"
            raise SystemExit(
                f"no cached collection for {args.model} on {name}: run bench/ood/score.py --model "
                f"{args.model} --bench {name}{again} first"
            )
        doc_ids, _, vectors = score.stored_points(folder)
        doc_parts = part_views(model, vectors)
        ids = score.query_ids(corpus)
        texts = [corpus.bench.queries[q] for q in ids]
        rows = {}
        for task in args.task or ["default"]:
            chosen = None if task == "default" else task
            query_parts = part_views(model, np.asarray(model.encode_queries(texts, task=chosen)))
            for mix, weights in mixes(args.share, args.eos_fraction).items():
                found = metrics.evaluate(rankings(query_parts, doc_parts, weights, doc_ids, ids), corpus.bench.qrels)
                rows[f"{task} | {mix}"] = found
                print(
                    f"{name:9s} {task:16s} {mix:40s} " + " ".join(f"{k}={v:.3f}" for k, v in found.items()), flush=True
                )
        report["benchmarks"][name] = rows
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
