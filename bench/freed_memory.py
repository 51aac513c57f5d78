"""Page faults and time of the decoder's forward pass with glibc's allocator kept from handing freed memory back
(``c2v_rag.core.memory.keep_freed_memory``, what loading a model on a CPU does) and with glibc's defaults
(``C2V_RAG_KEEP_FREED_MEMORY=0``), side by side.

    python bench/freed_memory.py --json freed_memory.json

The two settings run in two child processes at once, one core and one thread each, then again with the cores
swapped (on a machine with one core, one after the other). Each child loads the preset in its CPU dtype and times
its decoder's forward pass on batches of ``--batches`` texts of ``--length`` tokens (random states: the speed does
not depend on the values), best of ``--rounds`` rounds in CPU seconds, and counts the minor page faults a forward
pass takes. The ratios compare the two settings on the same core pair.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from common import recorded_command, speed_flags

SETTINGS = {"kept": {}, "glibc-defaults": {"C2V_RAG_KEEP_FREED_MEMORY": "0"}}


def child(batches: list[int], length: int, rounds: int) -> None:
    import torch

    from c2v_rag import Causal2Vec
    from c2v_rag.core.memory import keep_freed_memory

    model = Causal2Vec.from_pretrained()
    decoder = model.decoder
    rows = []
    with torch.inference_mode():
        for batch in batches:
            x = torch.randn(batch, length, decoder.config.hidden_size).to(model.dtype)  # [B, L, d]
            mask = torch.ones(batch, length, dtype=torch.long)
            positions = torch.arange(length)[None].expand(batch, length)

            def forward() -> None:
                decoder(inputs_embeds=x, attention_mask=mask, position_ids=positions)  # noqa: B023

            for _ in range(2):
                forward()
            calls = max(3, 60 // batch)
            best = float("inf")
            faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for _ in range(rounds):
                start = time.process_time()
                for _ in range(calls):
                    forward()
                best = min(best, (time.process_time() - start) / calls)
            faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before) / (rounds * calls)
            rows.append(
                {
                    "batch": batch,
                    "tokens": batch * length,
                    "us_per_token": 1e6 * best / (batch * length),
                    "faults_per_forward": faults,
                }
            )
    print(json.dumps({"kept": keep_freed_memory(), "dtype": str(model.dtype), "rows": rows}))


def run_pair(cores: list[int], order: list[str], passthrough: list[str]) -> dict[str, dict]:
    procs = {}
    for core, name in zip(cores, order):
        env = {k: v for k, v in os.environ.items() if k != "C2V_RAG_KEEP_FREED_MEMORY"}
        env |= {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **SETTINGS[name]}
        command = ["taskset", "-c", str(core), sys.executable, __file__, "--child", *passthrough]
        procs[name] = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        if cores[0] == cores[1]:  # one core: one after the other
            procs[name].wait()
    return {
        name: json.loads(proc.communicate()[0].strip().splitlines()[-1]) | {"core": core}
        for (name, proc), core in zip(procs.items(), cores)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, nargs="+", default=[5, 10, 20], help="texts a forward pass")
    parser.add_argument("--length", type=int, default=100, help="tokens a text")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.batches, args.length, args.rounds)
        return
    passthrough = ["--batches", *map(str, args.batches), "--length", str(args.length), "--rounds", str(args.rounds)]
    available = sorted(os.sched_getaffinity(0))
    cores = available[:2] if len(available) > 1 else available * 2
    print(f"CPU flags: {' '.join(speed_flags())}; cores {cores}")
    passes = [run_pair(cores, ["kept", "glibc-defaults"], passthrough)]
    passes.append(run_pair(cores, ["glibc-defaults", "kept"], passthrough))
    print(
        f"{'pass':>4} {'tokens':>7} {'us/token kept':>14} {'defaults':>9} {'faults kept':>12} {'defaults':>9} "
        f"{'defaults/kept':>14}"
    )
    for number, result in enumerate(passes, 1):
        for kept, default in zip(result["kept"]["rows"], result["glibc-defaults"]["rows"]):
            print(
                f"{number:>4} {kept['tokens']:>7} {kept['us_per_token']:>14.1f} {default['us_per_token']:>9.1f} "
                f"{kept['faults_per_forward']:>12.0f} {default['faults_per_forward']:>9.0f} "
                f"{default['us_per_token'] / kept['us_per_token']:>13.3f}x"
            )
    if args.json:
        report = {
            "command": recorded_command("bench/freed_memory.py", sys.argv[1:]),
            "cpu_flags": speed_flags(),
            "passes": passes,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
