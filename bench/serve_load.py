"""Load test of ``c2v-rag serve`` on loopback: concurrency 1, 8, 32 against one offline encode.

    python bench/serve_load.py --data ../shared/data --texts 128 --json serve_load.json

Starts ``c2v-rag serve`` as a subprocess on a free 127.0.0.1 port (nothing leaves the machine),
then sends the same mixed-length texts (SciFact claims and abstract openings, shuffled) as
one-text requests from C concurrent clients, for each C. Every returned vector is checked
against a direct ``encode`` of the same text in this process; a mismatch counts as an error.
Throughput is prompt tokens (``usage``) per wall second and per CPU second of the server
process: on a shared machine the wall clock also counts time other processes held the cores,
the CPU time does not. The offline encode of all texts in one call runs before and after the
server phases, to show how much the machine's load drifted meanwhile. Bounded: a fixed number
of texts, and ``--timeout-s`` per phase.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from common import load_scifact_docs, load_scifact_queries

REPO = Path(__file__).resolve().parents[1]


def mixed_lengths(data: Path, n: int, seed: int = 0) -> list[str]:
    """Half claims (~20 tokens), half abstract openings of 100-600 characters, shuffled."""
    rng = random.Random(seed)
    claims = load_scifact_queries(data, n // 2)
    openings = [doc[: rng.randint(100, 600)] for doc in load_scifact_docs(data, n - len(claims))]
    texts = claims + openings
    rng.shuffle(texts)
    return texts


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_clients(
    url: str, texts: list[str], expected: np.ndarray, concurrency: int, atol: float, timeout_s: float
) -> dict:
    import httpx

    order = list(range(len(texts)))
    latencies: list[float] = []
    errors: list[str] = []
    tokens = 0

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal tokens
        while order:
            i = order.pop()
            start = time.perf_counter()
            try:
                response = await http.post("/v1/embeddings", json={"input": texts[i], "model": "bench"})
            except httpx.HTTPError as err:
                errors.append(f"text {i}: {type(err).__name__}")
                continue
            latencies.append(time.perf_counter() - start)
            if response.status_code != 200:
                errors.append(f"text {i}: HTTP {response.status_code} {response.text[:200]}")
                continue
            body = response.json()
            tokens += body["usage"]["prompt_tokens"]
            got = np.asarray(body["data"][0]["embedding"], dtype=np.float32)
            if not np.allclose(got, expected[i], atol=atol):
                errors.append(f"text {i}: vector differs from encode by {np.abs(got - expected[i]).max():.2e}")

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=timeout_s, limits=limits) as http:
        start = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(client(http) for _ in range(concurrency))), timeout_s)
        wall = time.perf_counter() - start
    ms = np.array(latencies) * 1000
    return {
        "requests": len(texts),
        "wall_s": wall,
        "tokens": tokens,
        "errors": len(errors),
        "error_samples": errors[:5],
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    model: str | None,
    max_wait_ms: float,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
    cpus: set[int] | None = None,
) -> tuple[subprocess.Popen, str]:
    """``c2v-rag serve`` on a free loopback port, once it answers /health; ``env``: its environment (this process's
    when None), without an API key either way; ``args``: more of its options; ``cpus``: the cores it may run on
    (set before it starts, so every thread it makes inherits them), this process's when None."""
    import httpx

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "c2v_rag.cli",
        "serve",
        *([model] if model else []),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--model-name",
        "bench",
        "--max-wait-ms",
        str(max_wait_ms),
        "--threads",
        "1",
        *args,
    ]
    env = {**(os.environ if env is None else env), "PYTHONPATH": str(REPO)}
    env.pop("C2V_RAG_API_KEY", None)
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pin)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the server did not start: {' '.join(cmd)}")
        try:
            if httpx.get(url + "/health").status_code == 200:
                return server, url
        except httpx.TransportError:
            time.sleep(0.2)


def offline(model, texts: list[str]) -> dict:
    pieces, _ = model.prepare(texts, None)
    tokens = sum(p.length(model.config.num_contextual_tokens) for p in pieces)
    cpu, start = time.process_time(), time.perf_counter()
    vectors = model.encode_documents(texts, normalize_embeddings=True)
    return {
        "wall_s": time.perf_counter() - start,
        "cpu_s": time.process_time() - cpu,
        "tokens": tokens,
        "vectors": vectors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder with scifact/")
    parser.add_argument("--texts", type=int, default=128)
    parser.add_argument("--model", default=None, help="variant or preset (default: the default preset)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    parser.add_argument("--timeout-s", type=float, default=300, help="limit per phase")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    import torch

    from c2v_rag import Causal2Vec
    from c2v_rag.core.devices import configure_cpu_threads

    configure_cpu_threads(1)  # as the server runs: one intra-op thread
    model = Causal2Vec.from_pretrained(args.model)
    texts = mixed_lengths(args.data, args.texts)
    model.encode_documents(texts[:4])  # warm-up
    before = offline(model, texts)
    expected = before.pop("vectors")
    atol = 2e-2 if model.dtype == torch.bfloat16 else 1e-4
    rows = [{"phase": "offline encode (before)", **before}]
    server, url = start_server(args.model, args.max_wait_ms)
    try:
        asyncio.run(run_clients(url, texts[:8], expected[:8], 4, atol, args.timeout_s))  # warm-up
        for c in args.concurrency:
            cpu = cpu_seconds(server.pid)
            row = asyncio.run(run_clients(url, texts, expected, c, atol, args.timeout_s))
            rows.append({"phase": f"server, concurrency {c}", "cpu_s": cpu_seconds(server.pid) - cpu, **row})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=60)
    after = offline(model, texts)
    after.pop("vectors")
    rows.append({"phase": "offline encode (after)", **after})
    report(rows, args)


def report(rows: list[dict], args) -> None:
    offline_rows = [r for r in rows if r["phase"].startswith("offline")]
    best_offline = max(r["tokens"] / r["wall_s"] for r in offline_rows)
    best_offline_cpu = max(r["tokens"] / r["cpu_s"] for r in offline_rows)
    one = next((r for r in rows if r["phase"] == "server, concurrency 1"), None)
    print(
        f"\n{args.texts} texts, {rows[0]['tokens']} prompt tokens; server: 1 intra-op thread, "
        f"max_wait_ms={args.max_wait_ms}; one text per request"
    )
    print(
        "| phase | wall s | tokens/s | tokens/CPU s | p50 ms | p99 ms | errors | vs one-at-a-time | vs offline (wall) | vs offline (CPU) |"  # noqa: E501
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        tps, tpc = r["tokens"] / r["wall_s"], r["tokens"] / r["cpu_s"]
        gain = f"{tps / (one['tokens'] / one['wall_s']):.2f}x" if one and "p50_ms" in r else ""
        p50 = f"{r['p50_ms']:.0f}" if "p50_ms" in r else ""
        p99 = f"{r['p99_ms']:.0f}" if "p99_ms" in r else ""
        print(
            f"| {r['phase']} | {r['wall_s']:.1f} | {tps:.0f} | {tpc:.0f} | {p50} | {p99} | {r.get('errors', '')} "
            f"| {gain} | {tps / best_offline:.0%} | {tpc / best_offline_cpu:.0%} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
