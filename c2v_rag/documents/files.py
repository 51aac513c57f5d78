"""Reading files and folders as documents: which files, which of them can be read, and what was skipped.

A *source* is a path the caller passed: a file, or a folder read recursively (hidden entries
skipped). Opening a source checks everything that needs no model, at once: the path exists,
a file has a supported suffix and its format's package is installed, a folder holds at least one
supported file. The documents are then read one file at a time, each by its format
(:mod:`c2v_rag.documents.formats`).

What cannot be read is recorded in a :class:`ReadLog` rather than lost in a log line: files that
are not what their suffix says or are over the size limit (always skipped, with one warning each),
a folder's files whose format needs a package that is not installed (one warning for them all), and,
with ``on_error="continue"``, unreadable files and folders and bad JSONL records. The log also knows
which paths were read incompletely, so that a sync never deletes the points of a document it
merely failed to read.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import stat
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, Field

from c2v_rag.core.errors import MissingPackageError
from c2v_rag.core.wording import counted, in_words
from c2v_rag.documents import page_formats, sphinx_builds
from c2v_rag.documents.formats import FORMATS, SUPPORTED_SUFFIXES, FileFormat, TextSuffixes, format_of
from c2v_rag.documents.formats.archives import COMPRESSED_SUFFIXES, compressed_head
from c2v_rag.documents.reading import MAX_LISTED_SKIPS, ExcludePatterns, ReadLog, ReadOptions, SkippedInput, excluded
from c2v_rag.documents.sniffing import HEAD_BYTES, binary_reason, file_head
from c2v_rag.documents.source_document import SourceDocument

logger = logging.getLogger(__name__)


class FileSelection(BaseModel):
    """Which of a folder's files are read, and how: the settings ingest, embed and adapt share (their configs'
    base)."""

    exclude: ExcludePatterns = Field(
        default_factory=list,
        description=(
            "glob patterns of a folder's files and subfolders to leave out, as in a .gitignore: 'node_modules', "
            "'*.min.html', 'drafts/*' (a pattern with a / matches the path under the folder). With ingest's sync, "
            "the points of files left out are deleted, as those of files gone (--exclude)"
        ),
    )
    text_suffixes: TextSuffixes = Field(
        default_factory=list,
        description=(
            "more file suffixes a folder's files are read with, as plain text: source code, logs, configuration "
            "('.py', '.log'); a suffix a format reads already is refused. With ingest's sync, the points of such "
            "files are deleted on a run that no longer names their suffix, as those of files gone (--text-suffix)"
        ),
    )

    every_format: bool = Field(
        False,
        description=(
            "read every copy of a page that a folder holds in several formats (guide.md beside guide.html, FAQ.txt "
            "beside FAQ.html); by default only the first of its source markup (Markdown, reStructuredText, "
            "AsciiDoc, Org, LaTeX), HTML, plain text, a word processor's file, PDF is read, so that a search does "
            "not find the page twice. With ingest's sync, the points of copies left out are deleted (--every-format)"
        ),
    )

    def read_options(self) -> ReadOptions:
        """What reading the sources needs of these settings."""
        return ReadOptions(
            exclude=tuple(self.exclude), text_suffixes=tuple(self.text_suffixes), every_format=self.every_format
        )


__all__ = [
    "MAX_LISTED_SKIPS",
    "SUPPORTED_SUFFIXES",
    "NothingToReadError",
    "ReadLog",
    "ReadOptions",
    "SkippedInput",
    "list_files",
    "list_source",
    "open_source",
    "read_file",
    "snapshot",
]


class NothingToReadError(ValueError):
    """A folder holds no file to read (``path``: as the caller named it)."""

    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


def open_source(path: Path, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
    """The documents of a file or folder the caller named; the checks run now, the reading lazily."""
    root, files = list_source(path, options, log)
    return _read_files(files, root, options, log)


def read_file(file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
    """The documents of one file listed by :func:`list_source` under ``root`` (the Ray engine reads
    each file in a task of its own)."""
    return _read_files([file], root, options, log)


def list_source(path: Path, options: ReadOptions, log: ReadLog) -> tuple[str, list[Path]]:
    """The resolved root of a file or folder the caller named, and its supported files, checked; their sizes
    go to ``log.file_sizes``."""
    path = path.expanduser()
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; pass a file or a folder of documents ({FORMATS_COMMAND})")
    root = path.resolve()
    if root.is_dir():
        listing = _listing(root, options, log)
        if not listing.files:
            raise NothingToReadError(listing.nothing_to_read(path, options), path)
        files = _not_refused(listing.files, options, log)
        log.file_sizes.extend(_content_size(file, listing.sizes[file], options) for file in files)
        return str(root), files
    fmt = format_of(root, options.text_suffixes)
    if fmt is None:
        suffix = _type_suffix(root)
        as_text = f"; to read it as text, {_as_text_fix([suffix])}" if _looks_like_text(root) else ""
        if root.suffix.lower() in COMPRESSED_SUFFIXES:
            raise ValueError(
                f"{path}: a compressed file of a type c2v_rag does not read ({suffix or 'no suffix'} inside "
                f"{root.suffix.lower()}; {FORMATS_COMMAND}){as_text}"
            )
        if not suffix:
            raise ValueError(f"{path}: a file without a suffix, of no type c2v_rag reads ({FORMATS_COMMAND}){as_text}")
        raise ValueError(
            f"{path}: unsupported file type {suffix!r} ({FORMATS_COMMAND}); convert it to one of those{as_text}"
        )
    missing = fmt.missing()
    if missing is not None:
        raise missing
    if not os.access(root, os.R_OK):
        raise PermissionError(f"{path} is not readable (permission denied); fix its permissions")
    files = _not_refused([root], options, log)
    log.file_sizes.extend(fmt.content_size(file, file.stat().st_size) for file in files)
    return str(root), files


def _not_refused(files: list[Path], options: ReadOptions, log: ReadLog) -> list[Path]:
    """``files`` but those their format refuses (:meth:`FileFormat.refuses`): raised with the reason, before any
    reading (``on_error="raise"``), or skipped and recorded."""
    kept = []
    for file in files:
        fmt = format_of(file, options.text_suffixes)
        reason = fmt.refuses(file) if fmt is not None else None
        if reason is None:
            kept.append(file)
        elif options.on_error == "raise":
            raise ValueError(f"{file}: {reason}")
        else:
            log.skip_file(file, reason)
    return kept


def _content_size(file: Path, size: int, options: ReadOptions) -> int:
    fmt = format_of(file, options.text_suffixes)
    return size if fmt is None else fmt.content_size(file, size)


def list_files(root: Path, options: ReadOptions, log: ReadLog, *, quiet: bool = False) -> list[Path]:
    """The supported, non-hidden files under ``root`` that ``options.exclude`` does not leave out, in path order.

    A folder that cannot be listed raises (``on_error="raise"``) or is recorded as incomplete. Files of a format
    whose package is not installed are skipped, with one warning per format naming the install command. What is
    left out (other suffixes, by suffix; ``exclude``) is logged at INFO unless ``quiet``.
    """
    return _listing(root, options, log, quiet=quiet).files


# An exclude pattern that reads as a file suffix (.gz, .min.js): no glob character, no folder, a leading dot.
_SUFFIX_PATTERN = re.compile(r"\.[A-Za-z0-9_.~-]+")
# Where a message sends a user who asks which files are read (the list is 59 suffixes long).
FORMATS_COMMAND = "`c2v-rag formats` lists the types c2v_rag reads"
# How many suffixes a message names of those it left out, most files first.
_NAMED_SUFFIXES = 6


@dataclass
class _Listing:
    """A folder's listing: the files to read, and what was left out, for the messages."""

    files: list[Path] = field(default_factory=list)
    # Each file's size in bytes on disk.
    sizes: dict[Path, int] = field(default_factory=dict)
    # Files no format reads, by the suffix a text_suffixes entry would read them with (formats.NO_SUFFIX for none; a
    # compressed file's inner one: NEWS.gz is NO_SUFFIX), with the first met of each: its first bytes tell text.
    others: Counter[str] = field(default_factory=Counter)
    other_example: dict[str, Path] = field(default_factory=dict)
    excluded: int = 0
    # Links that lead nowhere (their target gone) or in a loop, of a type that would be read.
    dangling: list[Path] = field(default_factory=list)
    # Sphinx's HTML builds met (their generated files left out), and folders of Sphinx projects (a conf.py).
    sphinx_builds: list[Path] = field(default_factory=list)
    sphinx_projects: list[Path] = field(default_factory=list)

    def add_other(self, file: Path) -> None:
        suffix = _type_suffix(file)
        self.others[suffix] += 1
        self.other_example.setdefault(suffix, file)

    def others_in_words(self) -> str:
        """``.png (4), .css (2), no suffix (1)``: the suffixes left out, most files first."""
        return suffixes_in_words(self.others)

    def text_suffixes(self) -> list[str]:
        """The suffixes left out whose first file looks like text (the ones --text-suffix could read), most first."""
        return [
            suffix
            for suffix, _ in _ranked(self.others)[:_NAMED_SUFFIXES]
            if _looks_like_text(self.other_example[suffix])
        ]

    def nothing_to_read(self, path: Path, options: ReadOptions) -> str:
        """Why a folder gave no file to read, and the fix."""
        if self.others:
            text = self.text_suffixes()
            named = in_words([s or "suffix-less" for s in text])
            as_text = f"; to read {named} files as plain text, {_as_text_fix(text)}" if text else ""
            return (
                f"no file under {path} is of a type c2v_rag reads: it holds {self.others_in_words()} "
                f"({FORMATS_COMMAND}){as_text}"
            )
        if self.excluded:
            return f"every file under {path} is left out by exclude {list(options.exclude)} (--exclude)"
        if self.dangling:
            return f"no file to read under {path}: {_dangling_words(self.dangling)}"
        return f"no files under {path} (hidden files and folders, whose names start with '.', are left out)"


