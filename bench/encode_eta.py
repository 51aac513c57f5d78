"""How right the encode bar's ETA is when it counts texts, and when it weighs them by characters (what it does).

``model.encode(texts, show_progress_bar=True)`` on SciFact abstracts with the default preset; the time and the
texts done at each batch are recorded, and the bar each weighting would draw is replayed on that trace: at each
batch, projected total = elapsed / share done. The batches run longest text first, so a count of texts is a slow
clock early in the run.

    taskset -c 0 env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python bench/encode_eta.py --data ../shared/data --texts 600
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load_scifact_docs, recorded_command, speed_flags_note  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the folder holding scifact/")
    parser.add_argument("--texts", type=int, default=600)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import c2v_rag.encode.loop as loop
    from c2v_rag.rag.embedding import load_model

    texts = load_scifact_docs(args.data, args.texts)
    model = load_model(None)
    trace: list[tuple[float, int]] = []  # (seconds, texts done) at each batch

    class Recording(loop.CountingBar):
        def update(self, n=1):
            trace.append((time.perf_counter(), self.count))
            return super().update(n)

    loop.CountingBar = Recording  # type: ignore[misc]
    started = time.perf_counter()
    model.encode_documents(texts, show_progress_bar=True)
    real = time.perf_counter() - started
    seconds = np.array([t - started for t, _ in trace])
    done = np.array([count for _, count in trace])
    lengths = np.array(sorted((len(t) for t in texts), reverse=True), dtype=float)  # the order the batches run
    rows = {}
    for name, weights in (("texts", np.ones(len(lengths))), ("characters", lengths)):
        share = np.concatenate([[0.0], np.cumsum(weights)])[done] / weights.sum()
        inside = (seconds > 0.05 * real) & (seconds < 0.95 * real)
        ratio = seconds / np.maximum(share, 1e-9) / real  # projected total / real total
        at = {f"{p}%": float(ratio[np.argmax(seconds > p / 100 * real)]) for p in (10, 25, 50, 75)}
        rows[name] = {"mean_abs_error": float(np.abs(ratio[inside] - 1).mean()), **at}
    print(f"# {len(texts)} SciFact texts in {real:.1f} s, {len(trace)} batches; {speed_flags_note()}")
    print("| bar weighs | mean abs(projected/real - 1) | at 10% of the run | 25% | 50% | 75% |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, row in rows.items():
        print(
            f"| {name} | {row['mean_abs_error']:.2f} | {row['10%']:.2f} | {row['25%']:.2f} | {row['50%']:.2f} "
            f"| {row['75%']:.2f} |"
        )
    if args.json:
        command = recorded_command("bench/encode_eta.py", sys.argv[1:])
        result = {"command": command, "note": speed_flags_note(), "seconds": real, "texts": len(texts), "rows": rows}
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
