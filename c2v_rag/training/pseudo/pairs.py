"""A pseudo-pair: a query made from a chunk, and the text it is trained against."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PairSource = Literal["crop", "heading", "generated"]
SOURCES: tuple[PairSource, ...] = ("crop", "heading", "generated")


@dataclass(frozen=True)
class PseudoPair:
    """``query`` was made from chunk ``chunk_id``; ``positive`` is what it is paired with in training: the chunk,
    less what the query was cut from (a cropped sentence, a heading line), so that the pair is not a copy."""

    query: str
    chunk_id: str
    source: PairSource
    positive: str
    mean_logprob: float | None = None
