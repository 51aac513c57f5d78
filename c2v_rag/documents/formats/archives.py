"""Archives (.zip, .tar, .tgz) and compressed files (.gz, .bz2, .xz): the documents of the files inside them.

Each file inside an archive is read by the format its own suffix names, as it would be in a folder: hidden files,
``exclude`` patterns (matched against the path under the folder, through the archive) and suffixes no format reads
are left out, and ``text_suffixes`` apply. A document from inside an archive is named by the archive's path and
the member's path under it (``/docs/export.zip/guide/intro.md``: its id and ``source``); its metadata says which
archive it came from (``archive``). A compressed file (``notes.md.gz``) is the one file it holds, named by its own
path; a folder's compressed files whose inner suffix no format reads (a ``changelog.gz``) are left out, as other
suffixes are.

Each member is extracted to a temporary file of its own name (deleted once read) and read from there, one at a
time, within the size limit (``max_file_bytes``) each; archives inside archives are read up to
:data:`MAX_NESTING` deep. A member that cannot be extracted (encrypted, damaged, an unsupported compression) is
skipped with the reason, and the archive marked incomplete, so that a sync keeps its points.
"""

from __future__ import annotations

import bz2
import contextvars
import dataclasses
import functools
import gzip
import itertools
import logging
import lzma
import tarfile
import tempfile
import zipfile
from abc import abstractmethod
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from c2v_rag.documents import sphinx_builds
from c2v_rag.documents.formats.base import FileFormat, SkipFile, over_limit, parse_or_skip
from c2v_rag.documents.formats.registry import AS_TEXT, format_of
from c2v_rag.documents.reading import ReadLog, ReadOptions, excluded, progress_weight
from c2v_rag.documents.source_document import SourceDocument

logger = logging.getLogger(__name__)

MAX_NESTING = 4
"""How many archives or messages deep a member is read (an archive in an archive in an archive..., a message
forwarded as an attachment of one forwarded...); deeper ones are skipped."""

# The members being read, outermost first: each one's temporary copy and the path it stands for.
_reading: contextvars.ContextVar[tuple[tuple[Path, Path], ...]] = contextvars.ContextVar("archive_members", default=())
_CHUNK = 1 << 20


class Stream(Protocol):
    """What a member's bytes are read through (a zip's, a tar's or a compressed file's stream)."""

    def read(self, size: int = -1, /) -> bytes: ...


@dataclass(frozen=True)
class Member:
    """A regular file inside an archive: its path there (``/``-separated, no leading ``./``), its size as the
    archive records it (None: unknown), and how to open its bytes."""

    name: str
    size: int | None
    open: Callable[[], AbstractContextManager[Stream]]


class Archive(FileFormat):
    """A file of files: :meth:`members` lists them, and each is read by its own format."""

    @abstractmethod
    def opened(self, file: Path) -> AbstractContextManager[Sequence[Member]]:
        """The archive's regular files, in the order they are read (raises as a damaged archive does): by name where
        the archive is read at random cheaply, else as stored."""

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        if len(_reading.get()) >= MAX_NESTING:
            log.skip_file(file, f"an archive nested more than {MAX_NESTING} deep inside others is not read")
            return
        opened = parse_or_skip(file, log, f"{file.suffix.lower()} archive", lambda: self.opened(file))
        if opened is None:
            return
        with opened as members:
            inside = [(PurePosixPath(member.name), member) for member in members]
            yield from read_inner(file, inside, root, options, log, {"archive": str(file)})


def read_inner(
    file: Path,
    inside: Sequence[tuple[PurePosixPath, Member]],
    root: str,
    options: ReadOptions,
    log: ReadLog,
    metadata: dict[str, Any],
    span: tuple[float, float] = (0.0, 1.0),
) -> Iterator[SourceDocument]:
    """The documents of the files held inside ``file`` (an archive's members, a message's attachments), each at its
    path inside it: hidden ones, those ``exclude`` leaves out (matched through ``file`` as through a folder) and
    those no format reads are left out, the others read by :func:`read_member` and named ``file/path``; ``span``
    is their share of ``file``, for progress."""
    if len(_reading.get()) >= MAX_NESTING:  # a message attached to a message attached to ... (archives stop earlier)
        log.skip_file(file, f"what it holds lies more than {MAX_NESTING} deep inside archives or messages: not read")
        return
    here = _relative(_real_path(file), root)
    other = 0
    builds = sphinx_builds.archived_builds([path for path, _ in inside])
    for (path, member), member_span in zip(inside, _spans(inside, span), strict=True):
        if any(part.startswith(".") for part in path.parts) or path.parts[0] == "__MACOSX":
            continue  # hidden, as in a folder; __MACOSX holds the resource forks macOS zips
        if options.exclude and excluded(here / path, options.exclude):
            continue
        if builds and sphinx_builds.generated(path, builds):
            continue
        if not _has_format(path, options.text_suffixes):
            other += 1
            continue
        yield from read_member(member, file.joinpath(*path.parts), root, options, log, metadata, member_span)
    if other:
        logger.info("Skipped %d files in %s that no format reads (text_suffixes, --text-suffix)", other, file)
    if builds:
        logger.info("%s, in %s", sphinx_builds.left_out(builds), file)


