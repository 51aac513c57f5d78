"""``c2v-rag env``: what this machine gives c2v_rag, for a bug report or a benchmark's record.

The versions of c2v_rag, Python, torch and the packages behind each extra; the CPU, its flags that decide speed
and what ``dtype="auto"``, ``quantize="auto"`` and a search's ``rerank="auto"`` pick on it; the GPUs; where caches
go; and the environment variables c2v_rag reads, with any secret's value hidden.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers

# The distributions behind the extras, in the order a reader looks for them.
PACKAGES = (
    "torch", "transformers", "tokenizers", "peft", "safetensors", "gguf", "qdrant-client", "qdrant-edge-py",
    "llama-index-core", "langchain-core", "sentence-transformers", "onnxruntime", "onnx", "bm25s", "ray",
    "fastapi", "uvicorn", "pyarrow", "pypdf", "python-docx", "python-pptx", "openpyxl", "xlrd", "beautifulsoup4",
    "pylatexenc", "striprtf", "olefile",
)  # fmt: skip
# The environment variables shown: c2v_rag's own and those of the libraries and runtimes it runs on.
_PREFIXES = ("C2V_RAG_", "HF_", "TRANSFORMERS_", "QDRANT_", "RAY_ADDRESS", "OMP_", "MKL_", "CUDA_VISIBLE")
# Environment variables whose values are never printed.
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("env", help="versions, CPU and GPU, caches: what to paste into a bug report")
    parser.add_argument("--json", action="store_true", help="print it as one JSON object")
    return parser


def run(args: argparse.Namespace) -> int:
    facts = environment()
    if args.json:
        print(json.dumps(facts, indent=1))
        return 0
    for section, values in facts.items():
        print(f"{section}:")
        for key, value in values.items():
            print(f"  {key}: {value}")
        if not values:
            print("  none set")
    return 0


def environment() -> dict[str, dict[str, Any]]:
    """Every fact ``c2v-rag env`` prints, by section."""
    import torch
    from huggingface_hub import constants as hub_constants

    from c2v_rag.core.cache import cache_dir
    from c2v_rag.core.devices import cpu_class, cpu_model, resolve_dtype, resolve_quantize, speed_flags, usable_cores
    from c2v_rag.hub.hub_access import hub_status
    from c2v_rag.version import __version__

    cpu = torch.device("cpu")
    cuda = torch.cuda.is_available()
    gpus = [torch.cuda.get_device_name(n) for n in range(torch.cuda.device_count())] if cuda else []
    return {
        "c2v_rag": {"version": __version__, "python": platform.python_version(), "platform": platform.platform()},
        "cpu": {
            "model": cpu_model() or "unknown",
            "cores usable": usable_cores(),
            "speed flags": " ".join(speed_flags()) or "none found",
            "class": cpu_class(),
            "dtype auto": str(resolve_dtype("auto", cpu)).removeprefix("torch."),
            "quantize auto": resolve_quantize("auto", cpu),
            "rerank auto": _rerank_auto(),
            "torch threads": torch.get_num_threads(),
        },
        "gpu": {"cuda": torch.version.cuda or "none", "devices": ", ".join(gpus) or "none"},
        "packages": {name: _version(name) for name in PACKAGES},
        "paths": {"cache": str(cache_dir()), "hugging face cache": hub_constants.HF_HUB_CACHE},
        "hub": {"endpoint": hub_constants.ENDPOINT, "answers": hub_status()},
        "environment": {
            name: "(set, hidden)" if any(word in name for word in _SECRET_WORDS) else value
            for name, value in sorted(os.environ.items())
            if name.startswith(_PREFIXES)
        },
    }


def _rerank_auto() -> str:
    """What a search's ``rerank="auto"`` does here (the default device and dtype, ``$C2V_RAG_RERANK``,
    ``$C2V_RAG_QUANTIZE``), and what the reranker computes in."""
    from c2v_rag.rag.options import ModelOptions
    from c2v_rag.rag.retrieval.reranking import auto_plan, resolve_rerank

    options = ModelOptions()  # resolves the default preset once for both questions
    try:
        depth = resolve_rerank("auto", 1, options)
        precision = auto_plan(options).precision
    except (ValueError, OSError) as err:  # a bad $C2V_RAG_RERANK, the default preset unreadable: named
        return f"error: {err}"
    return f"the top {depth} (the decoder in {precision})" if depth else "none"


def _version(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not installed"
