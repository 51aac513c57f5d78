"""Token-aware chunking with overlap, sized in the embedder's own decoder tokens.

The splitting itself is LlamaIndex's ``SentenceSplitter`` (paragraphs, then sentences, then
words), given the decoder tokenizer as its length function: a chunk of ``chunk_size`` tokens is
exactly what the model will see, with no guess from a foreign tokenizer. The splitter and
:func:`sections` live in :mod:`c2v_rag.encode.splitting`, which ``long_texts="chunk"`` shares.

Chunks stream: a long document is cut into sections at paragraph breaks (:func:`sections`), and
the splitter runs on one section at a time, so the first chunks reach the embedder after one
section's work rather than the whole document's, and the splitter's intermediate lists never
cover more than a section. A document shorter than a section (nearly all of them: a section is
at least 64K characters) is split exactly as the splitter alone would; in a longer one, chunks
do not overlap across a section break (a paragraph break, where overlap matters least).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from c2v_rag.documents.outline import Outline, innermost
from c2v_rag.documents.payload_keys import SECTION_SEPARATOR
from c2v_rag.encode.splitting import check_overlap, make_splitter, piece_length, sections, token_count

if TYPE_CHECKING:
    from c2v_rag.core.config import Causal2VecConfig
    from c2v_rag.model.causal2vec import Causal2Vec

# The decoder tokens a chunk is read with by default (an ingest into a new collection, adapt's gate), where the
# model's Contextual token reads the whole chunk (docs/ingest-and-search.md measures the trade).
DEFAULT_DECODER_MAX_LENGTH = 96


def default_decoder_max_length(config: Causal2VecConfig) -> int | None:
    """The decoder tokens ``config``'s model reads of a chunk when none is asked for (None: the whole chunk):
    :data:`DEFAULT_DECODER_MAX_LENGTH` where an encoder's Contextual token carries the whole chunk, else the whole
    chunk, as the decoder is then the only part that reads the text."""
    carried = config.encoder is not None and config.num_contextual_tokens > 0
    return DEFAULT_DECODER_MAX_LENGTH if carried else None


def decoder_tokens(asked: int) -> int | None:
    """``decoder_max_length`` as asked (0: whole chunks) in its held form (None: whole chunks), the form a
    collection records and the embedder takes."""
    return asked or None


def check_decoder_tokens(asked: int | None, whole: str = "chunks") -> None:
    """Refuse a ``decoder_max_length`` too short to leave the decoder any text (0 and None read ``whole`` texts)."""
    if asked is not None and 0 < asked < 8:
        raise ValueError(
            f"decoder_max_length={asked} leaves the decoder no text to read: pass at least 8 tokens, or 0 for whole "
            f"{whole}"
        )


# Room the prompt template (BOS, chat prefix, Contextual token, suffix, EOS) takes around a
# document, plus slack: the splitter sums its pieces' token counts, and joined pieces can
# tokenize a token or two longer. A chunk so never loses its tail to truncation.
_TEMPLATE_ALLOWANCE = 16
# A section is at least this many characters, and at least this many chunks' worth (at ~4
# characters per token), so that section breaks are rare and the splitter sees whole passages.
MIN_SECTION_CHARS = 65536
_CHUNKS_PER_SECTION = 64


# What leads a chunk after a document's first (TokenChunker): nothing; the document's opening (document_lead); or
# that opening with the headings the chunk lies under (section_lead); or that, with chunks cut at headings.
ChunkContext = Literal["none", "lead", "headings", "sections"]
# The contexts that read a text's outline: its headings lead chunks (and, for "sections", bound them).
_OUTLINED: tuple[ChunkContext, ...] = ("headings", "sections")

# The most of a document's opening that leads its later chunks (see document_lead): a title and the line
# under it, not a passage of its own.
LEAD_CHARS = 200
# The most of the headings above a chunk that lead it (section_lead): the innermost, where they run longer.
PATH_CHARS = 200
# A first paragraph of one line up to this long is taken for a title (where it is no Markdown heading).
TITLE_CHARS = 200
# A paragraph that is a Markdown ATX heading (``## Usage``; ``#include`` is none).
_ATX_HEADING = re.compile(r"#{1,6}(?:[ \t]|$)")


def document_lead(text: str, max_chars: int = LEAD_CHARS) -> str:
    """A document's opening, to lead its chunks after the first, where it opens with a title: its first
    paragraph (a Markdown heading, hashes dropped, a title over a reStructuredText or setext rule, or one line of at
    most :data:`TITLE_CHARS` characters) and
    the next one, cut to ``max_chars`` characters on a word boundary. A Markdown page or a man page gives its
    title and the line under it (``elf(5)`` / ``elf - format of Executable and Linking Format (ELF) files``),
    a record with a title the title and the start of its text; a page whose next paragraph is a heading (it opens
    with a section: ``Git User Manual`` / ``# Introduction``) its title alone, as that section is not where its
    later chunks are; a text of one paragraph, or one that opens with a paragraph of prose, gives none ("")."""
    paragraphs = [p.strip() for p in text.strip().split("\n\n") if p.strip()]
    if len(paragraphs) < 2:  # no title above a text: one paragraph, or none
        return ""
    first = _underlined_title(paragraphs[0]) or paragraphs[0]
    if not first.startswith("#") and ("\n" in first or len(first) > TITLE_CHARS):
        return ""
    under = [] if _ATX_HEADING.match(paragraphs[1]) or _underlined_title(paragraphs[1]) else paragraphs[1:2]
    return cut_at_word("\n".join([first.lstrip("#").strip(), *under]).strip(), max_chars)


def section_lead(opening: str, path: tuple[str, ...], max_chars: int = PATH_CHARS) -> str:
    """A chunk's lead under ``chunk_context="headings"``: the document's title (the first line of its ``opening``,
    :func:`document_lead`'s) and the headings the chunk lies under, as one line, then the rest of the opening:
    ``Git User Manual › Chapter 2. Exploring Git history › How to use bisect to find a regression``. The headings
    keep to ``max_chars`` characters, the innermost kept where they run longer; with no headings above the
    chunk the lead is ``opening`` alone, and with no opening the headings alone."""
    headings = innermost(path, max_chars)
    if not headings:
        return opening
    title, _, rest = opening.partition("\n")
    crumbs = SECTION_SEPARATOR.join([title, *headings] if title else headings)
    return "\n".join([cut_at_word(crumbs, LEAD_CHARS + max_chars), *([rest] if rest else [])])


def cut_at_word(text: str, max_chars: int = LEAD_CHARS) -> str:
    """``text`` cut to ``max_chars`` characters on a word boundary (a word longer than that is cut)."""
    cut = text[:max_chars]
    if len(text) <= max_chars or text[max_chars].isspace() or cut[-1].isspace():
        return cut.rstrip()
    return cut.rsplit(None, 1)[0] if any(c.isspace() for c in cut) else cut  # no word cut in half


def _underlined_title(paragraph: str) -> str | None:
    """The title of a heading written as a line under (and over) a rule of one punctuation mark, as
    reStructuredText and Markdown's setext headings write it (``Title`` / ``=====``), else None."""
    lines = [line.strip() for line in paragraph.split("\n")]
    rules = [line for line in lines if len(line) >= 3 and len(set(line)) == 1 and not line[0].isalnum()]
    titles = [line for line in lines if line not in rules]
    if len(lines) not in (2, 3) or len(titles) != 1 or lines[-1] not in rules:
        return None
    return titles[0] if len(lines) == 2 or lines[0] == lines[-1] else None


@dataclass(frozen=True)
class Chunk:
    """A piece of a document: its text, position among the document's chunks and char span, and the headings of
    the section it starts in (outermost first, the document's title aside; none in plain text)."""

    text: str
    index: int
    start_char: int | None
    end_char: int | None
    # Characters of ``text`` before the document's own (the lead and a blank line): ``text[lead_chars:]`` is
    # the span ``start_char:end_char`` of the document.
    lead_chars: int = 0
    section: tuple[str, ...] = ()


def _lead_limits(
    tokenizer: Any, max_length: int, encoder_tokenizer: Any, encoder_max_length: int | None
) -> list[tuple[Any, int]]:
    """``(token counter, most tokens)`` that a chunk with its lead must keep to: the decoder's room beside the
    prompt template, and the text the encoder reads whole (where the model has one)."""

    limits = [(partial(token_count, tokenizer), max_length - _TEMPLATE_ALLOWANCE)]
    if encoder_tokenizer is not None and encoder_max_length is not None:
        limits.append((partial(token_count, encoder_tokenizer), encoder_budget(encoder_tokenizer, encoder_max_length)))
    return limits


def _tokenizer_name(tokenizer: Any) -> str | None:
    """A tokenizer's vocabulary size, added tokens included, for a chunker's signature: a collection holds one
    model's chunks (its record says which), so this only has to tell its decoder's tokenizer from its encoder's, the
    same whichever wrapper (ours or transformers') holds the ``tokenizers`` backend."""
    if tokenizer is None:
        return None
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "backend", None)
    size = backend.get_vocab_size(with_added_tokens=True) if backend is not None else len(tokenizer)
    return f"vocab {size}"


def check_chunk_size(chunk_size: int, max_length: int) -> None:
    """Refuse a chunk size that the model (bounded at ``max_length`` decoder tokens) would truncate."""
    limit = max_length - _TEMPLATE_ALLOWANCE
    if chunk_size > limit:
        raise ValueError(
            f"chunk_size={chunk_size} does not fit the model's max_length={max_length} "
            f"(with the prompt template); use chunk_size <= {limit}"
        )


def encoder_budget(encoder_tokenizer: Any, encoder_max_length: int) -> int:
    """The text tokens the encoder reads whole: its limit less the special tokens around the text ([CLS], [SEP])."""
    return encoder_max_length - len(encoder_tokenizer("")["input_ids"])


def encoder_fit(encoder_tokenizer: Any, encoder_max_length: int | None, chunk_size: int) -> tuple[Any, int] | None:
    """The encoder's tokenizer and budget when chunks of ``chunk_size`` decoder tokens must also fit the encoder,
    else None.

    A chunk the encoder truncates gives a Contextual token that summarises only its start. The encoder's
    tokenizer often counts more tokens than the decoder's (all-MiniLM's WordPiece on code, URLs, tables), so
    chunks of 200 decoder tokens overflowed its 254 on 2 to 3% of real folders (43 of 2,759 chunks of
    /usr/share/doc's READMEs). Chunks are therefore cut to fit both. A ``chunk_size`` over the encoder's budget
    asks for chunks longer than the encoder reads, deliberately: those are left to the decoder's count, and
    ingest's warning names the size that fits.
    """
    if encoder_tokenizer is None or encoder_max_length is None:
        return None
    budget = encoder_budget(encoder_tokenizer, encoder_max_length)
    return (encoder_tokenizer, budget) if chunk_size <= budget else None


class TokenChunker:
    """Splits a document's text into :class:`Chunk` objects for ``model``.

    With ``context="lead"`` every chunk after a document's first starts with the document's opening
    (:func:`document_lead`) and a blank line, so that a chunk from the middle of a page still says what the page
    is about; with ``context="headings"`` the opening's title line also names the headings the chunk lies under
    (:func:`section_lead`), so that it says where in the page it is. The lead is shortened where a chunk leaves it
    too little room in the decoder's or the encoder's budget, and the chunk's own text is never cut for it.
    """

    def __init__(
        self,
        model: Causal2Vec,
        chunk_size: int,
        chunk_overlap: int,
        section_chars: int | None = None,
        *,
        context: ChunkContext = "none",
    ) -> None:
        encoder = model.fast_encoder_tokenizer if model.config.num_contextual_tokens else None
        self._setup(
            model.fast_tokenizer,
            model.config.max_length,
            chunk_size,
            chunk_overlap,
            section_chars,
            encoder,
            model.encoder_max_length,
            context=context,
        )

    @classmethod
    def for_variant(
        cls, model: str | Path | None, chunk_size: int, chunk_overlap: int, *, context: ChunkContext = "none"
    ) -> TokenChunker:
        """The chunker of a preset or variant directory without its weights: its config and its
        decoder's tokenizer alone (what CPU workers that only chunk need)."""
        from c2v_rag.core.config import read_config
        from c2v_rag.hub.presets import resolve_variant_path
        from c2v_rag.hub.sources import load_tokenizer, resolve_reference

        config = read_config(resolve_variant_path(model))
        tokenizer = load_tokenizer(
            resolve_reference(config.decoder, config.decoder_revision), trust_remote_code=config.trust_remote_code
        )
        encoder = None
        if config.num_contextual_tokens and config.encoder and config.encoder_max_length is not None:
            encoder = load_tokenizer(
                resolve_reference(config.encoder, config.encoder_revision), trust_remote_code=config.trust_remote_code
            )
        chunker = cls.__new__(cls)
        chunker._setup(
            tokenizer,
            config.max_length,
            chunk_size,
            chunk_overlap,
            None,
            encoder,
            config.encoder_max_length,
            context=context,
        )
        return chunker

    def _setup(
        self,
        tokenizer: Any,
        max_length: int,
        chunk_size: int,
        chunk_overlap: int,
        section_chars: int | None,
        encoder_tokenizer: Any,
        encoder_max_length: int | None,
        *,
        context: ChunkContext,
    ) -> None:
        check_chunk_size(chunk_size, max_length)
        # Characters per streamed section (see the module docstring); None is the default size.
        self._section_chars = section_chars
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        check_overlap(chunk_size, chunk_overlap)
        fit = encoder_fit(encoder_tokenizer, encoder_max_length, chunk_size)
        # Built at the first text to cut: an unchanged re-run cuts none, and the splitter's import takes seconds.
        self._make_splitter = partial(make_splitter, tokenizer, chunk_size, chunk_overlap, fit=fit)
        # What the splitter counts a piece as, to pack whole sections into a chunk ("sections").
        self._length = piece_length(tokenizer, chunk_size, fit=fit)
        self.context = context
        self._lead_limits = _lead_limits(tokenizer, max_length, encoder_tokenizer, encoder_max_length)
        self.signature = json.dumps(
            [
                _tokenizer_name(tokenizer),
                _tokenizer_name(encoder_tokenizer),
                chunk_size,
                chunk_overlap,
                self.section_chars,
                fit[1] if fit is not None else None,
                # True and False for "lead" and "none", as before "headings" existed: their hashes stay.
                context if context in _OUTLINED else context == "lead",
                [budget for _, budget in self._lead_limits],
            ]
        )
        """What decides how this chunker cuts a text: its tokenizers and budgets (part of a document's hash)."""

    @cached_property
    def splitter(self) -> Any:
        """LlamaIndex's ``SentenceSplitter`` counting this chunker's tokens (:func:`make_splitter`)."""
        return self._make_splitter()

    @property
    def section_chars(self) -> int:
        if self._section_chars is not None:
            return self._section_chars
        return max(MIN_SECTION_CHARS, _CHUNKS_PER_SECTION * 4 * self.chunk_size)

    def chunk(self, text: str, *, plain_text: bool = False) -> list[Chunk]:
        """All of ``text``'s chunks (see :meth:`iter_chunks`)."""
        return list(self.iter_chunks(text, plain_text=plain_text))

    def iter_chunks(
        self, text: str, lead: str | None = None, *, plain_text: bool = False, outline: Outline | None = None
    ) -> Iterator[Chunk]:
        """``text``'s chunks in order, produced one section at a time, each after the first led as the chunker's
        ``context`` says (the document's opening is ``lead`` where the document's reader gave one, else
        :func:`document_lead` of ``text``), each with the section it starts in (none where ``plain_text``: the
        text is no Markdown, and its ``#`` lines no headings). ``outline``: ``text``'s, where the caller has parsed
        it already (adapt's chunks ask it for their headings too)."""
        if plain_text:
            outline = None
        elif outline is None:
            outline = Outline(text)
        chunks = self._split(text, outline)
        opening = ""
        if self.context != "none":
            opening = document_lead(text) if lead is None else cut_at_word(lead)
        for chunk in chunks:
            lead = opening
            start = chunk.start_char
            if outline is not None and start is not None:
                chunk = replace(chunk, section=outline.section(start))
                if self.context in _OUTLINED:
                    lead = section_lead(opening, outline.path(start))
            fitted = self._fit_lead(lead, chunk.text) if chunk.index and lead else ""
            if fitted:
                prefix = f"{fitted}\n\n"
                chunk = replace(chunk, text=prefix + chunk.text, lead_chars=len(prefix))
            yield chunk

    def _fit_lead(self, lead: str, text: str) -> str:
        """``lead``, or its longest word prefix, that fits before ``text`` within every token budget ("" if
        none does)."""
        words = lead.split(" ")
        while words:
            candidate = " ".join(words)
            if all(count(f"{candidate}\n\n{text}") <= limit for count, limit in self._lead_limits):
                return candidate
            words.pop()
        return ""

    def _split(self, text: str, outline: Outline | None = None) -> Iterator[Chunk]:
        """``text``'s own chunks in order, produced one section at a time (cut at ``outline``'s headings too, for
        ``context="sections"``)."""
        if not text.strip():
            return
        index = 0
        for offset, section in sections(text, self.section_chars):
            if self.context == "sections" and outline is not None:
                # The whole text's headings, not the section's own: a section may start inside a code block.
                inside = [start - offset for start in outline.starts(offset, offset + len(section))]
                pieces = self._cut_at_headings(section, inside)
            else:
                pieces = self._cut(section, 0, None)
            for start, piece in pieces:
                if start is None:
                    yield Chunk(piece, index, None, None)
                else:
                    yield Chunk(piece, index, offset + start, offset + start + len(piece))
                index += 1

    def _cut(self, text: str, begin: int, end: int | None) -> Iterator[tuple[int | None, str]]:
        """The splitter's pieces of ``text[begin:end]``, each with where it starts in ``text`` (None where it is
        not found there as it is)."""
        cursor = begin
        for piece in self.splitter.split_text(text[begin:end]):
            # Offsets for citations; the splitter strips whitespace, so the piece is found from the previous
            # start rather than computed.
            start = text.find(piece, cursor, end)
            if start < 0:
                yield None, piece
            else:
                yield start, piece
                cursor = start + 1

    def _cut_at_headings(self, text: str, starts: list[int]) -> Iterator[tuple[int | None, str]]:
        """``text``'s pieces with no chunk crossing a heading (one starts at each of ``starts``) where that can be
        helped: the text from one heading to the next is a unit; consecutive units go whole into one piece while
        they fit the chunk budget, and a unit over the budget is cut by the splitter alone."""
        bounds = [0, *starts, len(text)]
        begin = end = 0
        for unit_begin, unit_end in zip(bounds, bounds[1:]):
            if end > begin and self._length(text[begin:unit_end]) <= self.chunk_size:
                end = unit_end  # the unit joins the units before it
                continue
            if end > begin:
                yield from self._cut(text, begin, end)
            begin, end = unit_begin, unit_end
        if end > begin:
            yield from self._cut(text, begin, end)
