"""Markdown (and MDX): the text as a reader sees it rendered, one document per file.

The source is kept as it is (headings, lists, code, tables), less what a renderer never shows:

- HTML comments that stand as blocks (``<!-- TODO -->``, ``<!-- markdownlint-disable -->``, the ``<!-- YAML
  added: v0.5.8 -->`` notes of Node.js's API docs); a comment inside a fenced or indented code block is code, kept;
- link reference definitions (``[fs.watch()]: #fswatchfilename-options-listener``), which many projects gather at
  the end of a page, where a chunk of nothing but them, with nothing to find, still took a place in the hits;
- YAML front matter (``---`` lines around ``key: value`` pairs, as Jekyll, Hugo, MkDocs and Obsidian write it),
  whose fields become metadata instead and whose ``title`` leads the text as a heading.

Links and images read as their text, as the HTML format reads them: ``[the guide](https://...)`` and
``[the guide][guide]`` as ``the guide``, ``![Moon phases](moon.png)`` as ``Moon phases``; a paragraph of linked
images alone (a README's badges: ``[![Build status](https://.../badge.svg)](https://...)``) is left out. Their URLs
were tokens the decoder spent its reading on (by default it reads a chunk's first 96) and words BM25 matched, and
a badge row led every later chunk of its page.

markdown-it-py's CommonMark parser tells what is what, so a definition is told from text of the same shape by the
rules a renderer applies (inside code it is code; it cannot interrupt a paragraph). Links are rewritten in the
source of the paragraphs and headings that hold them, code spans aside, and a rewritten block is kept only where
it renders the same characters as before (an image as its alt text); else the block stays as written.
"""

from __future__ import annotations

import datetime
import logging
import re
import textwrap
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

from c2v_rag.core.front_matter import split_front_matter
from c2v_rag.documents.commonmark import block_parser, full_parser
from c2v_rag.documents.formats.base import FileFormat, file_document, led_by_title, read_text
from c2v_rag.documents.payload_keys import RESERVED_METADATA_KEYS
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

logger = logging.getLogger(__name__)

# MDX (Markdown with JSX, as Docusaurus and other documentation sites write it) is read as Markdown: its
# import lines and components are a little noise beside its prose.
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")
# Fields a file's metadata gets from the file itself, which its front matter may not change.
_FILE_FIELDS = frozenset({"source", "file_name"})
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# A list item's mark: a bullet, or a number and its dot or parenthesis.
_LIST_MARK = r"(?:[-*+]|[0-9]{1,9}[.)])"
# A footnote ("[^1]: https://..."), which CommonMark alone reads as a link definition but renderers with
# footnotes (GitHub's, MkDocs') show.
_FOOTNOTE = re.compile(r"^[ \t>]*(?:" + _LIST_MARK + r"[ \t]+)?\[\^")
# A line of container marks alone (a quote's blank line ">", an empty list item "-"), which no leaf block holds
# either.
_MARKS_ONLY = re.compile(r"^[ \t>]*(?:" + _LIST_MARK + r"[ \t>]*)?\r?$")


class Markdown(FileFormat):
    name = "Markdown"
    suffixes = MARKDOWN_SUFFIXES
    page_rank = 0

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        text = read_text(file, options, log)
        if text is None:
            return
        fields, body = front_matter(text, log.shown(file))
        title = fields.get("title") if isinstance(fields.get("title"), str) else None
        yield file_document(file, root, led_by_title(title, shown_markdown(body)), fields or None)


