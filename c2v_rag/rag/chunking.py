"""Token-aware chunking with overlap, sized in the embedder's own decoder tokens.

The splitting itself is LlamaIndex's ``SentenceSplitter`` (paragraphs, then sentences, then
words), given the decoder tokenizer as its length function: a chunk of ``chunk_size`` tokens is
exactly what the model will see, with no guess from a foreign tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .deps import require

if TYPE_CHECKING:
    from ..modeling import Causal2Vec

# Room the prompt template (BOS, chat prefix, Contextual token, suffix, EOS) takes around a
# document, plus slack: the splitter sums its pieces' token counts, and joined pieces can
# tokenize a token or two longer. A chunk so never loses its tail to truncation.
_TEMPLATE_ALLOWANCE = 16


@dataclass(frozen=True)
class Chunk:
    """A piece of a document: its text, position among the document's chunks and char span."""

    text: str
    index: int
    start_char: int | None
    end_char: int | None


def make_splitter(tokenizer: Any, chunk_size: int, chunk_overlap: int):
    """A LlamaIndex ``SentenceSplitter`` that counts ``tokenizer``'s tokens (a HF tokenizer)."""
    require("llama_index.core", "chunking")
    from llama_index.core.node_parser import SentenceSplitter

    if chunk_overlap >= chunk_size:
        raise ValueError(f"chunk_overlap={chunk_overlap} must be smaller than chunk_size={chunk_size}")

    def tokenize(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    return SentenceSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap, tokenizer=tokenize)


def check_chunk_size(chunk_size: int, max_length: int) -> None:
    """Refuse a chunk size that the model (bounded at ``max_length`` decoder tokens) would truncate."""
    limit = max_length - _TEMPLATE_ALLOWANCE
    if chunk_size > limit:
        raise ValueError(
            f"chunk_size={chunk_size} does not fit the model's max_length={max_length} "
            f"(with the prompt template); use chunk_size <= {limit}"
        )


class TokenChunker:
    """Splits a document's text into :class:`Chunk` objects for ``model``."""

    def __init__(self, model: "Causal2Vec", chunk_size: int, chunk_overlap: int) -> None:
        check_chunk_size(chunk_size, model.config.max_length)
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.splitter = make_splitter(model.tokenizer, chunk_size, chunk_overlap)

    def chunk(self, text: str) -> list[Chunk]:
        if not text.strip():
            return []
        pieces = self.splitter.split_text(text)
        chunks, cursor = [], 0
        for index, piece in enumerate(pieces):
            # Offsets for citations; the splitter strips whitespace, so the piece is found from
            # the previous start rather than computed.
            start = text.find(piece, cursor)
            if start < 0:
                chunks.append(Chunk(piece, index, None, None))
                continue
            chunks.append(Chunk(piece, index, start, start + len(piece)))
            cursor = start + 1
        return chunks
