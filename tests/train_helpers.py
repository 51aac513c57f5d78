"""Helpers shared by the training tests."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import torch


def disable_dropout(model: torch.nn.Module) -> torch.nn.Module:
    """Zero every dropout (BERT keeps 0.1 in train mode) so gradient comparisons are deterministic."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if hasattr(module, "dropout_prob"):
            module.dropout_prob = 0.0
        if hasattr(module, "attention_dropout") and isinstance(module.attention_dropout, float):
            module.attention_dropout = 0.0
    return model


def no_dropout_callback(trainer, step: int) -> None:
    disable_dropout(trainer.model)


@contextlib.contextmanager
def run_past_checkpoint(command: list[str], env: dict[str, str], out: Path) -> Iterator[subprocess.Popen[str]]:
    """``command`` (a ``c2v-rag train`` run writing to ``out``) started, given once its step-3 checkpoint is saved,
    and killed on leaving if it still runs: a run the test lost track of never outlives it."""
    proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not (out / "checkpoints" / "step-000003").is_dir():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "no checkpoint after 240 s"
            time.sleep(0.2)
        yield proc
    finally:
        proc.kill()
