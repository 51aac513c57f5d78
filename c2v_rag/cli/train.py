"""``c2v-rag train``: fine-tune a variant from a YAML recipe (also under ``torchrun -m c2v_rag.cli``)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from c2v_rag.cli.errors import EXIT_BAD_INPUT

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("train", help="fine-tune a variant from a YAML recipe (see recipes/)")
    parser.add_argument("config", help="the YAML training recipe")
    parser.add_argument(
        "--resume",
        nargs="?",
        const="auto",
        default=None,
        metavar="CHECKPOINT",
        help="continue from the latest checkpoint in output.dir, or from CHECKPOINT",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a recipe value, e.g. --set training.steps=100 --set datasets.0.path=DIR",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Train, then print where the variant went and its evaluations.

    A bad recipe, a diverged run or a checkpoint problem is an ``error:`` line and EXIT_BAD_INPUT here, named
    after the recipe where that helps, rather than the generic report of ``errors.py``.
    """
    from c2v_rag.training import load_config
    from c2v_rag.training.checkpoint import CheckpointError
    from c2v_rag.training.trainer import TrainingDivergedError, train

    try:
        config = load_config(args.config, args.overrides)
    except (FileNotFoundError, ValueError) as err:  # pydantic's ValidationError is a ValueError
        print(f"error: {args.config}: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    resume: bool | str = args.resume if args.resume not in (None, "auto") else args.resume == "auto"
    try:
        result = train(config, resume=resume)
    except (TrainingDivergedError, CheckpointError, FileExistsError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"variant written to {result.output_dir} after {result.steps} steps (final loss {result.final_loss:.4f})")
    for record in result.evaluations:
        print("  step {step}: ".format(**record) + ", ".join(f"{k}={v:.4f}" for k, v in record.items() if k != "step"))
    return 0
