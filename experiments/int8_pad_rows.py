"""Do the pad rows of calibration batches move the int8 decoder? (lab note: int8-history.md, "Pad rows in the
calibration").

``c2v_rag.cpu.int8.input_maxima`` records ``max |x_k|`` over every row its hooks see, and the calibration encodes
its texts in right-padded batches of 8, so pad positions count. This calibrates the preset (float32, as the
shipped maxima are made) both ways, batches of 8 and one text at a time (no pad rows), compares the maxima, builds
an int8 decoder from each (each in its own cache), and prints the cosine of each int8 vector to the float32 model's
on SciFact texts the calibration never saw: the first 150 corpus documents and the last 100 claims.

    python experiments/int8_pad_rows.py --data ../shared/data --work runs/int8-pad-rows

Each step runs in its own process (``--step``), as the int8 builds need their own ``C2V_RAG_CACHE``; without
``--step`` the script runs them in turn.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

PRESET = Path(__file__).resolve().parents[1] / "c2v_rag" / "presets" / "c2v-smollm2-135m-minilm"
STEPS = ("maxima", "float", "b8", "b1")
PARTS = {"MiniLM": (0, 384), "h_EOS": (384, 960), "h_C": (960, 1536)}


def texts(data: Path) -> tuple[list[str], list[str]]:
    corpus = [json.loads(line) for line in (data / "scifact" / "corpus.jsonl").open()][:150]
    claims = [json.loads(line)["text"] for line in (data / "scifact" / "queries.jsonl").open()][-100:]
    return [(r.get("title", "") + " " + r["text"]).strip() for r in corpus], claims


def run_step(step: str, data: Path, work: Path) -> None:
    from safetensors.numpy import load_file, save_file

    import c2v_rag.cpu.int8 as int8
    from c2v_rag import Causal2Vec

    variant = work / "variant"  # the preset without its shipped maxima: an int8 load calibrates
    if not variant.exists():
        shutil.copytree(PRESET, variant)
        (variant / int8.SHIPPED_MAXIMA_FILE).unlink()
    if step == "maxima":
        model = Causal2Vec.from_pretrained(str(variant), device="cpu", dtype="float32")
        for batch in (8, 1):
            started = time.perf_counter()
            maxima = int8.input_maxima(model, batch_size=batch, precision="fp32")
            print(f"calibration, batches of {batch}: {time.perf_counter() - started:.1f} s")
            save_file({k: np.ascontiguousarray(v, np.float32) for k, v in maxima.items()}, str(work / f"b{batch}.st"))
        return
    if step == "float":
        model = Causal2Vec.from_pretrained(str(variant), device="cpu", dtype="float32")
    else:
        maxima = load_file(str(work / f"{step}.st"))
        int8.input_maxima = lambda *args, **kwargs: maxima  # the build's calibration, replaced by these maxima
        os.environ["C2V_RAG_CACHE"] = str(work / f"cache-{step}")
        model = Causal2Vec.from_pretrained(str(variant), device="cpu", quantize="int8")
    documents, queries = texts(data)
    vectors = np.concatenate(
        [
            model.encode_documents(documents, normalize_embeddings=True, batch_size=16),
            model.encode_queries(queries, task="SciFact", normalize_embeddings=True, batch_size=16),
        ]
    )
    np.save(work / f"vectors-{step}.npy", vectors)


def report(work: Path) -> None:
    from safetensors.numpy import load_file

    padded, single = load_file(str(work / "b8.st")), load_file(str(work / "b1.st"))
    ratios = sorted(((padded[k] / np.maximum(single[k], 1e-6)).max(), k) for k in padded)
    inflated = sum(r > 1.01 for r, _ in ratios)
    print(f"maxima, padded / single: {inflated} of {len(ratios)} modules have a channel > 1.01x; largest:")
    for ratio, name in ratios[::-1][:5]:
        print(f"  {ratio:.2f}x  {name}")
    reference = np.load(work / "vectors-float.npy")
    for step in ("b8", "b1"):
        vectors = np.load(work / f"vectors-{step}.npy")
        whole = (reference * vectors).sum(1)
        line = [f"{step}: whole mean {whole.mean():.6f} worst {whole.min():.6f}"]
        for part, (a, b) in PARTS.items():
            x, y = reference[:, a:b], vectors[:, a:b]
            cos = (x * y).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1)
            line.append(f"{part} mean {cos.mean():.5f} worst {cos.min():.5f}")
        print(" | ".join(line))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--step", choices=STEPS)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.step:
        run_step(args.step, args.data, args.work)
        return
    for step in STEPS:
        subprocess.run(
            [sys.executable, __file__, "--data", str(args.data), "--work", str(args.work), "--step", step], check=True
        )
    report(args.work)


if __name__ == "__main__":
    main()
