"""An unchanged re-run of a folder: documents skipped before chunking against the same run chunking them all.

    taskset -c 1 env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python bench/ingest_rerun.py \
        --folder /tmp/c2v-md-3000 --path /tmp/rerun-store --truncate-dim 384 --rounds 2 --json rerun.json

The first call ingests ``--folder`` into ``--path`` (``--collection``, default ``rerun``) when that collection is not
there yet; it
embeds every chunk, so give it a folder the model gets through in minutes (``--truncate-dim 384`` runs the encoder
alone: what a re-run costs does not depend on how the vectors were made). Then, in alternating rounds, each in its
own child process, ``c2v_rag.ingest`` runs again on the unchanged folder:

- ``skip`` (as shipped): every document is looked up by its hash and skipped, as it is stored whole and unchanged;
- ``chunk-all``: the same ingest with the lookup answering "nothing stored whole"
  (``PointWriter.unchanged_documents`` returning ``{}``) and no hashes recorded, which is what a re-run did before
  documents were hashed: read, chunk every document, then find every chunk stored.

Each child loads the model before the clock starts; the time is the ``ingest`` call (``result.seconds`` and the
call's wall time). The folder builders are in ``bench/ingest_folder.py`` (``--build scifact --data ../shared/data``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

MODES = ("skip", "chunk-all")


def child(mode: str, folder: Path, store: Path, collection: str, truncate_dim: int | None) -> dict:
    import c2v_rag
    from c2v_rag.rag.embedding import load_model
    from c2v_rag.rag.ingestion.points import PointWriter

    load_model(None)  # the model loads before the clock, as it does in every mode
    if mode == "chunk-all":  # the lookup finds nothing, and nothing records hashes: a re-run as it was before
        write = PointWriter.write
        PointWriter.unchanged_documents = lambda self, states: {}  # type: ignore[method-assign]
        PointWriter.write = lambda self, points, completed, hashes=None: write(self, points, completed)  # type: ignore[method-assign]
    started = time.perf_counter()
    result = c2v_rag.ingest(folder, path=store, collection=collection, truncate_dim=truncate_dim, show_progress=False)
    wall = time.perf_counter() - started
    return {
        "mode": mode,
        "seconds": round(result.seconds, 3),
        "wall_s": round(wall, 3),
        "documents": result.documents,
        "chunks": result.chunks,
        "chunks_written": result.chunks_written,
        "chunks_unchanged": result.chunks_unchanged,
    }


def run_child(mode: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--child", mode, "--folder", str(args.folder), "--path", str(args.path)]
    command += ["--collection", args.collection]
    if args.truncate_dim is not None:
        command += ["--truncate-dim", str(args.truncate_dim)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", type=Path, required=True, help="the folder to ingest and re-run")
    parser.add_argument("--path", type=Path, required=True, help="the embedded store (made on the first call)")
    parser.add_argument("--collection", default="rerun")
    parser.add_argument("--truncate-dim", type=int, default=None, help="ingest's truncate_dim (384: no decoder)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of both modes, alternating")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", choices=MODES, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.folder, args.path, args.collection, args.truncate_dim)))
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import recorded_command, shown_path, single_thread_note, speed_flags_note

    from c2v_rag.core.devices import cpu_flags

    print(f"CPU flags: {speed_flags_note()}; {single_thread_note()}", flush=True)
    if not (args.path / "collection" / args.collection).exists():
        print(f"first ingest of {args.folder} into {args.path} (every chunk embedded) ...", flush=True)
        first = run_child("skip", args)
        print(f"  {first['chunks']} chunks in {first['seconds']:.1f} s", flush=True)
    rows = []
    for round_ in range(args.rounds):
        for mode in MODES:
            row = run_child(mode, args) | {"round": round_}
            if row["chunks_written"]:
                raise SystemExit(f"the folder changed between runs: {row}")
            rows.append(row)
            print(
                f"round {round_} {mode:>9}: ingest {row['seconds']:7.2f} s, call {row['wall_s']:7.2f} s "
                f"({row['documents']} documents, {row['chunks_unchanged']} chunks unchanged)",
                flush=True,
            )
    by_mode = {m: [r["seconds"] for r in rows if r["mode"] == m] for m in MODES}
    ratio = sum(by_mode["chunk-all"]) / max(sum(by_mode["skip"]), 1e-9)
    print(f"chunk-all / skip, ingest seconds summed over the rounds: {ratio:.1f}x", flush=True)
    if args.json:
        report = {
            "command": recorded_command("bench/ingest_rerun.py", sys.argv[1:]),
            "cpu_flags": " ".join(sorted(cpu_flags())),
            "speed_flags": speed_flags_note(),
            "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")},
            "folder": shown_path(args.folder),
            "truncate_dim": args.truncate_dim,
            "rows": rows,
            "chunk_all_over_skip": round(ratio, 2),
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
