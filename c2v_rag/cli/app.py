"""The ``c2v-rag`` command line."""

from __future__ import annotations

import argparse
import logging
import sys

from c2v_rag.cli.errors import EXIT_OK, EXIT_PARTIAL, one_line_warnings, report


def _add_model_options(parser: argparse.ArgumentParser,
                       model_help: str = "variant directory or preset (default: the default preset)") -> None:
    parser.add_argument("--model", default=None, help=model_help)
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1... (default: cuda when present)")
    parser.add_argument("--dtype", default=None, choices=["auto", "float32", "bfloat16", "float16"])
    _add_quantize(parser)


def _add_quantize(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quantize", default=None, choices=["none", "int8", "auto"],
                        help="CPU only: the decoder's linear layers in int8 (ONNX Runtime, pip install 'c2v-rag[int8]'; "
                             "1.4x float32 on an AVX2 CPU, vectors at cosine >= 0.998 to float); auto: int8 where it "
                             "met the quality bound (docs/performance.md). Default: none (search: the collection's)")


def _add_example_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--example", nargs=2, action="append", default=None, metavar=("QUERY", "RESPONSE"),
                        help="an in-context example for the query (Causal2Vec w/ ICL), repeatable; default: the "
                             "task's registered examples")


def _add_truncate_dim(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--truncate-dim", type=int, default=None, metavar="N",
                        help="shorter vectors (Matryoshka): one of the sizes the variant was trained for, e.g. 384 or "
                             "960 for the default preset (search embeds queries at the collection's size)")


def _load(args):
    from c2v_rag.model.causal2vec import Causal2Vec

    return Causal2Vec.from_pretrained(args.model, device=args.device, dtype=args.dtype, quantize=args.quantize)


def cmd_compare(args) -> int:
    model = _load(args)
    query = model.encode_queries([args.query], task=args.task, instruction=args.instruction, examples=args.example)
    docs = model.encode_documents(args.documents, task=args.task, long_texts=args.long_texts)
    scores = model.similarity(query, docs)[0].tolist()
    print(f"query: {args.query}")
    for score, doc in sorted(zip(scores, args.documents), reverse=True):
        print(f"  {score:+.4f}  {doc[:100]}")
    return 0


def cmd_push(args) -> int:
    from c2v_rag.hub.publish import prepare_upload, push_to_hub

    if args.dry_run:
        folder = prepare_upload(args.variant, args.dry_run, args.repo_id, license=args.license)
        print(f"wrote {folder} (not uploaded):")
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            print(f"  {path.relative_to(folder)}  {path.stat().st_size:,} bytes")
        return 0
    url = push_to_hub(args.variant, args.repo_id, private=args.private, license=args.license)
    print(f"uploaded {args.variant} to {url}")
    return 0


def cmd_presets(args) -> int:
    from c2v_rag.hub.presets import DEFAULT_PRESET, list_presets

    for name in list_presets():
        print(name + ("  (default)" if name == DEFAULT_PRESET else ""))
    return 0


def cmd_tasks(args) -> int:
    from c2v_rag.core.instructions import list_tasks

    for task in list_tasks():
        side = "all inputs" if task.symmetric else "queries only"
        print(f"{task.name:40s} {task.kind.value:20s} {side:13s} {task.instruction}")
        for query, response in task.examples:  # in-context examples (register_task(..., examples=...))
            print(f"{'':40s} example: {query!r} -> {response!r}")
    return 0