def _dangling_words(links: Sequence[Path]) -> str:
    """``2 links that lead to nothing or in a loop (a.txt -> gone.txt, ...)``."""
    first = min(links)
    try:
        target = os.readlink(first)
    except OSError:
        target = "?"
    more = ", ..." if len(links) > 1 else ""
    lead = "leads" if len(links) == 1 else "lead"
    return f"{counted(len(links), 'link')} that {lead} to nothing or in a loop ({first.name} -> {target}{more})"


def _as_text_fix(suffixes: Sequence[str]) -> str:
    """``pass text_suffixes=['.log', ''] (--text-suffix .log --text-suffix '')``: how to read files as text."""
    flags = " ".join(f"--text-suffix {shlex.quote(suffix)}" for suffix in suffixes)
    return f"pass text_suffixes={list(suffixes)!r} ({flags})"


def suffixes_in_words(counts: Mapping[str, int]) -> str:
    """``.png (4), .css (2), no suffix (1)``: files by suffix, most first (the first six named)."""
    ranked = _ranked(counts)
    named = [f"{suffix or 'no suffix'} ({n})" for suffix, n in ranked[:_NAMED_SUFFIXES]]
    rest = len(ranked) - len(named)
    return ", ".join(named) + (f" and {rest} more suffixes" if rest else "")


