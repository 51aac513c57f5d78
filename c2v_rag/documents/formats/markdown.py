"""Markdown (and MDX): the text as a reader sees it rendered, one document per file.

The source is kept as it is (headings, lists, code, links, tables), less what a renderer never shows:

- HTML comments that stand as blocks (``<!-- TODO -->``, ``<!-- markdownlint-disable -->``, the ``<!-- YAML
  added: v0.5.8 -->`` notes of Node.js's API docs); a comment inside a fenced or indented code block is code, kept;
- link reference definitions (``[fs.watch()]: #fswatchfilename-options-listener``), which many projects gather at
  the end of a page: a page's last chunk was often nothing but them, a chunk with nothing to find that still took
  a place in the hits;
- YAML front matter (``---`` lines around ``key: value`` pairs, as Jekyll, Hugo, MkDocs and Obsidian write it),
  whose fields become metadata instead and whose ``title`` leads the text as a heading.

markdown-it-py's CommonMark parser tells what is what, so a definition is told from text of the same shape by the
rules a renderer applies (inside code it is code; it cannot interrupt a paragraph).
"""

from __future__ import annotations

import datetime
import logging
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from c2v_rag.documents.formats.base import FileFormat, file_document, led_by_title, read_text
from c2v_rag.documents.payload_keys import RESERVED_METADATA_KEYS
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

logger = logging.getLogger(__name__)

# MDX (Markdown with JSX, as Docusaurus and other documentation sites write it) is read as Markdown: its
# import lines and components are a little noise beside its prose.
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")
# Front matter: a first line of ---, YAML, and a line of --- (or ...) that closes it.
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)
# Fields a file's metadata gets from the file itself, which its front matter may not change.
_FILE_FIELDS = frozenset({"source", "file_name"})
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# A footnote ("[^1]: https://..."), which CommonMark alone reads as a link definition but renderers with
# footnotes (GitHub's, MkDocs') show.
_FOOTNOTE = re.compile(r"^[ \t>]*(?:(?:[-*+]|[0-9]{1,9}[.)])[ \t]+)?\[\^")
# A line of container marks alone (a quote's blank line ">", an empty list item "-"), which no leaf block holds
# either.
_MARKS_ONLY = re.compile(r"^[ \t>]*(?:(?:[-*+]|[0-9]{1,9}[.)])[ \t>]*)?\r?$")


class Markdown(FileFormat):
    name = "Markdown"
    suffixes = MARKDOWN_SUFFIXES

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        text = read_text(file, options, log)
        if text is None:
            return
        fields, body = front_matter(text, log.shown(file))
        title = fields.get("title") if isinstance(fields.get("title"), str) else None
        yield file_document(file, root, led_by_title(title, shown_markdown(body)), fields or None)


def shown_markdown(text: str) -> str:
    """``text``, Markdown, less what rendering it shows nothing of: HTML comment blocks and link reference
    definitions (the module's docstring); everything else is left as it is, line for line."""
    if "<!--" not in text and "]:" not in text:
        return text  # nothing to leave out: no parse
    lines = text.split("\n")
    shown = [True] * len(lines)
    # Lines of some block that renders; container blocks (quotes, lists) only hold blocks, so their own range
    # does not count: a definition inside a quote is in the quote's range and in no leaf's.
    in_leaf = [False] * len(lines)
    replaced: dict[int, str] = {}
    for token in _parser().parse(text):
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
                replaced[start] = rest
    for i, line in enumerate(lines):
        if not in_leaf[i] and not _MARKS_ONLY.match(line) and not _FOOTNOTE.match(line):
            shown[i] = False  # a link reference definition: the only text CommonMark parses into no block
    kept: list[str] = []
    i = 0
    while i < len(lines):
        if shown[i] or i in replaced:
            kept.append(replaced.get(i, lines[i]))
            i += 1
            continue
        end = i  # the run of lines left out: [i, end)
        while end < len(lines) and not (shown[end] or end in replaced):
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


# Block tokens that hold other blocks, not text of their own.
_CONTAINERS = frozenset({"blockquote_open", "bullet_list_open", "ordered_list_open", "list_item_open"})


@cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    # Blocks are all that is asked of it: inline parsing (emphasis, links) would only cost time.
    return MarkdownIt("commonmark").disable("inline")


def front_matter(text: str, where: str) -> tuple[dict[str, Any], str]:
    """A Markdown text's YAML front matter as metadata fields, and the text after it; ``({}, text)`` when it has
    none (or none that parses as a mapping). Values kept: strings, numbers, booleans, dates (as ISO strings) and
    lists of those; fields the payload or the file own are left out, with a warning."""
    import yaml

    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, text
    try:
        data = yaml.safe_load(match.group(1))
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
    return fields, text[match.end() :].lstrip("\r\n")


def _scalar(value: Any) -> str | int | float | bool | None:
    if isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return None