def cmd_eval(args) -> int:
    import json

    from c2v_rag.evaluation import BiEncoder, load_suite, run_suite
    from c2v_rag.evaluation.suites import SharedDocuments
    from c2v_rag.evaluation.suites import format_table
    from c2v_rag.model.causal2vec import Causal2Vec

    if not args.variants and not args.baseline:
        raise SystemExit("c2v-rag eval: name at least one variant (or 'default'), or a --baseline bi-encoder")
    readout = _parse_readout(args.readout or [])
    if args.chunk_pooling is not None and args.long_texts != "chunk":
        raise SystemExit("c2v-rag eval: --chunk-pooling applies to --long-texts chunk only")
    long_texts = None
    if args.long_texts != "truncate":
        long_texts = {"mode": args.long_texts, "pooling": args.chunk_pooling or "mean"}
        if args.long_texts == "maxp":
            long_texts.pop("pooling")
    long_kwargs = {} if long_texts is None else {"long_texts": long_texts}
    if args.truncate_dim is not None and not args.variants:
        raise SystemExit("c2v-rag eval: --truncate-dim applies to Causal2Vec variants; name one")
    suite = load_suite(args.sets, args.data)
    rows = {}
    for variant in args.variants:
        model = Causal2Vec.from_pretrained(None if variant == "default" else variant, device=args.device, dtype=args.dtype,
                                           quantize=args.quantize)
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
        for count in args.examples:
            label = name + (f" ({count} in-context examples)" if count else "")
            rows[label] = run_suite(shared, suite, show_progress_bar=args.verbose, examples=count, **long_kwargs,
                                    **size)
    for baseline in args.baseline or []:
        name = f"{baseline} (bi-encoder alone)"
        if long_texts is not None:
            name += f" (long texts: {_long_texts_label(long_texts)})"
        rows[name] = run_suite(BiEncoder(baseline, device=args.device), suite, **long_kwargs)
    print(format_table(rows))
    if args.json:
        from pathlib import Path

        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


def _long_texts_label(long_texts: dict) -> str:
    return long_texts["mode"] + (f", {long_texts['pooling']}-pooled" if long_texts["mode"] == "chunk" else "")


def _parse_readout(items: list[str]) -> dict:
    import yaml

    from c2v_rag.core.config import READOUT_FIELDS

    fields = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in READOUT_FIELDS:
            raise SystemExit(f"c2v-rag eval: --readout {item!r} must be FIELD=VALUE with FIELD one of {list(READOUT_FIELDS)}")
        fields[key] = yaml.safe_load(value)
    return fields


def _add_qdrant_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--qdrant-url", default=None, metavar="URL",
                        help="Qdrant server, e.g. https://host:6333 (API key from $QDRANT_API_KEY); "
                             "default: embedded Qdrant in a local directory")
    parser.add_argument("--path", default=None, metavar="LOCALDIR",
                        help="embedded Qdrant directory (default: $C2V_RAG_QDRANT_PATH or the user data dir)")
    parser.add_argument("--store", choices=["local", "edge"], default=None,
                        help="embedded engine: 'local' (qdrant-client's local mode) or 'edge' (Qdrant Edge: HNSW, "
                             "for large stores); default: an existing directory's, else local")
    parser.add_argument("--collection", default=None, metavar="NAME", help="collection name (default: c2v_rag)")
    parser.add_argument("--grpc", action="store_true", help="talk gRPC to the Qdrant server")


def _qdrant_args(args) -> dict:
    from c2v_rag.rag.store.collection import DEFAULT_COLLECTION

    return {"qdrant_url": args.qdrant_url, "path": args.path, "collection": args.collection or DEFAULT_COLLECTION,
            "prefer_grpc": args.grpc or None, "store": args.store}


def cmd_ingest(args) -> int:
    from pathlib import Path

    from c2v_rag.rag import IngestConfig, ingest

    fields = {"retry_attempts": args.retries, "max_file_bytes": _megabytes(args.max_file_mb)}
    config = IngestConfig(**{k: v for k, v in fields.items() if v is not None})
    result = ingest(
        [Path(p) for p in args.paths], model=args.model, device=args.device, dtype=args.dtype,
        quantize=args.quantize, chunk_size=args.chunk_size, chunk_overlap=args.chunk_overlap, batch_size=args.batch_size,
        on_error=args.on_error, sync=args.sync, show_progress=not args.quiet, sparse=args.sparse,
        versioned=args.versioned, payload_indexes=_parse_payload_indexes(args.payload_index or []), config=config,
        truncate_dim=args.truncate_dim,
        **_qdrant_args(args), **_ray_args(args),
    )
    print(f"ingested {result.summary()}")
    return EXIT_OK if result.ok else EXIT_PARTIAL