def _spans(inside: Sequence[tuple[PurePosixPath, Member]], span: tuple[float, float]) -> list[tuple[float, float]]:
    """Each member's share of ``span``, by its size where every member's is known (as a folder's files weigh on a
    progress bar), else equal shares."""
    known = [member.size for _, member in inside if member.size is not None]
    weights = [progress_weight(size) for size in known] if len(known) == len(inside) else [1] * len(inside)
    ends = list(itertools.accumulate(weights))
    width = (span[1] - span[0]) / ends[-1] if ends else 0.0
    return [(span[0] + (end - weight) * width, span[0] + end * width) for weight, end in zip(weights, ends)]


class ZipArchive(Archive):
    name = "ZIP archive"
    suffixes = (".zip",)

    def content_size(self, file: Path, size: int) -> int:
        try:  # the central directory alone, at the end of the file
            with zipfile.ZipFile(file) as archive:
                return max(size, sum(info.file_size for info in archive.infolist()))
        except (OSError, zipfile.BadZipFile, ValueError):  # reading says what is wrong with it
            return size

    def opened(self, file: Path) -> AbstractContextManager[Sequence[Member]]:
        return _ZipMembers(file)


class TarArchive(Archive):
    """A tar archive, compressed or not (tarfile finds gzip, bzip2 and xz itself)."""

    name = "tar archive"
    suffixes = (".tar", ".tgz", ".tbz2", ".txz")

    def content_size(self, file: Path, size: int) -> int:
        return gzip_content_size(file, size)

    def opened(self, file: Path) -> AbstractContextManager[Sequence[Member]]:
        return _TarMembers(file)


# A compressed file's suffix -> how to open what it holds: the suffixes CompressedFile takes.
_DECOMPRESSED: dict[str, Callable[[Path], AbstractContextManager[Stream]]] = {
    ".gz": lambda file: gzip.GzipFile(file, "rb"),
    ".bz2": lambda file: bz2.BZ2File(file, "rb"),
    ".xz": lambda file: lzma.LZMAFile(file, "rb"),
}
# A compressed file's type is the suffix under its own (notes.md.gz): the suffixes of files compressed alone.
COMPRESSED_SUFFIXES = frozenset(_DECOMPRESSED)


class CompressedFile(FileFormat):
    """One file compressed alone (``notes.md.gz``): read as the file it holds, by its inner suffix; a compressed
    tar (``docs.tar.gz``) as a tar archive."""

    name = "compressed file"
    suffixes = tuple(_DECOMPRESSED)

    def accepts(self, file: Path, text_suffixes: Collection[str]) -> bool:
        return _has_format(PurePosixPath(file.stem), text_suffixes)

    def content_size(self, file: Path, size: int) -> int:
        return gzip_content_size(file, size)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        if file.stem.lower().endswith(".tar"):
            yield from TarArchive().read(file, root, options, log)
            return
        member = Member(file.stem, None, lambda: _decompressed(file))
        yield from read_member(member, file, root, options, log, {})


def gzip_content_size(file: Path, size: int) -> int:
    """The size of what a gzip file holds, from its last four bytes (the size modulo 4 GiB, of its last member
    where it has several); ``size`` for a file that is not gzip (bzip2 and xz say theirs only by decompressing)."""
    try:
        with open(file, "rb") as stream:
            if stream.read(2) != b"\x1f\x8b" or size < 18:  # gzip's magic; its smallest file
                return size
            stream.seek(-4, 2)
            return max(size, int.from_bytes(stream.read(4), "little"))
    except OSError:  # reading says what is wrong with it
        return size


