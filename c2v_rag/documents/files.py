"""Reading files and folders as documents: which files, which of them are text, and what was skipped.

A *source* is a path the caller passed: a file, or a folder read recursively (hidden entries
skipped). Opening a source checks everything that needs no model, at once: the path exists,
a file has a supported suffix, a folder holds at least one supported file. The documents are
then read one file at a time.

What cannot be read is recorded in a :class:`ReadLog` rather than lost in a log line: files that
are not text or are over the size limit (always skipped, with one warning each), and, with
``on_error="continue"``, unreadable files and folders and bad JSONL records. The log also knows
which paths were read incompletely, so that a sync never deletes the points of a document it
merely failed to read.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from c2v_rag.documents.sniffing import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_UNDECODABLE_SHARE,
    NotText,
    binary_signature,
    decode_text,
)
from c2v_rag.documents.source_document import SourceDocument, from_record

logger = logging.getLogger(__name__)

TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown"})
JSONL_SUFFIXES = frozenset({".jsonl"})
# Parquet: one document per row, from a text column (text, page_content, content or body), read
# with pyarrow one row group at a time.
PARQUET_SUFFIXES = frozenset({".parquet"})
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | JSONL_SUFFIXES | PARQUET_SUFFIXES
# Skipped inputs kept by name in a ReadLog; beyond this only the counts grow (a corpus of
# millions of bad lines must not fill memory with their descriptions).
MAX_LISTED_SKIPS = 1000


class SkippedInput(BaseModel):
    """A file or a JSONL record that was not ingested, and why."""

    where: str
    reason: str


@dataclass(frozen=True)
class ReadOptions:
    """How files are read: the size limit, the undecodable-byte threshold, and error handling."""

    max_file_bytes: int | None = DEFAULT_MAX_FILE_BYTES
    max_undecodable_share: float = DEFAULT_MAX_UNDECODABLE_SHARE
    on_error: Literal["raise", "continue"] = "raise"


@dataclass
class ReadLog:
    """What reading skipped, and which paths were read incompletely."""

    files_skipped: int = 0
    records_skipped: int = 0
    skipped: list[SkippedInput] = field(default_factory=list)
    # Resolved files and folders some of whose documents may be missing from this read.
    incomplete: set[str] = field(default_factory=set)
    # For progress: the files the sources were found to hold when opened (before any is read), and
    # those done with so far (read to the end, skipped, or unreadable and skipped).
    files_listed: int = 0
    files_done: int = 0
    # For progress within a file: the share of the file being read that comes before the document last handed
    # on, and the share up to its end (a text file is one document, (0, 1); a JSONL line, its bytes' span; Parquet
    # row n of N, ((n - 1) / N, n / N)).
    document_span: tuple[float, float] = (0.0, 1.0)

    def skip_file(self, path: Path | str, reason: str, *, incomplete: bool = True) -> None:
        self.files_skipped += 1
        self._note(str(path), reason)
        if incomplete:
            self.incomplete.add(str(path))
        logger.warning("Skipped %s: %s", path, reason)

    def skip_record(self, where: str, file: Path, reason: str) -> None:
        self.records_skipped += 1
        self._note(where, reason)
        self.incomplete.add(str(file))
        logger.warning("Skipped the record %s: %s", where, reason)

    def _note(self, where: str, reason: str) -> None:
        if len(self.skipped) < MAX_LISTED_SKIPS:
            self.skipped.append(SkippedInput(where=where, reason=reason))

    def covers(self, source: str | None) -> bool:
        """Whether ``source`` (a resolved file path) lies in a path that was read incompletely."""
        if not source or not self.incomplete:
            return False
        return any(source == p or source.startswith(p.rstrip(os.sep) + os.sep) for p in self.incomplete)


def open_source(path: Path, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
    """The documents of a file or folder the caller named; the checks run now, the reading lazily."""
    root, files = list_source(path, options, log)
    log.files_listed += len(files)
    return _read_files(files, root, options, log)


def read_file(file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
    """The documents of one file listed by :func:`list_source` under ``root`` (the Ray engine reads
    each file in a task of its own)."""
    return _read_files([file], root, options, log)


def list_source(path: Path, options: ReadOptions, log: ReadLog) -> tuple[str, list[Path]]:
    """The resolved root of a file or folder the caller named, and its supported files, checked."""
    path = path.expanduser()
    if not path.exists():
        raise FileNotFoundError(
            f"{path} does not exist; pass a file or a folder of .txt, .md, .jsonl or .parquet files"
        )
    root = path.resolve()
    if root.is_dir():
        files = list_files(root, options, log)
        if not files:
            raise ValueError(f"no .txt, .md, .jsonl or .parquet files under {path}")
    else:
        if root.suffix.lower() not in SUPPORTED_SUFFIXES:
            raise ValueError(
                f"{path}: unsupported file type {root.suffix!r}; c2v_rag reads .txt, .md, .markdown, "
                ".jsonl and .parquet (convert other formats to text first)"
            )
        if not os.access(root, os.R_OK):
            raise PermissionError(f"{path} is not readable (permission denied); fix its permissions")
        files = [root]
    return str(root), files


def list_files(root: Path, options: ReadOptions, log: ReadLog) -> list[Path]:
    """The supported, non-hidden files under ``root``, in path order.

    A folder that cannot be listed raises (``on_error="raise"``) or is recorded as incomplete.
    """
    files, other = [], 0

    def unreadable(err: OSError) -> None:
        where = err.filename or root
        if options.on_error == "raise":
            raise PermissionError(
                f"cannot list {where}: {err.strerror or err}; fix its permissions, or pass "
                "on_error='continue' (--on-error continue) to skip it"
            ) from err
        log.skip_file(where, f"the folder cannot be listed ({err.strerror or err})")

    for folder, dirs, names in os.walk(root, onerror=unreadable):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if name.startswith("."):
                continue
            file = Path(folder) / name
            if file.suffix.lower() in SUPPORTED_SUFFIXES and file.is_file():
                files.append(file)
            else:
                other += 1
    if other:
        logger.info("Skipped %d files under %s that are not .txt, .md, .jsonl or .parquet", other, root)
    return sorted(files)


def _read_files(files: list[Path], root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
    for file in files:
        try:
            if file.suffix.lower() in JSONL_SUFFIXES:
                yield from _read_jsonl(file, root, options, log)
            elif file.suffix.lower() in PARQUET_SUFFIXES:
                yield from _read_parquet(file, root, options, log)
            else:
                doc = _read_text(file, root, options, log)
                if doc is not None:
                    log.document_span = (0.0, 1.0)
                    yield doc
        except OSError as err:
            if options.on_error == "raise":
                raise
            log.skip_file(file.resolve(), f"it cannot be read ({err.strerror or err})")
        # Counted once the consumer asks for the next document: every document of this file has been
        # handed on by then.
        log.files_done += 1


def _read_text(file: Path, root: str, options: ReadOptions, log: ReadLog) -> SourceDocument | None:
    resolved = file.resolve()
    size = resolved.stat().st_size
    if options.max_file_bytes is not None and size > options.max_file_bytes:
        log.skip_file(
            resolved,
            f"it is {size:,} bytes, over the limit of {options.max_file_bytes:,} (max_file_bytes / --max-file-mb)",
        )
        return None
    text = decode_text(resolved.read_bytes(), options.max_undecodable_share)
    if isinstance(text, NotText):
        log.skip_file(resolved, f"not a text file: {text.reason}")
        return None
    if "\ufffd" in text:
        logger.warning("%s is not valid UTF-8 throughout; undecodable bytes were replaced", resolved)
    metadata = {"source": str(resolved), "file_name": resolved.name}
    return SourceDocument(resolved.as_posix(), text, metadata, str(resolved), root)


def _read_jsonl(file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
    from c2v_rag.core.jsonl import iter_jsonl_spans

    resolved = file.resolve()
    with resolved.open("rb") as handle:
        head = handle.read(8192)
    kind = binary_signature(head)
    if kind is not None or b"\x00" in head:
        log.skip_file(resolved, f"not a text file: {f'it is {kind}' if kind else 'it contains NUL bytes'}")
        return

    def bad_line(number: int, err: ValueError) -> None:
        if options.on_error == "raise":
            raise err
        log.skip_record(f"{resolved}:{number}", resolved, str(err))

    size = resolved.stat().st_size or 1
    records = (
        (f"{resolved}:{n}", r, (min(1.0, start / size), min(1.0, end / size)))  # a file growing as it is read
        for n, (start, end), r in iter_jsonl_spans(resolved, on_error=bad_line)
    )
    yield from _record_documents(records, resolved, root, options, log)


Span = tuple[float, float]


def _record_documents(
    records: Iterator[tuple[str, dict, Span]], resolved: Path, root: str, options: ReadOptions, log: ReadLog
) -> Iterator[SourceDocument]:
    """Documents from ``(where, record, span)`` triples (JSONL lines, Parquet rows; ``span``: the share of the file
    before the record and up to its end); a bad record is skipped and logged, or raised under
    ``on_error="raise"``."""
    for where, record, span in records:
        try:
            doc = from_record(record, where, default_id=where, source=str(resolved))
        except (ValueError, TypeError) as err:
            if options.on_error == "raise":
                raise
            log.skip_record(where, resolved, str(err))
            continue
        log.document_span = span
        yield doc.with_root(root)


def _read_parquet(file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
    """One document per row, as a JSONL record would give (``from_record``: the text column, an id
    column or ``path:row``, the other scalar columns as metadata)."""
    from c2v_rag.core.extras import require

    parquet = require("pyarrow.parquet", "reading .parquet files", "parquet", distribution="pyarrow")
    resolved = file.resolve()
    with resolved.open("rb") as handle:
        head = handle.read(4)
    if head != b"PAR1":
        log.skip_file(resolved, "not a Parquet file (no PAR1 signature)")
        return
    table = parquet.ParquetFile(resolved)
    rows = (record for batch in table.iter_batches(batch_size=1024) for record in batch.to_pylist())
    total = table.metadata.num_rows or 1
    records = ((f"{resolved}:{n}", r, ((n - 1) / total, n / total)) for n, r in enumerate(rows, start=1))
    yield from _record_documents(records, resolved, root, options, log)
