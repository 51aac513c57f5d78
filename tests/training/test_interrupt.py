"""Ctrl-C during ``c2v-rag train`` says what was saved and the exact command that resumes, not ingest's message.

Before, a SIGINT reached the CLI's generic handler: "error: interrupted; re-run the same command to resume
(stored chunks are skipped)", though re-running the same command refuses a non-empty output.dir and resuming
needs ``--resume``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from train_helpers import run_past_checkpoint

from c2v_rag.cli.errors import EXIT_INTERRUPTED
from c2v_rag.cli.train import command_words, interrupted_message
from c2v_rag.training import TrainConfig

ROOT = Path(__file__).resolve().parents[2]


def _cli(words: list[str]) -> list[str]:
    assert words[0] == "c2v-rag"
    return [sys.executable, "-m", "c2v_rag.cli", *words[1:]]


@pytest.mark.parametrize(
    ("stop", "status"),
    [(signal.SIGINT, EXIT_INTERRUPTED), (signal.SIGTERM, -signal.SIGTERM)],
    ids=["ctrl-c", "sigterm"],
)
def test_sigint_during_training_names_the_checkpoint_and_the_command_that_resumes(tiny_recipe, tmp_path, stop, status):
    """Ctrl-C, or SIGTERM (a scheduler ending the job), stops training with its checkpoint named."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(steps=100_000, save_every=3)))
    out = Path(tiny_recipe()["output"]["dir"])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    words = ["c2v-rag", "train", str(recipe), "--set", "training.lr=0.0005"]
    with run_past_checkpoint(_cli(words), env, out) as proc:
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: training interrupted after step ") and "stored chunks" not in err
    assert f"{out}/checkpoints/step-0000" in line
    command = line.split("Resume from it with: ", 1)[1]
    assert command == shlex.join([*words, "--resume"])
    # The command given resumes from that checkpoint (here told to stop one step after it).
    saved = int(line.split(", holds step ", 1)[1].split(";")[0].split(".")[0])
    resumed = subprocess.run(
        _cli([*shlex.split(command), "--set", f"training.steps={saved + 1}"]),
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"after {saved + 1} steps" in resumed.stdout


def test_ctrl_c_pressed_again_while_the_run_stops_still_names_the_checkpoint(tiny_recipe, tmp_path):
    """A user who presses Ctrl-C again (or holds it) while the run stops gets the same message and exit code, not a
    traceback, ingest's message or a death by signal that leaves the shell nothing to read."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(steps=100_000, save_every=3)))
    out = Path(tiny_recipe()["output"]["dir"])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    with run_past_checkpoint(_cli(["c2v-rag", "train", str(recipe)]), env, out) as proc:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            proc.send_signal(signal.SIGINT)
            time.sleep(0.01)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert err.strip().splitlines()[-1].startswith("error: training interrupted after step "), err


def test_an_interrupt_before_any_checkpoint_says_so(tiny_recipe, tmp_path):
    config = TrainConfig.model_validate(tiny_recipe(save_every=50))
    args = argparse.Namespace(config="r.yaml", data=["my docs/"], overrides=["training.steps=9"])
    words = command_words(args)
    assert shlex.join(words) == "c2v-rag train r.yaml --data 'my docs/' --set training.steps=9"
    fresh = interrupted_message(config, 0, words)
    assert "nothing was written" in fresh and fresh.endswith(shlex.join(words))
    (Path(config.output.dir) / "mined").mkdir(parents=True)
    message = interrupted_message(config, 7, words)
    assert "after step 7 of 4, before any checkpoint was saved (one is saved every 50 steps" in message
    assert message.split("Start again from step 0 with: ", 1)[1].startswith(shlex.join([*words, "--resume"]))
