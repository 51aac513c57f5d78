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
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from c2v_rag.documents.commonmark import block_parser, full_parser

if TYPE_CHECKING:
    from markdown_it.token import Token

# Where a line ends, as CommonMark counts lines (markdown-it's line numbers are these lines').
_LINE_BREAK = re.compile(r"\r\n?|\n")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Heading:
    """A heading: the character its line starts at, its level (1 for ``#``) and its text as shown."""

    offset: int
    level: int
    text: str


def headings(text: str) -> list[Heading]:
    """``text``'s headings in order, ATX (``## Usage``) and setext (a line over ``===`` or ``---``), each with its
    text as a reader sees it (code spans and emphasis as their characters); empty headings left out."""
    line_starts = [0, *(match.end() for match in _LINE_BREAK.finditer(text))]
    tokens = block_parser().parse(text)
    found = []
    for opening, inline in zip(tokens, tokens[1:], strict=False):
        if opening.type != "heading_open" or opening.map is None:
            continue
        shown = _shown(inline.content)
        if shown:
            found.append(Heading(line_starts[opening.map[0]], int(opening.tag[1:]), shown))
    return found


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


class Outline:
    """The headings of one text, to ask which of them a character lies under."""

    def __init__(self, text: str) -> None:
        opening = len(text) - len(text.lstrip())
        # A heading that opens the text is its title, which the document's lead already gives.
        found = [heading for heading in headings(text) if heading.offset > opening]
        self._offsets = [heading.offset for heading in found]
        # The headings open below each one, itself last: a heading closes those of its level and deeper.
        self._paths: list[tuple[str, ...]] = []
        stack: list[Heading] = []
        for heading in found:
            while stack and stack[-1].level >= heading.level:
                stack.pop()
            stack.append(heading)
            self._paths.append(tuple(open_heading.text for open_heading in stack))

    def starts(self, begin: int, end: int) -> list[int]:
        """Where the headings whose lines start strictly between ``begin`` and ``end`` start, in order, the title
        aside."""
        return self._offsets[bisect.bisect_right(self._offsets, begin) : bisect.bisect_left(self._offsets, end)]

    def path(self, offset: int) -> tuple[str, ...]:
        """The headings that the character at ``offset`` lies under, outermost first, the title aside. At a
        heading's line, those it lies under: it closes the sections of its level and deeper, and a chunk that opens
        with it shows it."""
        above = bisect.bisect_right(self._offsets, offset)
        if not above:
            return ()
        if self._offsets[above - 1] == offset:
            return self._paths[above - 1][:-1]
        return self._paths[above - 1]
