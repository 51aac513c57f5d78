"""A text's outline: its Markdown headings, and the headings a point of the text lies under.

Readers give structured documents as Markdown (HTML, EPUB, Word, OpenDocument, slides, LaTeX, GNU Info,
reStructuredText, and Markdown itself), so their sections open with ``#`` headings; a chunk from deep inside a long
page is placed by the headings above it (``Chapter 2. Exploring Git history`` › ``How to use bisect to find a
regression``), which ingest's ``chunk_context="headings"`` puts in front of it. The headings are CommonMark's
(markdown-it-py's block parser), so a ``#include`` in a fenced code block or a ``#`` comment in an indented one
is no heading.
"""

from __future__ import annotations

import bisect
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from c2v_rag.documents.commonmark import block_parser, full_parser
from c2v_rag.documents.payload_keys import SECTION_SEPARATOR

if TYPE_CHECKING:
    from markdown_it.token import Token

# Where a line ends, as CommonMark counts lines (markdown-it's line numbers are these lines').
_LINE_BREAK = re.compile(r"\r\n?|\n")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Heading:
    """A heading: the character its line starts at, its level (1 for ``#``), its text as shown, and where its
    source ends (after its last line: a setext heading's underline included)."""

    offset: int
    level: int
    text: str
    end: int


def headings(text: str) -> list[Heading]:
    """``text``'s headings in order, ATX (``## Usage``) and setext (a line over ``===`` or ``---``), each with its
    text as a reader sees it (code spans and emphasis as their characters); empty headings left out."""
    return _parse(text)[0]


def _parse(text: str, at: int = 0) -> tuple[list[Heading], list[int]]:
    """``text``'s headings, and where its top-level blocks (paragraphs, headings, code blocks, lists, quotes)
    start, as offsets plus ``at``."""
    tokens = block_parser().parse(text)
    line_starts = [0, *(match.end() for match in _LINE_BREAK.finditer(text))]
    found = []
    for opening, inline in zip(tokens, tokens[1:], strict=False):
        if opening.type != "heading_open" or opening.map is None:
            continue
        shown = _shown(inline.content)
        if shown:
            first, after = opening.map
            end = line_starts[after] if after < len(line_starts) else len(text)
            found.append(Heading(at + line_starts[first], int(opening.tag[1:]), shown, at + end))
    blocks = [at + line_starts[token.map[0]] for token in tokens if token.level == 0 and token.map is not None]
    return found, blocks


def innermost(path: Sequence[str], max_chars: int) -> list[str]:
    """The innermost headings of ``path`` (outermost first) that keep to ``max_chars`` characters joined by
    :data:`SECTION_SEPARATOR`, the innermost one kept whatever its length: where a path runs long, where in it a
    chunk is matters more than what holds it."""
    kept: list[str] = []
    for heading in reversed(path):
        if kept and len(SECTION_SEPARATOR.join([heading, *kept])) > max_chars:
            break
        kept.insert(0, heading)
    return kept


def _shown(content: str) -> str:
    """A heading's source as its characters show (```fs.watch()``` as ``fs.watch()``), on one line."""
    tokens = full_parser().parseInline(content)
    children = tokens[0].children if tokens else None
    if children:
        content = "".join(_SHOWN_AS.get(child.type, lambda child: "")(child) for child in children)
    return _SPACES.sub(" ", content).strip()


# What each inline token of a heading shows: text and code as their characters, an image as its alt text, a line
# break as a space; markup (emphasis marks, link delimiters, inline HTML) nothing.
_SHOWN_AS: dict[str, Callable[[Token], str]] = {
    "text": lambda child: child.content,
    "code_inline": lambda child: child.content,
    "image": lambda child: child.content,
    "softbreak": lambda child: " ",
    "hardbreak": lambda child: " ",
}


# What every heading's source holds, in or out of a quote or a list: a "#" before a space or a line's end (ATX), or a
# line that ends in "=" or "-" (a setext underline). A text without either has no heading and is not parsed.
_MAYBE_HEADING = re.compile(r"#(?=[ \t\r\n]|\Z)|[=-][ \t]*(?=[\r\n]|\Z)")
_OFFSET = operator.attrgetter("offset")
# Characters of a text parsed at a time (more where one block, a long code block, fills them): an outline is found
# as far as chunks ask, so a long text's first chunks do not wait for its whole parse, and the parser's tokens never
# cover more than a window (a 5 MB Markdown text parsed whole held 35 MiB of them).
WINDOW_CHARS = 65536


