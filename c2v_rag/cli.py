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


def cmd_eval(args) -> int:
    import json

    from .evaluation import BiEncoder, load_suite, run_suite
    from .evaluation.suites import format_table
    from .modeling import Causal2Vec

    suite = load_suite(args.sets, args.data)
    rows = {}
    for variant in args.variants:
        model = Causal2Vec.from_pretrained(None if variant == "default" else variant, device=args.device, dtype=args.dtype)
        rows[variant] = run_suite(model, suite, show_progress_bar=args.verbose)
    for baseline in args.baseline or []:
        rows[f"{baseline} (bi-encoder alone)"] = run_suite(BiEncoder(baseline, device=args.device), suite)
    print(format_table(rows))
    if args.json:
        from pathlib import Path

        Path(args.json).write_text(json.dumps(rows, indent=2))
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

    evaluate = sub.add_parser("eval", help="score variants on dev sets carved from the shared data")
    evaluate.add_argument("variants", nargs="+", help="variant directories or presets ('default' for the default preset)")
    evaluate.add_argument("--data", required=True, help="folder with scifact/, stsb/, emotion/, banking77/")
    evaluate.add_argument("--sets", nargs="+", default=["stsb-dev", "scifact-dev", "emotion-val"],
                          help="dev sets: stsb-dev, scifact-dev, emotion-val, banking77-dev")
    evaluate.add_argument("--baseline", nargs="*", help="also score bi-encoders alone, e.g. all-minilm-l6-v2")
    evaluate.add_argument("--json", help="write all scores to this file")
    evaluate.add_argument("--device", default=None)
    evaluate.add_argument("--dtype", default=None, choices=["auto", "float32", "bfloat16", "float16"])
    evaluate.set_defaults(func=cmd_eval)

    sub.add_parser("presets", help="list the shipped presets").set_defaults(func=cmd_presets)
    sub.add_parser("tasks", help="list the registered task instructions").set_defaults(func=cmd_tasks)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
