"""How fast the host prepares training steps: in the training process, and in 1, 2, ... prefetch workers.

    python bench/prefetch_prepare.py --pairs runs/docs-pairs/train.jsonl --workers 0 1 2 --steps 6 \\
        --json bench/results/gpu_train/prefetch_prepare_avx2.json

A step is what the GPU run trains (bench/gpu_train.py): ``recipes/preset_broad_docs.yaml``'s model, loss and
prompts on the shipped preset's tokenizers, a batch of 512 documentation pairs (``build_docs_corpus.py
--pairs``; 1,024 texts) in GradCache mini-batches of 128. The trainer itself lays each step out and prepares it
(``Trainer.step_texts``, ``Objective.prepare``: prompts, both tokenizers, padding, the length-sorted chunks); with
workers, :class:`~c2v_rag.training.prefetch.StepPrefetcher` runs that in forked processes, as training does.
Reported per setting: steps prepared per second over all steps (the workers' start included) and after the first.
Nothing is embedded: the numbers bound how fast a GPU can be fed from this many cores.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from common import recorded_command  # noqa: E402

from c2v_rag.training import TrainConfig, Trainer  # noqa: E402
from c2v_rag.training.prefetch import StepPrefetcher  # noqa: E402


def build_trainer(pairs: Path, batch: int, mini_batch: int, out: Path) -> Trainer:
    recipe = yaml.safe_load((REPO / "recipes" / "preset_broad_docs.yaml").read_text(encoding="utf-8"))
    docs = next(s for s in recipe["datasets"] if s["format"] == "corpus")
    recipe["datasets"] = [{"name": docs["name"], "format": "jsonl", "path": str(pairs), "task": docs["task"]}]
    recipe["mining"] = {"method": "none"}
    recipe.pop("evaluation", None)
    recipe["training"].update(
        batch_size=batch,
        mini_batch_size=mini_batch,
        steps=10_000,
        precision="fp32",
        device="cpu",
        progress_bar=False,
        prefetch_workers=0,
    )
    recipe["output"] = {"dir": str(out), "overwrite": True}
    trainer = Trainer(TrainConfig.model_validate(recipe))
    trainer.setup()
    return trainer


def measure(trainer: Trainer, workers: int, steps: int, first: int) -> dict:
    marks = []
    start = time.perf_counter()
    if workers == 0:
        for step in range(first, first + steps):
            prepared = trainer.objective.prepare(trainer.step_texts(step))
            marks.append(time.perf_counter())
    else:
        prefetcher = StepPrefetcher(trainer.step_texts, trainer.objective.prepare, workers=workers, depth=2)
        try:
            for step in range(first, first + steps):
                prepared = prefetcher.get(step, first + steps).prepared
                marks.append(time.perf_counter())
        finally:
            prefetcher.close()
    chunks = prepared.chunks  # type: ignore[attr-defined]
    total = marks[-1] - start
    return {
        "workers": workers,
        "steps": steps,
        "seconds": round(total, 2),
        "steps_per_s": round(steps / total, 3),
        "steps_per_s_after_first": round((steps - 1) / (marks[-1] - marks[0]), 3) if steps > 1 else None,
        "texts_per_step": sum(len(c.rows) for c in chunks),
        "chunks_per_step": len(chunks),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=Path, default=REPO / "runs" / "docs-pairs" / "train.jsonl")
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--mini-batch", type=int, default=128)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer(args.pairs, args.batch, args.mini_batch, Path(tmp) / "run")
        rows = []
        for i, workers in enumerate(args.workers):
            # Other steps for each setting: no setting finds another's texts in a cache.
            row = measure(trainer, workers, args.steps, first=i * args.steps)
            print(json.dumps(row), flush=True)
            rows.append(row)
    base = rows[0]["steps_per_s"]
    for row in rows:
        row["speedup"] = round(row["steps_per_s"] / base, 2)
    result = {
        "command": recorded_command("bench/prefetch_prepare.py", sys.argv[1:]),
        "machine": platform.processor() or platform.machine(),
        "rows": rows,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
