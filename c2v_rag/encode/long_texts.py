"""Texts longer than the model reads: truncate them, or embed overlapping windows and pool them.

``encode(texts, long_texts="truncate" | "chunk")`` chooses per call:

- ``"truncate"`` (the default): the model reads the first ``max_seq_length`` decoder tokens (and
  the first ``encoder_max_length`` encoder tokens); the rest of the text does not count.
- ``"chunk"``: a text that would be truncated is split into overlapping windows that each fit the
  model whole, each window is embedded as a text of its own, and the windows' unit vectors are
  pooled into one vector per text: their mean (``pooling="mean"``, the default) or elementwise max
  (``"max"``; on SciFact dev it lost 2.6 points of nDCG@10 to truncation with all-MiniLM-L6-v2, where
  the mean tied it: docs/ingest-and-search.md, "Long documents"). A text
  that fits is embedded exactly as with ``"truncate"``.

The windows come from the ingest chunker's splitter (LlamaIndex's ``SentenceSplitter``, see
:mod:`c2v_rag.encode.splitting`): paragraphs, then sentences, then words, counted in the model's own
tokens, so a window ends at a sentence boundary where one is near. A Causal2Vec model has two
tokenizers with two limits (the decoder's text budget and the encoder's ``encoder_max_length``):
a window is measured in both and must fit both.

The retrieval-side alternative, MaxP (index the windows, score a document by its best one), is what
:func:`c2v_rag.ingest` and ``search(..., group_by_document=True)`` do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from c2v_rag.encode.splitting import make_splitter, sections

LongTextMode = Literal["truncate", "chunk"]
ChunkPooling = Literal["max", "mean"]
LONG_TEXT_MODES: tuple[str, ...] = ("truncate", "chunk")
CHUNK_POOLINGS: tuple[str, ...] = ("max", "mean")

# Tokens a window leaves unused below the model's limit: the splitter sums its pieces' token
# counts, and the joined pieces can tokenize a few tokens longer.
WINDOW_SLACK = 8


class LongTexts(BaseModel):
    """What ``encode`` does with a text longer than the model reads (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: LongTextMode = Field(default="truncate", description="'truncate' or 'chunk'")
    pooling: ChunkPooling = Field(
        default="mean",
        description="how a chunked text's window vectors (each L2-normalized) become one: 'mean' or elementwise 'max'",
    )
    overlap: int | None = Field(
        default=None, ge=0, description="tokens neighbouring windows may share; None: an eighth of the window"
    )
    window: int | None = Field(
        default=None, ge=8, description="tokens per window; None: the most the model reads whole"
    )


def resolve_long_texts(value: str | LongTexts | Mapping[str, Any] | None) -> LongTexts:
    """A :class:`LongTexts` from ``"truncate"``, ``"chunk"``, a dict of its fields or one itself."""
    if value is None:
        return LongTexts()
    if isinstance(value, LongTexts):
        return value
    if isinstance(value, str):
        if value not in LONG_TEXT_MODES:
            raise ValueError(
                f"long_texts={value!r} is not an option: use 'truncate' (read the first max_seq_length tokens) "
                "or 'chunk' (embed overlapping windows of the whole text and pool them), "
                "or LongTexts(mode=..., pooling=..., overlap=..., window=...)"
            )
        return LongTexts(mode=value)
    if isinstance(value, Mapping):
        return LongTexts(**value)
    raise TypeError(f"long_texts must be 'truncate', 'chunk', a dict or a LongTexts, not {type(value).__name__}")


@dataclass
class Windows:
    """The texts to embed for a batch of inputs: whole inputs, or windows of the long ones.

    ``owners[j]`` is the input that ``texts[j]`` comes from; an input's windows are consecutive.
    """

    texts: list[str]
    owners: np.ndarray
    n_inputs: int

    @property
    def split_inputs(self) -> int:
        """How many inputs were split into several windows."""
        counts = np.bincount(self.owners, minlength=self.n_inputs)
        return int((counts > 1).sum())


def check_window(window: int | None, limit: int, who: str) -> int:
    """The window size to use: ``window``, or the largest that ``limit`` allows (refusing one too large)."""
    largest = limit - WINDOW_SLACK
    if largest < 8:
        raise ValueError(
            f"{who} reads only {limit} tokens of text beside its instruction and examples: too few to chunk long "
            "texts into windows; raise max_length, or use long_texts='truncate'"
        )
    if window is None:
        return largest
    if window > largest:
        raise ValueError(
            f"long_texts window={window} does not fit {who} ({limit} tokens of text, "
            f"less {WINDOW_SLACK} of slack); use window <= {largest}"
        )
    return window


def split_long_texts(
    texts: Sequence[str], fits: Sequence[bool], tokenizers: Sequence[Any], window: int, overlap: int | None
) -> Windows:
    """Keep each text that ``fits`` whole; split the others into windows of ``window`` tokens.

    A window's length is its longest count among ``tokenizers`` (Hugging Face tokenizers, without
    special tokens), so it fits every model that reads it. The splitter overlaps neighbours by
    whole sentences (or words, inside a long sentence) of at most ``overlap`` tokens in all.
    """
    overlap = window // 8 if overlap is None else overlap
    if overlap >= window:
        raise ValueError(f"long_texts overlap={overlap} must be smaller than the window ({window} tokens)")
    splitter = None
    pieces: list[str] = []
    owners: list[int] = []
    for i, (text, whole) in enumerate(zip(texts, fits)):
        parts = [text]
        if not whole and text.strip():
            if splitter is None:
                splitter = make_splitter(tokenizers, window, overlap, feature="long_texts='chunk'")
            # Sections bound the splitter's work on a book-sized text, as at ingest.
            parts = [
                p for _, section in sections(text, max(65536, 256 * window)) for p in splitter.split_text(section)
            ] or [text]
        pieces.extend(parts)
        owners.extend([i] * len(parts))
    return Windows(pieces, np.asarray(owners, dtype=np.int64), len(texts))


def pool_windows(vectors: np.ndarray, windows: Windows, pooling: str) -> np.ndarray:
    """One vector per input: its own vector when it was whole, else its windows' unit vectors pooled."""
    if pooling not in CHUNK_POOLINGS:
        raise ValueError(f"pooling={pooling!r} is not a chunk pooling; use one of {', '.join(CHUNK_POOLINGS)}")
    out = np.zeros((windows.n_inputs, vectors.shape[1]), dtype=np.float32)
    counts = np.bincount(windows.owners, minlength=windows.n_inputs)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    for i, (start, count) in enumerate(zip(starts, counts)):
        rows = vectors[start : start + count]
        if count == 1:
            out[i] = rows[0]
            continue
        # Unit vectors first: each window then weighs the same, whatever its length did to the norm.
        unit = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
        out[i] = unit.max(axis=0) if pooling == "max" else unit.mean(axis=0)
    return out
