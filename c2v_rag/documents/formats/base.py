"""What a file format is to the reader: its suffixes, the package it needs, and how a file becomes documents."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from c2v_rag.core.errors import MissingPackageError
from c2v_rag.core.extras import Requirement, missing_requirements
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.sniffing import HEAD_BYTES, Decoded, NotText, binary_reason, decode_text, file_head
from c2v_rag.documents.source_document import SourceDocument
from c2v_rag.documents.terminal import screen_text

logger = logging.getLogger(__name__)

T = TypeVar("T")


class FileFormat(ABC):
    """One kind of file ingest reads: a class here and a line in :data:`c2v_rag.documents.formats.FORMATS`.

    ``read`` yields the file's documents (one for a page of text, a PDF or a Word file; one per record for JSONL
    and Parquet). What cannot be read is recorded in the :class:`ReadLog` (``log.skip_file``) and yields nothing;
    an ``OSError`` is the caller's to raise or skip, by ``options.on_error``.
    """

    # How messages name the format ("PDF").
    name: ClassVar[str]
    # Lower-case file suffixes, with their dot.
    suffixes: ClassVar[tuple[str, ...]]
    # The packages reading needs beyond the core install, each with the c2v-rag extra that brings it.
    requires: ClassVar[tuple[Requirement, ...]] = ()
    # Whether the numbered parts of a split file are of this format too (makeinfo's gnupg.info-2 of .info).
    numbered_parts: ClassVar[bool] = False
    # Where a folder holds one page in several formats (guide.md beside guide.html, FAQ.txt beside FAQ.html), the
    # copy of the lowest rank is read and the others left out (c2v_rag.documents.page_formats): a source before
    # what is made from it, markup that says its headings before text that does not. None: files of this format
    # are never taken for another's copy (tables, records, slides, mail, archives).
    page_rank: ClassVar[int | None] = None
    # Suffixes of ``suffixes`` that other programs' text files have too (.dot: Graphviz's graphs beside Word's
    # templates): this format reads such a file only where ``accepts`` finds it its own, and ``text_suffixes`` may
    # name them, to read the others as plain text.
    shared_suffixes: ClassVar[tuple[str, ...]] = ()

    def missing(self) -> MissingPackageError | None:
        """The error to give when a package this format needs is not installed, else None (nothing imported)."""
        return missing_requirements(self.requires, f"Reading {self.name} files ({', '.join(self.suffixes)})")

    def accepts(self, file: Path, text_suffixes: Collection[str]) -> bool:
        """Whether this format reads ``file``, one of its suffixes: yes, unless the suffix alone does not say (a
        compressed file, by the suffix under it)."""
        return True

    def refuses(self, file: Path) -> str | None:
        """Why ``file``, though of this format, must not be read as documents, as far as a look before any reading
        tells (a listing asks for each file, so that an ingest refuses it before the model loads, or skips it
        under ``on_error="continue"``); None to read it."""
        return None

    def content_size(self, file: Path, size: int) -> int:
        """How many bytes reading ``file`` (``size`` bytes on disk) goes through, as far as can be told without
        reading it: a progress bar weights the file by it. Its size, unless it is compressed."""
        return size

    @abstractmethod
    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        """The documents of ``file`` (resolved), read under the caller's ``root``."""


class SkipFile(Exception):
    """Raised by a parse that finds the file cannot be read as a document (encrypted, under DRM, too large), with
    the reason to record."""


def office_main_part(
    file: Path, package: Any, factory: Any, part_class: type[T], content_types: Sequence[str], kind: str
) -> T:
    """The main part of an Office Open XML file (python-docx's or python-pptx's ``package`` class opening it) as
    ``part_class``, which ``factory`` (that library's part factory) is told to make of ``content_types`` too: the
    macro-enabled files', templates' and shows' main parts, which hold the same XML as the plain format's but which
    the library maps to no part class of its own. :class:`SkipFile` naming ``kind`` when the main part is another
    application's (a deck under a Word suffix)."""
    for content_type in content_types:
        factory.part_type_for.setdefault(content_type, part_class)
    main = package.open(str(file)).main_document_part
    if not isinstance(main, part_class):
        raise SkipFile(f"not a {kind} (its main part is {main.content_type})")
    return main


