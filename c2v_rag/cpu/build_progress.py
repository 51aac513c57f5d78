"""The progress bar of a first int8 load: one bar, with an ETA, over the stages that build the ONNX graphs.

A quantized model's graphs are built once per model and cached (:mod:`c2v_rag.cpu.onnx_decoder`); that first
load takes about a minute of one core for the default preset, most of it calibration. :func:`building` opens a
bar around a load; :func:`stage` marks each piece of work inside it. The bar appears only when a stage runs, so a
load from the cache prints nothing. The builders find the open bar through a context variable, as the encode
loop finds its observer, so that no builder's signature carries it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from tqdm.auto import tqdm

from c2v_rag.core.progress_bar import unsized_terminal

# The stages in the order they run, each weighted by its CPU seconds in a first int8 load of the default preset
# on one AVX2 core (decoder export 11.0 s, calibration 49.8 s, attention fusion + int8 rewrite + save about 3 s,
# encoder export about 8 s).
STAGE_WEIGHTS: dict[str, float] = {
    "exporting the decoder": 11.0,
    "calibrating": 50.0,
    "writing the int8 decoder": 3.0,
    "exporting the encoder": 8.0,
}


@dataclass
class _Bar:
    description: str
    bar: tqdm | None = None

    def open(self) -> tqdm:
        if self.bar is None:
            total = sum(STAGE_WEIGHTS.values())
            self.bar = tqdm(
                total=total,
                desc=self.description,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]",
                disable=not _shown.get(),
                **unsized_terminal(sys.stderr),
            )
        return self.bar

    def advance_to(self, position: float) -> None:
        bar = self.open()
        position = min(position, bar.total)
        if position > bar.n:
            bar.update(position - bar.n)


_bar: ContextVar[_Bar | None] = ContextVar("c2v_rag_build_bar", default=None)
_shown: ContextVar[bool] = ContextVar("c2v_rag_build_bar_shown", default=True)


@contextlib.contextmanager
def build_bar_shown(show: bool) -> Iterator[None]:
    """Whether a first int8 load inside shows its bar: an ingest, embed or reindex asked for no progress bar
    (``show_progress=False``, the CLI's ``-q``) loads its model inside ``build_bar_shown(False)``."""
    token = _shown.set(show)
    try:
        yield
    finally:
        _shown.reset(token)


@contextlib.contextmanager
def building(description: str) -> Iterator[None]:
    """Show one bar over the :func:`stage` calls made inside, once the first of them starts."""
    bar = _Bar(description)
    token = _bar.set(bar)
    try:
        yield
        if bar.bar is not None:
            bar.advance_to(bar.bar.total)  # stages read from the cache count as done
            bar.bar.set_postfix_str("built", refresh=True)  # not the last stage's name under a full bar
    finally:
        _bar.reset(token)
        if bar.bar is not None:
            bar.bar.close()


class Stage:
    """One stage under way: :meth:`step` moves the bar through it in ``steps`` equal parts."""

    def __init__(self, bar: _Bar | None, start: float, width: float, steps: int) -> None:
        self.bar, self.start, self.width, self.steps, self.done = bar, start, width, max(1, steps), 0

    def step(self) -> None:
        self.done = min(self.done + 1, self.steps)
        if self.bar is not None:
            self.bar.advance_to(self.start + self.width * self.done / self.steps)


@contextlib.contextmanager
def stage(name: str, *, steps: int = 1) -> Iterator[Stage]:
    """Mark the work inside as stage ``name`` of :data:`STAGE_WEIGHTS` (its ``steps`` parts are counted with
    :meth:`Stage.step`). Outside :func:`building`, it shows nothing."""
    bar = _bar.get()
    names = list(STAGE_WEIGHTS)
    start = sum(STAGE_WEIGHTS[n] for n in names[: names.index(name)])
    if bar is not None:
        bar.advance_to(start)
        bar.open().set_postfix_str(name, refresh=True)
    yield Stage(bar, start, STAGE_WEIGHTS[name], steps)
    if bar is not None:
        bar.advance_to(start + STAGE_WEIGHTS[name])