def read_member(
    member: Member,
    shown: Path,
    root: str,
    options: ReadOptions,
    log: ReadLog,
    metadata: dict[str, Any],
    span: tuple[float, float] = (0.0, 1.0),
) -> Iterator[SourceDocument]:
    """The documents of ``member``, read by its suffix's format from a temporary copy and named as ``shown`` (the
    archive's path and the member's under it), ``metadata`` added to each; ``span`` is the member's share of the
    archive, for progress (``log.document_span``)."""
    # None only for a compressed file reached through a link of another name (NEWS.rst.gz -> changelog.gz, as
    # Debian's docs have them): the link's inner suffix was readable, so it is read as text, which refuses binaries.
    fmt = format_of(Path(PurePosixPath(member.name).name), options.text_suffixes) or AS_TEXT
    missing = fmt.missing()
    if missing is not None:
        log.skip_file(shown, " ".join(str(missing).split()))
        return
    limit = options.max_file_bytes
    if limit is not None and member.size is not None and member.size > limit:
        log.skip_file(shown, over_limit(member.size, limit))
        return
    with tempfile.TemporaryDirectory(prefix="c2v-archive-") as folder:
        copy = Path(folder) / _safe_name(member.name)
        try:
            written = _extract(member, copy, limit)
        except SkipFile as skip:
            log.skip_file(shown, str(skip))
            return
        except gzip.BadGzipFile as err:  # an OSError, but of the data, not of the disk
            log.skip_file(shown, f"it cannot be extracted ({err})")
            return
        except OSError:
            raise
        except Exception as err:  # noqa: BLE001 - a damaged member fails in zlib, bz2, lzma or zipfile, in many ways
            log.skip_file(shown, f"it cannot be extracted ({type(err).__name__}: {err})")
            return
        if written is None and limit is not None:
            log.skip_file(shown, over_limit(None, limit))
            return
        renamed = _Renamed(copy, shown)
        token = _reading.set((*_reading.get(), (copy, shown)))
        try:
            member_log = _MemberLog(log, renamed)
            for doc in fmt.read(copy, root, options, member_log):
                # Where the document lies in the archive: its place in the member, within the member's share.
                start, end = member_log.document_span
                log.document_span = (span[0] + start * (span[1] - span[0]), span[0] + end * (span[1] - span[0]))
                yield renamed.document(doc, metadata)
        finally:
            _reading.reset(token)


class _Renamed:
    """A member's temporary copy's path, in ids, sources, metadata and messages, replaced by the path it stands
    for."""

    def __init__(self, copy: Path, shown: Path) -> None:
        self.pairs = ((copy.as_posix(), shown.as_posix()), (str(copy), str(shown)))
        self.names = (copy.name, shown.name)

    def text(self, text: str) -> str:
        for old, new in self.pairs:
            text = text.replace(old, new)
        return text

    def document(self, doc: SourceDocument, metadata: dict[str, Any]) -> SourceDocument:
        fields = {key: self.text(value) if isinstance(value, str) else value for key, value in doc.metadata.items()}
        if fields.get("file_name") == self.names[0]:  # the copy's name: the member's, or the compressed file's
            fields["file_name"] = self.names[1]
        for key, value in metadata.items():
            fields.setdefault(key, value)  # a document of an archive inside this one names the innermost archive
        source = self.text(doc.source) if doc.source is not None else None
        return dataclasses.replace(doc, doc_id=self.text(doc.doc_id), metadata=fields, source=source)


class _MemberLog(ReadLog):
    """The log a member's reader writes to: what it skips goes to the archive's log, named by the member's path
    in the archive, not by its temporary copy."""

    def __init__(self, parent: ReadLog, renamed: _Renamed) -> None:
        super().__init__()
        self.parent, self.renamed = parent, renamed

    def shown(self, path: Path | str) -> str:
        return self.parent.shown(self.renamed.text(str(path)))

    def skip_file(self, path: Path | str, reason: str, *, incomplete: bool = True) -> None:
        self.parent.skip_file(self.renamed.text(str(path)), self.renamed.text(reason), incomplete=incomplete)

    def skip_files(self, paths: Sequence[Path], reason: str) -> None:
        self.parent.skip_files([Path(self.renamed.text(str(p))) for p in paths], self.renamed.text(reason))

    def skip_record(self, where: str, file: Path | str | None, reason: str) -> None:
        renamed = None if file is None else self.renamed.text(str(file))
        self.parent.skip_record(self.renamed.text(where), renamed, self.renamed.text(reason))