def not_read_words(counts: Mapping[str, int]) -> str:
    """``not read: 57 files of other types (no suffix (43), .sed (2))`` (a :class:`ReadLog`'s ``not_read``), or
    nothing when there were none."""
    total = sum(counts.values())
    return f"not read: {counted(total, 'file')} of other types ({suffixes_in_words(counts)})" if total else ""


def _ranked(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    """``counts`` most first, ties by suffix: the same order for the same folder, whatever order it is listed in."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def _type_suffix(file: Path) -> str:
    """The suffix that tells ``file``'s type, as ``text_suffixes`` names it: its own, or for a compressed file the
    one inside (``notes.sed.gz``: ``.sed``; ``NEWS.gz``: none)."""
    suffix = file.suffix.lower()
    return Path(file.stem).suffix.lower() if suffix in COMPRESSED_SUFFIXES else suffix


def _looks_like_text(file: Path) -> bool:
    """Whether ``file``'s first bytes are those of a text file (no binary signature, no NUL bytes); a compressed
    file's, once decompressed."""
    try:
        if not file.is_file():  # a pipe would block the read; a link to nothing holds no text
            return False
        compressed = file.suffix.lower() in COMPRESSED_SUFFIXES
        return binary_reason(compressed_head(file, HEAD_BYTES) if compressed else file_head(file)) is None
    except OSError:
        return False


def _regular_file_size(file: Path) -> int | None:
    """The size of ``file`` in bytes where it is a regular file (through symbolic links, as ``Path.is_file``
    tells), else None: one ``stat`` for both."""
    try:
        status = file.stat()
    except (OSError, ValueError):
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None


def _listing(root: Path, options: ReadOptions, log: ReadLog, *, quiet: bool = False) -> _Listing:
    """:func:`list_files`, with what was left out."""
    listing = _Listing()
    missing = {fmt: fmt.missing() for fmt in FORMATS}  # asked once per listing, not per file
    unreadable_formats: dict[FileFormat, list[Path]] = {}

    def unreadable(err: OSError) -> None:
        where = err.filename or root
        if options.on_error == "raise":
            raise PermissionError(
                f"cannot list {where}: {err.strerror or err}; fix its permissions, or pass "
                "on_error='continue' (--on-error continue) to skip it"
            ) from err
        log.skip_file(where, f"the folder cannot be listed ({err.strerror or err})")

    # Patterns written as a suffix ('.gz'), which match a whole name (only a hidden file's, never read): how many
    # names end with each, for the warning below.
    as_suffix = {p: 0 for p in options.exclude if _SUFFIX_PATTERN.fullmatch(p)}
    for folder, dirs, names in os.walk(root, onerror=unreadable):
        # Relative paths are made only when there are patterns to match them against: a listing is per file.
        here = PurePosixPath(Path(folder).relative_to(root).as_posix()) if options.exclude else None
        visible = [d for d in dirs if not d.startswith(".")]
        dirs[:] = [d for d in visible if here is None or not excluded(here / d, options.exclude)]
        listing.excluded += len(visible) - len(dirs)
        if sphinx_builds.is_html_build(Path(folder), names):
            listing.sphinx_builds.append(Path(folder))
            dirs[:] = [d for d in dirs if d != sphinx_builds.SOURCE_COPIES]
            names = [name for name in names if name not in sphinx_builds.GENERATED_PAGES]
        elif sphinx_builds.is_project(names, COMPRESSED_SUFFIXES):
            listing.sphinx_projects.append(Path(folder))
        for name in names:
            if name.startswith("."):
                continue
            for pattern in as_suffix:
                as_suffix[pattern] += name.endswith(pattern)
            if here is not None and excluded(here / name, options.exclude):
                listing.excluded += 1
                continue
            file = Path(folder) / name
            fmt = format_of(file, options.text_suffixes)
            size = None if fmt is None else _regular_file_size(file)
            if fmt is None:
                listing.add_other(file)
            elif size is None:  # a link to nothing, a pipe, a socket: nothing to read, and no type to name
                if file.is_symlink():
                    listing.dangling.append(file)
                continue
            elif missing[fmt] is not None:
                unreadable_formats.setdefault(fmt, []).append(file)
            else:
                listing.files.append(file)
                listing.sizes[file] = size
    log.not_read.update(listing.others)
    log.excluded += listing.excluded
    if listing.others and not quiet:
        logger.info(
            "Skipped %d files under %s of types c2v_rag does not read: %s (%s; text_suffixes, --text-suffix, "
            "reads other suffixes as plain text)",
            listing.others.total(),
            root,
            listing.others_in_words(),
            FORMATS_COMMAND,
        )
    if listing.dangling and listing.files:
        # Said once a folder, as a warning: a link that led to a document and no longer does may be a mistake.
        logger.warning("Left out %s under %s", _dangling_words(listing.dangling), root)
    if listing.sphinx_builds and not quiet:
        logger.info("%s", sphinx_builds.left_out(listing.sphinx_builds))
        for twice in sphinx_builds.read_twice(listing.sphinx_builds, listing.sphinx_projects, root):
            logger.warning("%s", twice.warning())
    if listing.excluded and not quiet:
        logger.info(
            "Left out %d files and folders under %s matching exclude %s", listing.excluded, root, list(options.exclude)
        )
    for pattern, ending in as_suffix.items():
        if ending:
            logger.warning(
                "exclude %r leaves out no file under %s: a pattern matches whole names, and %s with %r; to leave "
                "them out, pass %r (--exclude %s)",
                pattern,
                root,
                f"{counted(ending, 'file')} {'ends' if ending == 1 else 'end'}",
                pattern,
                f"*{pattern}",
                shlex.quote(f"*{pattern}"),
            )
    if unreadable_formats and not listing.files:  # nothing to read but what a missing package would read: say so
        error = missing[next(iter(unreadable_formats))]
        raise MissingPackageError(f"{root} holds only files whose reader is not installed. {error}")
    for fmt, skipped in unreadable_formats.items():
        log.skip_files(sorted(skipped), " ".join(str(missing[fmt]).split()))
    listing.files.sort()
    if not options.every_format:
        _leave_out_other_formats(listing, root, log, quiet=quiet)
    return listing


def _leave_out_other_formats(listing: _Listing, root: Path, log: ReadLog, *, quiet: bool) -> None:
    """Take out of ``listing`` the copies of pages it holds in another format too (:mod:`page_formats`)."""
    copies = page_formats.copies_in_other_formats(listing.files)
    if not copies:
        return
    listing.files = [file for file in listing.files if file not in copies]
    for file in copies:
        del listing.sizes[file]
    log.other_format_copies += len(copies)
    if not quiet:
        example = min(copies)
        more = f" and {len(copies) - 1} more" if len(copies) > 1 else ""
        logger.info(
            "Left out %s under %s, each a copy of a page read in another format beside it: %s (%s is read)%s; to "
            "read every copy, pass every_format=True (--every-format)",
            counted(len(copies), "file"),
            root,
            example.relative_to(root),
            copies[example].name,
            more,
        )


def snapshot(paths: Sequence[Path], options: ReadOptions) -> dict[str, tuple[int, int]]:
    """Each file ``paths`` would have read, by path, with its size and modification time: what a watch compares
    to see that something was added, changed or deleted (a path missing, or a folder that cannot be listed, has
    no entries)."""
    seen: dict[str, tuple[int, int]] = {}
    for path in paths:
        root = path.expanduser()
        try:
            # quiet: what the listing leaves out was said by the ingest, not again at every look
            files = list_files(root.resolve(), options, ReadLog(), quiet=True) if root.is_dir() else [root.resolve()]
            for file in files:
                status = file.stat()
                seen[str(file)] = (status.st_size, status.st_mtime_ns)
        except (OSError, MissingPackageError):  # gone, or unreadable now: the ingest that follows says which
            continue
    return seen


def _read_files(files: list[Path], root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
    for file in files:
        fmt = format_of(file, options.text_suffixes)
        assert fmt is not None, f"{file} was listed without a format"
        try:
            log.document_span = (0.0, 1.0)  # a record format sets each record's own
            yield from fmt.read(file.resolve(), root, options, log)
        except OSError as err:
            reason = f"it cannot be read ({err.strerror or err})"
            if options.on_error == "raise":  # Python's own "[Errno 13] Permission denied: ..." named no fix
                fix = "fix its permissions" if isinstance(err, PermissionError) else "check it"
                raise type(err)(f"{file}: {reason}; {fix}, or pass on_error='continue' to skip it") from err
            log.skip_file(file.resolve(), reason)
        # Counted once the consumer asks for the next document: every document of this file has been
        # handed on by then.
        log.files_done += 1
