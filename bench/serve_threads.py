"""Single-query latency under each CPU thread setting: intra-op threads x OpenMP wait policy.

    python bench/serve_threads.py --data ../shared/data --queries 30 --json threads.json

One search query is one small forward pass, made of hundreds of OpenMP parallel regions. With
more than one intra-op thread, every region ends at a barrier that waits for the slowest thread;
when another process holds a core, that thread waits for a scheduler time slice, and the query
pays it hundreds of times. Each setting runs in a fresh process, because libgomp reads
``OMP_WAIT_POLICY`` once, when torch is imported. Whatever else runs on the machine during the
measurement is the load the numbers are for: say what it was when you quote them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

SETTINGS = [  # (intra-op threads, OMP_WAIT_POLICY or None for libgomp's default)
    (1, None),
    (1, "PASSIVE"),
    (2, None),
    (2, "PASSIVE"),
]


def measure(threads: int, queries: list[str], model: str | None) -> dict:
    """Runs inside the child process: load the model, warm up, time one query at a time."""
    import time

    import numpy as np
    import torch

    from c2v_rag import Causal2Vec
    from c2v_rag.core.devices import configure_cpu_threads

    configure_cpu_threads(threads)
    c2v = Causal2Vec.from_pretrained(model)
    for q in queries[:3]:  # warm-up: allocator and kernel selection
        c2v.encode_queries(q)
    latencies = []
    for q in queries:
        start = time.perf_counter()
        c2v.encode_queries(q)
        latencies.append(time.perf_counter() - start)
    ms = np.array(latencies) * 1000
    return {
        "threads": torch.get_num_threads(),
        "interop": torch.get_num_interop_threads(),
        "n": len(ms),
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
        "max_ms": float(ms.max()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder with scifact/ (the claims are the queries)")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--model", default=None, help="variant or preset (default: the default preset)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    from common import load_scifact_queries

    queries = load_scifact_queries(args.data, args.queries)
    if args.child is not None:
        print(json.dumps(measure(int(args.child), queries, args.model)))
        return
    rows = []
    for threads, policy in SETTINGS:
        env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
        if policy is not None:
            env["OMP_WAIT_POLICY"] = policy
        cmd = [
            sys.executable,
            __file__,
            "--data",
            str(args.data),
            "--queries",
            str(args.queries),
            "--child",
            str(threads),
        ] + (["--model", args.model] if args.model else [])
        result = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        row = {"wait_policy": policy or "default", **json.loads(result.stdout.strip().splitlines()[-1])}
        rows.append(row)
        print(
            f"threads={row['threads']} interop={row['interop']} OMP_WAIT_POLICY={row['wait_policy']:8s} "
            f"p50={row['p50_ms']:.0f} ms  p99={row['p99_ms']:.0f} ms  max={row['max_ms']:.0f} ms  "
            f"(n={row['n']})",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
