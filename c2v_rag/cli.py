"""The ``c2v-rag`` command line."""

from __future__ import annotations

import argparse
import logging
import sys


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help="variant directory or preset (default: the default preset)")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1... (default: cuda when present)")
    parser.add_argument("--dtype", default=None, choices=["auto", "float32", "bfloat16", "float16"])


def _load(args):
    from .modeling import Causal2Vec

    return Causal2Vec.from_pretrained(args.model, device=args.device, dtype=args.dtype)


def cmd_compare(args) -> int:
    model = _load(args)
    query = model.encode_queries([args.query], task=args.task, instruction=args.instruction)
    docs = model.encode_documents(args.documents, task=args.task)
    scores = model.similarity(query, docs)[0].tolist()
    print(f"query: {args.query}")
    for score, doc in sorted(zip(scores, args.documents), reverse=True):
        print(f"  {score:+.4f}  {doc[:100]}")
    return 0


def cmd_presets(args) -> int:
    from .presets import DEFAULT_PRESET, list_presets

    for name in list_presets():
        print(name + ("  (default)" if name == DEFAULT_PRESET else ""))
    return 0


def cmd_tasks(args) -> int:
    from .instructions import list_tasks

    for task in list_tasks():
        side = "all inputs" if task.symmetric else "queries only"
        print(f"{task.name:40s} {task.kind.value:20s} {side:13s} {task.instruction}")
    return 0


def cmd_train(args) -> int:
    from .training import load_config
    from .training.checkpoint import CheckpointError
    from .training.trainer import TrainingDivergedError, train

    try:
        config = load_config(args.config, args.overrides)
    except (FileNotFoundError, ValueError) as err:  # pydantic's ValidationError is a ValueError
        print(f"error: {args.config}: {err}", file=sys.stderr)
        return 2
    resume: bool | str = args.resume if args.resume not in (None, "auto") else args.resume == "auto"
    try:
        result = train(config, resume=resume)
    except (TrainingDivergedError, CheckpointError, FileExistsError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"variant written to {result.output_dir} after {result.steps} steps (final loss {result.final_loss:.4f})")
    for record in result.evaluations:
        print("  step {step}: ".format(**record) + ", ".join(f"{k}={v:.4f}" for k, v in record.items() if k != "step"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="c2v-rag", description="Causal2Vec embeddings for retrieval and RAG")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress and details")
    sub = parser.add_subparsers(dest="command", required=True)

    compare = sub.add_parser("compare", help="rank documents against a query by cosine similarity")
    compare.add_argument("query")
    compare.add_argument("documents", nargs="+")
    compare.add_argument("--task", default=None, help="registered task name, e.g. SciFact (see 'c2v-rag tasks')")
    compare.add_argument("--instruction", default=None, help="a literal query instruction instead of --task")
    _add_model_options(compare)
    compare.set_defaults(func=cmd_compare)

    train = sub.add_parser("train", help="fine-tune a variant from a YAML recipe (see recipes/)")
    train.add_argument("config", help="the YAML training recipe")
    train.add_argument("--resume", nargs="?", const="auto", default=None, metavar="CHECKPOINT",
                       help="continue from the latest checkpoint in output.dir, or from CHECKPOINT")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a recipe value, e.g. --set training.steps=100 --set datasets.0.path=DIR")
    train.set_defaults(func=cmd_train)

    sub.add_parser("presets", help="list the shipped presets").set_defaults(func=cmd_presets)
    sub.add_parser("tasks", help="list the registered task instructions").set_defaults(func=cmd_tasks)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
