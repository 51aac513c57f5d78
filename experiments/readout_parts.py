"""Score each part of a variant's embedding alone, from one encoding pass: the encoder's vector, the decoder's
readout, h_C and h_EOS.

A preset with ``encoder_share`` s and a normalized concat stores
``[sqrt(s) * unit(encoder); sqrt(1 - s) * unit([unit(h_C); unit(h_EOS)])]``, so every part is a slice of the
full vector. Each slice is scored re-normalized to unit length, which is exactly what
``c2v-rag eval VARIANT --readout encoder_share=1`` (the encoder part) or ``encoder_share=0`` (the decoder
part) would score, without encoding the dev sets again for each readout. The ``full`` row goes through the
same ``run_suite`` as ``c2v-rag eval`` and equals it.

    python experiments/readout_parts.py runs/preset/stage4-cosent --data ../shared/data \\
        --sets stsb-dev scifact-dev-1k --max-length 256 --json runs/eval/stage4_parts_a.json

Trained Matryoshka prefixes (``matryoshka_dims``) are scored the same way: a prefix re-normalized is what
``encode(truncate_dim=N)`` returns. ``--shares 0.7 0.9`` also scores the vector another ``encoder_share`` gives:
each part re-normalized and weighted ``[sqrt(s); sqrt((1 - s) / 2); sqrt((1 - s) / 2)]``, which is what
``c2v-rag eval VARIANT --readout encoder_share=s`` scores. ``--eos-fractions 0 0.75 1`` splits each share's decoder
weight between h_EOS and h_C otherwise (``part_weights``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from c2v_rag import Causal2Vec
from c2v_rag.evaluation import load_suite, run_suite
from c2v_rag.evaluation.readout_mixes import mix_label, mix_weights, unit_rows
from c2v_rag.evaluation.suites import format_table


class Mix:
    """The vector another ``encoder_share`` gives, from the stored one: each part re-normalized and weighted.
    ``eos_fraction`` f splits the decoder's weight 1 - s into h_EOS (f) and h_C (1 - f): the ``part_weights``
    ``{"encoder": s, "eos": (1 - s) f, "contextual": (1 - s) (1 - f)}``; 0.5 is ``encoder_share`` s."""

    def __init__(self, parts: dict[str, slice], share: float, prefix: int | None = None, eos_fraction: float = 0.5):
        self.parts, self.prefix = parts, prefix
        self.weights = mix_weights(share, eos_fraction)

    def __call__(self, vectors: np.ndarray) -> np.ndarray:
        pieces = [np.sqrt(w) * unit_rows(vectors[:, self.parts[name]]) for name, w in self.weights.items()]
        mixed = np.concatenate(pieces, 1)
        return mixed[:, : self.prefix]


class SlicedEmbedder:
    """The evaluators' interface over one model; vectors are computed once and every view slices them."""

    def __init__(self, model: Causal2Vec) -> None:
        self.model, self.cache = model, {}
        self.view: slice | Mix = slice(None)

    def _encode(self, side: str, texts: list[str], task: str | None, kwargs) -> np.ndarray:
        key = (side, task, tuple(texts))
        if key not in self.cache:
            encode = self.model.encode_queries if side == "query" else self.model.encode_documents
            self.cache[key] = encode(texts, task=task, **kwargs)
        vectors = self.cache[key]
        return unit_rows(self.view(vectors) if isinstance(self.view, Mix) else vectors[:, self.view])

    def encode_queries(self, texts, *, task=None, **kwargs):
        return self._encode("query", texts, task, kwargs)

    def encode_documents(self, texts, *, task=None, **kwargs):
        return self._encode("document", texts, task, kwargs)


def part_slices(model: Causal2Vec, shares: list[float], eos_fractions: list[float]) -> dict[str, slice | Mix]:
    """The views to score: the whole vector, each part of the layout (``Causal2VecConfig.parts``), the decoder's
    half, and every trained Matryoshka prefix."""
    config = model.config
    if config.representation != "concat" or not config.normalize_parts:
        raise SystemExit(
            f"parts are defined for a normalized concat readout, not {config.representation!r} "
            f"(normalize_parts={config.normalize_parts})"
        )
    parts = config.parts
    views: dict[str, slice | Mix] = {"full": parts["full"]}
    if "encoder" in parts:
        views |= {
            "encoder part (encoder_share=1)": parts["encoder"],
            "decoder part (encoder_share=0)": slice(parts["contextual"].start, parts["eos"].stop),
        }
    views |= {"h_C alone": parts["contextual"], "h_EOS alone": parts["eos"]}
    views |= {f"prefix {n} (truncate_dim={n})": slice(0, n) for n in config.matryoshka_dims}
    if shares and "encoder" in parts:
        views |= {f"encoder_share={s:g}": Mix(parts, s) for s in shares}
        views |= {f"encoder_share={s:g}, prefix {n}": Mix(parts, s, n) for s in shares for n in config.matryoshka_dims}
        views |= {mix_label(s, f): Mix(parts, s, eos_fraction=f) for s in shares for f in eos_fractions if f != 0.5}
    return views


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variant")
    parser.add_argument("--data", required=True)
    parser.add_argument("--sets", nargs="+", default=["stsb-dev", "scifact-dev-1k", "emotion-val", "banking77-dev"])
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--shares", type=float, nargs="*", default=[], help="also score these encoder_share mixes")
    parser.add_argument(
        "--eos-fractions", type=float, nargs="*", default=[], help="h_EOS's fractions of each share's decoder weight"
    )
    parser.add_argument("--only-shares", action="store_true", help="score the full vector and the mixes only")
    parser.add_argument("--views", nargs="*", default=[], help="score only these views, by name")
    args = parser.parse_args()
    model = Causal2Vec.from_pretrained(
        None if args.variant == "default" else args.variant, device="cpu", dtype="float32"
    )
    if args.max_length:
        model.max_seq_length = args.max_length
    suite = load_suite(args.sets, args.data)
    embedder, rows = SlicedEmbedder(model), {}
    views = part_slices(model, args.shares, args.eos_fractions)
    if args.only_shares:
        views = {k: v for k, v in views.items() if k == "full" or isinstance(v, Mix) and v.prefix is None}
    if args.views:
        views = {k: v for k, v in views.items() if k in args.views}
    for name, view in views.items():
        embedder.view = view
        rows[f"{args.variant}: {name}"] = run_suite(embedder, suite)
        print(format_table({k: rows[k] for k in [f"{args.variant}: {name}"]}), flush=True)
    print(format_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