class _ZipMembers(AbstractContextManager[Sequence[Member]]):
    def __init__(self, file: Path) -> None:
        self.archive = zipfile.ZipFile(file)

    def __enter__(self) -> Sequence[Member]:
        latest = {}  # a name stored twice: the later copy, as unzip keeps it
        for info in self.archive.infolist():
            name = _normal(info.filename)
            if name and not info.is_dir():
                latest[name] = info
        ordered = sorted(latest.items())
        return [Member(name, info.file_size, functools.partial(self._open, info)) for name, info in ordered]

    def _open(self, info: zipfile.ZipInfo) -> AbstractContextManager[Stream]:
        if info.flag_bits & 0x1:
            raise SkipFile("it is encrypted (password-protected): extract it with its password to read it")
        return self.archive.open(info)

    def __exit__(self, *exc: object) -> None:
        self.archive.close()


class _TarMembers(AbstractContextManager[Sequence[Member]]):
    def __init__(self, file: Path) -> None:
        self.archive = tarfile.open(file, mode="r:*")
        try:  # the whole listing now, inside the caller's parse_or_skip: a truncated or damaged tar fails here
            infos = self.archive.getmembers()
        except BaseException:
            self.archive.close()
            raise
        latest = {}
        for info in infos:
            name = _normal(info.name)
            if name and info.isfile():  # links, devices and folders hold no document
                latest[name] = info
        # In the order they are stored: a compressed tar is a stream, and reading a member before one already read
        # decompresses it from its start again.
        ordered = sorted(latest.items(), key=lambda item: item[1].offset_data)
        self.members = [Member(name, info.size, functools.partial(self._open, info)) for name, info in ordered]

    def __enter__(self) -> Sequence[Member]:
        return self.members

    def _open(self, info: tarfile.TarInfo) -> AbstractContextManager[Stream]:
        handle = self.archive.extractfile(info)
        if handle is None:
            raise SkipFile("it is not a regular file in the archive")
        return handle

    def __exit__(self, *exc: object) -> None:
        self.archive.close()


def _decompressed(file: Path) -> AbstractContextManager[Stream]:
    return _DECOMPRESSED[file.suffix.lower()](file)


def compressed_head(file: Path, size: int) -> bytes:
    """The first ``size`` bytes of what the compressed file ``file`` (``.gz``, ``.bz2``, ``.xz``) holds; OSError
    when it cannot be read or is not what its suffix says."""
    try:
        with _decompressed(file) as stream:
            return stream.read(size)
    except (EOFError, lzma.LZMAError) as err:  # a truncated stream, xz's own errors: not OSErrors
        raise OSError(f"{file}: {err}") from err


def _extract(member: Member, copy: Path, limit: int | None) -> int | None:
    """Copy ``member``'s bytes to ``copy``: their count, or None when they run past ``limit`` (a size the archive
    understated, or a compressed file's, which is known only once read)."""
    written = 0
    with member.open() as source, copy.open("wb") as target:
        while chunk := source.read(_CHUNK):
            written += len(chunk)
            if limit is not None and written > limit:
                return None
            target.write(chunk)
    return written


def _normal(name: str) -> str:
    """A member's path as read here: ``/``-separated, without a leading ``./`` or ``/``, ``..`` parts dropped
    (they name nothing inside the archive; the copy is written under a name of its own anyway)."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    return "/".join(parts)


def _safe_name(name: str) -> str:
    """The file name a member's temporary copy gets: its own, so that its reader sees its suffix and name."""
    base = PurePosixPath(name).name
    return base if base and len(base.encode()) <= 200 else f"member{PurePosixPath(name).suffix[:20]}"


def _has_format(path: PurePosixPath, text_suffixes: Collection[str]) -> bool:
    return format_of(Path(path.name), text_suffixes) is not None


def _real_path(file: Path) -> Path:
    """The path ``file`` (an archive's temporary copy, or a real file) stands for, through every archive around it."""
    for copy, shown in reversed(_reading.get()):
        if file == copy or copy in file.parents:
            file = shown.joinpath(file.relative_to(copy))
    return file


def _relative(file: Path, root: str) -> PurePosixPath:
    """``file``'s path under the folder the caller named (its name alone when the caller named it)."""
    try:
        return PurePosixPath(file.relative_to(root).as_posix())
    except ValueError:
        return PurePosixPath(file.name)


__all__ = [
    "MAX_NESTING",
    "Archive",
    "CompressedFile",
    "Member",
    "Stream",
    "TarArchive",
    "ZipArchive",
    "compressed_head",
    "read_inner",
    "read_member",
]
