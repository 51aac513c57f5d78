"""Plain text and Markdown (and MDX, and reStructuredText, read as the text it is): one document per file.

A Markdown file that opens with YAML front matter (``---`` lines around ``key: value`` pairs, as Jekyll, Hugo,
MkDocs and Obsidian write it) gives its fields as metadata and its ``title`` as the heading that leads the text; the
front matter itself is not embedded.
"""

from __future__ import annotations

import datetime
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from c2v_rag.documents.formats.base import FileFormat, file_document, led_by_title, read_text
from c2v_rag.documents.payload_keys import RESERVED_METADATA_KEYS
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

logger = logging.getLogger(__name__)

# MDX (Markdown with JSX, as Docusaurus and other documentation sites write it) is read as Markdown: its
# import lines and components are a little noise beside its prose.
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")
# Front matter: a first line of ---, YAML, and a line of --- (or ...) that closes it.
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)
# Fields a file's metadata gets from the file itself, which its front matter may not change.
_FILE_FIELDS = frozenset({"source", "file_name"})


class PlainText(FileFormat):
    name = "text"
    suffixes = (".txt", *MARKDOWN_SUFFIXES, ".rst")

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        text = read_text(file, options, log)
        if text is None:
            return
        if file.suffix.lower() not in MARKDOWN_SUFFIXES:
            yield file_document(file, root, text)
            return
        fields, body = front_matter(text, log.shown(file))
        title = fields.get("title") if isinstance(fields.get("title"), str) else None
        yield file_document(file, root, led_by_title(title, body), fields or None)


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