def cmd_embed(args) -> int:
    from pathlib import Path

    from c2v_rag.rag.ingestion.embed import embed

    result = embed([Path(p) for p in args.paths], args.out, model=args.model, device=args.device, dtype=args.dtype,
                   quantize=args.quantize, chunk_size=args.chunk_size, chunk_overlap=args.chunk_overlap, batch_size=args.batch_size,
                   on_error=args.on_error, show_progress=not args.quiet, truncate_dim=args.truncate_dim,
                   **_ray_args(args))
    print(f"embedded {result.summary()}")
    return EXIT_OK


def _add_ray_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                        help="run on a Ray cluster: ADDRESS ('auto', HOST:6379, ray://HOST:10001), or none for "
                             "$RAY_ADDRESS or a local one (pip install 'c2v-rag[ray]')")
    parser.add_argument("--actors", type=int, default=None, help="with --ray: embedding actors (default 1)")
    parser.add_argument("--gpus-per-actor", type=float, default=None,
                        help="with --ray: GPUs per actor (default 1 when the cluster has GPUs, else 0)")
    parser.add_argument("--cpus-per-actor", type=float, default=None,
                        help="with --ray: CPUs per actor, its torch threads on CPU (default 1)")


def _ray_args(args) -> dict:
    from c2v_rag.rag.ingestion.ray_dataflow import RayOptions

    given = {"actors": args.actors, "gpus_per_actor": args.gpus_per_actor, "cpus_per_actor": args.cpus_per_actor}
    if args.ray is None:
        if any(v is not None for v in given.values()):
            raise ValueError("--actors, --gpus-per-actor and --cpus-per-actor need --ray")
        return {}
    fields = {k: v for k, v in given.items() if v is not None}
    return {"engine": "ray", "ray": RayOptions(address=args.ray or None, **fields)}


def _megabytes(value: float | None) -> int | None:
    return None if value is None else max(1, int(value * 1024 * 1024))


def _parse_payload_indexes(items: list[str]) -> dict[str, str]:
    indexes = {}
    for item in items:
        key, sep, kind = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--payload-index {item!r} must be KEY=TYPE, e.g. year=integer")
        indexes[key] = kind
    return indexes


def _parse_filter(text: str | None) -> dict | None:
    import json

    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"--filter {text!r} is not JSON ({err.msg}); write it like "
                         "--filter '{\"year\": {\"gte\": 2020}}'") from None
    if not isinstance(value, dict):
        raise ValueError(f"--filter must be a JSON object of metadata conditions, got {text!r}")
    return value


def cmd_search(args) -> int:
    import json
    import textwrap

    from c2v_rag.core.devices import configure_cpu_threads
    from c2v_rag.rag import search
    from c2v_rag.rag.options import SearchOptions

    # One query is latency-bound: one thread unless told otherwise (docs/serving.md, "CPU threads").
    configure_cpu_threads(args.threads)
    connection = _qdrant_args(args)
    # The SearchOptions /v1/search builds too, here from the flags (argparse has checked mode and fusion).
    options = SearchOptions(collection=connection.pop("collection"), task=args.task, instruction=args.instruction,
                            examples=args.example, filter=_parse_filter(args.filter), mode=args.mode,
                            fusion=args.fusion, group_by_document=args.group_by_document)
    hits = search(args.query, args.top_k, options=options, model=args.model, device=args.device, dtype=args.dtype,
                  quantize=args.quantize, **connection)
    if args.json:
        print(json.dumps([h.model_dump() for h in hits], ensure_ascii=False, indent=2))
        return 0
    if not hits:
        print("no results")
    for rank, hit in enumerate(hits, 1):
        where = hit.source or hit.doc_id or hit.id
        chunk = f"  (chunk {hit.chunk_index})" if hit.chunk_index is not None else ""
        print(f"{rank:2d}. {hit.score:.4f}  {where}{chunk}")
        snippet = " ".join(hit.text.split())
        print(textwrap.indent(textwrap.shorten(snippet, width=args.snippet_chars, placeholder=" ..."), "    "))
    return 0