def parse_or_skip(file: Path, log: ReadLog, kind: str, parse: Callable[[], T]) -> T | None:
    """What ``parse()`` returns, or None when ``file`` is skipped and recorded: ``parse`` raised :class:`SkipFile`,
    or failed as a damaged file does. An ``OSError`` (the file itself unreadable) is raised, for the caller's
    ``on_error`` to decide; ``kind`` names the format in the skip's reason (``.docx``)."""
    try:
        return parse()
    except SkipFile as skip:
        log.skip_file(file, str(skip))
    except OSError:
        raise
    except Exception as err:  # noqa: BLE001 - a damaged file fails deep in its parser (a zip, XML, a PDF), in many ways
        log.skip_file(file, f"not a readable {kind} file ({type(err).__name__}: {err})")
    return None


def parse_file(file: Path, options: ReadOptions, log: ReadLog, kind: str, parse: Callable[[], T]) -> T | None:
    """What ``parse()`` makes of a file read whole (a zip, a PDF): None when ``file`` is over the size limit or
    ``parse`` skips it (:func:`parse_or_skip`), each recorded."""
    if not within_size(file, options, log):
        return None
    return parse_or_skip(file, log, kind, parse)


def within_size(file: Path, options: ReadOptions, log: ReadLog) -> bool:
    """Whether ``file`` is within the size limit; if not it is skipped and recorded."""
    size = file.stat().st_size
    if options.max_file_bytes is not None and size > options.max_file_bytes:
        log.skip_file(file, over_limit(size, options.max_file_bytes))
        return False
    return True


def over_limit(size: int | None, limit: int) -> str:
    """Why a file of ``size`` bytes (None: known only to be larger, a stream cut at the limit) is skipped."""
    where = "(max_file_bytes / --max-file-mb)"
    if size is None:
        return f"it is over the limit of {limit:,} bytes {where}"
    return f"it is {size:,} bytes, over the limit of {limit:,} {where}"


def read_text(file: Path, options: ReadOptions, log: ReadLog) -> str | None:
    """``file``'s text in the encoding it is in (:func:`~c2v_rag.documents.sniffing.decode_text`), as a terminal
    showed it (:func:`~c2v_rag.documents.terminal.screen_text`: a log's colour codes and nroff's overstrikes out), or
    None when it is over the size limit or not text (skipped and recorded)."""
    if not within_size(file, options, log):
        return None
    decoded = checked_text(file, file.read_bytes(), options, log)
    return None if decoded is None else screen_text(decoded.text)


def opens_as_text(file: Path, log: ReadLog, data: bytes | None = None) -> bool:
    """Whether ``file`` opens as text does (its first 8 KiB: ``data``, its bytes where read already); if not it is
    skipped and recorded. For formats that decode text themselves (JSONL, mail) or stream it."""
    if data is None:
        data = file_head(file)
    reason = binary_reason(data[:HEAD_BYTES])
    if reason is not None:
        log.skip_file(file, f"not a text file: {reason}")
    return reason is None


def checked_text(file: Path, data: bytes, options: ReadOptions, log: ReadLog) -> Decoded | None:
    """``data`` (``file``'s bytes, or its head) decoded; None when it is not text (``file`` skipped and recorded).
    Another encoding than UTF-8 is logged, and so are invalid bytes replaced."""
    decoded = decode_text(data, options.max_undecodable_share)
    if isinstance(decoded, NotText):
        log.skip_file(file, f"not a text file: {decoded.reason}")
        return None
    if decoded.encoding not in ("utf-8", "utf-16", "utf-32"):
        logger.info("%s is not UTF-8; read as %s", log.shown(file), decoded.encoding)
    elif decoded.replaced:
        logger.warning("%s is not valid UTF-8 throughout; undecodable bytes were replaced", log.shown(file))
    return decoded


