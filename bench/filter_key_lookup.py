"""What a search's filter-key check costs beyond the first 256 chunks: the look-up of a key they do not carry.

    python bench/filter_key_lookup.py --points 10000 --backends local edge --out bench/results/filter_key_lookup.json

A store of ``--points`` points (8-d vectors, a metadata dict per point) where one key is carried by the last point
alone and another by none. Timed, best of five, side by side in one run: the sample read every filtered search makes
(256 points' metadata), the look-up of the late key (a filtered read of one point: it scans until it meets it), the
look-up of the missing key (a scan of all: the search is then refused), and a dense query of 10, as the reference.
A search looks a key it finds up once a process (store.filters.FilterKeyCheck.settle), so the look-up is paid by the
first search that filters on such a key, and by every search that names a key no chunk carries (each refused).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np


def _store(backend: str, path: Path, points: int) -> object:
    from qdrant_client.http import models

    from c2v_rag.store.collection import QdrantConfig

    target = QdrantConfig.resolve(path=path, store=backend)
    client = target.connect()
    client.create_collection("kb", vectors_config=models.VectorParams(size=8, distance=models.Distance.COSINE))
    rng = np.random.default_rng(0)
    for start in range(0, points, 1000):
        batch = [
            models.PointStruct(
                id=i,
                vector=rng.standard_normal(8).tolist(),
                payload={"metadata": {"topic": "t", **({"late": 1} if i == points - 1 else {})}},
            )
            for i in range(start, min(points, start + 1000))
        ]
        client.upsert("kb", batch)
    return client


def _best(call, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def _timed(client) -> dict[str, float]:
    """Seconds, best of five: the reference query, the sample every filtered search reads, and the two look-ups."""
    from c2v_rag.store.filters import KEY_SAMPLE, FilterKeyCheck

    sample = {"limit": KEY_SAMPLE, "with_payload": ["metadata"], "with_vectors": False}
    query = np.random.default_rng(1).standard_normal(8).tolist()
    return {
        "dense query (top 10)": _best(lambda: client.query_points("kb", query=query, limit=10)),
        f"sample of {KEY_SAMPLE}": _best(lambda: client.scroll("kb", **sample)),
        "look-up, key on the last point": _best(lambda: client.scroll("kb", **FilterKeyCheck.look_for("late"))),
        "look-up, key on none": _best(lambda: client.scroll("kb", **FilterKeyCheck.look_for("nowhere"))),
    }


def main() -> None:

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--backends", nargs="+", default=["local", "edge"])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    for backend in args.backends:
        folder = Path(tempfile.mkdtemp(prefix=f"filter-keys-{backend}-"))
        try:
            client = _store(backend, folder, args.points)
            timed = _timed(client)
            client.close()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        reference = timed["dense query (top 10)"]
        for what, seconds in timed.items():
            rows.append({"backend": backend, "points": args.points, "what": what, "ms": round(seconds * 1000, 2)})
            print(f"{backend:6s} {args.points:>7d}  {what:32s} {seconds * 1000:8.1f} ms  {seconds / reference:7.1f}x")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
