"""What reading PDF, HTML and Word files costs beside embedding them: each format's files read by c2v_rag's readers
(``c2v_rag.documents.formats``), then the same files ingested end to end, side by side in one process.

    taskset -c 1 env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python bench/read_formats.py \
        --folder /usr/share/doc/libffi8/html --folder /usr/share/doc/libtasn1-doc --ingest --json formats.json

Per format: files, pages (PDF), characters of text read, CPU seconds to read them (``time.process_time``, best of
``--repeats``), milliseconds per file and per PDF page, and characters per second. With ``--ingest`` the files are
also ingested into a fresh embedded Qdrant with the default preset (``quantize="auto"``, the model loaded and
warmed before the clock), and the report gives reading's share of the ingest's CPU seconds: the cost a format adds
to the pipeline. The CPU flags are printed; ``--json`` holds the command, the flags and the rows.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def read_rows(folders: list[Path], repeats: int, limit: int | None) -> tuple[list[dict], dict[str, list[Path]]]:
    from c2v_rag.documents.files import ReadLog, ReadOptions, list_files, read_file
    from c2v_rag.documents.formats import format_of

    by_format: dict[str, list[Path]] = {}
    for folder in folders:
        for file in list_files(folder.resolve(), ReadOptions(), ReadLog()):
            fmt = format_of(file)
            assert fmt is not None
            by_format.setdefault(fmt.name, []).append(file)
    rows = []
    for name, files in sorted(by_format.items()):
        files = files[:limit] if limit else files
        by_format[name] = files
        best, docs = float("inf"), []
        for _ in range(repeats):
            log = ReadLog()
            started = time.process_time()
            docs = [d for f in files for d in read_file(f, str(f.parent), ReadOptions(), log)]
            best = min(best, time.process_time() - started)
        chars = sum(len(d.text) for d in docs)
        pages = sum(len(d.pages) for d in docs)
        rows.append(
            {
                "format": name,
                "files": len(files),
                "documents": len(docs),
                "skipped": log.files_skipped,
                "pages": pages or None,
                "chars": chars,
                "read_cpu_s": round(best, 3),
                "ms_per_file": round(1000 * best / max(len(files), 1), 1),
                "ms_per_page": round(1000 * best / pages, 1) if pages else None,
                "chars_per_s": round(chars / best) if best else None,
            }
        )
    return rows, by_format


def ingest_cpu_seconds(files: list[Path]) -> tuple[float, int]:
    """CPU seconds of ``c2v_rag.ingest(files)`` into a fresh store, with the model already loaded, and its chunks."""
    import c2v_rag
    from c2v_rag.rag import IngestConfig

    with tempfile.TemporaryDirectory() as store:
        started = time.process_time()
        result = c2v_rag.ingest(files, path=store, collection="bench", config=IngestConfig(show_progress=False))
        return time.process_time() - started, result.chunks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", type=Path, action="append", required=True, help="a folder to read (repeatable)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--files-per-format", type=int, default=None, help="at most this many files of each format")
    parser.add_argument("--ingest", action="store_true", help="also ingest each format's files, for reading's share")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from common import recorded_command, shown_path, single_thread_note, speed_flags_note

    print(f"CPU flags: {speed_flags_note()}; {single_thread_note()}", flush=True)
    rows, by_format = read_rows(args.folder, args.repeats, args.files_per_format)
    if args.ingest:
        import c2v_rag

        c2v_rag.ingest(["warm the model up"], path=tempfile.mkdtemp(), collection="warm")  # load once, off the clock
        for row in rows:
            seconds, chunks = ingest_cpu_seconds(by_format[row["format"]])
            row.update(ingest_cpu_s=round(seconds, 2), chunks=chunks, read_share=round(row["read_cpu_s"] / seconds, 3))
    for row in rows:
        print(json.dumps(row), flush=True)
    if args.json:
        report = {
            "command": recorded_command("bench/read_formats.py", sys.argv[1:]),
            "speed_flags": speed_flags_note(),
            "folders": [shown_path(f) for f in args.folder],
            "rows": rows,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
