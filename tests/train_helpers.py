"""Helpers shared by the training tests."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import torch

from c2v_rag.training.pseudo.generation import GeneratedQuery, QueryGenerator, register


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


class FirstWords(QueryGenerator):
    """A deterministic generator: the first five words of the passage as a question. It counts its calls."""

    name = "first-words"
    calls: list[int] = []

    def __init__(self, batch_size: int = 4, reply_start: str = "Which") -> None:
        self.batch_size = batch_size
        self.reply_start = reply_start

    def check(self) -> None:
        pass

    def describe(self) -> dict:
        return {"kind": self.name, "model": "rule", "prompt": "first five words", "reply_start": self.reply_start}

    def generate(
        self, passages: Sequence[str], *, progress: Callable[[int], None] | None = None
    ) -> list[GeneratedQuery | None]:
        FirstWords.calls.append(len(passages))
        if progress is not None:
            progress(len(passages))
        return [self.question(p) for p in passages]

    def question(self, passage: str) -> GeneratedQuery | None:
        return GeneratedQuery(f"{self.reply_start} " + " ".join(passage.split()[:5]).lower() + "?", -0.5)


class Silent(FirstWords):
    """A generator that writes nothing for any passage (as a small model that only asks back, filtered out)."""

    name = "silent"

    def question(self, passage: str) -> GeneratedQuery | None:
        return None


def use_generator(monkeypatch, generator: type[QueryGenerator]) -> None:
    """Register ``generator`` and make pseudo-pair making (and adapt, which asks it) build it; its calls start
    from none. The caller pops it from ``GENERATORS`` when done."""
    register(generator)
    monkeypatch.setattr(
        "c2v_rag.training.pseudo.make.generator_options", lambda config: {"kind": generator.name, "batch_size": 4}
    )
    FirstWords.calls.clear()