def file_document(
    file: Path,
    root: str,
    text: str,
    metadata: dict[str, Any] | None = None,
    pages: Sequence[tuple[int, str]] = (),
    lead: str | None = None,
    *,
    plain_text: bool = False,
) -> SourceDocument:
    """The document of a whole file: its resolved path for id and ``source``, its name, and ``metadata`` from the
    format (a title); ``pages`` are ``(offset, label)`` pairs where the file's pages start in ``text``, ``lead``
    what leads its later chunks (None: the text's opening), ``plain_text`` whether the text is plain rather than
    Markdown (:class:`~c2v_rag.documents.source_document.SourceDocument`)."""
    fields = {"source": str(file), "file_name": file.name, **(metadata or {})}
    return SourceDocument(
        file.as_posix(), text, fields, str(file), root, pages=tuple(pages), lead=lead, plain_text=plain_text
    )


def titled_document(file: Path, root: str, title: str | None, body: str, *, lead: str | None = None) -> SourceDocument:
    """The document of a whole file led by its recorded ``title`` (:func:`led_by_title`), which its metadata holds
    too; ``lead`` as for :func:`file_document`."""
    return file_document(file, root, led_by_title(title, body), {"title": title} if title else None, lead=lead)


def titled_or_skipped(
    file: Path, root: str, log: ReadLog, parsed: tuple[str | None, str] | None
) -> Iterator[SourceDocument]:
    """The :func:`titled_document` of a parse's ``(title, text)``; nothing for a file skipped already (None) or one
    that holds no text (skipped, with the reason)."""
    if parsed is None:
        return
    title, text = parsed
    if not text:
        log.skip_file(file, "it holds no text (pictures or objects only?)")
        return
    yield titled_document(file, root, title, text)


def led_by_title(title: str | None, body: str) -> str:
    """``body`` under ``title`` as a Markdown heading, so that its later chunks are led by it (ingest's
    ``chunk_context="lead"``); a body that already opens with the title is left as it is."""
    title = " ".join((title or "").split())
    if not title:
        return body
    if _plain_words(body.lstrip().split("\n", 1)[0].lstrip("#")) == _plain_words(title):
        return body
    return f"# {title}\n\n{body}" if body.strip() else title


# Markdown's inline marks and escapes: an HTML page's <h1> read as text has none, the same heading converted has
# them ("`secrets` — ...", "token\\_hex"), and both are one title.
_INLINE_MARKS = str.maketrans("", "", "`*_\\")


def _plain_words(line: str) -> str:
    """``line`` as words without Markdown's inline marks, casefolded, spaced as the title is (DocBook's headings
    put a no-break space after their number)."""
    return " ".join(line.translate(_INLINE_MARKS).split()).casefold()


def join_pages(texts: list[str], labels: list[str]) -> tuple[str, list[tuple[int, str]]]:
    """The pages' texts joined by blank lines, and where each page with text starts in it, with its label."""
    parts: list[str] = []
    pages: list[tuple[int, str]] = []
    offset = 0
    for text, label in zip(texts, labels):
        if not text:
            continue
        if parts:
            offset += 2
        pages.append((offset, label))
        parts.append(text)
        offset += len(text)
    return "\n\n".join(parts), pages


def shift_pages(pages: list[tuple[int, str]], shift: int) -> list[tuple[int, str]]:
    """``pages`` (from :func:`join_pages`) once ``shift`` characters were put before the first page's text (a
    title's heading): the first page still starts at 0, the later ones ``shift`` further on."""
    return [(offset + shift if n else 0, label) for n, (offset, label) in enumerate(pages)]
