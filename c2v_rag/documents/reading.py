"""How files are read (:class:`ReadOptions`) and what reading left out (:class:`ReadLog`).

Shared by the folder walk (:mod:`c2v_rag.documents.files`) and the readers of each file format
(:mod:`c2v_rag.documents.formats`): a file that is skipped is recorded here rather than lost in a log line, and
so is every path read incompletely, so that a sync never deletes the points of a document it merely failed to
read.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel

from c2v_rag.documents.sniffing import DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_UNDECODABLE_SHARE

logger = logging.getLogger(__name__)


# Skipped inputs kept by name in a ReadLog; beyond this only the counts grow (a corpus of
# millions of bad lines must not fill memory with their descriptions).
MAX_LISTED_SKIPS = 1000


def progress_weight(size: int) -> int:
    """What an input holding ``size`` bytes (a file) or characters (a document in memory) weighs on a progress bar:
    its size and 1 KiB more, since every input costs a chunk's work at least, and an empty one still moves the bar."""
    return size + 1024


class SkippedInput(BaseModel):
    """A file or a JSONL record that was not ingested, and why."""

    where: str
    reason: str


@dataclass(frozen=True)
class ReadOptions:
    """How files are read: which of a folder's are left out, which other suffixes are read as text, the size
    limit, the undecodable-byte threshold, and error handling."""

    max_file_bytes: int | None = DEFAULT_MAX_FILE_BYTES
    max_undecodable_share: float = DEFAULT_MAX_UNDECODABLE_SHARE
    on_error: Literal["raise", "continue"] = "raise"
    # Glob patterns of a folder's files and subfolders to leave out (excluded says how they match).
    exclude: tuple[str, ...] = ()
    # Suffixes read as plain text besides the formats' own, as formats.checked_text_suffixes gives them (lower
    # case, with their dot); IngestConfig and AdaptConfig check theirs so.
    text_suffixes: tuple[str, ...] = ()
    # Read every copy of a page a folder holds in several formats (page_formats), not the first-ranked alone.
    every_format: bool = False


def checked_exclude(patterns: list[str]) -> list[str]:
    """Refuse an ``exclude`` entry that names nothing (blank, or slashes alone), which would leave out everything."""
    for pattern in patterns:
        if not pattern.strip("/ "):
            raise ValueError(f"exclude={patterns!r}: {pattern!r} is no pattern; name files or folders to leave out")
    return patterns


# A config's ``exclude`` field: glob patterns of a folder's files and subfolders to leave out (excluded).
ExcludePatterns = Annotated[list[str], AfterValidator(checked_exclude)]


def excluded(relative: PurePosixPath, patterns: Sequence[str]) -> bool:
    """Whether a file or folder, by its path ``relative`` to the folder being read, matches one of ``patterns``.

    As in a ``.gitignore``: a pattern without a ``/`` matches the name of the entry or of any folder above it
    (``node_modules``, ``*.min.html``, ``build/``); a pattern with one matches the whole relative path
    (``drafts/*``, ``docs/v1/*``), its ``*`` crossing folders. Matching is case-sensitive."""
    path = relative.as_posix()
    for pattern in patterns:
        pattern = pattern.strip("/")
        if "/" in pattern:
            if fnmatch.fnmatchcase(path, pattern):
                return True
        elif any(fnmatch.fnmatchcase(part, pattern) for part in relative.parts):
            return True
    return False


@dataclass
class ReadLog:
    """What reading skipped, and which paths were read incompletely."""

    files_skipped: int = 0
    records_skipped: int = 0
    skipped: list[SkippedInput] = field(default_factory=list)
    # Files of the folders listed that no format reads, by suffix ("" for none): left out, not skipped (no warning;
    # text_suffixes reads the text ones).
    not_read: Counter[str] = field(default_factory=Counter)
    # Files and folders of the folders listed that an ``exclude`` pattern left out.
    excluded: int = 0
    # Files of the folders listed left out as copies of a page read in another format (page_formats).
    other_format_copies: int = 0
    # Resolved files and folders some of whose documents may be missing from this read.
    incomplete: set[str] = field(default_factory=set)
    # For progress: how many bytes each file the sources were found to hold when opened (before any is read) holds
    # (FileFormat.content_size), in the order they are read, and how many are done with so far (read to the end,
    # skipped, or unreadable and skipped).
    file_sizes: list[int] = field(default_factory=list)
    files_done: int = 0
    # For progress within a file: the share of the file being read that comes before the document last handed
    # on, and the share up to its end (a text file is one document, (0, 1); a JSONL line, its bytes' span; Parquet
    # row n of N, ((n - 1) / N, n / N)).
    document_span: tuple[float, float] = (0.0, 1.0)

    @property
    def files_listed(self) -> int:
        return len(self.file_sizes)

    def shown(self, path: Path | str) -> str:
        """``path`` as messages name it: the path a file inside an archive or compressed file stands for, not its
        temporary copy's."""
        return str(path)

    def skip_file(self, path: Path | str, reason: str, *, incomplete: bool = True) -> None:
        self.files_skipped += 1
        self._note(str(path), reason)
        if incomplete:
            self.incomplete.add(str(path))
        logger.warning("Skipped %s: %s", path, reason)

    def skip_files(self, paths: Sequence[Path], reason: str) -> None:
        """Skip several files for one reason, with one warning for all of them (``reason`` names the fix)."""
        for path in paths:
            self.files_skipped += 1
            self._note(str(path), reason)
            self.incomplete.add(str(path))
        if paths:
            logger.warning("Skipped %d files (%s, ...): %s", len(paths), paths[0], reason)

    def skip_record(self, where: str, file: Path | str | None, reason: str) -> None:
        """A record (or a document) skipped; ``file``, when it came from one, was read incompletely."""
        self.records_skipped += 1
        self._note(where, reason)
        if file is not None:
            self.incomplete.add(str(file))
        logger.warning("Skipped the record %s: %s", where, reason)

    def take_skips(self, other: ReadLog) -> None:
        """Count what ``other`` skipped (another process's reading, which warned of it) as skipped here too."""
        self.files_skipped += other.files_skipped
        self.records_skipped += other.records_skipped
        for entry in other.skipped:
            self._note(entry.where, entry.reason)
        self.incomplete |= other.incomplete

    def _note(self, where: str, reason: str) -> None:
        if len(self.skipped) < MAX_LISTED_SKIPS:
            self.skipped.append(SkippedInput(where=where, reason=reason))

    def covers(self, source: str | None) -> bool:
        """Whether ``source`` (a resolved file path) lies in a path that was read incompletely."""
        if not source or not self.incomplete:
            return False
        return any(source == p or source.startswith(p.rstrip(os.sep) + os.sep) for p in self.incomplete)
