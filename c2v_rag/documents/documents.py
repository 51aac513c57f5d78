"""Turning what callers pass to ``ingest`` into a stream of :class:`SourceDocument`.

Accepted inputs: strings, dicts (``text`` + ``metadata`` + optional ``id``), LlamaIndex Documents
or Nodes, LangChain Documents, and paths to files or folders of the formats
:mod:`c2v_rag.documents.formats` reads (text, Markdown, HTML, PDF, Word, PowerPoint, EPUB, notebooks, CSV, Excel,
JSONL, Parquet).
Documents are yielded one at a time, so a folder of millions of files is never held in memory.

Every document gets a stable id, the key that lets a re-run replace a changed document's chunks:
an explicit id when the input has one, the resolved path for files, ``path:line`` for JSONL
records without an id, and a content hash otherwise. LlamaIndex Documents keep their ``id_``:
load files with ``SimpleDirectoryReader(filename_as_id=True)``, whose default ids are random and
would make every re-run look like new documents.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from c2v_rag.documents.files import SUPPORTED_SUFFIXES, ReadLog, ReadOptions, open_source
from c2v_rag.documents.items import EXPECTED_ITEMS, item_kind, item_text_length
from c2v_rag.documents.reading import progress_weight
from c2v_rag.documents.source_document import SourceDocument, content_doc_id, from_record

logger = logging.getLogger(__name__)

__all__ = [
    "SourceDocument",
    "iter_documents",
    "InputSize",
    "input_size",
    "from_record",
    "content_doc_id",
    "names_existing_path",
    "SUPPORTED_SUFFIXES",
]


def iter_documents(
    docs: Any, *, options: ReadOptions | None = None, log: ReadLog | None = None
) -> Iterator[SourceDocument]:
    """Yield :class:`SourceDocument` for every input; see the module docstring for the forms.

    A single top-level string that names an existing file or folder is read as a path; inside
    a list, strings are always texts (pass :class:`pathlib.Path` objects for paths), and a list
    whose strings all look like paths is refused (:func:`check_not_path_strings`). The input's
    type, and every path given at the top level or in a top-level list (existence, suffix, a
    folder's supported files), are checked on the call, before any document is read.
    ``options`` sets the file size limit and error handling; ``log`` collects what was skipped.
    """
    options = options or ReadOptions()
    log = log if log is not None else ReadLog()
    if isinstance(docs, str) and names_existing_path(docs):
        return open_source(Path(docs), options, log)
    if isinstance(docs, str):
        check_not_missing_path(docs)
    if isinstance(docs, os.PathLike):
        return open_source(Path(docs), options, log)
    if item_kind(docs) is not None:
        return _from_item(docs, "docs", options, log)
    if isinstance(docs, Iterable) and not isinstance(docs, (bytes, bytearray)):
        if isinstance(docs, (list, tuple)):
            check_not_path_strings(docs)
            # Open (check) every path now; their files are still read one at a time.
            opened = {
                i: open_source(Path(item), options, log) for i, item in enumerate(docs) if isinstance(item, os.PathLike)
            }
            return (
                doc
                for i, item in enumerate(docs)
                for doc in (opened[i] if i in opened else _from_item(item, f"docs[{i}]", options, log))
            )
        return (doc for i, item in enumerate(docs) for doc in _from_item(item, f"docs[{i}]", options, log))
    raise TypeError(
        f"docs must be a string, a dict, a document object, a path or an iterable of them; got {type(docs).__name__}"
    )


@dataclass(frozen=True)
class InputSize:
    """How much input a run reads, as far as it is known before the reading: what a progress bar counts.

    ``unit`` is ``"file"`` when the input is files and folders (a file may hold many documents), else
    ``"doc"``; ``total`` is None when it is not known up front (an iterator, paths mixed with texts).
    ``sizes`` are the bytes each file holds (a compressed file's inside: ``FileFormat.content_size``), or each
    document's characters, in the order they are read: a bar weighs each input by them (:meth:`position`), since
    a run's time goes with its text, not its count of inputs (one large PDF among small pages is most of it).
    """

    unit: Literal["file", "doc"]
    total: int | None
    sizes: Sequence[int] = ()

    @cached_property
    def _ends(self) -> list[int]:
        """Where each input ends on the bar; empty when the inputs are counted, not weighed."""
        if self.total is None or len(self.sizes) != self.total:
            return []
        return list(itertools.accumulate(map(progress_weight, self.sizes)))

    @property
    def extent(self) -> float | None:
        """The bar's total: the files' weight, or the count of inputs; None when not known."""
        if self.total is None:
            return None
        return float(self._ends[-1]) if self._ends else float(self.total)

    def position(self, inputs: float) -> float:
        """Where ``inputs`` (the inputs done whole, plus the share done of the next) lies on the bar."""
        ends = self._ends
        if not ends:
            return float(inputs)
        whole = min(int(inputs), len(ends))
        start = ends[whole - 1] if whole else 0
        if whole == len(ends):
            return float(start)
        return float(start + (inputs - whole) * (ends[whole] - start))

    def inputs_at(self, position: float) -> float:
        """The inverse of :meth:`position`: the inputs done whole and the share of the next that a point of the bar
        lies at."""
        ends = self._ends
        if not ends:
            return float(position)
        whole = bisect.bisect_right(ends, position)
        if whole == len(ends):
            return float(whole)
        start = ends[whole - 1] if whole else 0
        return whole + (position - start) / (ends[whole] - start)


def input_size(docs: Any, log: ReadLog) -> InputSize:
    """The size of ``docs`` once :func:`iter_documents` has opened it with ``log``: every path given at
    the top level or in a top-level list is listed then, so its files are counted without reading one."""
    if _names_path(docs):
        return InputSize("file", log.files_listed, tuple(log.file_sizes))
    if isinstance(docs, (list, tuple)):
        paths = sum(isinstance(item, os.PathLike) for item in docs)
        if paths == len(docs) and docs:
            return InputSize("file", log.files_listed, tuple(log.file_sizes))
        # Each item that is not a path is one document.
        return InputSize("doc", None, ()) if paths else InputSize("doc", len(docs), tuple(map(item_text_length, docs)))
    if item_kind(docs) is not None:
        return InputSize("doc", 1)
    return InputSize("doc", None)


def _names_path(docs: Any) -> bool:
    return isinstance(docs, os.PathLike) or (isinstance(docs, str) and names_existing_path(docs))


def check_not_path_strings(docs: list[Any] | tuple[Any, ...]) -> None:
    """Refuse a list whose strings are all file paths rather than texts.

    ``ingest(["a.md", "b.md", ...])`` would embed the path strings themselves (strings in a list
    are texts) and every search would then return file names. Reading them as paths instead
    would make the meaning of the same call depend on the file system: on a machine where the
    files are missing, or after a typo, the names would again be embedded silently. So a list
    whose strings each end in a readable suffix (``.md``, ``.txt``, ``.jsonl``...) or name an
    existing file or folder with a separator or suffix in the name (``docs/a``, ``a.pdf``; a bare
    word like ``"notes"`` stays a text even when such a folder exists) is an error naming the fix.

    Raises:
        ValueError: every string in ``docs`` looks like a path (at least one string).
    """
    strings = [item for item in docs if isinstance(item, str)]
    if not strings or not all(_looks_like_path(s) for s in strings):
        return
    existing = sum(names_existing_path(s) for s in strings)
    first = next(i for i, item in enumerate(docs) if isinstance(item, str))
    sample = f"docs[{first}]={strings[0]!r}" + (f" and {len(strings) - 1} more" if len(strings) > 1 else "")
    found = (
        f"all {len(strings)} of them name existing files or folders"
        if existing == len(strings)
        else f"{existing} of {len(strings)} name existing files or folders, the others end in a file suffix"
    )
    raise ValueError(
        f"the strings in docs look like file paths ({sample}); {found}. Strings inside a list are "
        "embedded as texts, so these file names, not the files, would be stored. To read the files pass "
        "pathlib.Path objects ([Path(p) for p in paths]) or their folder; to embed the strings as texts anyway "
        "pass them as dicts ([{'text': s} for s in strings])."
    )


def check_not_missing_path(text: str) -> None:
    """Refuse a top-level string that reads as a path to nothing rather than as a text: one word with a
    separator whose folder exists (``notes/drafts/todo`` where ``notes/drafts`` does), or one that starts as a
    path does (``/``, ``./``, ``../``, ``~``) or ends in a readable suffix (``report.pdf``). An existing path is
    read as one; a mistyped one was embedded as the text of one document, silently. A word like ``and/or``, or
    a URL, stays a text."""
    word = text.strip()
    if not word or any(c.isspace() for c in word) or "://" in word or len(word) > 1024:
        return
    path = Path(word).expanduser()
    marked = word.startswith(("/", "./", "../", "~")) or path.suffix.lower() in SUPPORTED_SUFFIXES
    if not (marked or ("/" in word or os.sep in word) and names_existing_path(str(path.parent))):
        return
    raise FileNotFoundError(
        f"docs={text!r} looks like a path, and no file or folder is there (a typo?); a string is read as a path "
        f"only where one exists. Pass an existing file or folder, or {{'text': {text!r}}} to embed the string "
        "itself as a text"
    )


def _looks_like_path(text: str) -> bool:
    text = text.strip()
    if not text or "\n" in text or len(text) > 1024:
        return False
    if Path(text).suffix.lower() in SUPPORTED_SUFFIXES:
        return True
    return (os.sep in text or "/" in text or bool(Path(text).suffix)) and names_existing_path(text)


def names_existing_path(text: str) -> bool:
    """Whether a top-level string passed to ``ingest`` is read as a path (an existing one)."""
    if "\n" in text or len(text) > 4096:
        return False
    try:
        return Path(text).expanduser().exists()
    except (OSError, ValueError):  # a long or odd string (or one with NUL) is no path
        return False


def _from_item(item: Any, where: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
    if isinstance(item, os.PathLike):
        yield from open_source(Path(item), options, log)
    elif (kind := item_kind(item)) is not None:
        yield kind.document(item, where)
    else:
        raise TypeError(f"{where} is a {type(item).__name__}; expected {EXPECTED_ITEMS}")
