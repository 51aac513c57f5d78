"""A long-lived ``c2v-rag serve``'s memory under c2v_rag's CPU memory settings and without one of them.

    taskset -c 0 python bench/server_memory.py --data ../shared/data --cycles 10 --json server_memory.json
    ... --settings defaults kernel-caches-32     # the kernel caches at torch's defaults against bounded to 32
    ... --settings release-memory defaults --pause-s 2   # freed memory handed back when work pauses, or kept
    ... --side-by-side --settings defaults before      # both at once, a core each: CPU ratios free of drift

Loading a model for inference on a CPU sets glibc to keep freed memory (``keep_freed_memory``: blocks under 32 MiB
from the heap, its top handed back only beyond 256 MiB), and torch's bf16 matrix products keep a compiled kernel for
every new matrix shape in oneDNN's and ideep's caches (up to 1,024 each). A server lives for days and sees requests
of every size, so what each costs it in resident memory is measured here over many cycles of mixed work. Each
server (the two ``--settings``, in that order: ``defaults``; ``glibc-allocator``, ``C2V_RAG_KEEP_FREED_MEMORY=0``;
``kernel-caches-32`` and ``kernel-caches-1024``, both kernel caches at 32 or 1,024 shapes by their environment
variables; ``release-memory`` and ``no-release``, ``--release-memory-after 1`` or ``0``, freed memory handed back
once the work pauses for a second or kept; ``before``, the server as it was before it bounded the kernel caches
and released freed memory by default) runs as a subprocess on a free 127.0.0.1 port and gets ``--cycles`` cycles
of

- 32 one-text requests (SciFact claims) to ``/v1/embeddings``, one after another, as queries come;
- one ``/v1/embeddings`` request of 64 whole abstracts (up to 512 tokens each: the largest batches it plans);
- one ``/v1/rerank`` request, a claim against 20 abstracts (the reranker's decoder loads at the first);
- ``--pause-s`` seconds with no request (0 by default: the next cycle at once), as a server's quiet moments.

After each phase (and the pause) the server's resident set (VmRSS) is read from /proc, and its CPU seconds per
cycle. The summary compares the two servers' RSS after the first and the last cycle (growth over the cycles: what
fragmentation or a filling cache shows), their peak (VmHWM), and their CPU seconds per cycle after the first, as a
ratio (the first setting's over the second's). One server after the other, that ratio also holds whatever the
machine drifted between them; ``--side-by-side`` runs both at once, each pinned to a core of its own (the first
setting on the first core this process may use), and begins each cycle of both together. Every returned vector of
the second server is checked against the first's (neither setting changes a result).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from common import load_scifact_docs, load_scifact_queries, recorded_command, status_kib
from serve_load import cpu_seconds, start_server

from c2v_rag.core.memory import KEEP_ENV, KERNEL_CACHE_ENV

# Each setting: its variables in the server's environment, and its options of c2v-rag serve.
SETTINGS: dict[str, tuple[dict[str, str], list[str]]] = {
    "defaults": ({}, []),
    "glibc-allocator": ({KEEP_ENV: "0"}, []),
    "kernel-caches-32": (dict.fromkeys(KERNEL_CACHE_ENV, "32"), []),
    "kernel-caches-1024": (dict.fromkeys(KERNEL_CACHE_ENV, "1024"), []),
    "release-memory": ({}, ["--release-memory-after", "1"]),
    "no-release": ({}, ["--release-memory-after", "0"]),
    "before": (dict.fromkeys(KERNEL_CACHE_ENV, "1024"), ["--release-memory-after", "0"]),
}


def start(setting: str, cpus: set[int] | None) -> tuple[subprocess.Popen, str]:
    """The setting's server: its variables over this process's environment (less any of them this process has) and
    its options of c2v-rag serve, on ``cpus``."""
    variables, options = SETTINGS[setting]
    env = {k: v for k, v in os.environ.items() if k not in (KEEP_ENV, *KERNEL_CACHE_ENV)} | variables
    return start_server(None, 5.0, env, options, cpus)


def drive(
    setting: str,
    server: subprocess.Popen,
    url: str,
    claims: list[str],
    abstracts: list[str],
    cycles: int,
    pause_s: float,
    together: threading.Barrier | None = None,
) -> dict:
    """``cycles`` cycles of work against a started server, each begun together with the other server's where
    ``together`` is given; stops the server at the end."""
    import httpx

    pid = server.pid
    timeline: list[dict] = []
    vectors: list[list[float]] = []
    cpu_per_cycle: list[float] = []
    try:
        with httpx.Client(base_url=url, timeout=600) as http:
            rss_loaded = status_kib("VmRSS", pid)
            for cycle in range(cycles):
                if together is not None:
                    together.wait()
                cpu = cpu_seconds(pid)
                for claim in claims:
                    body = http.post("/v1/embeddings", json={"input": claim}).raise_for_status().json()
                    if cycle == 0:
                        vectors.append(body["data"][0]["embedding"])
                after_queries = status_kib("VmRSS", pid)
                body = http.post("/v1/embeddings", json={"input": abstracts[:64]}).raise_for_status().json()
                if cycle == 0:
                    vectors.extend(item["embedding"] for item in body["data"])
                after_batch = status_kib("VmRSS", pid)
                http.post(
                    "/v1/rerank", json={"query": claims[cycle % len(claims)], "documents": abstracts[64:84]}
                ).raise_for_status()
                after_rerank = status_kib("VmRSS", pid)
                cpu_per_cycle.append(cpu_seconds(pid) - cpu)
                time.sleep(pause_s)
                after_pause = status_kib("VmRSS", pid)
                timeline.append(
                    {
                        "cycle": cycle,
                        "rss_mib": [round(v / 1024, 1) for v in (after_queries, after_batch, after_rerank)],
                        "rss_after_pause_mib": round(after_pause / 1024, 1),
                    }
                )
                print(
                    f"{setting}: cycle {cycle}: RSS MiB {timeline[-1]['rss_mib']}, after the pause "
                    f"{timeline[-1]['rss_after_pause_mib']}, {cpu_per_cycle[-1]:.1f} CPU s"
                )
            peak = status_kib("VmHWM", pid)
    except BaseException:
        if together is not None:
            together.abort()  # the other server's cycles stop at their next start, not wait forever
        raise
    finally:
        server.terminate()
        server.wait(timeout=60)
    return {
        "setting": setting,
        "rss_loaded_mib": round(rss_loaded / 1024, 1),
        "rss_after_first_cycle_mib": timeline[0]["rss_mib"][-1],
        "rss_after_last_cycle_mib": timeline[-1]["rss_mib"][-1],
        "rss_after_last_pause_mib": timeline[-1]["rss_after_pause_mib"],
        "peak_rss_mib": round(peak / 1024, 1),
        "cpu_s_per_cycle_median_after_first": statistics.median(cpu_per_cycle[1:] or cpu_per_cycle),
        "cpu_s_per_cycle": [round(c, 2) for c in cpu_per_cycle],
        "timeline": timeline,
        "vectors": vectors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder with scifact/")
    parser.add_argument("--cycles", type=int, default=12)
    parser.add_argument("--settings", nargs=2, default=["defaults", "glibc-allocator"], choices=list(SETTINGS))
    parser.add_argument("--pause-s", type=float, default=0.0, help="seconds with no request after each cycle")
    parser.add_argument(
        "--side-by-side",
        action="store_true",
        help="both servers at once, each on a core of its own, every cycle begun together (CPU ratios free of the "
        "machine's drift); by default one server after the other",
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.settings[0] == args.settings[1]:
        parser.error("--settings takes two different settings")
    claims = load_scifact_queries(args.data, 32)
    abstracts = load_scifact_docs(args.data, 84)
    started = time.time()
    work = (claims, abstracts, args.cycles, args.pause_s)
    if args.side_by_side:
        cores = sorted(os.sched_getaffinity(0))[:2]
        if len(cores) < 2:
            parser.error(f"--side-by-side runs each server on a core of its own; this process may use {cores} only")
        servers: list[tuple[subprocess.Popen, str]] = []
        try:
            for setting, core in zip(args.settings, cores, strict=True):
                servers.append(start(setting, {core}))
        except BaseException:
            for server, _ in servers:  # the first server, when the second failed to start: stopped and waited for
                server.terminate()
                server.wait(timeout=60)
            raise
        together = threading.Barrier(2, timeout=1800)
        with ThreadPoolExecutor(2) as pool:
            futures = [
                pool.submit(drive, setting, server, url, *work, together)
                for setting, (server, url) in zip(args.settings, servers, strict=True)
            ]
            runs = {setting: future.result() for setting, future in zip(args.settings, futures, strict=True)}
    else:
        cores = []
        runs = {setting: drive(setting, *start(setting, None), *work) for setting in args.settings}
    first, second = (runs[name] for name in args.settings)
    worst = float(np.abs(np.asarray(first.pop("vectors")) - np.asarray(second.pop("vectors"))).max())
    summary = {
        "rss_last_cycle_first_minus_second_mib": round(
            first["rss_after_last_cycle_mib"] - second["rss_after_last_cycle_mib"], 1
        ),
        "rss_growth_first_to_last_cycle_mib": {
            name: round(run["rss_after_last_cycle_mib"] - run["rss_after_first_cycle_mib"], 1)
            for name, run in runs.items()
        },
        "rss_after_last_pause_mib": {name: run["rss_after_last_pause_mib"] for name, run in runs.items()},
        "peak_rss_first_over_second": round(first["peak_rss_mib"] / second["peak_rss_mib"], 3),
        "cpu_per_cycle_first_over_second": round(
            first["cpu_s_per_cycle_median_after_first"] / second["cpu_s_per_cycle_median_after_first"], 3
        ),
        "largest_vector_difference": worst,
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        report = {
            "command": recorded_command("bench/server_memory.py", sys.argv[1:]),
            "cycles": args.cycles,
            "pause_s": args.pause_s,
            "settings": args.settings,
            "side_by_side_cores": cores,
            "wall_s": round(time.time() - started, 1),
            "summary": summary,
            "runs": runs,
        }
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
