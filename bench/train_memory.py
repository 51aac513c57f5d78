"""Peak memory and seconds per step of a training recipe, phase by phase, in this process.

    python bench/train_memory.py recipes/own_data.yaml --data docs/ --steps 3 [--set KEY=VALUE ...]
        [--json bench/results/train_memory_<flags>.json --label own_data]
    python bench/train_memory.py OUT/candidate/train_config.yaml --steps 40    # an adapt run's recipe

Runs the recipe as ``c2v-rag train`` does (same config, same Trainer) into a temporary output.dir, for
``--steps`` steps, while a thread samples the resident set size (RSS) every 50 ms. The trainer's own log lines
mark the phases: loading the model, making the data (pseudo-pairs, mining), each training step. Reported: the
peak RSS of each phase, the process's peak (``ru_maxrss``, which the sampler can miss between samples), and
the median seconds per step, wall-clock and CPU (the first step excluded: it warms the allocator). One recipe
per process: a peak is only its own in a fresh one.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
from common import recorded_command

from c2v_rag.training import load_config
from c2v_rag.training.trainer import Trainer


def rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize()


class Sampler(threading.Thread):
    """Peak RSS per phase; :meth:`mark` starts a new phase."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.phase = "start"
        self.peaks: dict[str, int] = {}
        self.order: list[str] = []
        self.running = True
        self.lock = threading.Lock()

    def mark(self, phase: str) -> None:
        with self.lock:
            self.phase = phase

    def sample(self) -> None:
        with self.lock:
            if self.phase not in self.peaks:
                self.order.append(self.phase)
                self.peaks[self.phase] = 0
            self.peaks[self.phase] = max(self.peaks[self.phase], rss_bytes())

    def run(self) -> None:
        while self.running:
            self.sample()
            time.sleep(0.05)


class PhaseLog(logging.Handler):
    """Moves the sampler to a new phase at the trainer's log lines."""

    MARKS = (("mining", "mining"), ("pseudo-pairs", "data"), ("training examples", "data"), ("training ", "model"))

    def __init__(self, sampler: Sampler) -> None:
        super().__init__(logging.INFO)
        self.sampler = sampler

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        for needle, phase in self.MARKS:
            if needle in message:
                self.sampler.mark(f"setup: after {phase}")
                return


def cpu_flags() -> list[str]:
    text = Path("/proc/cpuinfo").read_text(encoding="utf-8") if Path("/proc/cpuinfo").is_file() else ""
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return sorted({f for f in flags if f == "avx2" or f.startswith(("avx512", "amx"))})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recipe")
    parser.add_argument("--data", action="append", default=[])
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--label", default=None)
    parser.add_argument("--json", default=None, help="append the result to this JSON list")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("c2v_rag.training").setLevel(logging.INFO)
    sampler = Sampler()
    logging.getLogger("c2v_rag.training").addHandler(PhaseLog(sampler))
    sampler.start()
    with tempfile.TemporaryDirectory() as tmp:
        overrides = [
            *args.overrides,
            f"training.steps={args.steps}",
            "training.save_every=0",
            "training.progress_bar=false",
            "evaluation.sts_path=null",
            "evaluation.retrieval_dataset=null",
            f"output.dir={tmp}/run",
        ]
        config = load_config(args.recipe, overrides, args.data)
        trainer = Trainer(config)
        sampler.mark("setup: loading")
        start = time.perf_counter()
        trainer.setup()
        setup_s = time.perf_counter() - start
        times, cpu_times, datasets = [], [], []
        for step in range(args.steps):
            sampler.mark(f"step {step + 1}")
            start, cpu_start = time.perf_counter(), time.process_time()
            datasets.append(trainer._train_step(step)["dataset"])
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - cpu_start)
        sampler.sample()
        sampler.running = False
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux
    gib = 1024**3
    # a recipe of several datasets (adapt's: the corpus and the general data) has steps of other sizes
    by_dataset = {}
    for name in dict.fromkeys(datasets):
        steps = [i for i, d in enumerate(datasets) if d == name]
        by_dataset[name] = {
            "steps": len(steps),
            "median_cpu_s_per_step": round(statistics.median(cpu_times[i] for i in steps), 2),
            "peak_rss_gib": round(max(sampler.peaks[f"step {i + 1}"] for i in steps) / gib, 2),
        }
    result = {
        "label": args.label or Path(args.recipe).stem,
        "command": recorded_command("bench/train_memory.py", sys.argv[1:]),
        "recipe": args.recipe,
        "data": args.data,
        "overrides": args.overrides,
        "batch_size": config.training.batch_size,
        "gradient_checkpointing": config.training.gradient_checkpointing,
        "mini_batch_size": config.training.mini_batch_size,
        "precision": trainer.precision,
        "peak_rss_gib": round(peak / gib, 2),
        "phase_peak_rss_gib": {phase: round(sampler.peaks[phase] / gib, 2) for phase in sampler.order},
        "setup_s": round(setup_s, 1),
        "s_per_step": [round(t, 2) for t in times],
        "median_s_per_step": round(statistics.median(times[1:] or times), 2),
        # CPU seconds: on a core shared with other work, what the step itself cost (one thread: comparable).
        "cpu_s_per_step": [round(t, 2) for t in cpu_times],
        "median_cpu_s_per_step": round(statistics.median(cpu_times[1:] or cpu_times), 2),
        "by_dataset": by_dataset,
        "cpu": platform.processor() or platform.machine(),
        "cpu_flags": cpu_flags(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        path = Path(args.json)
        rows = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
        path.write_text(json.dumps([*rows, result], indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
