"""Splitting text into pieces that fit a token budget, shared by chunking at ingest and ``long_texts="chunk"``.

The splitter is LlamaIndex's ``SentenceSplitter`` (paragraphs, then sentences, then words), counting
the model's own tokens; :func:`sections` cuts a long text at paragraph breaks first, so the splitter
works on one bounded section at a time. The model layer (:mod:`c2v_rag.encode.long_texts`) and document
chunking (:mod:`c2v_rag.documents.chunking`) both split this way, so it lives below both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sized
from typing import Any

from c2v_rag.core.extras import require

# Where a section may end, best first: a paragraph break, a line break, a sentence end, a space.
_BREAKS = ("\n\n", "\n", ". ", " ")


def token_count(tokenizer: Any, text: str) -> int:
    """``text``'s tokens under ``tokenizer`` (a HF tokenizer), special tokens left out."""
    return len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])


def check_overlap(chunk_size: int, chunk_overlap: int) -> None:
    """Refuse an overlap that leaves a chunk no text of its own."""
    if chunk_overlap >= chunk_size:
        raise ValueError(f"chunk_overlap={chunk_overlap} must be smaller than chunk_size={chunk_size}")


def piece_length(tokenizer: Any, chunk_size: int, *, fit: tuple[Any, int] | None = None) -> Callable[[str], int]:
    """How long a piece of text is to :func:`make_splitter`'s splitter of the same arguments: its longest count
    under ``tokenizer`` (one HF tokenizer or a list), and under ``fit``'s tokenizer scaled so that ``fit``'s budget
    counts as ``chunk_size``. A piece fits where this is at most ``chunk_size``."""
    tokenizers = list(tokenizer) if isinstance(tokenizer, (list, tuple)) else [tokenizer]

    def length(text: str) -> int:
        counts = [token_count(tok, text) for tok in tokenizers]
        if fit is not None:
            # The second tokenizer's count, scaled onto chunk_size's: a piece of ``budget`` of its tokens
            # counts as chunk_size, so "at most chunk_size" means "within both budgets".
            fit_tokenizer, budget = fit
            counts.append(-(-token_count(fit_tokenizer, text) * chunk_size // budget))
        return max(counts)

    return length


def make_splitter(
    tokenizer: Any,
    chunk_size: int,
    chunk_overlap: int,
    *,
    feature: str = "chunking",
    fit: tuple[Any, int] | None = None,
):
    """A LlamaIndex ``SentenceSplitter`` that counts ``tokenizer``'s tokens (a HF tokenizer).

    ``tokenizer`` may be a list of tokenizers: a piece then counts as its longest tokenization, so
    every chunk fits each of them (the decoder and the encoder of a Causal2Vec model). ``fit`` is a
    second tokenizer and the most of its tokens a piece may hold: a piece then also fits that budget,
    while ``chunk_size`` keeps counting ``tokenizer``'s tokens (so text both count alike is cut exactly
    as without ``fit``). Without ``llama-index-core`` it raises
    :class:`~c2v_rag.core.errors.MissingPackageError` naming ``feature``.
    """
    SentenceSplitter = require(
        "llama_index.core.node_parser", feature, "qdrant", distribution="llama-index-core"
    ).SentenceSplitter

    check_overlap(chunk_size, chunk_overlap)
    length = piece_length(tokenizer, chunk_size, fit=fit)

    def tokenize(text: str) -> Sized:
        return range(length(text))  # the splitter only takes len() of what this returns

    return SentenceSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap, tokenizer=tokenize)


def sections(text: str, size: int) -> Iterator[tuple[int, str]]:
    """``(offset, section)`` pieces of ``text`` of at most ``size`` characters, cut at the best break
    in each piece's second half (a hard cut only in a run of ``size / 2`` characters without one)."""
    start, n = 0, len(text)
    while start < n:
        end = min(start + size, n)
        if end < n:
            floor = start + size // 2
            for mark in _BREAKS:
                cut = text.rfind(mark, floor, end)
                if cut >= 0:
                    end = cut + len(mark)
                    break
        yield start, text[start:end]
        start = end
