"""Which weight of a file makes the ingest bar's ETA right: its count, its size on disk, or the bytes it holds.

For each folder, every file in the order ingest reads it is read and chunked as ingest does (the default
preset's chunker), and its time modelled as its reading and chunking time, measured, plus its chunks at the
embedding rate (``--chunks-per-second``: the rate an ingest's summary prints on this machine). A bar that weights
the files by ``w`` projects, at each moment, a total of elapsed / (the weight of the files done, plus the share of
the one being read); the table gives |projected / real - 1| over the run (from 5% to 95% of its time) for each
weight. Nothing is embedded, so a folder of hours is measured in minutes.

    taskset -c 0 env OMP_NUM_THREADS=1 python bench/eta_weights.py /usr/share/doc/valgrind /usr/share/doc/git \\
        --chunks-per-second 27.2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import recorded_command, shown_path, speed_flags_note  # noqa: E402


def measure_folder(folder: Path, chunker) -> list[dict]:
    """Each file of ``folder`` in ingest's read order: its size on disk, what ingest weights it by, its chunks and
    its reading and chunking seconds."""
    from c2v_rag.documents.files import ReadOptions, list_source, read_file
    from c2v_rag.documents.reading import ReadLog
    from c2v_rag.rag.ingestion.points import document_chunks

    options, log = ReadOptions(on_error="continue"), ReadLog()
    root, files = list_source(folder, options, log)
    rows = []
    for file, content in zip(files, log.file_sizes, strict=True):
        start, chunks = time.perf_counter(), 0
        for doc in read_file(file, root, options, log):
            chunks += sum(1 for _ in document_chunks(doc, chunker))
        seconds = time.perf_counter() - start
        rows.append(
            {"file": file.name, "size": file.stat().st_size, "content": content, "chunks": chunks, "read_s": seconds}
        )
    return rows


def projection_error(times: np.ndarray, weights: np.ndarray) -> dict[str, float]:
    """|projected total / real total - 1| of a bar weighting the files by ``weights``, sampled over the run."""
    real = times.sum()
    time_ends = np.concatenate([[0.0], np.cumsum(times)])
    weight_ends = np.concatenate([[0.0], np.cumsum(weights)]) / weights.sum()
    moments = np.linspace(0.05, 0.95, 181) * real
    done = np.interp(moments, time_ends, weight_ends)  # the bar moves through a file as its time passes
    error = np.abs(moments / np.maximum(done, 1e-9) / real - 1)
    return {"mean": float(error.mean()), "median": float(np.median(error)), "max": float(error.max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", type=Path, nargs="+")
    parser.add_argument("--chunks-per-second", type=float, required=True, help="the embedding rate of an ingest here")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from c2v_rag.documents.chunking import TokenChunker
    from c2v_rag.documents.reading import progress_weight
    from c2v_rag.rag.embedding import load_model
    from c2v_rag.rag.ingestion.config import IngestConfig

    settings = IngestConfig()
    chunker = TokenChunker(load_model(None), settings.chunk_size, settings.chunk_overlap, context=settings.context)
    print(f"# |projected total / real total - 1| over the run (5% to 95% of its time); {speed_flags_note()}")
    print("| folder | files | chunks | modelled s | by count | by size on disk | by bytes held (ingest's) |")
    print("|---|---:|---:|---:|---|---|---|")
    results = []
    for folder in args.folders:
        rows = measure_folder(folder, chunker)
        times = np.array([r["read_s"] + r["chunks"] / args.chunks_per_second for r in rows])
        weights = {
            "count": np.ones(len(rows)),
            "size": np.array([progress_weight(r["size"]) for r in rows], dtype=float),
            "content": np.array([progress_weight(r["content"]) for r in rows], dtype=float),
        }
        errors = {name: projection_error(times, w) for name, w in weights.items()}
        cells = [f"{e['mean']:.2f} (max {e['max']:.2f})" for e in errors.values()]
        chunks = sum(r["chunks"] for r in rows)
        print(f"| {shown_path(folder)} | {len(rows)} | {chunks} | {times.sum():.0f} | " + " | ".join(cells) + " |")
        results.append(
            {"folder": shown_path(folder), "files": rows, "modelled_s": float(times.sum()), "errors": errors}
        )
    if args.json:
        command = recorded_command("bench/eta_weights.py", sys.argv[1:])
        args.json.write_text(json.dumps({"command": command, "note": speed_flags_note(), "results": results}) + "\n")


if __name__ == "__main__":
    main()
