"""Argument groups that several commands share, declared once so that their flags and help read the same.

Each ``add_*`` function adds its flags to one command's parser; the matching ``*_args`` function turns the
parsed flags back into the keyword arguments the library takes. Nothing here imports more than argparse
at module level: ``c2v-rag --help`` builds every parser, and the library is loaded only by a command's
``run``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    from c2v_rag.rag.handle import Collection

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

DTYPES = ["auto", "float32", "bfloat16", "float16"]
DEVICE_HELP = "cpu, cuda, cuda:1... (default: cuda when present)"
MODEL_HELP = "variant directory or preset (default: the default preset)"
# What ingest, embed and adapt read (documents/formats, SUPPORTED_SUFFIXES; tests/cli check the two agree),
# written out so that --help imports nothing of the library.
DOCUMENT_SUFFIXES = (
    ".txt, .md, .markdown, .mdx, .rst, .rest, .adoc, .asciidoc, .org, .tex, .ltx, .jsonl, .parquet, .csv, .tsv, "
    ".xlsx, .xlsm, .xltx, .xltm, .xls, .xlt, .ods, .ots, .html, .htm, .xhtml, .pdf, .docx, .docm, .dotx, .dotm, "
    ".doc, .dot, .odt, .ott, .rtf, .pptx, .pptm, .ppsx, .ppsm, .potx, .potm, .ppt, .pps, .pot, .odp, .otp, .epub, "
    ".ipynb, .info, .eml, .mbox, .msg, .zip, .tar, .tgz, .tbz2, .txz, .gz, .bz2 and .xz"
)
# Where a description sends a reader for the types (PATH's help lists the suffixes).
FORMATS_LISTED = "`c2v-rag formats` lists each type, and whether its reader is installed here"
PATHS_HELP = (
    f"file or folder of {DOCUMENT_SUFFIXES} "
    "(Parquet, Excel, HTML, PDF, Word, RTF, PowerPoint, EPUB and LaTeX files: pip install 'c2v-rag[formats]'), "
    "and these inside archives or compressed; README, INSTALL, FAQ and other documentation without a suffix as text"
)


def add_model_options(parser: argparse.ArgumentParser, model_help: str = MODEL_HELP) -> None:
    """``--model`` and the runtime flags: which variant a command loads, and how."""
    parser.add_argument("--model", default=None, help=model_help)
    add_runtime_options(parser)


def add_runtime_options(parser: argparse.ArgumentParser, device_help: str | None = DEVICE_HELP) -> None:
    """``--device``, ``--dtype`` and ``--quantize``: where and in which precision the model runs."""
    parser.add_argument("--device", default=None, help=device_help)
    parser.add_argument("--dtype", default=None, choices=DTYPES)
    parser.add_argument(
        "--quantize",
        default=None,
        choices=["none", "int8", "auto"],
        help="CPU only: the decoder's linear layers in int8 (ONNX Runtime, pip install 'c2v-rag[int8]'; "
        "speed and agreement with float in docs/performance.md); auto: int8 where it met the "
        "quality bound. Default: ingest and embed: an existing collection's, else auto ($C2V_RAG_QUANTIZE "
        "sets another); search: the collection's; other commands: none",
    )


def add_query_options(parser: argparse.ArgumentParser, task_help: str) -> None:
    """``--task``, ``--instruction`` and ``--example``: the prompt a query is embedded with."""
    parser.add_argument("--task", default=None, help=task_help)
    parser.add_argument("--instruction", default=None, help="a literal query instruction instead of --task")
    parser.add_argument(
        "--example",
        nargs=2,
        action="append",
        default=None,
        metavar=("QUERY", "RESPONSE"),
        help="an in-context example for the query (Causal2Vec w/ ICL), repeatable; default: the "
        "task's registered examples",
    )


def truncate_dim_value(text: str) -> int | Literal["full"]:
    """``--truncate-dim``'s value: a size, or ``full`` for the whole vector (``none`` too: the word an error
    suggests for Python's ``truncate_dim=None`` is one the flag takes)."""
    if text.strip().lower() in ("full", "none"):
        return "full"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a size (e.g. 384) nor 'full'") from None


def add_truncate_dim(parser: argparse.ArgumentParser) -> None:
    """``--truncate-dim``: store shorter (Matryoshka) vectors."""
    parser.add_argument(
        "--truncate-dim",
        type=truncate_dim_value,
        default=None,
        metavar="N",
        help="shorter vectors (Matryoshka): one of the sizes the variant was trained for, e.g. 384 or "
        "960 for the default preset, or 'full' for the whole vector (left out: what an existing collection "
        "stores, else the whole vector); search embeds queries at the collection's size",
    )


