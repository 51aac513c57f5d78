"""How long one `c2v-rag search` takes from the shell, beside the floor that its imports set.

A search from the command line is a new process each time: it imports torch (the model) and qdrant-client
(the store) before any work of ours runs. This bench times, side by side and alternated round by round, in
fresh processes on the cores this one may use:

- ``python -c ...``: the interpreter alone, and with ``import torch`` or ``import qdrant_client``, the two
  imports every search needs (each process ends without the interpreter's teardown, as a search does);
- ``c2v-rag search QUERY --json`` on a collection, as the collection records (int8 for an int8 collection) and
  with its default ``--rerank auto`` (the top 20 reranked where the decoder is fast: int8 or bf16 in hardware);
- the same with ``--rerank none``: the first stage alone;
- ``--quantize none --rerank none``: the query embedded in float32, whatever the collection's vectors are.

It prints the median wall and CPU seconds of each, the floor (the two imports, less one interpreter start,
which both include) and what a search spends beyond it, and whether the two searches return the same hits.
Pin it to one core with one thread for figures that compare across runs:

    taskset -c 0 env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python bench/cli_search.py \\
        --path /tmp/c2v-q/qdrant --collection i50 --query "How do I get a stack trace of interrupts?" \\
        --rounds 5 --json cli_search.json

The collection is any embedded one, local mode or Edge (``c2v-rag ingest FOLDER --path DIR --collection NAME``);
the caches must be warm (one search beforehand), as this measures a warm search.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(command: list[str]) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, its stdout) of one run of ``command``; a failure stops the bench."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    clock = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - clock
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def hit_ids(stdout: str) -> list[str]:
    return [hit["id"] for hit in json.loads(stdout)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--path", type=Path, required=True, help="the embedded store, local mode or Edge (c2v-rag's --path)"
    )
    parser.add_argument("--collection", required=True)
    parser.add_argument("--query", default="How do I get a stack trace of interrupts?")
    parser.add_argument("--rounds", type=int, default=5, help="each command runs once a round (default 5)")
    parser.add_argument("--json", type=Path, default=None, help="write the runs and medians here")
    parser.add_argument("--threads", type=int, default=None, help="the searches' --threads (default: theirs, 1)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if not args.path.is_dir():
        parser.error(f"--path {args.path} is not a folder: ingest a collection there first")
    cli = shutil.which("c2v-rag", path=str(Path(sys.executable).parent)) or shutil.which("c2v-rag")
    if cli is None:
        parser.error("c2v-rag is not on PATH: install the package (pip install -e .) in this environment")

    from common import recorded_command, speed_flags_note

    from c2v_rag.core.devices import cpu_flags

    search = [cli, "search", args.query, "--path", str(args.path), "--collection", args.collection, "--json"]
    search += ["--threads", str(args.threads)] if args.threads else []
    commands = {
        # each ends as the search does, without the interpreter's teardown (c2v_rag.cli.app.exit_now)
        "interpreter": [sys.executable, "-c", "import os; os._exit(0)"],
        "import torch": [sys.executable, "-c", "import os, torch; os._exit(0)"],
        "import qdrant_client": [sys.executable, "-c", "import os, qdrant_client; os._exit(0)"],
        "search": search,
        "search --rerank none": [*search, "--rerank", "none"],
        "search --quantize none --rerank none": [*search, "--quantize", "none", "--rerank", "none"],
    }
    print(f"CPU flags: {speed_flags_note()}; affinity {sorted(os.sched_getaffinity(0))}", flush=True)
    timed(search)  # warms the page cache and the model caches; not counted
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    outputs: dict[str, str] = {}
    for round_ in range(args.rounds):
        # alternate the order, so that drift over the run falls on every command alike
        names = list(commands) if round_ % 2 == 0 else list(reversed(commands))
        for name in names:
            wall, cpu, stdout = timed(commands[name])
            runs[name].append((wall, cpu))
            outputs[name] = stdout
        print(f"round {round_ + 1}/{args.rounds} done", flush=True)

    medians = {
        name: {"wall_s": statistics.median(w for w, _ in times), "cpu_s": statistics.median(c for _, c in times)}
        for name, times in runs.items()
    }
    start = medians["interpreter"]
    floor = {
        kind: medians["import torch"][kind] + medians["import qdrant_client"][kind] - start[kind]
        for kind in ("wall_s", "cpu_s")
    }
    same_hits = hit_ids(outputs["search --rerank none"]) == hit_ids(outputs["search --quantize none --rerank none"])
    reranked = any(hit.get("rerank_score") is not None for hit in json.loads(outputs["search"]))

    plain = medians["search --rerank none"]["wall_s"]
    print(f"\n{'median of ' + str(args.rounds):<38}{'wall s':>9}{'CPU s':>9}{'vs --rerank none':>18}")
    for name, m in medians.items():
        print(f"{name:<38}{m['wall_s']:>9.2f}{m['cpu_s']:>9.2f}{m['wall_s'] / plain:>17.2f}x")
    print(f"{'floor: both imports':<38}{floor['wall_s']:>9.2f}{floor['cpu_s']:>9.2f}{floor['wall_s'] / plain:>17.2f}x")
    print(
        f"\nA search without reranking spends {plain - floor['wall_s']:.2f} s wall beyond the floor of its two "
        f"imports ({floor['wall_s']:.2f} s); the default search reranked: {reranked}."
    )
    print(f"--quantize none returns the same hits, in the same order: {same_hits}")

    if args.json is not None:
        report = {
            "command": recorded_command("bench/cli_search.py", sys.argv[1:]),
            "cpu_flags": " ".join(sorted(cpu_flags())),
            "speed_flags": speed_flags_note(),
            "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")},
            "cpu_affinity": sorted(os.sched_getaffinity(0)),
            "query": args.query,
            "collection": args.collection,
            "runs": {name: [{"wall_s": round(w, 3), "cpu_s": round(c, 3)} for w, c in t] for name, t in runs.items()},
            "medians": {name: {k: round(v, 3) for k, v in m.items()} for name, m in medians.items()},
            "floor": {k: round(v, 3) for k, v in floor.items()},
            "same_hits_with_quantize_none": same_hits,
            "default_search_reranked": reranked,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
