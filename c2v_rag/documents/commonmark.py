"""The CommonMark parsers (markdown-it-py) that the Markdown reader and a text's outline share, built once."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt


@cache
def block_parser() -> MarkdownIt:
    """Blocks only (paragraphs, headings, code, lists): inline parsing (emphasis, links) would only cost time where
    the question is what block a line belongs to."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").disable("inline")


@cache
def full_parser() -> MarkdownIt:
    """Blocks and inlines: what a renderer shows."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")
