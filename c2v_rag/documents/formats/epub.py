"""EPUB books: their chapters in reading order (the package's spine), each read as an HTML page, joined into one
document per book, led by the book's title."""

from __future__ import annotations

import posixpath
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from c2v_rag.documents.formats.base import FileFormat, SkipFile, parse_file, titled_document
from c2v_rag.documents.formats.html import Html, html_to_markdown, parse_markup
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

_CONTAINER = "META-INF/container.xml"
# Present in books whose chapters are encrypted (DRM, or obfuscated fonts alone: see _encrypted_chapters).
_ENCRYPTION = "META-INF/encryption.xml"


class Epub(FileFormat):
    name = "EPUB"
    suffixes = (".epub",)
    page_rank = 3
    requires = Html.requires

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        parsed = parse_file(file, options, log, "EPUB", lambda: _title_and_chapters(file, options))
        if parsed is None:
            return
        title, texts = parsed
        body = "\n\n".join(t for t in texts if t)
        if not body.strip():
            log.skip_file(file, "its chapters hold no text")
            return
        yield titled_document(file, root, title, body, lead=title)


def _title_and_chapters(file: Path, options: ReadOptions) -> tuple[str | None, list[str]]:
    """The book's title and its chapters as Markdown, in reading order."""
    with zipfile.ZipFile(file) as book:
        title, chapters = _spine(book)
        if _encrypted_chapters(book, chapters):
            raise SkipFile("its chapters are encrypted (DRM); only books without DRM can be read")
        size = sum(book.getinfo(c).file_size for c in chapters)
        if options.max_file_bytes is not None and size > options.max_file_bytes:
            raise SkipFile(f"its chapters hold {size:,} bytes, over the limit of {options.max_file_bytes:,}")
        return title, [html_to_markdown(book.read(chapter))[1] for chapter in chapters]


def _spine(book: zipfile.ZipFile) -> tuple[str | None, list[str]]:
    """The book's title and its chapters' paths in the archive, in reading order (the OPF package's spine)."""
    container = parse_markup(book.read(_CONTAINER))  # no entity a crafted book defines is expanded
    rootfile = container.find(_named("rootfile"))
    if rootfile is None or not rootfile.get("full-path"):
        raise ValueError(f"{_CONTAINER} names no package file")
    package_path = str(rootfile["full-path"])
    package = parse_markup(book.read(package_path))
    heading = package.find(_named("title"))
    title = " ".join(heading.get_text(" ").split()) if heading is not None else ""
    base = posixpath.dirname(package_path)
    manifest: dict[str, Any] = {str(item.get("id")): item for item in package.find_all(_named("item"))}
    chapters = []
    for ref in package.find_all(_named("itemref")):
        item = manifest.get(str(ref.get("idref")))
        if item is None or "html" not in str(item.get("media-type", "")):
            continue
        chapters.append(posixpath.normpath(posixpath.join(base, str(item.get("href")).split("#")[0])))
    if not chapters:
        raise ValueError("its spine lists no chapter")
    return title or None, chapters


def _named(local: str) -> Callable[[Any], bool]:
    """A match for elements of local name ``local`` under any namespace prefix (``dc:title``, ``opf:item``): the
    HTML parser keeps prefixes in names and lower-cases them."""
    return lambda tag: tag.name.rpartition(":")[2] == local


def _encrypted_chapters(book: zipfile.ZipFile, chapters: list[str]) -> bool:
    """Whether encryption.xml names a chapter (fonts alone are often obfuscated in books without DRM)."""
    from urllib.parse import unquote

    if _ENCRYPTION not in book.namelist():
        return False
    encrypted = {
        unquote(str(ref.get("uri"))) for ref in parse_markup(book.read(_ENCRYPTION)).find_all(_named("cipherreference"))
    }
    return any(c in encrypted for c in chapters)