def cmd_reindex(args) -> int:
    from c2v_rag.rag import reindex

    qdrant = _qdrant_args(args)
    sparse = {"keep": "keep", "bm25": "bm25", "none": None}[args.sparse]
    result = reindex(qdrant.pop("collection"), model=args.model, device=args.device, dtype=args.dtype,
                     quantize=args.quantize, sparse=sparse,
                     batch_size=args.batch_size, drop_previous=args.drop_previous, show_progress=not args.quiet,
                     **qdrant)
    print(f"reindexed: {result.summary()}")
    return 0


def cmd_migrate(args) -> int:
    from c2v_rag.rag import migrate

    qdrant = _qdrant_args(args)
    result = migrate(qdrant["collection"], source_path=qdrant["path"], source_url=qdrant["qdrant_url"],
                     source_store=qdrant["store"], target_path=args.to_path, target_url=args.to_url,
                     target_store=args.to_store, target_collection=args.to_collection, batch_size=args.batch_size)
    print(f"migrated: {result.summary()}")
    return 0


def cmd_serve(args) -> int:
    from c2v_rag.serving.config import ServerConfig
    from c2v_rag.serving.server import serve

    fields = {"host": args.host, "port": args.port, "model": args.variant or args.model, "model_name": args.model_name,
              "device": args.device, "dtype": args.dtype, "quantize": args.quantize, "api_key": args.api_key,
              "default_input_type": args.default_input_type, "max_wait_ms": args.max_wait_ms,
              "max_batch_tokens": args.max_batch_tokens, "threads": args.threads or None,
              "max_texts_per_request": args.max_texts, "max_tokens_per_request": args.max_tokens,
              "max_queued_texts": args.max_queued_texts, "qdrant_url": args.qdrant_url,
              "qdrant_path": args.path, "qdrant_store": args.store, "collection": args.collection,
              "prefer_grpc": args.grpc or None}
    config = ServerConfig(**{k: v for k, v in fields.items() if v is not None})
    serve(config)
    return 0


