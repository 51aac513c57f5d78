"""Ray engine scaling: one process vs Ray with 1 and 2 actors, side by side in one run.

The same first N SciFact abstracts (written once as a folder of JSONL files of ``--docs-per-batch``
records, so both engines read files) are
ingested into a fresh embedded Qdrant per configuration, with the same model, chunking and batch
size:

- ``local``: ``c2v_rag.ingest`` in this process, model loaded before the clock starts, torch on
  ``--local-threads`` threads (default: one per actor of the widest Ray run, so it has the same cores);
- ``ray xN``: ``ingest(engine="ray")`` with N actors of one CPU each (one torch thread each). Its wall
  time includes what a Ray run pays every time: planning, starting the actors and loading the model
  in each. That fixed cost is measured on its own by a 2-document run of the same shape, and the
  steady rate is ``chunks / (wall - fixed)``.

Ray's cluster start (``ray.init``, once per session on a real cluster) is timed separately.

    taskset -c 0,1 python bench/ray_scaling.py --data ../shared/data --n 1000
    taskset -c 1 python bench/ray_scaling.py --data ../shared/data --n 40 --ray-cpus 2   # a smoke run on 1 core

Scaling efficiency is ``rate(2 actors) / (2 * rate(1 actor))``; 1.0 is linear. ``--json`` writes
every number.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path


def write_corpus(data: Path, n: int, folder: Path, per_file: int) -> Path:
    """The first ``n`` abstracts as a folder of JSONL files of ``per_file`` records: Ray reads a file
    per task, and a file's documents reach the actors as one block, so files are the unit of spread."""
    corpus = data / "scifact" / "corpus.jsonl"
    if not corpus.is_file():
        sys.exit(f"error: {corpus} not found; pass --data the folder that holds scifact/corpus.jsonl")
    out = folder / "scifact"
    out.mkdir()
    with corpus.open(encoding="utf-8") as source:
        rows = [json.loads(line) for _, line in zip(range(n), source)]
    for start in range(0, len(rows), per_file):
        with (out / f"part-{start // per_file:05d}.jsonl").open("w", encoding="utf-8") as target:
            for row in rows[start : start + per_file]:
                target.write(
                    json.dumps({"id": str(row["_id"]), "title": row.get("title", ""), "text": row["text"]}) + "\n"
                )
    return out


def ingest(corpus: Path, store: Path, args, engine: str = "local", actors: int = 1) -> tuple[float, object]:
    import c2v_rag
    from c2v_rag.rag import RayOptions

    options = dict(
        collection="bench",
        model=args.model,
        dtype=args.dtype,
        chunk_size=args.chunk_size,
        chunk_overlap=args.chunk_overlap,
        batch_size=args.batch_size,
        show_progress=False,
    )
    if engine == "ray":
        options.update(
            engine="ray", ray=RayOptions(actors=actors, cpus_per_actor=1, docs_per_batch=args.docs_per_batch)
        )
    start = time.perf_counter()
    result = c2v_rag.ingest(corpus, path=store, **options)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder holding scifact/corpus.jsonl")
    parser.add_argument("--n", type=int, default=1000, help="SciFact abstracts (default 1,000)")
    parser.add_argument("--model", default=None, help="preset or variant directory (default: the shipped preset)")
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--chunk-size", type=int, default=200)
    parser.add_argument("--chunk-overlap", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32, help="chunks per encode call (both engines)")
    parser.add_argument("--docs-per-batch", type=int, default=16, help="documents per Ray batch")
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2], help="Ray actor counts to run")
    parser.add_argument(
        "--ray-cpus",
        type=int,
        default=None,
        help="CPUs the local Ray cluster offers (default: the cores this process may use)",
    )
    parser.add_argument(
        "--local-threads",
        type=int,
        default=None,
        help="torch threads of the single process (default: the largest actor count)",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    os.environ.setdefault("RAY_worker_niceness", "0")  # Ray renices workers to 15 by default
    import ray
    import torch

    from c2v_rag.rag import load_model

    cores = len(os.sched_getaffinity(0))
    ray_cpus = args.ray_cpus or cores
    local_threads = args.local_threads or max(args.actors)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        corpus = write_corpus(args.data, args.n, folder, args.docs_per_batch)
        tiny = folder / "tiny.jsonl"
        tiny.write_text("".join((corpus / "part-00000.jsonl").read_text().splitlines(keepends=True)[:2]))

        torch.set_num_threads(local_threads)
        load_model(args.model, dtype=args.dtype).encode_documents(["warm-up"])  # loaded before the clock
        seconds, result = ingest(corpus, folder / "local", args)
        rows = [
            {
                "engine": f"local ({local_threads} thread{'s' * (local_threads > 1)})",
                "actors": 0,
                "chunks": result.chunks,
                "seconds": seconds,
                "fixed": 0.0,
            }
        ]
        torch.set_num_threads(1)

        begin = time.perf_counter()
        ray.init(num_cpus=ray_cpus, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        startup = time.perf_counter() - begin
        try:
            for actors in args.actors:
                fixed, _ = ingest(tiny, folder / f"fixed-{actors}", args, "ray", actors)
                seconds, result = ingest(corpus, folder / f"ray-{actors}", args, "ray", actors)
                rows.append(
                    {
                        "engine": f"ray x{actors}",
                        "actors": actors,
                        "chunks": result.chunks,
                        "seconds": seconds,
                        "fixed": fixed,
                    }
                )
        finally:
            ray.shutdown()

    for row in rows:
        row["chunks_per_s"] = row["chunks"] / row["seconds"]
        # A fixed cost as large as the run itself (a noisy machine, a tiny N) leaves no steady rate.
        steady = row["seconds"] - row["fixed"]
        row["steady_chunks_per_s"] = row["chunks"] / steady if steady > 0.1 * row["seconds"] else float("nan")
    base = next((r for r in rows if r["actors"] == 1), None)
    for row in rows:
        if base is not None and row["actors"]:
            row["efficiency"] = row["steady_chunks_per_s"] / (row["actors"] * base["steady_chunks_per_s"])
    local = rows[0]
    print(
        f"{args.n} SciFact abstracts, {local['chunks']} chunks; {platform.processor() or platform.machine()}, "
        f"{cores} cores usable, Ray offered {ray_cpus} CPUs; ray.init {startup:.1f} s"
    )
    print(
        f"{'engine':22s} {'chunks':>7s} {'wall s':>8s} {'fixed s':>8s} {'chunks/s':>9s} {'steady/s':>9s} "
        f"{'x local':>8s} {'efficiency':>10s}"
    )
    for row in rows:
        efficiency = f"{row['efficiency']:.2f}" if "efficiency" in row else "-"
        print(
            f"{row['engine']:22s} {row['chunks']:7d} {row['seconds']:8.1f} {row['fixed']:8.1f} "
            f"{row['chunks_per_s']:9.2f} {row['steady_chunks_per_s']:9.2f} "
            f"{row['steady_chunks_per_s'] / local['chunks_per_s']:8.2f} {efficiency:>10s}"
        )
    if any(r["chunks"] != local["chunks"] for r in rows):
        sys.exit("error: the engines produced different chunk counts")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"n": args.n, "ray_init_seconds": startup, "cores": cores, "ray_cpus": ray_cpus, "rows": rows}, indent=2
            )
        )


if __name__ == "__main__":
    main()
