"""``c2v-rag eval``: score variants, and bi-encoders alone for reference, on dev sets carved from the data.

One row per variant and setting (readout, long-text handling, size, in-context example count), as a table
and optionally as JSON.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from c2v_rag.cli.arguments import add_runtime_options

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "eval",
        help="score variants on dev sets carved from the shared data",
        description="Score each variant (and each --baseline bi-encoder alone) on dev sets carved from the data in "
        "--data: STS-B (Spearman), SciFact (nDCG@10), Emotion and Banking77 (accuracy); a row per variant and "
        "setting, printed as a table and written as JSON with --json.",
    )
    parser.add_argument("variants", nargs="*", help="variant directories or presets ('default' for the default preset)")
    parser.add_argument("--data", required=True, help="folder with scifact/, stsb/, emotion/, banking77/")
    parser.add_argument(
        "--sets",
        nargs="+",
        default=["stsb-dev", "scifact-dev-1k", "emotion-val", "banking77-dev"],
        help="dev sets: stsb-dev, scifact-dev, scifact-dev-1k, emotion-val, banking77-dev (default: the four a model "
        "card reports; scifact-dev ranks all 5,183 abstracts, several times scifact-dev-1k's time)",
    )
    parser.add_argument("--baseline", nargs="*", help="also score bi-encoders alone, e.g. all-minilm-l6-v2")
    parser.add_argument("--json", help="write all scores to this file")
    parser.add_argument(
        "--max-length",
        type=int,
        default=None,
        help="bound the decoder sequence while scoring (default: the variant's own)",
    )
    parser.add_argument(
        "--readout",
        action="append",
        metavar="FIELD=VALUE",
        help="score the variants with another readout of the same weights, e.g. "
        "representation=contextual or normalize_parts=true (repeatable)",
    )
    parser.add_argument(
        "--long-texts",
        default="truncate",
        choices=["truncate", "chunk", "maxp"],
        help="documents longer than the model reads: truncate them (default), chunk them into "
        "windows pooled into one vector, or maxp: score each by its best window",
    )
    parser.add_argument(
        "--chunk-pooling",
        default=None,
        choices=["max", "mean"],
        help="with --long-texts chunk: pool the windows' unit vectors by mean (default) or max",
    )
    parser.add_argument(
        "--truncate-dim",
        type=int,
        default=None,
        metavar="N",
        help="score the first N values (a Matryoshka size the variants were trained for)",
    )
    parser.add_argument(
        "--examples",
        type=int,
        nargs="+",
        default=[0],
        metavar="K",
        help="K in-context examples per query (Causal2Vec w/ ICL), drawn from the set's train side: "
        "train claims for scifact-dev*, other labels' texts for classification sets (default 0). "
        "Several counts (--examples 0 1 3) give a row each and encode a retrieval corpus once",
    )
    add_runtime_options(parser, device_help=None)
    return parser


def run(args: argparse.Namespace) -> int:
    """Check the flags, score every variant and baseline, print the table and write ``--json``."""
    import json
    from pathlib import Path

    from c2v_rag.evaluation import load_suite
    from c2v_rag.evaluation.suites import format_table

    if not args.variants and not args.baseline:
        raise ValueError("name at least one variant (or 'default'), or a --baseline bi-encoder")
    readout = _parse_readout(args.readout or [])
    long_texts = _long_texts(args)
    if args.truncate_dim is not None and not args.variants:
        raise ValueError("--truncate-dim applies to Causal2Vec variants; name one")
    _check_models(args.variants, args.baseline or [])
    suite = load_suite(args.sets, args.data)  # checks what scoring its sets imports (the eval extra)
    rows: dict[str, Any] = {}
    scorers: list[Callable[[], dict[str, Any]]] = [
        partial(_score_variant, variant, args, suite, readout, long_texts) for variant in args.variants
    ]
    scorers += [partial(_score_baseline, baseline, args, suite, long_texts) for baseline in args.baseline or []]
    try:
        for score in scorers:
            rows.update(score())
            if args.json:  # after each model: a later one that fails loses none of the scores before it
                Path(args.json).write_text(json.dumps(rows, indent=2))
    except BaseException:
        if rows:
            print(format_table(rows))
            print(f"(scored before the error{f'; written to {args.json}' if args.json else ''})")
        raise
    print(format_table(rows))
    return 0


def _check_models(variants: list[str], baselines: list[str]) -> None:
    """Refuse, before any model loads, a variant that is not one, and a ``--baseline`` that names a variant (the
    flag takes every name after it: ``--baseline all-minilm-l6-v2 default`` scored ``default`` as a
    bi-encoder); scoring takes minutes a model, and a name that fails later lost the scores before it."""
    from c2v_rag.core.config import read_config
    from c2v_rag.core.errors import VariantLoadError
    from c2v_rag.hub.presets import resolve_variant_path
    from c2v_rag.hub.sources import resolve_reference

    for variant in variants:
        read_config(resolve_variant_path(variant))
    for baseline in baselines:
        try:
            read_config(resolve_variant_path(baseline))
        except VariantLoadError:
            resolve_reference(baseline)  # a bi-encoder: a packaged alias, a model directory or a hub id
        else:
            raise ValueError(
                f"--baseline {baseline!r} is a Causal2Vec variant, and --baseline scores bi-encoders alone: name "
                "variants before --baseline, which takes every name after it"
            )


def _score_variant(
    variant: str, args: argparse.Namespace, suite: Any, readout: dict[str, Any], long_texts: dict[str, str] | None
) -> dict[str, Any]:
    """One row per ``--examples`` count for ``variant``, named after the settings it was scored with."""
    from c2v_rag.evaluation import run_suite
    from c2v_rag.evaluation.suites import SharedDocuments
    from c2v_rag.model.causal2vec import Causal2Vec

    model = Causal2Vec.from_pretrained(variant, device=args.device, dtype=args.dtype, quantize=args.quantize)
    if args.max_length is not None:
        model.max_seq_length = args.max_length
    name = variant
    if readout:
        model.set_readout(**readout)
        name += " (" + ", ".join(f"{k}={v}" for k, v in readout.items()) + ")"
    if long_texts is not None:
        name += f" (long texts: {_long_texts_label(long_texts)})"
    size = {}
    if args.truncate_dim is not None:
        size = {"truncate_dim": model.config.check_truncate_dim(args.truncate_dim) or model.embedding_dim}
        name += f" (truncate_dim={args.truncate_dim})"
    shared = SharedDocuments(model)  # several example counts encode each retrieval corpus once
    rows = {}
    for count in args.examples:
        label = name + (f" ({count} in-context examples)" if count else "")
        rows[label] = run_suite(
            shared, suite, show_progress_bar=args.verbose, examples=count, **_long_texts_kwargs(long_texts), **size
        )
    return rows


def _score_baseline(
    baseline: str, args: argparse.Namespace, suite: Any, long_texts: dict[str, str] | None
) -> dict[str, Any]:
    """The row of the bi-encoder ``baseline`` scored alone."""
    from c2v_rag.evaluation import BiEncoder, run_suite

    name = f"{baseline} (bi-encoder alone)"
    if long_texts is not None:
        name += f" (long texts: {_long_texts_label(long_texts)})"
    return {name: run_suite(BiEncoder(baseline, device=args.device), suite, **_long_texts_kwargs(long_texts))}


def _long_texts(args: argparse.Namespace) -> dict[str, str] | None:
    """The ``long_texts`` setting from ``--long-texts`` and ``--chunk-pooling``; None to truncate."""
    if args.chunk_pooling is not None and args.long_texts != "chunk":
        raise SystemExit("c2v-rag eval: --chunk-pooling applies to --long-texts chunk only")
    if args.long_texts == "truncate":
        return None
    if args.long_texts == "maxp":
        return {"mode": "maxp"}
    return {"mode": args.long_texts, "pooling": args.chunk_pooling or "mean"}


def _long_texts_kwargs(long_texts: dict[str, str] | None) -> dict[str, Any]:
    return {} if long_texts is None else {"long_texts": long_texts}


def _long_texts_label(long_texts: dict[str, str]) -> str:
    return long_texts["mode"] + (f", {long_texts['pooling']}-pooled" if long_texts["mode"] == "chunk" else "")


def _parse_readout(items: list[str]) -> dict[str, Any]:
    """``--readout FIELD=VALUE`` flags as readout fields, each value read as YAML (``true``, ``2``, a word)."""
    import yaml

    from c2v_rag.core.config import READOUT_FIELDS

    fields = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in READOUT_FIELDS:
            raise SystemExit(
                f"c2v-rag eval: --readout {item!r} must be FIELD=VALUE with FIELD one of {list(READOUT_FIELDS)}"
            )
        fields[key] = yaml.safe_load(value)
    return fields
