"""One-text query latency of the default preset: 64 distinct SciFact claims, each embedded alone, twice over.

    taskset -c 0 env OMP_NUM_THREADS=1 python bench/results/kernel_caches/query_latency.py --data ../shared/data

Prints the median seconds of the first and of the second round (the second finds a query's kernels built, if the
caches kept them) and the whole. Run it under each environment setting in turn, in separate processes.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from common import load_scifact_queries  # noqa: E402

from c2v_rag import Causal2Vec  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--data", type=Path, required=True)
parser.add_argument("--claims", type=int, default=64)
args = parser.parse_args()
claims = load_scifact_queries(args.data, args.claims)
model = Causal2Vec.from_pretrained()
model.encode_queries(["warm up the first call"])
rounds = []
for _ in range(2):
    times = []
    for claim in claims:
        started = time.perf_counter()
        model.encode_queries([claim])
        times.append(time.perf_counter() - started)
    rounds.append(times)
settings = {k: os.environ.get(k) for k in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")}
print(
    json.dumps(
        {
            "settings_after_load": settings,
            "dtype": str(model.dtype),
            "first_round_median_ms": round(1000 * statistics.median(rounds[0]), 2),
            "second_round_median_ms": round(1000 * statistics.median(rounds[1]), 2),
            "median_ms": round(1000 * statistics.median(rounds[0] + rounds[1]), 2),
        }
    )
)