def shown_markdown(text: str) -> str:
    """``text``, Markdown, as it renders (the module's docstring): HTML comment blocks and link reference definitions
    left out, links and images as their text; every other line as it is."""
    if not any(mark in text for mark in ("<!--", "]:", "](", "][")):
        return text  # nothing to leave out or rewrite: no parse
    lines = text.split("\n")
    shown = [True] * len(lines)
    # Lines of some block that renders; container blocks (quotes, lists) only hold blocks, so their own range
    # does not count: a definition inside a quote is in the quote's range and in no leaf's.
    in_leaf = [False] * len(lines)
    rewritten: dict[int, tuple[int, str]] = {}  # a block's first line: (its end, its text as read)
    env: dict[str, Any] = {}
    parent = ""  # the block an inline token is the text of
    for token in block_parser().parse(text, env):
        if token.nesting == 1:
            parent = token.type
        if token.map is None or token.nesting == -1 or token.type in _CONTAINERS:
            continue
        start, end = token.map
        for i in range(start, end):
            in_leaf[i] = True
        if token.type == "html_block" and token.content.lstrip().startswith("<!--"):
            rest = _COMMENT.sub("", token.content).strip()
            for i in range(start, end):
                shown[i] = False
            if rest:  # markup after the comment (<!-- x --><a id="y"></a>): kept, as the block's one line
                rewritten[start] = (end, rest)
        elif (
            token.type == "inline"
            and parent == "paragraph_open"
            and "![" in token.content
            and _badges_only(token.content, env)
        ):
            for i in range(start, end):
                shown[i] = False
        elif token.type == "inline" and "[" in token.content:
            source = "\n".join(lines[start:end])
            plain = link_text(source, env.get("references", {}))
            if plain != source and _shown_characters(plain, env) == _shown_characters(source, env):
                rewritten[start] = (end, plain)
    for i, line in enumerate(lines):
        if not in_leaf[i] and not _MARKS_ONLY.match(line) and not _FOOTNOTE.match(line):
            shown[i] = False  # a link reference definition: the only text CommonMark parses into no block
    kept: list[str] = []
    i = 0
    while i < len(lines):
        if i in rewritten:
            i, block = rewritten[i]
            kept.extend(block.split("\n"))
            continue
        if shown[i]:
            kept.append(lines[i])
            i += 1
            continue
        end = i  # the run of lines left out: [i, end)
        while end < len(lines) and not (shown[end] or end in rewritten):
            end += 1
        before = bool(kept and kept[-1].strip())
        after = end < len(lines) and bool(lines[end].strip())
        if before and after:
            # A comment between two paragraphs set them apart: they stay two (inside a quote, by a quote's blank line).
            kept.append(lines[i][: len(lines[i]) - len(lines[i].lstrip(" \t>"))].rstrip(" \t"))
        elif not before and end < len(lines) and not after:
            end += 1  # one blank line where the run stood between two, not two
        i = end
    return "\n".join(kept)


# A code span: a run of backticks up to the next run of as many (CommonMark), whose text is code, never a link.
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", re.DOTALL)
# A character of a link's text or label: not a bracket, or an escaped character.
_LABEL_CHAR = r"(?:[^\[\]\\]|\\.)"
# A link's or image's text: brackets nested one deep ([![badge](src)](href)), escaped characters.
_LABEL = r"((?:[^\[\]\\]|\\.|\[" + _LABEL_CHAR + r"*\])*)"
# An inline destination and optional title: (<url with spaces> "title"), (url (with) parens 'title').
_DESTINATION = r"\(\s*(?:<[^<>\n]*>|(?:[^()\s\\]|\\.|\([^()\s]*\))*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)"
_INLINE = re.compile(r"(?<!\\)!?\[" + _LABEL + r"\]" + _DESTINATION)
_FULL_REFERENCE = re.compile(r"(?<!\\)!?\[" + _LABEL + r"\]\[(" + _LABEL_CHAR + r"*)\]")
_SHORTCUT = re.compile(r"(?<![\\\]])!?\[(" + _LABEL_CHAR + r"+)\](?![\[(:])")