class Outline:
    """The headings of one text, to ask which of them a character lies under.

    The text is parsed a window at a time, as far as the questions reach. A window's last top-level block may run
    on past it, so that block's headings wait for the next window, which starts where the block does: parsed from
    a top-level block's start, a text's blocks are the whole text's from there on.
    """

    def __init__(self, text: str, window: int = WINDOW_CHARS) -> None:
        self._text = text
        self._window = window
        # A heading that opens the text is its title, which the document's lead already gives.
        self._opening = len(text) - len(text.lstrip())
        # Every heading that starts before this offset is found; the parse goes on from here.
        self._settled = 0 if _MAYBE_HEADING.search(text) else len(text)
        self._headings: list[Heading] = []
        # The heading that opens the text, once parsed that far: its title, which no section has.
        self._title: Heading | None = None
        # The headings open below each one, itself last: a heading closes those of its level and deeper.
        self._paths: list[tuple[str, ...]] = []
        self._open: list[Heading] = []

    def starts(self, begin: int, end: int) -> list[int]:
        """Where the headings whose lines start strictly between ``begin`` and ``end`` start, in order, the title
        aside."""
        self._settle(end)
        first, last = (
            bisect.bisect_right(self._headings, begin, key=_OFFSET),
            bisect.bisect_left(self._headings, end, key=_OFFSET),
        )
        return [heading.offset for heading in self._headings[first:last]]

    def section(self, offset: int) -> tuple[str, ...]:
        """The headings of the section the character at ``offset`` is in, outermost first, the title aside: at a
        heading's line, that heading's section."""
        above = self._headings_to(offset)
        return self._paths[above - 1] if above else ()

    def path(self, offset: int) -> tuple[str, ...]:
        """The headings that the character at ``offset`` lies under, outermost first, the title aside. At a
        heading's line, those it lies under: it closes the sections of its level and deeper, and a chunk that opens
        with it shows it."""
        above = self._headings_to(offset)
        if not above:
            return ()
        section = self._paths[above - 1]
        return section[:-1] if self._headings[above - 1].offset == offset else section

    def title(self) -> Heading | None:
        """The heading that opens the text (after leading blank space), which is its title; None where the text
        opens with anything else."""
        self._settle(self._opening + 1)
        return self._title

    def heading_around(self, offset: int) -> Heading | None:
        """The heading whose source holds the character at ``offset`` (its line, or its lines and underline), the
        title aside; None where the character is in no heading."""
        above = self._headings_to(offset)
        heading = self._headings[above - 1] if above else None
        return heading if heading is not None and offset < heading.end else None

    def _headings_to(self, offset: int) -> int:
        """How many headings start at or before ``offset``, parsing on as far as needed."""
        self._settle(offset + 1)
        return bisect.bisect_right(self._headings, offset, key=_OFFSET)

    def _settle(self, offset: int) -> None:
        """Parse on until every heading that starts before ``offset`` is found."""
        text = self._text
        size = self._window
        while self._settled < min(offset, len(text)):
            begin = self._settled
            end = _after_line_break(text, begin + size)
            found, blocks = _parse(text[begin:end], begin)
            if end < len(text):
                if len(blocks) < 2 or blocks[-1] <= begin:  # one block fills the window and may run on: widen it
                    size *= 2
                    continue
                found = [heading for heading in found if heading.offset < blocks[-1]]
            self._settled = blocks[-1] if end < len(text) else len(text)
            self._add(found)
            size = self._window

    def _add(self, found: list[Heading]) -> None:
        for heading in found:
            if heading.offset <= self._opening:
                self._title = heading
                continue
            while self._open and self._open[-1].level >= heading.level:
                self._open.pop()
            self._open.append(heading)
            self._headings.append(heading)
            self._paths.append(tuple(open_heading.text for open_heading in self._open))


def _after_line_break(text: str, end: int) -> int:
    """Where the line that ``end`` falls in ends (after its line break): a window ends at a line's end. The text's
    end where no line break follows."""
    if end >= len(text):
        return len(text)
    found = _LINE_BREAK.search(text, end)
    return found.end() if found else len(text)