def cmd_train(args) -> int:
    from c2v_rag.training import load_config
    from c2v_rag.training.checkpoint import CheckpointError
    from c2v_rag.training.trainer import TrainingDivergedError, train

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
    _add_example_option(compare)
    compare.add_argument("--long-texts", default="truncate", choices=["truncate", "chunk"],
                         help="documents longer than the model reads: truncate them (default) or embed overlapping "
                              "windows, mean-pooled into one vector")
    _add_model_options(compare)
    compare.set_defaults(func=cmd_compare)

    evaluate = sub.add_parser("eval", help="score variants on dev sets carved from the shared data")
    evaluate.add_argument("variants", nargs="*", help="variant directories or presets ('default' for the default preset)")
    evaluate.add_argument("--data", required=True, help="folder with scifact/, stsb/, emotion/, banking77/")
    evaluate.add_argument("--sets", nargs="+", default=["stsb-dev", "scifact-dev", "emotion-val"],
                          help="dev sets: stsb-dev, scifact-dev, scifact-dev-1k, emotion-val, banking77-dev")
    evaluate.add_argument("--baseline", nargs="*", help="also score bi-encoders alone, e.g. all-minilm-l6-v2")
    evaluate.add_argument("--json", help="write all scores to this file")
    evaluate.add_argument("--max-length", type=int, default=None,
                          help="bound the decoder sequence while scoring (default: the variant's own)")
    evaluate.add_argument("--readout", action="append", metavar="FIELD=VALUE",
                          help="score the variants with another readout of the same weights, e.g. "
                               "representation=contextual or normalize_parts=true (repeatable)")
    evaluate.add_argument("--long-texts", default="truncate", choices=["truncate", "chunk", "maxp"],
                          help="documents longer than the model reads: truncate them (default), chunk them into "
                               "windows pooled into one vector, or maxp: score each by its best window")
    evaluate.add_argument("--chunk-pooling", default=None, choices=["max", "mean"],
                          help="with --long-texts chunk: pool the windows' unit vectors by mean (default) or max")
    evaluate.add_argument("--truncate-dim", type=int, default=None, metavar="N",
                          help="score the first N values (a Matryoshka size the variants were trained for)")
    evaluate.add_argument("--examples", type=int, nargs="+", default=[0], metavar="K",
                          help="K in-context examples per query (Causal2Vec w/ ICL), drawn from the set's train side: "
                               "train claims for scifact-dev*, other labels' texts for classification sets (default 0). "
                               "Several counts (--examples 0 1 3) give a row each and encode a retrieval corpus once")
    evaluate.add_argument("--device", default=None)
    evaluate.add_argument("--dtype", default=None, choices=["auto", "float32", "bfloat16", "float16"])
    _add_quantize(evaluate)
    evaluate.set_defaults(func=cmd_eval)

    ingest = sub.add_parser(
        "ingest", help="chunk, embed and store files in Qdrant (re-runs add nothing)",
        description="Chunk, embed and store .txt, .md and .jsonl files (or folders of them) in a Qdrant "
                    "collection. Re-running skips stored chunks and replaces changed documents; without --sync "
                    "nothing is ever deleted. Exit codes: 0 done, 1 some batches failed (--on-error continue), "
                    "2 bad input or setup (nothing written), 3 failed midway (re-run to resume), 130 interrupted.")
    ingest.add_argument("paths", nargs="+", metavar="PATH", help="file or folder of .txt, .md, .jsonl")
    _add_qdrant_options(ingest)
    ingest.add_argument("--chunk-size", type=int, default=None, help="decoder tokens per chunk (default 200)")
    ingest.add_argument("--chunk-overlap", type=int, default=None, help="tokens shared by neighbouring chunks (default 20)")
    ingest.add_argument("--batch-size", type=int, default=None, help="chunks embedded and uploaded together (default 256)")
    ingest.add_argument("--on-error", choices=["raise", "continue"], default=None,
                        help="stop at the first failed batch, unreadable file or bad JSONL record (default), "
                             "or report it, skip it and go on")
    ingest.add_argument("--sync", action="store_true",
                        help="make the collection mirror PATHs: delete the points of files gone from them "
                             "(never points from other paths; nothing when a PATH is missing or a file unreadable)")
    ingest.add_argument("--retries", type=int, default=None, metavar="N",
                        help="attempts per Qdrant request, reaching the server included (default 5)")
    ingest.add_argument("--max-file-mb", type=float, default=None, metavar="MB",
                        help="skip .txt/.md files larger than this, with a warning (default 64)")
    ingest.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    ingest.add_argument("--sparse", choices=["bm25"], default=None,
                        help="also store BM25 sparse vectors, for search --mode sparse|hybrid")
    ingest.add_argument("--versioned", action="store_true",
                        help="--collection is an alias: a new one gets NAME_v1 behind it once written "
                             "(see c2v-rag reindex)")
    ingest.add_argument("--payload-index", action="append", metavar="KEY=TYPE",
                        help="index a metadata key for filters on a server: keyword, integer, float, bool, "
                             "datetime, text, uuid (repeatable)")
    _add_truncate_dim(ingest)
    _add_ray_options(ingest)
    _add_model_options(ingest)
    ingest.set_defaults(func=cmd_ingest)

    embed = sub.add_parser(
        "embed", help="chunk and embed files into Parquet (ids, text, metadata, vector), with no vector store",
        description="Chunk and embed .txt, .md, .jsonl and .parquet files (or folders of them) into Parquet files "
                    "under --out: one row per chunk with the point id ingest would give it, the document id, chunk "
                    "index, text, metadata (JSON) and the vector. On this machine, or on Ray with --ray.")
    embed.add_argument("paths", nargs="+", metavar="PATH", help="file or folder of .txt, .md, .jsonl, .parquet")
    embed.add_argument("--out", required=True, metavar="DIR", help="a new or empty folder for the Parquet files")
    embed.add_argument("--chunk-size", type=int, default=None, help="decoder tokens per chunk (default 200)")
    embed.add_argument("--chunk-overlap", type=int, default=None, help="tokens shared by neighbouring chunks (default 20)")
    embed.add_argument("--batch-size", type=int, default=None, help="chunks embedded together (default 256)")
    embed.add_argument("--on-error", choices=["raise", "continue"], default=None,
                       help="stop at the first unreadable file or bad record (default), or skip it and go on")
    embed.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    _add_truncate_dim(embed)
    _add_ray_options(embed)
    _add_model_options(embed)
    embed.set_defaults(func=cmd_embed)

    reindex = sub.add_parser(
        "reindex", help="re-embed the collection behind an alias with another model, then switch the alias",
        description="Fill NAME_v(n+1) from the chunks behind the alias --collection, embedded with --model, then "
                    "point the alias at it in one step; searches keep running on the old one meanwhile.")
    _add_qdrant_options(reindex)
    reindex.add_argument("--sparse", choices=["keep", "bm25", "none"], default="keep",
                         help="BM25 sparse vectors: keep the old collection's setting (default), add or drop them")
    reindex.add_argument("--batch-size", type=int, default=256, help="chunks embedded and uploaded together")
    reindex.add_argument("--drop-previous", action="store_true", help="delete the old collection after the switch")
    reindex.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    _add_model_options(reindex, "the new variant directory or preset (default: the default preset)")
    reindex.set_defaults(func=cmd_reindex)

    migrate = sub.add_parser(
        "migrate", help="copy a collection to another store (local mode, Qdrant Edge, a server) without re-embedding",
        description="Copy --collection (or the collection an alias names, and the alias) from the store given by "
                    "--path/--qdrant-url to the one given by --to-path/--to-url: ids, payloads and vectors unchanged. "
                    "Run it again to resume a stopped copy.")
    _add_qdrant_options(migrate)
    migrate.add_argument("--to-path", default=None, metavar="LOCALDIR", help="the target embedded store")
    migrate.add_argument("--to-url", default=None, metavar="URL", help="the target Qdrant server")
    migrate.add_argument("--to-store", choices=["local", "edge"], default=None,
                         help="the target's embedded engine (default: an existing directory's, else local)")
    migrate.add_argument("--to-collection", default=None, metavar="NAME", help="the copy's name (default: the same)")
    migrate.add_argument("--batch-size", type=int, default=256, help="points copied per request")
    migrate.set_defaults(func=cmd_migrate)

    search = sub.add_parser("search", help="search an ingested collection",
                            description="Print the chunks nearest to QUERY: score, source and a snippet.")
    search.add_argument("query")
    search.add_argument("-k", "--top-k", type=int, default=5, help="number of results (default 5)")
    _add_qdrant_options(search)
    search.add_argument("--task", default=None, help="registered task whose instruction the query gets")
    search.add_argument("--instruction", default=None, help="a literal query instruction instead of --task")
    _add_example_option(search)
    search.add_argument("--snippet-chars", type=int, default=300, help="snippet length (default 300)")
    search.add_argument("--json", action="store_true", help="print the hits as JSON")
    search.add_argument("--filter", default=None, metavar="JSON",
                        help='metadata conditions, e.g. \'{"topic": "physics", "year": {"gte": 2020}, '
                             '"must_not": {"lang": ["de"]}}\'')
    search.add_argument("--mode", choices=["dense", "sparse", "hybrid"], default="dense",
                        help="dense vectors (default), BM25, or both fused (needs ingest --sparse bm25)")
    search.add_argument("--fusion", choices=["rrf", "dbsf"], default="rrf",
                        help="how --mode hybrid fuses the two lists: reciprocal rank (default) or "
                             "distribution-based score fusion")
    search.add_argument("--group-by-document", action="store_true",
                        help="the top-k documents, each shown by its best chunk, rather than the top-k chunks")
    search.add_argument("--threads", type=int, default=1,
                        help="intra-op CPU threads (default 1: measured fastest for one query on a busy machine)")
    _add_model_options(search, "variant directory or preset (default: the one the collection was built with)")
    search.set_defaults(func=cmd_search)

    serve = sub.add_parser(
        "serve", help="serve embeddings over HTTP (OpenAI's /v1/embeddings API) and search",
        description="An OpenAI-compatible embeddings server with dynamic batching, plus /v1/search against "
                    "Qdrant, /health and /metrics (Prometheus). docs/serving.md has the API and the limits.")
    serve.add_argument("variant", nargs="?", default=None, metavar="VARIANT",
                       help="variant directory or preset (default: the default preset)")
    serve.add_argument("--host", default=None, help="interface to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=None, help="port (default 8080)")
    serve.add_argument("--api-key", default=None,
                       help="require 'Authorization: Bearer KEY' (default: $C2V_RAG_API_KEY; prefer the variable, "
                            "since a command line is visible to other users)")
    serve.add_argument("--model-name", default=None, help="the model id clients send (default: the variant's name)")
    serve.add_argument("--default-input-type", choices=["query", "document"], default=None,
                       help="for requests without input_type (plain OpenAI clients); default document")
    serve.add_argument("--max-wait-ms", type=float, default=None,
                       help="longest a request waits for others to share its batch (default 5)")
    serve.add_argument("--max-batch-tokens", type=int, default=None,
                       help="padded tokens per forward pass (default: 1,024 on CPU, 65,536 on GPU)")
    serve.add_argument("--threads", type=int, default=None,
                       help="intra-op CPU threads (default 1: measured best for latency on a shared machine)")
    serve.add_argument("--max-texts", type=int, default=None, help="inputs per request (default 2048; more: 413)")
    serve.add_argument("--max-tokens", type=int, default=None,
                       help="decoder tokens per request (default 262144; more: 413)")
    serve.add_argument("--max-queued-texts", type=int, default=None,
                       help="texts waiting for the model (default 8192; more: 503 with Retry-After)")
    _add_qdrant_options(serve)
    serve.add_argument("--model", default=None, help=argparse.SUPPRESS)
    serve.add_argument("--device", default=None, help="cpu, cuda, cuda:1... (default: cuda when present)")
    serve.add_argument("--dtype", default=None, choices=["auto", "float32", "bfloat16", "float16"])
    _add_quantize(serve)
    serve.set_defaults(func=cmd_serve)

    train = sub.add_parser("train", help="fine-tune a variant from a YAML recipe (see recipes/)")
    train.add_argument("config", help="the YAML training recipe")
    train.add_argument("--resume", nargs="?", const="auto", default=None, metavar="CHECKPOINT",
                       help="continue from the latest checkpoint in output.dir, or from CHECKPOINT")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a recipe value, e.g. --set training.steps=100 --set datasets.0.path=DIR")
    train.set_defaults(func=cmd_train)

    push = sub.add_parser("push", help="upload a variant to the Hugging Face Hub with a generated model card")
    push.add_argument("variant", help="variant directory or preset name")
    push.add_argument("repo_id", help="the Hub model repo, e.g. your-name/c2v-smollm2-scifact")
    push.add_argument("--private", action="store_true", help="create the repo as private")
    push.add_argument("--license", default="apache-2.0", help="the licence to publish under (check your data's terms)")
    push.add_argument("--dry-run", metavar="FOLDER", default=None,
                      help="write what would be uploaded (card included) to FOLDER instead of uploading")
    push.set_defaults(func=cmd_push)

    sub.add_parser("presets", help="list the shipped presets").set_defaults(func=cmd_presets)
    sub.add_parser("tasks", help="list the registered task instructions").set_defaults(func=cmd_tasks)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; every failure is one ``error:`` line and an exit code (cli_errors.py)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    one_line_warnings()
    try:
        return args.func(args)
    except (Exception, KeyboardInterrupt) as err:
        return report(err, args.verbose)