def link_text(source: str, references: dict[str, Any]) -> str:
    """``source``, the Markdown of a paragraph or heading, with its links and images as their text: inline ones,
    and those by reference to a label in ``references`` (markdown-it's, by normalized label). Code spans are left
    as they are. Where the patterns misread the source, :func:`shown_markdown` checks the rendering and keeps it."""
    from markdown_it.common.utils import normalizeReference

    spans: list[str] = []

    def hide(match: re.Match[str]) -> str:
        spans.append(match.group(0))
        return f"\ue000{len(spans) - 1}\ue001"

    def restore(text: str) -> str:
        return _HIDDEN.sub(lambda m: spans[int(m.group(1))], text)

    def by_reference(match: re.Match[str]) -> str:
        label = restore(match.group(2) or match.group(1))
        return match.group(1) if normalizeReference(label) in references else match.group(0)

    def shortcut(match: re.Match[str]) -> str:
        return match.group(1) if normalizeReference(restore(match.group(1))) in references else match.group(0)

    # Code spans are set aside as private-use marks, so that a link's text may hold one ([`fs.watch()`][]).
    text = _CODE_SPAN.sub(hide, source)
    for _ in range(2):  # twice: a badge is an image inside a link
        text = _INLINE.sub(lambda m: m.group(1), text)
        text = _FULL_REFERENCE.sub(by_reference, text)
    return restore(_SHORTCUT.sub(shortcut, text))


_HIDDEN = re.compile("\ue000([0-9]+)\ue001")


def _badges_only(content: str, env: dict[str, Any]) -> bool:
    """Whether a paragraph's ``content`` is linked images alone: a README's row of badges (build status, coverage,
    version), which renders as pictures and no text."""
    (inline,) = full_parser().parseInline(content, dict(env))
    depth = images = 0
    for child in inline.children or []:
        if child.type in ("link_open", "link_close"):
            depth += 1 if child.type == "link_open" else -1
        elif child.type == "image" and depth > 0:
            images += 1
        elif not (child.type in ("softbreak", "hardbreak") or (child.type == "text" and not child.content.strip())):
            return False
    return images > 0


def _shown_characters(source: str, env: dict[str, Any]) -> str:
    """The characters ``source`` renders as, an image's alt text among them, with the page's link definitions;
    whitespace aside (an image read as its alt text may join the word before it: ``Done![ok](ok.png)``)."""
    # Dedented: a nested list's paragraph, indented four spaces, read alone would be an indented code block.
    html = full_parser().render(textwrap.dedent(source), dict(env))
    html = re.sub(r"<img [^>]*?alt=\"([^\"]*)\"[^>]*>", r" \1 ", html)
    return "".join(unescape(re.sub(r"<[^>]*>", " ", html)).split())


# Block tokens that hold other blocks, not text of their own.
_CONTAINERS = frozenset({"blockquote_open", "bullet_list_open", "ordered_list_open", "list_item_open"})


def front_matter(text: str, where: str) -> tuple[dict[str, Any], str]:
    """A Markdown text's YAML front matter as metadata fields, and the text after it; ``({}, text)`` when it has
    none (or none that parses as a mapping). Values kept: strings, numbers, booleans, dates (as ISO strings) and
    lists of those; fields the payload or the file own are left out, with a warning."""
    import yaml

    source, body = split_front_matter(text)
    if source is None:
        return {}, text
    try:
        data = yaml.safe_load(source)
    except yaml.YAMLError as err:
        logger.warning("%s: its front matter is not YAML (%s); it is read as text", where, str(err).split("\n")[0])
        return {}, text
    if not isinstance(data, dict):
        return {}, text
    fields: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(key, str) or value is None:
            continue
        if key in RESERVED_METADATA_KEYS or key in _FILE_FIELDS:
            logger.warning("%s: front matter field %r is left out (the file or the store owns it)", where, key)
            continue
        scalar = _scalar(value)
        items = [_scalar(v) for v in value] if isinstance(value, list) else []
        if scalar is not None:
            fields[key] = scalar
        elif items and all(i is not None for i in items):
            fields[key] = items
    return fields, body


def _scalar(value: Any) -> str | int | float | bool | None:
    if isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return None
