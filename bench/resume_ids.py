"""What a resumed ``embed`` pays to know the chunks its folder holds: the ids as a set of strings (before) against a
:class:`~c2v_rag.store.point_id_set.PointIdSet`, side by side.

    taskset -c 1 env OMP_NUM_THREADS=1 python bench/resume_ids.py --ids 2000000 --json resume_ids.json

An embed folder of ``--ids`` rows (only the ``id`` column, point ids as ``embed`` makes them, in files of 100,000
rows with an embed record) is written once. Then, each in its own child process so that its peak memory is its own:

- ``frozenset``: ``frozenset(pq.read_table(files, columns=["id"]).column("id").to_pylist())``, what
  ``EmbedFolder.read`` held before;
- ``PointIdSet``: ``EmbedFolder.read(folder).stored``, what it holds now.

Reported for each: seconds to read the ids, the growth of the process's peak RSS over its state before the read,
the bytes pickled for each Ray actor, and the time of ``--lookups`` membership tests (half stored, half not) asked
in batches of 256, as a resumed run's sink asks about each batch of chunks.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CANDIDATES = ("frozenset", "PointIdSet")
# Chunks a sink asks about at once (ingest's and embed's default batch_size).
BATCH = 256


def write_folder(folder: Path, ids: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from c2v_rag.rag.ingestion.parquet_folder import part_name, with_record
    from c2v_rag.store.point_schema import point_id

    folder.mkdir(parents=True, exist_ok=True)
    record = {"model": "bench", "embedding_dim": 4, "quantize": "none", "chunk_size": 200, "chunk_overlap": 20}
    for part, start in enumerate(range(0, ids, 100_000)):
        column = [point_id(f"doc-{i // 3}", i % 3, f"{i:064x}") for i in range(start, min(start + 100_000, ids))]
        table = with_record(pa.table({"id": pa.array(column, pa.string())}), record)
        pq.write_table(table, folder / part_name(part))


def child(candidate: str, folder: Path, lookups: int) -> dict:
    import pyarrow.parquet as pq
    from common import peak_rss_kib, reset_peak_rss

    from c2v_rag.rag.ingestion.parquet_folder import EmbedFolder
    from c2v_rag.store.point_id_set import PointIdSet
    from c2v_rag.store.point_schema import point_id

    files = sorted(folder.glob("*.parquet"))
    total = pq.ParquetFile(files[0]).metadata.num_rows * (len(files) - 1) + pq.ParquetFile(files[-1]).metadata.num_rows
    first = total - lookups // 2  # the last half stored, and as many beyond
    probes = [point_id(f"doc-{i // 3}", i % 3, f"{i:064x}") for i in range(first, first + lookups)]
    # What any read loads once (modules, Arrow's memory pool) before the clock, for both alike.
    frozenset(pq.read_table(files[:1], columns=["id"]).column("id").to_pylist())
    EmbedFolder.read(folder, ids=False)
    PointIdSet.from_ids(probes[:10])
    before = reset_peak_rss()
    started = time.perf_counter()
    if candidate == "frozenset":
        stored = frozenset(pq.read_table(files, columns=["id"]).column("id").to_pylist())
    else:
        stored = EmbedFolder.read(folder).stored
    read_s = time.perf_counter() - started
    grown_mib = (peak_rss_kib() - before) / 1024
    held_mib = (reset_peak_rss() - before) / 1024  # once the read's temporaries are freed: what the run holds
    started = time.perf_counter()
    found = 0
    for start in range(0, len(probes), BATCH):  # as the sinks ask: a batch of chunks at a time
        batch = probes[start : start + BATCH]
        found += int(sum(stored.isin(batch))) if candidate == "PointIdSet" else sum(p in stored for p in batch)
    lookup_s = time.perf_counter() - started
    return {
        "candidate": candidate,
        "ids": len(stored),
        "read_s": round(read_s, 2),
        "peak_rss_growth_mib": round(grown_mib, 1),
        "held_mib": round(held_mib, 1),
        "pickled_mib": round(len(pickle.dumps(stored, protocol=5)) / 2**20, 1),
        "lookups": len(probes),
        "found": found,
        "lookup_us": round(lookup_s / len(probes) * 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", type=int, default=2_000_000, help="rows of the folder")
    parser.add_argument("--lookups", type=int, default=200_000, help="membership tests timed")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", choices=CANDIDATES, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if args.child:
        print(json.dumps(child(args.child, args.folder, args.lookups)))
        return
    from common import recorded_command

    from c2v_rag.core.devices import cpu_flags

    work = Path(tempfile.mkdtemp(prefix="c2v-resume-ids-"))
    try:
        write_folder(work / "vectors", args.ids)
        rows = []
        for candidate in CANDIDATES:
            command = [sys.executable, __file__, "--child", candidate, "--folder", str(work / "vectors")]
            command += ["--lookups", str(args.lookups)]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = rows[0]
    print(f"\n{args.ids:,} ids | read s | peak RSS growth MiB | held MiB | pickled MiB | one lookup µs")
    for r in rows:
        print(
            f"{r['candidate']} | {r['read_s']} | {r['peak_rss_growth_mib']} | {r['held_mib']} | {r['pickled_mib']} | "
            f"{r['lookup_us']}  (held: {base['held_mib'] / max(r['held_mib'], 0.1):.1f}x less than frozenset's)"
        )
    if args.json:
        report = {
            "command": recorded_command("bench/resume_ids.py", sys.argv[1:]),
            "cpu_flags": " ".join(sorted(cpu_flags())),
            "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")},
            "rows": rows,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
