"""``c2v-rag train``: fine-tune a variant from a YAML recipe (also under ``torchrun -m c2v_rag.cli``)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from c2v_rag.cli.errors import EXIT_BAD_INPUT, interrupted_exit

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers
    from c2v_rag.training.config import TrainConfig


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("train", help="fine-tune a variant from a YAML recipe (see recipes/)")
    parser.add_argument(
        "config",
        help="the YAML training recipe: a file, or the name of one in the source repository's recipes/ "
        "(own_data, llm2vec_mntp...)",
    )
    parser.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="PATH",
        help="train on this instead of the recipe's datasets (repeat for several): a folder of documents, a .tsv "
        "of query<TAB>positive[<TAB>negative] rows, a .jsonl of {query, positive, negatives} records, or a BEIR "
        "folder; the format is read from the path (docs/training.md)",
    )
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

    A bad recipe, a missing dataset, a diverged run or a checkpoint problem is an ``error:`` line and
    EXIT_BAD_INPUT here, named after the recipe where that helps, rather than the generic report of
    ``errors.py``; Ctrl-C is training's own line (what was saved, the command that resumes) and EXIT_INTERRUPTED
    (SIGTERM: the same line and EXIT_TERMINATED).
    """
    from c2v_rag.cli.errors import validation_messages
    from c2v_rag.core.interrupts import ignore_further_interrupts
    from c2v_rag.training import TrainConfig, load_config
    from c2v_rag.training.checkpoint import CheckpointError
    from c2v_rag.training.data import check_data_paths
    from c2v_rag.training.trainer import Trainer, TrainingDivergedError

    try:
        config = load_config(args.config, args.overrides, args.data)
        check_data_paths(config, args.config, data_given=bool(args.data))
    except (FileNotFoundError, ValueError) as err:  # pydantic's ValidationError is a ValueError
        print(f"error: {args.config}: {validation_messages(err, TrainConfig) or err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    resume: bool | str = args.resume if args.resume not in (None, "auto") else args.resume == "auto"
    trainer = Trainer(config)
    try:
        trainer.setup(resume=resume)
        result = trainer.fit()
    except (TrainingDivergedError, CheckpointError, FileExistsError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM (Terminated)
        ignore_further_interrupts()  # the run has stopped; a second Ctrl-C must not cut its message or exit short
        print(f"error: {interrupted_message(config, trainer.step, command_words(args))}", file=sys.stderr)
        return interrupted_exit(err)
    print(f"variant written to {result.output_dir} after {result.steps} steps (final loss {result.final_loss:.4f})")
    for record in result.evaluations:
        print("  step {step}: ".format(**record) + ", ".join(f"{k}={v:.4f}" for k, v in record.items() if k != "step"))
    return 0


def command_words(args: argparse.Namespace) -> list[str]:
    """This run's command line as words: the same recipe, data and overrides (without ``--resume``)."""
    words = ["c2v-rag", "train", args.config]
    for path in args.data:
        words += ["--data", path]
    for override in args.overrides:
        words += ["--set", override]
    return words


def interrupted_message(config: TrainConfig, step: int, words: list[str]) -> str:
    """What a Ctrl-C after ``step`` steps left: the checkpoint a resume starts from (and the steps after it that
    are lost), or that none was saved; and the command, from this run's ``words``, that goes on."""
    from c2v_rag.training.checkpoint import list_checkpoints
    from c2v_rag.training.trainer import CHECKPOINTS_DIR

    output = Path(config.output.dir).expanduser()
    command = shlex.join([*words, "--resume"])
    found = list_checkpoints(output / CHECKPOINTS_DIR)
    total = config.training.steps
    if found:
        saved = int(found[-1].name.rsplit("-", 1)[-1])
        lost = f"; steps {saved + 1}-{step} after it are lost" if step > saved else ""
        return (
            f"training interrupted after step {step} of {total}. The last checkpoint, {found[-1]}, holds step "
            f"{saved}{lost}. Resume from it with: {command}"
        )
    every = config.training.save_every
    when = f"every {every} steps (training.save_every)" if every else "only at the end (training.save_every: 0)"
    if step == 0 and not (output.is_dir() and any(output.iterdir())):
        return f"training interrupted before its first step; nothing was written. Start again with: {shlex.join(words)}"
    return (
        f"training interrupted after step {step} of {total}, before any checkpoint was saved (one is saved {when}); "
        f"no step is kept. Start again from step 0 with: {command} (it reuses what {output} holds: mined "
        "negatives and pseudo-pairs)"
    )
