"""Preparing training steps ahead, in worker processes, while the device trains the current one.

A step's texts follow from its index alone (the batch plan, the negatives and the in-context examples are all
drawn from ``(seed, step)``), and so does its host-side work: the tokenizers, the prompts, the padding, the
length-sorted chunks (:meth:`Objective.prepare <c2v_rag.training.objectives.base.Objective.prepare>`). Worker
processes of a torch :class:`~torch.utils.data.DataLoader` run that work for the next steps, each on one
thread, and hand the results back in step order; the training process only moves them to the device (from
page-locked memory on a GPU) and runs forward and backward. The step's numbers are the same as when it is
prepared in the training process: the same code tokenizes the same texts, and nothing in it draws from the
training process's random state.

Workers are forked: they inherit the model's tokenizers and the datasets without copying them through a pipe,
and never touch the device. The tokenizers' own threads are switched off in them (``TOKENIZERS_PARALLELISM``
is ``false`` while they start), which also keeps the tokenizers' warning about forking after parallel use
quiet. An error in a worker is raised again in the training process with the worker's traceback in its message;
the workers are daemons, and are shut down when training stops, whatever stops it.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import torch
from torch.utils.data import DataLoader, Dataset

from c2v_rag.core.devices import usable_cores
from c2v_rag.training.step_texts import StepTexts

logger = logging.getLogger(__name__)

MAX_AUTO_WORKERS = 8
SPARE_CORES = 2  # the training process's own thread and the device's feeding need cores too


@dataclass
class StepInputs:
    """One step's texts, and what the objective prepared from them on the CPU (None: it prepares them itself)."""

    step: int
    texts: StepTexts
    prepared: object | None = None

    def pin_memory(self) -> StepInputs:
        """The same inputs with the prepared tensors page-locked (the DataLoader's pinning thread calls this)."""
        pin = getattr(self.prepared, "pin_memory", None)
        return StepInputs(self.step, self.texts, pin() if pin is not None else self.prepared)


def resolve_workers(setting: int | Literal["auto"], device: torch.device, processes_per_host: int = 1) -> int:
    """How many prefetch workers ``training.prefetch_workers`` asks for on ``device``.

    ``auto`` is 0 on a CPU, whose cores the forward and backward use, and on a GPU the usable cores less
    :data:`SPARE_CORES`, shared among the training processes of the host, at most :data:`MAX_AUTO_WORKERS`.
    """
    if setting != "auto":
        return int(setting)
    if device.type == "cpu":
        return 0
    return max(0, min(MAX_AUTO_WORKERS, (usable_cores() - SPARE_CORES) // max(1, processes_per_host)))


class _Steps(Dataset):
    """Step index -> :class:`StepInputs`: the map-style dataset the workers read."""

    def __init__(self, texts: Callable[[int], StepTexts], prepare: Callable[[StepTexts], object | None]) -> None:
        self.texts, self.prepare = texts, prepare

    def __getitem__(self, step: int) -> StepInputs:
        texts = self.texts(step)
        return StepInputs(step, texts, self.prepare(texts))


def _as_is(item: StepInputs) -> StepInputs:
    return item


@contextlib.contextmanager
def _sequential_tokenizers() -> Iterator[None]:
    """``TOKENIZERS_PARALLELISM=false`` in what is forked meanwhile, the caller's setting kept for itself."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TOKENIZERS_PARALLELISM"]
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


class StepPrefetcher:
    """Steps' inputs, prepared by ``workers`` forked processes, each up to ``depth`` steps ahead.

    ``texts(step)`` lays a step out and ``prepare(texts)`` does its host-side work; both run in the workers.
    :meth:`get` returns the inputs of the step asked for. The workers prepare the steps after it in order, up to
    the ``end`` given; a step out of that order (a longer run, a jump) restarts them there. ``pin_memory``
    page-locks the prepared tensors in the training process for an asynchronous copy to a GPU.
    """

    def __init__(
        self,
        texts: Callable[[int], StepTexts],
        prepare: Callable[[StepTexts], object | None],
        *,
        workers: int,
        depth: int = 2,
        pin_memory: bool = False,
        seed: int = 0,
    ) -> None:
        if workers < 1:
            raise ValueError(f"a prefetcher needs at least one worker, got {workers}")
        self.source = _Steps(texts, prepare)
        self.workers, self.depth, self.pin_memory, self.seed = workers, depth, pin_memory, seed
        self._iterator: Iterator[StepInputs] | None = None
        self._next = self._end = 0

    @staticmethod
    def available() -> bool:
        """Whether workers can be forked here (not on Windows)."""
        return "fork" in multiprocessing.get_all_start_methods()

    def _start(self, start: int, end: int) -> None:
        self.close()
        loader = DataLoader(
            self.source,
            batch_size=None,
            sampler=range(start, end),
            num_workers=self.workers,
            prefetch_factor=self.depth,
            pin_memory=self.pin_memory,
            # Without batching (batch_size=None) the loader calls collate_fn on each item, not on the list torch's
            # annotation expects.
            collate_fn=_as_is,  # type: ignore[arg-type]
            multiprocessing_context="fork",
            # The loader seeds its workers from this generator, not from the training process's random state,
            # which decides dropout: with or without workers, the run draws the same.
            generator=torch.Generator().manual_seed(self.seed),
        )
        with _sequential_tokenizers():
            self._iterator = iter(loader)
        self._next, self._end = start, end

    def get(self, step: int, end: int) -> StepInputs:
        """The inputs of ``step``; ``end`` is the step the run stops before (as it stands now)."""
        if self._iterator is None or step != self._next or step >= self._end:
            self._start(step, max(end, step + 1))
        assert self._iterator is not None
        inputs = next(self._iterator)
        self._next = step + 1
        if inputs.step != step:
            raise RuntimeError(f"the prefetch workers returned step {inputs.step} for step {step}")
        return inputs

    def close(self) -> None:
        """Stop the workers (they are also stopped when the prefetcher is collected)."""
        iterator, self._iterator = self._iterator, None
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
