"""Encode throughput and peak memory of Causal2Vec against its peers, on the same texts and backbone.

    python bench/peers.py --data ../shared/data                       # 200 abstracts + 200 claims
    python bench/peers.py --data ../shared/data --docs 5183 --queries 1109   # all of SciFact
    python bench/peers.py --data ../shared/data --llm2vec-python /path/to/venv-llm2vec/bin/python

Configurations, all on SmolLM2-135M-Instruct from the same local directory and in the same dtype:

- ``causal2vec``: c2v_rag's default preset (MiniLM encoder + projector + decoder), ``encode``;
- ``plain``: c2v_rag's plain decoder (no Contextual token), the same encode loop and batching;
- ``echo``: the plain decoder on each text written twice (Echo embeddings' cost), same loop;
- ``naive-hf``: transformers in input order, batch 32, padding to the longest, last-token pooling;
- ``st-lasttoken``: sentence-transformers (length-sorted batches of 32) with lasttoken pooling;
- ``llm2vec``: llm2vec 0.2.3 (bidirectional, mean pooling) in its own venv, as a subprocess.

The texts are SciFact abstracts and claims shuffled together. Every configuration is credited
with the same numerator: each text's own decoder tokens (no template), capped at 512, counted
once; so Echo's doubled input and c2v's template show up as lower tokens/s, as they should.
The configurations run round-robin for ``--rounds`` rounds in a rotating order, so load from
other processes falls on all of them alike; the best round of each is reported. Speeds are per
CPU second of the process (see ``common.measure``): on a machine shared with other jobs the
wall clock counts their time too. Wall seconds are printed beside them.

Peak memory is the process's peak RSS during that configuration's encode minus its RSS just
before (``VmHWM`` reset through ``/proc/self/clear_refs`` after ``malloc_trim``): the working
memory of the encode, activations and tokenized batches, on top of the weights (listed apart).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from common import Measurement, measure, mixed_texts, single_thread_note

MAX_LENGTH = 512


def decoder_dir() -> str:
    """The local directory of the SmolLM2 backbone that c2v_rag converted; peers load it from disk."""
    from c2v_rag.hub.sources import resolve_reference

    return resolve_reference("smollm2-135m-instruct").location


def weight_mib(*modules: torch.nn.Module | None) -> float:
    return sum(p.numel() * p.element_size() for m in modules if m is not None for p in m.parameters()) / 2**20


def c2v_runner(dtype: str, *, plain: bool, echo: bool = False) -> tuple[Callable[[list[str]], np.ndarray], float]:
    from c2v_rag import Causal2Vec

    if plain:
        model = Causal2Vec.from_components(
            "smollm2-135m-instruct",
            None,
            num_contextual_tokens=0,
            representation="last_token",
            device="cpu",
            dtype=dtype,
            max_length=2 * MAX_LENGTH if echo else MAX_LENGTH,
        )
    else:
        model = Causal2Vec.from_pretrained(None, device="cpu", dtype=dtype)
    weights = weight_mib(model.decoder, model.encoder, model.projector)
    if echo:
        # Echo embeddings read the second copy, which has seen the whole text once already.
        return (lambda texts: model.encode([f"{t}\n{t}" for t in texts], show_progress_bar=False)), weights
    return (lambda texts: model.encode(texts, show_progress_bar=False)), weights


def naive_hf_runner(dtype: str) -> tuple[Callable[[list[str]], np.ndarray], float]:
    """What a first attempt looks like: input order, fixed batches, pad to the longest."""
    from transformers import AutoModel, AutoTokenizer

    path = decoder_dir()
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModel.from_pretrained(path, dtype=getattr(torch, dtype)).eval()

    def run(texts: list[str]) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for start in range(0, len(texts), 32):
                batch = tokenizer(
                    texts[start : start + 32], padding=True, truncation=True, max_length=MAX_LENGTH, return_tensors="pt"
                )
                hidden = model(**batch).last_hidden_state
                last = batch["attention_mask"].sum(1) - 1
                out.append(hidden[torch.arange(hidden.size(0)), last].float().numpy())
        return np.concatenate(out)

    return run, weight_mib(model)


def st_runner(dtype: str) -> tuple[Callable[[list[str]], np.ndarray], float]:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(
        decoder_dir(), device="cpu", local_files_only=True, model_kwargs={"dtype": getattr(torch, dtype)}
    )
    model.max_seq_length = MAX_LENGTH
    pooling = [m for m in model if type(m).__name__ == "Pooling"]
    modes = getattr(pooling[0], "pooling_mode", None) if pooling else None
    if "lasttoken" not in str(modes):
        raise RuntimeError(f"sentence-transformers chose pooling {modes!r}, not lasttoken")
    if model.tokenizer.pad_token is None:
        model.tokenizer.pad_token = model.tokenizer.eos_token
    return (lambda texts: model.encode(texts, batch_size=32, show_progress_bar=False)), weight_mib(model)


def run_llm2vec(python: str, texts_file: Path, dtype: str, model_dir: str) -> dict:
    """One llm2vec round in its own venv; the worker times its own encode (load excluded)."""
    worker = Path(__file__).with_name("llm2vec_worker.py")
    proc = subprocess.run(
        [
            python,
            str(worker),
            "--texts",
            str(texts_file),
            "--model",
            model_dir,
            "--dtype",
            dtype,
            "--max-length",
            str(MAX_LENGTH),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"llm2vec worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def real_tokens(texts: list[str]) -> int:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(decoder_dir())
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return sum(min(len(i), MAX_LENGTH) for i in ids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the shared data folder (holds scifact/)")
    parser.add_argument("--docs", type=int, default=200, help="SciFact abstracts (5183 for all)")
    parser.add_argument("--queries", type=int, default=200, help="SciFact claims (1109 for all)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", nargs="+", help="run only these configurations")
    parser.add_argument("--llm2vec-python", help="python of a venv with llm2vec==0.2.3 (skipped without)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    texts = mixed_texts(args.data, args.docs, args.queries)
    tokens = real_tokens(texts)
    print(
        f"{len(texts)} texts ({args.docs} abstracts + {args.queries} claims, shuffled), {tokens} real tokens; "
        f"{args.dtype}; {single_thread_note()}",
        flush=True,
    )

    builders = {
        "causal2vec": lambda: c2v_runner(args.dtype, plain=False),
        "plain": lambda: c2v_runner(args.dtype, plain=True),
        "echo": lambda: c2v_runner(args.dtype, plain=True, echo=True),
        "naive-hf": lambda: naive_hf_runner(args.dtype),
        "st-lasttoken": lambda: st_runner(args.dtype),
    }
    names = [n for n in builders if not args.only or n in args.only]
    runners, weights = {}, {}
    for name in names:
        runners[name], weights[name] = builders[name]()
        runners[name](texts[:8])  # warm-up: allocator, kernel selection
    use_llm2vec = args.llm2vec_python and (not args.only or "llm2vec" in args.only)
    texts_file = Path(tempfile.mkstemp(suffix=".json")[1])
    texts_file.write_text(json.dumps(texts))

    results: dict[str, dict] = {n: {"seconds": [], "cpu_seconds": [], "working_mib": []} for n in names}
    if use_llm2vec:
        results["llm2vec"] = {"seconds": [], "cpu_seconds": [], "working_mib": []}
    order = list(results)
    for r in range(args.rounds):
        for name in order[r % len(order) :] + order[: r % len(order)]:
            if name == "llm2vec":
                out = run_llm2vec(args.llm2vec_python, texts_file, args.dtype, decoder_dir())
                m = Measurement(out["seconds"], out["cpu_seconds"], out["before_kib"], out["peak_kib"])
                weights["llm2vec"] = out["weight_mib"]
            else:
                m = measure(lambda: runners[name](texts))  # noqa: B023
            for key in ("seconds", "cpu_seconds", "working_mib"):
                results[name][key].append(getattr(m, key))
            print(
                f"  round {r + 1} {name:13s} wall {m.seconds:7.1f} s  cpu {m.cpu_seconds:7.1f} s  "
                f"{tokens / m.cpu_seconds:6.0f} tok/cpu-s  working {m.working_mib:6.0f} MiB",
                flush=True,
            )
    texts_file.unlink()

    # Ranked by CPU seconds (see common.measure); the best round of each configuration.
    best = {n: min(r["cpu_seconds"]) for n, r in results.items()}
    print(
        f"\n{'configuration':14s} {'cpu s':>7s} {'wall s':>7s} {'tok/s':>7s} {'texts/s':>8s} {'weights MiB':>11s} "
        f"{'working MiB':>11s} {'c2v speed-up':>12s}"
    )
    for name, r in results.items():
        r.update(
            best_cpu_seconds=best[name],
            tokens_per_s=tokens / best[name],
            weights_mib=weights[name],
            peak_working_mib=max(r["working_mib"]),
        )
        ratio = best[name] / best["causal2vec"] if "causal2vec" in best else float("nan")
        print(
            f"{name:14s} {best[name]:7.1f} {min(r['seconds']):7.1f} {tokens / best[name]:7.0f} "
            f"{len(texts) / best[name]:8.2f} {weights[name]:11.0f} {r['peak_working_mib']:11.0f} {ratio:11.2f}x"
        )
    if "causal2vec" in best and "plain" in best:
        print(f"\nCausal2Vec time / plain decoder time (same batching): {best['causal2vec'] / best['plain']:.3f}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "texts": len(texts),
                    "docs": args.docs,
                    "queries": args.queries,
                    "real_tokens": tokens,
                    "dtype": args.dtype,
                    "threads": torch.get_num_threads(),
                    "results": results,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
