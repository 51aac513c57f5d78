"""Steps prepared ahead by worker processes train exactly as steps prepared in the training process."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from train_helpers import run_past_checkpoint

from c2v_rag.cli.errors import EXIT_INTERRUPTED
from c2v_rag.core.devices import usable_cores
from c2v_rag.training import TrainConfig, Trainer
from c2v_rag.training.checkpoint import list_checkpoints
from c2v_rag.training.prefetch import StepPrefetcher, resolve_workers
from c2v_rag.training.step_texts import StepTexts

ROOT = Path(__file__).resolve().parents[2]


def _fitted(raw: dict) -> Trainer:
    trainer = Trainer(TrainConfig.model_validate(raw))
    trainer.setup()
    trainer.fit()
    return trainer


def _trainable(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def _same_training(a: Trainer, b: Trainer) -> None:
    for key in ("loss", "grad_norm", "dataset", "lr"):
        assert [h[key] for h in a.history] == [h[key] for h in b.history], key
    got, expected = _trainable(a.model), _trainable(b.model)
    assert got.keys() == expected.keys()
    for name in expected:
        assert torch.equal(got[name], expected[name]), name


@pytest.mark.parametrize("mini_batch_size", [None, 3])
def test_two_workers_train_exactly_as_none(tiny_recipe, tmp_path, mini_batch_size):
    """Losses, gradient norms and the trained weights of 5 steps, with dropout on (the RNG must not move)."""
    raw = tiny_recipe(steps=5, mini_batch_size=mini_batch_size, prefetch_workers=0)
    raw["lora"]["dropout"] = 0.2
    raw["datasets"][1]["icl_examples"] = 1  # seeded in-context examples, laid out in the workers too
    inline = _fitted(raw)
    assert inline.prefetch_workers == 0 and all(h["input_seconds"] >= 0 for h in inline.history)
    raw["training"]["prefetch_workers"] = 2
    raw["output"]["dir"] = str(tmp_path / "prefetched")
    prefetched = _fitted(raw)
    assert prefetched.prefetch_workers == 2
    assert prefetched.prefetcher is None  # fit shut its workers down
    _same_training(prefetched, inline)


def test_resume_with_workers_continues_the_run_without(tiny_recipe, tmp_path):
    """Where a step is tokenized is not part of the run: a run resumed with workers goes on as it would have."""
    raw = tiny_recipe(steps=6, save_every=3, keep_checkpoints=5, mini_batch_size=3, prefetch_workers=0)
    raw["lora"]["dropout"] = 0.2
    straight = _fitted(raw)
    resumed_dir = tmp_path / "resumed"
    shutil.copytree(straight.output_dir, resumed_dir)
    for later in list_checkpoints(resumed_dir / "checkpoints")[1:]:
        shutil.rmtree(later)
    torch.manual_seed(12345)
    raw["output"]["dir"] = str(resumed_dir)
    raw["training"].update(prefetch_workers=2, prefetch_depth=1)
    resumed = Trainer(TrainConfig.model_validate(raw))
    resumed.setup(resume=True)
    assert resumed.step == 3
    resumed.fit()
    _same_training(resumed, straight)


def test_an_objective_without_prefetch_trains_in_process_and_says_so_once(tiny_recipe, caplog):
    raw = tiny_recipe(steps=3, prefetch_workers=2)
    raw["model"]["config"] = {"num_contextual_tokens": 0, "representation": "mean"}
    raw["model"]["encoder"] = None
    raw["objective"] = {"kind": "simcse", "dropout": 0.1}
    raw["training"]["hard_negatives"] = 0
    with caplog.at_level(logging.INFO, logger="c2v_rag.training.trainer"):
        trainer = _fitted(raw)
    assert trainer.prefetch_workers == 0 and trainer.step == 3
    said = [r.getMessage() for r in caplog.records if "prefetch_workers" in r.getMessage()]
    assert len(said) == 1 and "objective.kind=simcse" in said[0], said


def _texts(step: int) -> StepTexts:
    return StepTexts("d", [f"q{step}"], [None], [f"p{step}"], [None], [0], [[False]], 0)


def _prepare(texts: StepTexts) -> object:
    if texts.queries == ["q3"]:
        raise ValueError("step 3 cannot be tokenized: the original message")
    return torch.tensor([int(texts.queries[0][1:])])


def test_the_prefetcher_returns_steps_in_order_and_restarts_where_asked():
    prefetcher = StepPrefetcher(_texts, lambda t: t.queries[0], workers=2, depth=2)
    try:
        assert [prefetcher.get(step, 4).prepared for step in range(4)] == ["q0", "q1", "q2", "q3"]
        # The run grew past the end the workers were given, then jumped: both restart them at the step asked.
        assert prefetcher.get(4, 6).prepared == "q4"
        assert prefetcher.get(9, 10).texts.queries == ["q9"]
    finally:
        prefetcher.close()
    assert prefetcher.get(0, 1).step == 0  # a closed prefetcher starts again
    prefetcher.close()


def _threads(texts: StepTexts) -> tuple[int, str | None]:
    return torch.get_num_threads(), os.environ.get("TOKENIZERS_PARALLELISM")


def test_workers_run_one_thread_each_with_sequential_tokenizers(monkeypatch):
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    prefetcher = StepPrefetcher(_texts, _threads, workers=2, depth=1)
    try:
        assert {prefetcher.get(step, 4).prepared for step in range(4)} == {(1, "false")}
    finally:
        prefetcher.close()
    assert "TOKENIZERS_PARALLELISM" not in os.environ  # the training process keeps its own setting


def test_an_error_in_a_worker_reaches_the_training_process_with_its_message():
    prefetcher = StepPrefetcher(_texts, _prepare, workers=2, depth=1)
    try:
        assert prefetcher.get(2, 8).prepared.tolist() == [2]
        with pytest.raises(ValueError, match="step 3 cannot be tokenized: the original message"):
            prefetcher.get(3, 8)
    finally:
        prefetcher.close()


def test_auto_workers_leave_a_cpu_run_alone_and_feed_a_gpu_from_spare_cores(tiny_recipe):
    assert resolve_workers("auto", torch.device("cpu")) == 0
    assert resolve_workers(3, torch.device("cpu")) == 3
    expected = max(0, min(8, usable_cores() - 2))
    assert resolve_workers("auto", torch.device("cuda")) == expected
    assert resolve_workers("auto", torch.device("cuda"), processes_per_host=64) == 0
    with pytest.raises(ValueError, match="prefetch_workers"):
        TrainConfig.model_validate(tiny_recipe(prefetch_workers=-1))
    assert TrainConfig.model_validate(tiny_recipe()).training.prefetch_workers == "auto"


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] not in "ZX"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the process tree from /proc")
def test_ctrl_c_stops_a_run_with_workers_and_its_workers(tiny_recipe, tmp_path):
    """SIGINT while the workers prepare steps: the run stops as without them (the resume message), none is left."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(steps=100_000, save_every=3, prefetch_workers=2)))
    out = Path(tiny_recipe()["output"]["dir"])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "c2v_rag.cli", "train", str(recipe)]
    with run_past_checkpoint(command, env, out) as proc:
        workers = _children(proc.pid)
        assert len(workers) >= 2  # the two prefetch workers (and the loader's own helpers, if any)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert err.strip().splitlines()[-1].startswith("error: training interrupted after step ")
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in workers if _alive(pid)]
