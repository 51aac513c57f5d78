"""What storing an ``embed`` folder costs (``c2v-rag load``) next to ingesting the same documents, side by side.

    taskset -c 1 env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python bench/load_embedded.py \
        --folder /tmp/kernel-docs-3000 --json load_embedded.json

In one process, with the model loaded and warm before the clock (a first ``embed`` of one document):

1. ``embed``: the folder's documents chunked and embedded into Parquet files (the library's defaults: int8 where
   ``quantize="auto"`` picks it);
2. ``load`` into a new collection of qdrant-client's local mode, and into a new Qdrant Edge store;
3. ``ingest`` of the folder into a new local-mode collection: the base of the ratios (what a user who can reach
   the store pays);
4. ``load`` again into the local collection: every chunk found stored (a resumed load with nothing left).

Each row: chunks, wall seconds, CPU seconds of the process, chunks/s, and wall time as a multiple of the
ingest's. The loaded collection's points are checked to be the ingest's (ids, payloads but for the document hash
only an ingest records) and the largest difference of their vectors printed. ``--folder`` is any folder c2v_rag
reads; ``bench/ingest_folder.py --build kernel-docs`` makes the one of the docs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from contextlib import closing
from pathlib import Path

import numpy as np


def stored(path: Path, collection: str, store: str = "local") -> dict[str, tuple[dict, np.ndarray]]:
    from c2v_rag.rag import QdrantConfig

    points: dict[str, tuple[dict, np.ndarray]] = {}
    with closing(QdrantConfig.resolve(path=path, store=store).connect()) as client:
        offset = None
        while True:
            batch, offset = client.scroll(collection, limit=1024, offset=offset, with_payload=True, with_vectors=True)
            points.update({str(p.id): (p.payload, np.asarray(p.vector, np.float32)) for p in batch})
            if offset is None:
                return points


def check_same(ingested: dict, loaded: dict) -> float:
    """Assert the same ids and payloads (but for the document hash only an ingest records); the largest vector
    difference."""
    if loaded.keys() != ingested.keys():
        raise SystemExit(f"the loaded collection holds other points: {len(loaded)} against {len(ingested)}")
    for pid, (payload, _) in ingested.items():
        if loaded[pid][0] != {k: v for k, v in payload.items() if k != "_doc_hash"}:
            raise SystemExit(f"point {pid}'s payload differs from the ingest's")
    return max(float(np.abs(loaded[p][1] - ingested[p][1]).max()) for p in ingested)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", type=Path, required=True, help="the documents")
    parser.add_argument("--model", default=None, help="a preset or variant (default: the default preset)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import measure, recorded_command, shown_path, single_thread_note, speed_flags_note

    import c2v_rag
    from c2v_rag.core.devices import cpu_flags

    print(f"CPU flags: {speed_flags_note()}; {single_thread_note()}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="c2v-load-bench-"))
    try:
        warm = sorted(p for p in args.folder.rglob("*") if p.is_file())[:1]
        c2v_rag.embed(warm, work / "warm", model=args.model, show_progress=False)  # model load and int8 build
        vectors, local, edge = work / "vectors", work / "local", work / "edge"
        steps = [
            ("embed", lambda: c2v_rag.embed(args.folder, vectors, model=args.model, show_progress=False).chunks),
            ("load, local mode", lambda: c2v_rag.load_embedded(vectors, path=local, show_progress=False).chunks),
            (
                "load, Qdrant Edge",
                lambda: c2v_rag.load_embedded(vectors, path=edge, store="edge", show_progress=False).chunks,
            ),
            (
                "ingest, local mode",
                lambda: (
                    c2v_rag.ingest(
                        args.folder, collection="ingested", path=local, model=args.model, show_progress=False
                    ).chunks
                ),
            ),
            ("load again (all stored)", lambda: c2v_rag.load_embedded(vectors, path=local, show_progress=False).chunks),
        ]
        rows = []
        for name, step in steps:
            m = measure(step)
            rows.append(
                {"step": name, "chunks": m.result, "wall_s": round(m.seconds, 2), "cpu_s": round(m.cpu_seconds, 2)}
            )
            print(f"  {name}: {m.result} chunks in {m.seconds:.1f} s", flush=True)
        base = next(r["wall_s"] for r in rows if r["step"].startswith("ingest"))
        for row in rows:
            row["chunks_per_s"] = round(row["chunks"] / row["wall_s"], 1) if row["wall_s"] else None
            row["vs_ingest"] = round(row["wall_s"] / base, 3)
        difference = check_same(stored(local, "ingested"), stored(local, "c2v_rag"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n| step | chunks | wall s | CPU s | chunks/s | wall time vs ingest |\n|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['step']} | {r['chunks']} | {r['wall_s']} | {r['cpu_s']} | {r['chunks_per_s']} | {r['vs_ingest']}x |"
        )
    print(f"\nloaded points = ingested points; largest vector difference {difference:.2e}")
    if args.json:
        report = {
            "command": recorded_command("bench/load_embedded.py", sys.argv[1:]),
            "cpu_flags": " ".join(sorted(cpu_flags())),
            "speed_flags": speed_flags_note(),
            "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")},
            "folder": shown_path(args.folder),
            "rows": rows,
            "largest_vector_difference": difference,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