def add_chunk_options(parser: argparse.ArgumentParser) -> None:
    """``--chunk-size`` and ``--chunk-overlap``: how files are split before they are embedded."""
    parser.add_argument(
        "--chunk-size",
        type=int,
        default=None,
        metavar="N",
        help="decoder tokens per chunk (default 200); a chunk also stays within what the encoder reads "
        "(254 tokens for the default preset) unless N is larger than that",
    )
    parser.add_argument(
        "--chunk-overlap", type=int, default=None, metavar="N", help="tokens shared by neighbouring chunks (default 20)"
    )


def add_decoder_max_length(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    """``--decoder-max-length``: the decoder tokens each chunk is embedded with (IngestConfig.decoder_max_length);
    ``default`` says what leaving it out does, where not what an ingest does."""
    parser.add_argument(
        "--decoder-max-length",
        type=int,
        default=None,
        metavar="N",
        help="the decoder reads the first N tokens of each chunk (the encoder all of it), 0 whole chunks: "
        "fewer is a cheaper ingest (docs/performance.md measures it); default: "
        + (default or "what the collection recorded, else 96 for a model with a Contextual token (the presets)"),
    )


def add_chunk_context(parser: argparse.ArgumentParser, default: str) -> None:
    """``--chunk-context``: what leads each chunk after a document's first (IngestConfig.chunk_context); ``default``
    says what leaving it out does."""
    from c2v_rag.documents.chunking import ChunkContext  # the choices, where they are defined (no heavy import)

    parser.add_argument(
        "--chunk-context",
        choices=get_args(ChunkContext),
        default=None,
        help="lead: each chunk after a document's first starts with the document's title and the line under it "
        "(the title alone where that line is a heading); "
        "headings: also with the headings above the chunk (Title › Chapter › Section); sections: as headings, "
        f"with chunks cut at headings; none: chunks alone (default: {default})",
    )


def add_reading_limits(parser: argparse.ArgumentParser, command: str) -> None:
    """``--max-file-mb`` and ``--dry-run``: how large a file is read, and a listing of what ``command`` would read
    instead of the run (:func:`max_file_bytes` gives the first as IngestConfig.max_file_bytes)."""
    parser.add_argument(
        "--max-file-mb",
        type=float,
        default=None,
        metavar="MB",
        help="skip files larger than this, with a warning (default 64; JSONL, Parquet and CSV are streamed)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help=f"list the files the {command} would read, with their sizes, and what it would leave out; load no "
        "model, read no file, write nothing",
    )


def max_file_bytes(args: argparse.Namespace) -> int | None:
    """``--max-file-mb`` in bytes (None: not given)."""
    value = args.max_file_mb
    if value is not None and not value > 0:  # not NaN either
        raise ValueError(f"--max-file-mb {value:g}: pass the size in MB above which files are skipped, more than 0")
    return None if value is None else max(1, int(value * 1024 * 1024))


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """``-q``: no progress bar, for commands that draw one."""
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def add_sparse(parser: argparse.ArgumentParser) -> None:
    """``--sparse bm25``: a new collection's BM25 sparse vectors."""
    parser.add_argument(
        "--sparse",
        choices=["bm25"],
        default=None,
        help="also store BM25 sparse vectors, for search --mode sparse|hybrid",
    )


def add_payload_index(parser: argparse.ArgumentParser) -> None:
    """``--payload-index KEY=TYPE``, repeatable (:func:`payload_indexes_from` reads them)."""
    parser.add_argument(
        "--payload-index",
        action="append",
        metavar="KEY=TYPE",
        help="index a metadata key for filters on a server: keyword, integer, float, bool, "
        "datetime, text, uuid (repeatable)",
    )


def payload_indexes_from(args: argparse.Namespace) -> dict[str, str]:
    """``--payload-index KEY=TYPE`` flags as {key: type}; the store checks the types."""
    indexes = {}
    for item in args.payload_index or []:
        key, sep, kind = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--payload-index {item!r} must be KEY=TYPE, e.g. year=integer")
        indexes[key] = kind
    return indexes


def add_qdrant_options(parser: argparse.ArgumentParser) -> None:
    """Where the Qdrant store is: a server, or an embedded directory and its engine, and the collection."""
    add_store_options(parser)
    parser.add_argument("--collection", default=None, metavar="NAME", help="collection name (default: c2v_rag)")


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """Where the Qdrant store is: a server, or an embedded directory and its engine."""
    parser.add_argument(
        "--qdrant-url",
        default=None,
        metavar="URL",
        help="Qdrant server, e.g. https://host:6333 (API key from $QDRANT_API_KEY); "
        "default: embedded Qdrant in a local directory",
    )
    parser.add_argument(
        "--path",
        default=None,
        metavar="LOCALDIR",
        help="embedded Qdrant directory (default: $C2V_RAG_QDRANT_PATH or the user data dir)",
    )
    parser.add_argument(
        "--store",
        choices=["local", "edge"],
        default=None,
        help="embedded engine: 'local' (qdrant-client's local mode) or 'edge' (Qdrant Edge: HNSW, "
        "for large stores); default: an existing directory's, else local",
    )
    parser.add_argument("--grpc", action="store_true", help="talk gRPC to the Qdrant server")


def add_filter(parser: argparse.ArgumentParser, what: str) -> None:
    """``--filter``: metadata conditions as JSON, the dict form of :mod:`c2v_rag.store.filters`."""
    parser.add_argument(
        "--filter",
        default=None,
        metavar="JSON",
        help=f'{what}, e.g. \'{{"file_name": "tides.txt"}}\', \'{{"year": {{"gte": 2020}}, "must_not": '
        '{"lang": ["de"]}}\'; the keys are the chunks\' metadata fields (files: source, file_name, doc_id, '
        "chunk_index; PDFs: page_label; docs/ingest-and-search.md, 'Payload fields')",
    )


def filter_from(text: str | None) -> dict[str, Any] | None:
    """``--filter`` as a dict of metadata conditions; a ValueError that shows the syntax when it is not one."""
    import json

    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(
            f'--filter {text!r} is not JSON ({err.msg}); write it like --filter \'{{"year": {{"gte": 2020}}}}\''
        ) from None
    if not isinstance(value, dict):
        raise ValueError(f"--filter must be a JSON object of metadata conditions, got {text!r}")
    return value


def collection_from(args: argparse.Namespace) -> Collection:
    """The collection handle the store flags (:func:`add_qdrant_options`) and the model flags
    (:func:`add_model_options`, where the command has them) name."""
    from c2v_rag.rag.handle import Collection
    from c2v_rag.store.collection import DEFAULT_COLLECTION

    model = {key: getattr(args, key) for key in ("model", "device", "dtype", "quantize") if hasattr(args, key)}
    return Collection(
        args.collection or DEFAULT_COLLECTION,
        qdrant_url=args.qdrant_url,
        path=args.path,
        prefer_grpc=args.grpc or None,
        store=args.store,
        **model,
    )


def add_ray_options(parser: argparse.ArgumentParser) -> None:
    """``--ray`` and the actors' resources: embed on a Ray cluster instead of this process."""
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run on a Ray cluster: ADDRESS ('auto', HOST:6379, ray://HOST:10001), or none for "
        "$RAY_ADDRESS or a local one (pip install 'c2v-rag[ray]')",
    )
    parser.add_argument("--actors", type=int, default=None, help="with --ray: embedding actors (default 1)")
    parser.add_argument(
        "--gpus-per-actor",
        type=float,
        default=None,
        help="with --ray: GPUs per actor (default 1 when the cluster has GPUs, else 0)",
    )
    parser.add_argument(
        "--cpus-per-actor",
        type=float,
        default=None,
        help="with --ray: CPUs per actor, its torch threads on CPU (default 1)",
    )


def ray_args(args: argparse.Namespace) -> dict[str, Any]:
    """The engine keywords from :func:`add_ray_options`' flags: none without ``--ray``.

    The actor flags mean nothing without ``--ray``, so giving one alone is an error rather than ignored.
    """
    from c2v_rag.rag.ingestion.ray_dataflow import RayOptions

    given = {"actors": args.actors, "gpus_per_actor": args.gpus_per_actor, "cpus_per_actor": args.cpus_per_actor}
    if args.ray is None:
        if any(v is not None for v in given.values()):
            raise ValueError("--actors, --gpus-per-actor and --cpus-per-actor need --ray")
        return {}
    fields = {k: v for k, v in given.items() if v is not None}
    return {"engine": "ray", "ray": RayOptions(address=args.ray or None, **fields)}


def add_file_selection(parser: argparse.ArgumentParser) -> None:
    """``--exclude``, ``--text-suffix`` and ``--every-format``: which of a folder's files are read (the fields of
    :class:`~c2v_rag.documents.files.FileSelection`; :func:`file_selection` gives those the command line set)."""
    parser.add_argument(
        "--exclude",
        action="append",
        metavar="PATTERN",
        help="leave out a folder's files and subfolders matching this glob, as in a .gitignore: node_modules, "
        "'*.min.html', 'drafts/*' (repeatable; quote it from the shell)",
    )
    parser.add_argument(
        "--text-suffix",
        action="append",
        dest="text_suffixes",
        metavar="SUFFIX",
        help="also read files with this suffix, as plain text: source code, logs, configuration (.py, .log; "
        "'' for files without a suffix, such as NEWS or INTRO; repeatable)",
    )
    parser.add_argument(
        "--every-format",
        action="store_true",
        default=None,
        help="read every copy of a page a folder holds in several formats (guide.md beside guide.html); by default "
        "the source markup's alone, else HTML's, plain text's, a word processor's, PDF's, in that order",
    )


def file_selection(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~c2v_rag.documents.files.FileSelection` fields the command line set (``add_file_selection``'s
    options), to lay over a config."""
    given = {"exclude": args.exclude, "text_suffixes": args.text_suffixes, "every_format": args.every_format}
    return {field: value for field, value in given.items() if value}
