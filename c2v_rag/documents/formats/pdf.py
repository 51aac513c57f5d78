"""PDF files with a text layer: one document per file, pages joined by blank lines, each chunk told the page it
starts on (``page_label``, as the PDF numbers its pages: ``iv``, ``12``)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from c2v_rag.core.extras import Requirement
from c2v_rag.documents.formats.base import (
    FileFormat,
    SkipFile,
    file_document,
    join_pages,
    led_by_title,
    parse_file,
    shift_pages,
)
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

# A word broken across lines by a hyphen ("man-\nagement"): joined, as the reader reads it.
_LINE_HYPHEN = re.compile(r"(?<=[a-z])-\n(?=[a-z])")
# A dot leader (a table of contents' or an index's "2.1 ASN.1 syntax . . . . . . 2"): the dots read as one space.
# Every dot was a token, and a manual's contents and index ran to whole chunks of them.
_LEADER = re.compile(r"[ \t]*(?:\.[ \t]*){4,}")
# The longest first line of a first page taken for the document's title where the PDF records none.
_TITLE_LINE_CHARS = 120
# Running headers and footers: a line among a page's first or last EDGE_LINES that recurs (digits aside) at that
# edge of at least RUNNING_SHARE of the pages with text, and of RUNNING_PAGES of them; or that starts or ends with
# the page's own number, at an edge where RUNNING_PAGES pages have such a line ("Chapter 4: Function reference 9",
# a bare "12"): whatever its words, since a book names each chapter in its own pages' headers.
EDGE_LINES = 2
RUNNING_SHARE = 0.4
RUNNING_PAGES = 3
_DIGITS = re.compile(r"\d+")
# Typographic ligatures a PDF's fonts draw as one glyph, which its text layer keeps ("conﬁguration ﬁles"): spelled
# out, as the words were typed. Left in, MiniLM's tokenizer splits "ﬁles" into pieces no other copy of the word has
# ('ﬁ', '##les' against 'files'), and BM25 never matches them.
_LIGATURES = str.maketrans({"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"})


class Pdf(FileFormat):
    name = "PDF"
    suffixes = (".pdf",)
    page_rank = 4
    requires = (Requirement("pypdf", "pypdf", "pdf"),)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        parsed = parse_file(file, options, log, "PDF", lambda: _pages_and_title(file))
        if parsed is None:
            return
        texts, labels, title = parsed
        if not any(t.strip() for t in texts):
            pages_have = "its page has" if len(texts) == 1 else f"its {len(texts)} pages have"
            log.skip_file(file, f"{pages_have} no text layer (scanned pages need OCR first)")
            return
        joined, pages = join_pages(strip_running_lines(texts, labels), labels)
        body = joined
        if title is None:
            title, body = _first_line_title(joined)
        text = led_by_title(title, body)
        pages = shift_pages(pages, len(text) - len(joined))
        # The title alone leads later chunks: the lines under a PDF's title are its authors and affiliations,
        # and no blank line ends them.
        yield file_document(
            file, root, text, {"title": title} if title else None, pages, lead=title or "", plain_text=True
        )


def _pages_and_title(file: Path) -> tuple[list[str], list[str], str | None]:
    """The text of each page, each page's label and the recorded title."""
    from pypdf import PdfReader

    with file.open("rb") as handle:
        if b"%PDF-" not in handle.read(1024):
            raise SkipFile("not a PDF file (no %PDF- header)")
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings are about the file's syntax, not ours
    reader = PdfReader(file)
    if reader.is_encrypted and not reader.decrypt(""):
        raise SkipFile("it is encrypted with a password; save a copy without it to ingest it")
    return [_page_text(page) for page in reader.pages], list(reader.page_labels), _metadata_title(reader)


def _page_text(page: Any) -> str:
    text = (page.extract_text() or "").translate(_LIGATURES)
    text = _LEADER.sub(" ", _LINE_HYPHEN.sub("", text.replace("\r\n", "\n")))
    return text.strip()


def strip_running_lines(texts: list[str], labels: list[str]) -> list[str]:
    """The pages' texts without their running headers and footers (a book's title, a chapter's name, a page number
    at the top or the bottom of pages): repeated in every chunk they fall in, they would say nothing of it."""
    if sum(1 for t in texts if t) < RUNNING_PAGES:
        return texts
    recurring: dict[tuple[str, str], int] = {}  # (edge, line with its digits as #): pages it is at that edge of
    numbered: dict[str, int] = {}  # edge: pages with a line there that carries the page's number
    for text, label in zip(texts, labels):
        edges = _edge_lines(text)
        for key in edges:
            recurring[key] = recurring.get(key, 0) + 1
        for edge in {edge for (edge, _), line in edges.items() if _carries(line, label)}:
            numbered[edge] = numbered.get(edge, 0) + 1
    least = max(RUNNING_PAGES, RUNNING_SHARE * sum(1 for t in texts if t))
    running = {key for key, n in recurring.items() if n >= least}
    paged = {edge for edge, n in numbered.items() if n >= RUNNING_PAGES}
    if not running and not paged:
        return texts
    first = next(n for n, text in enumerate(texts) if text)
    stripped = [_without_edges(text, label, running, paged) for text, label in zip(texts, labels)]
    # The first page's first line stays: a running header is often the document's title, and there it is one.
    head, _, rest = texts[first].partition("\n")
    stripped[first] = f"{head}\n{_without_edges(rest, labels[first], running, paged)}".strip()
    return stripped


def _edge_key(edge: str, line: str) -> tuple[str, str]:
    return edge, _DIGITS.sub("#", line.strip()).casefold()


def _edge_lines(text: str) -> dict[tuple[str, str], str]:
    lines = [line for line in text.split("\n") if line.strip()]
    edges = [("top", line) for line in lines[:EDGE_LINES]] + [("bottom", line) for line in lines[-EDGE_LINES:]]
    return {_edge_key(edge, line): line for edge, line in edges}


def _carries(line: str, label: str) -> bool:
    """Whether ``line`` starts or ends with the page's printed number ``label``."""
    words = line.split()
    return bool(label) and bool(words) and label in (words[0], words[-1])


def _without_edges(text: str, label: str, running: set[tuple[str, str]], paged: set[str]) -> str:
    lines = text.split("\n")
    for edge, index in (("top", 0), ("bottom", -1)):
        for _ in range(EDGE_LINES):
            if not lines:
                break
            key = _edge_key(edge, lines[index])
            if key not in running and not (edge in paged and _carries(lines[index], label)):
                break
            lines.pop(index)
    return "\n".join(lines).strip()


def _metadata_title(reader: Any) -> str | None:
    metadata = reader.metadata
    title = " ".join(str(metadata.title).split()) if metadata is not None and metadata.title else ""
    return title or None


def _first_line_title(body: str) -> tuple[str | None, str]:
    """Where the PDF records no title: the first page's first line, when it is short, set apart as a paragraph
    (a blank line after it, so that the text's later chunks are led by it); the text is otherwise unchanged."""
    first, sep, rest = body.partition("\n")
    first = first.strip()
    if not sep or not first or len(first) > _TITLE_LINE_CHARS or not any(c.isalpha() for c in first):
        return None, body
    return first, f"{first}\n{rest}" if rest.startswith("\n") else f"{first}\n\n{rest}"
