"""``c2v-rag adapt``: a domain variant from a folder of documents alone, kept only if it passes its gate."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from c2v_rag.cli.arguments import PATHS_HELP, add_file_selection, file_selection
from c2v_rag.cli.errors import EXIT_BAD_INPUT

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers

EXIT_NOT_KEPT = 1


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "adapt",
        help="make a domain variant from documents alone (pseudo-queries, LoRA, a gate)",
        description="Make training pairs from documents (sentence crops, headings, an LLM's questions), train a LoRA "
        "variant on them mixed with general data, and keep it only on clear evidence: a gain over its start "
        "on your --questions, searched among every chunk, whose 95% interval lies above zero and that a sign "
        "test confirms; and STS-B dev held. Without --questions it trains and reports held-out pseudo-query "
        "scores but keeps nothing (gate.evidence in a --config file lets those decide); a re-run with "
        "--questions and the same --out reuses the candidate. Writes the variant, its pairs (a BEIR folder) "
        "and adapt_report.json to --out. Exit codes: 0 "
        "kept, 1 not kept (use the start model), 2 bad input or setup. A run cut short resumes when re-run "
        "with the same arguments. Guide: docs/adapt.md.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help=PATHS_HELP)
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for the adapted variant and its report")
    parser.add_argument("--from", dest="start", default=None, metavar="VARIANT", help="variant or preset to adapt")
    parser.add_argument("--config", default=None, metavar="FILE", help="a YAML file of adapt settings (AdaptConfig)")
    parser.add_argument(
        "--generator",
        choices=["local", "openai", "none"],
        default=None,
        help="who writes questions: the bundled SmolLM2-135M-Instruct (local, the default), an OpenAI-compatible "
        "endpoint (openai: --generator-url, --generator-model), or nobody (crops and headings only)",
    )
    parser.add_argument("--generator-url", default=None, metavar="URL", help="e.g. http://127.0.0.1:11434/v1")
    parser.add_argument("--generator-model", default=None, metavar="NAME", help="a model the endpoint serves")
    parser.add_argument("--max-generated", type=int, default=None, metavar="N", help="chunks to write questions for")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default 150)")
    parser.add_argument(
        "--train",
        dest="parts",
        choices=["encoder", "decoder", "both"],
        default=None,
        help="what LoRA trains: the encoder (default; fast on CPU), the decoder, or both",
    )
    parser.add_argument(
        "--general-data",
        default=None,
        metavar="DIR",
        help="a folder with stsb/stsb.{train,dev}.tsv (default: $C2V_RAG_GENERAL_DATA, else the hub); 'none': train "
        "on your documents' pairs alone and check no STS-B at the gate (offline, without a copy)",
    )
    parser.add_argument(
        "--questions",
        default=None,
        metavar="FILE",
        help='your own questions for the gate, JSONL: {"query": "...", "doc_ids": ["path/of/the/answer.md"]} per '
        "line; the gate then decides on them (MRR@10, each searched among every chunk of the documents) instead of "
        "held-out pseudo-queries. Never trained on",
    )
    add_file_selection(parser)
    parser.add_argument("--device", default=None, help="cpu, cuda... (default: cuda when present)")
    parser.add_argument("--overwrite", action="store_true", help="replace what a finished run left in --out")
    parser.set_defaults(on_interrupt="re-run it with the same arguments to resume")
    return parser


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    import yaml

    from c2v_rag.training.adapt.config import AdaptConfig
    from c2v_rag.training.adapt.general_data import GeneralDataError
    from c2v_rag.training.adapt.run import adapt

    try:
        raw: dict[str, Any] = {}
        if args.config:
            raw = yaml.safe_load(Path(args.config).read_text(encoding="utf-8")) or {}
        config = AdaptConfig.model_validate(raw)
        overrides = config.model_dump()
        if args.max_generated is not None:
            overrides["pairs"]["max_generated"] = args.max_generated
        if args.parts is not None:
            overrides["training"]["parts"] = args.parts
        if args.device is not None:
            overrides["training"]["device"] = args.device
        if args.questions is not None:
            overrides["gate"]["questions"] = args.questions
        overrides |= file_selection(args)
        config = AdaptConfig.model_validate(overrides)
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    paths = [Path(p) for p in args.paths]
    try:
        report = adapt(
            paths[0] if len(paths) == 1 else paths,
            args.out,
            config=config,
            start=args.start,
            generator=args.generator,
            generator_url=args.generator_url,
            generator_model=args.generator_model,
            steps=args.steps,
            general_data=args.general_data,
            overwrite=args.overwrite or None,
        )
    except (GeneralDataError, FileExistsError, FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(report.table())
    return 0 if report.kept else EXIT_NOT_KEPT
