"""How right the ingest bar's ETA is: ``c2v-rag ingest FOLDER`` run in a pseudo-terminal, as a user at a shell
sees it, its redraws read back, and at each tenth of the files the total time the bar projected (elapsed + ETA)
against the time the run really took.

    taskset -c 0 env OMP_NUM_THREADS=1 python bench/ingest_eta.py /tmp/md-300
    python bench/ingest_eta.py /tmp/md-300 --checkout ../c2v-old --checkout .   # two versions, one after the other
    python bench/ingest_eta.py /tmp/md-300 --ray 2    # `ingest --ray --actors 2`: its bar counts a percentage

Each ``--checkout`` (a source tree of c2v_rag; default: this one) ingests the folder into a fresh embedded
Qdrant; they run one after the other in the same process affinity, so the ratios can be compared. A ratio of 1.00
is an ETA that was right; 2.00, one that projected twice the real time. Make a folder with
``bench/ingest_folder.py --files 300 --folder /tmp/md-300``.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import recorded_command, speed_flags_note  # noqa: E402

BAR = re.compile(r"(\d+)/(\d+) files \[(?:(\d+):)?(\d+):(\d+)<(?:(?:(\d+):)?(\d+):(\d+)|\?)")
# The Ray bar: no file count (files finish on the actors), a percentage of the bytes read.
RAY_BAR = re.compile(r"(\d+)%\|[^|]*\| \[(?:(\d+):)?(\d+):(\d+)<(?:(?:(\d+):)?(\d+):(\d+)|\?)")


def _seconds(hours: str | None, minutes: str, seconds: str) -> int:
    return int(hours or 0) * 3600 + int(minutes) * 60 + int(seconds)


def run_in_terminal(checkout: Path, folder: Path, store: Path, extra: list[str]) -> tuple[str, float]:
    """The ingest command's terminal output and its wall time, in a pseudo-terminal 120 x 30."""
    command = [sys.executable, "-m", "c2v_rag.cli", "ingest", str(folder), "--path", str(store)]
    command += ["--collection", "eta", *extra]
    env = {**os.environ, "COLUMNS": "120", "LINES": "30", "PYTHONPATH": str(checkout.resolve())}
    output = bytearray()
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the ingest, with the pty as its terminal
        os.chdir(checkout)
        os.execvpe(command[0], command, env)
    try:
        while True:
            try:
                data = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            output.extend(data)
    finally:
        _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{checkout}: the ingest failed:\n{output.decode(errors='replace')[-2000:]}")
    return output.decode(errors="replace"), time.perf_counter() - start


def projections(output: str) -> list[dict[str, float]]:
    """Each redraw with an ETA: files done (the Ray bar: percent), elapsed and projected total seconds."""
    rows = []
    for screen in re.split(r"[\r\n]", output):
        match = BAR.search(screen)
        if match is not None and match.group(7) is not None:
            done, total = int(match.group(1)), int(match.group(2))
            times = match.groups()[2:]
        elif (ray := RAY_BAR.search(screen)) is not None and ray.group(6) is not None:
            done, total = int(ray.group(1)), 100
            times = ray.groups()[1:]
        else:
            continue
        elapsed, remaining = _seconds(*times[:3]), _seconds(*times[3:])
        rows.append({"files": done, "of": total, "elapsed": elapsed, "projected": elapsed + remaining})
    return rows


def at_tenths(rows: list[dict[str, float]], real: float) -> list[dict[str, float]]:
    """The first redraw past each tenth of the files, with its projected total over the real total."""
    picked, next_tenth = [], 0.0
    for row in rows:
        if row["files"] / row["of"] >= next_tenth and row["files"] < row["of"]:
            picked.append({**row, "ratio": row["projected"] / real})
            next_tenth = (int(10 * row["files"] / row["of"]) + 1) / 10
    return picked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--checkout", type=Path, action="append", help="a c2v_rag source tree (repeatable)")
    parser.add_argument("--ray", type=int, metavar="ACTORS", help="ingest on a local Ray cluster with this many actors")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    extra = ["--ray", "--actors", str(args.ray)] if args.ray else []
    checkouts = args.checkout or [Path(__file__).resolve().parents[1]]
    revisions = [
        subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=c, capture_output=True, text=True).stdout.strip()
        for c in checkouts
    ]
    results = []
    for checkout, revision in zip(checkouts, revisions):
        with tempfile.TemporaryDirectory() as store:
            output, wall = run_in_terminal(checkout, args.folder, Path(store) / "qdrant", extra)
        rows = projections(output)
        # The bar's clock (its last elapsed) is the run's, without the interpreter's start-up and model load.
        real = rows[-1]["elapsed"] if rows else wall
        results.append(
            {
                "checkout": str(checkout),
                "revision": revision,
                "real_s": real,
                "wall_s": wall,
                "tenths": at_tenths(rows, real),
            }
        )
    print(f"# ingest of {args.folder}: projected total (elapsed + ETA) / real total, at each tenth of the files")
    print(f"# {speed_flags_note()}")
    for result in results:
        print(f"\n{result['revision']} ({result['checkout']}): real {result['real_s']:.0f} s on the bar's clock")
        print("| files | elapsed s | projected s | projected / real |\n|---:|---:|---:|---:|")
        for row in result["tenths"]:
            print(
                f"| {row['files']}/{row['of']} | {row['elapsed']:.0f} | {row['projected']:.0f} | {row['ratio']:.2f} |"
            )
    if args.json:
        command = recorded_command("bench/ingest_eta.py", sys.argv[1:])
        args.json.write_text(json.dumps({"command": command, "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
