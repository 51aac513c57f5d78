"""``c2v-rag serve``: the OpenAI-compatible embeddings server, with /v1/search against Qdrant."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from c2v_rag.cli.arguments import add_model_options, add_qdrant_options

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "serve",
        help="serve embeddings over HTTP (OpenAI's /v1/embeddings API) and search",
        description="An OpenAI-compatible embeddings server with dynamic batching, plus /v1/search against "
        "Qdrant, /health and /metrics (Prometheus). docs/serving.md has the API and the limits.",
    )
    parser.add_argument(
        "variant",
        nargs="?",
        default=None,
        metavar="VARIANT",
        help="variant directory or preset (default: the default preset)",
    )
    parser.add_argument("--host", default=None, help="interface to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=None, help="port (default 8080)")
    parser.add_argument(
        "--api-key",
        default=None,
        help="require 'Authorization: Bearer KEY' (default: $C2V_RAG_API_KEY; prefer the variable, "
        "since a command line is visible to other users)",
    )
    parser.add_argument("--model-name", default=None, help="the model id clients send (default: the variant's name)")
    parser.add_argument(
        "--default-input-type",
        choices=["query", "document"],
        default=None,
        help="for requests without input_type (plain OpenAI clients); default document",
    )
    parser.add_argument(
        "--max-wait-ms",
        type=float,
        default=None,
        help="longest a request waits for others to share its batch (default 5)",
    )
    parser.add_argument(
        "--max-batch-tokens",
        type=int,
        default=None,
        help="padded tokens per forward pass (default: 512 under int8, else 1,024 on CPU; 65,536 on GPU)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="intra-op CPU threads (default 1: measured best for latency on a shared machine)",
    )
    parser.add_argument("--max-texts", type=int, default=None, help="inputs per request (default 2048; more: 413)")
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="decoder tokens per request (default 262144; more: 413)"
    )
    parser.add_argument(
        "--max-queued-texts",
        type=int,
        default=None,
        help="texts waiting for the model (default 8192; more: 503 with Retry-After)",
    )
    parser.add_argument(
        "--release-memory-after",
        type=float,
        default=None,
        metavar="SECONDS",
        help="hand the memory forward passes freed back to the system once model work has paused this long "
        "(default 1; 0 keeps it for the next request: docs/serving.md, 'Memory over time')",
    )
    parser.add_argument(
        "--kernel-cache-shapes",
        type=int,
        default=None,
        metavar="N",
        help="compiled CPU kernels kept in each of torch's two kernel caches (default 256; torch's own: 1024)",
    )
    add_qdrant_options(parser)
    # VARIANT names the model; --model, as the other commands spell it, is accepted too but not listed.
    add_model_options(parser, argparse.SUPPRESS)
    # Uvicorn stops the server on SIGTERM itself, requests in flight answered, then ends by the signal.
    parser.set_defaults(own_sigterm=True)
    return parser


def run(args: argparse.Namespace) -> int:
    """Serve until stopped; flags left out take ServerConfig's defaults (and its environment variables)."""
    from c2v_rag.cli.errors import EXIT_INTERRUPTED
    from c2v_rag.core.interrupts import ignore_further_interrupts
    from c2v_rag.serving import ServerConfig, serve  # names the serve extra where it is missing

    fields = {
        "host": args.host,
        "port": args.port,
        "model": args.variant or args.model,
        "model_name": args.model_name,
        "device": args.device,
        "dtype": args.dtype,
        "quantize": args.quantize,
        "api_key": args.api_key,
        "default_input_type": args.default_input_type,
        "max_wait_ms": args.max_wait_ms,
        "max_batch_tokens": args.max_batch_tokens,
        "threads": args.threads or None,
        "max_texts_per_request": args.max_texts,
        "max_tokens_per_request": args.max_tokens,
        "max_queued_texts": args.max_queued_texts,
        "release_memory_idle_s": args.release_memory_after,
        "kernel_cache_shapes": args.kernel_cache_shapes,
        "qdrant_url": args.qdrant_url,
        "qdrant_path": args.path,
        "qdrant_store": args.store,
        "collection": args.collection,
        "prefer_grpc": args.grpc or None,
    }
    config = ServerConfig(**{k: v for k, v in fields.items() if v is not None})
    try:
        serve(config)
    except KeyboardInterrupt:
        # Ctrl-C is how a server in a terminal is stopped: uvicorn has shut it down (requests in flight answered)
        # and raised the signal again; the status says so, without an error line.
        ignore_further_interrupts()
        return EXIT_INTERRUPTED
    return 0
