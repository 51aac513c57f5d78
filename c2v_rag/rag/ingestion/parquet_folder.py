"""An ``embed`` folder: the Parquet files that runs of ``embed`` wrote there, and the settings they were written with.

Each file records, in its schema's metadata under ``c2v_rag``, the run's record: the model's fingerprint, as a
collection records it (:func:`~c2v_rag.store.collection.config_fingerprint`: weights, part weights, truncation,
quantization, the decoder tokens read and the chunks' lead), and how the chunks were cut (``chunk_size``,
``chunk_overlap``). A run into a folder that holds such files resumes it: with the same model and settings it embeds
only the chunks whose point ids no file holds yet, and writes them into new files beside the old ones. A run with
other settings is refused before any work (the folder would hold vectors that cannot be compared, or documents cut
two ways), and so is a folder with Parquet files ``embed`` did not write (nothing is overwritten).

A run holds the folder's lock (``.embed.lock``) from reading it to its last file: a second run into the same folder
is refused at once, not left to read the first one's files half written or to write under the same names.

The local engine writes each file under a hidden name (``.part-00003.parquet.inprogress``) and renames it once it is
closed, so that a run killed outright (SIGKILL, a lost machine) leaves no file cut short, only that hidden one, which
the next run deletes and whose chunks it embeds again; a Ctrl-C closes the file and keeps its rows. Ray writes its
own files: once a stopped Ray run's tasks are gone, the files they left cut short are deleted (:meth:`drop_cut_files`);
one that a run killed outright left cannot be read, and is named in the error that refuses the folder.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from c2v_rag.store.collection import FINGERPRINT_METADATA_KEY, fingerprint_differences
from c2v_rag.store.errors import StoreLockedError
from c2v_rag.store.point_id_set import PointIdSet

logger = logging.getLogger(__name__)

# The schema metadata key of each file's record (the one a collection's metadata uses).
RECORD_KEY = FINGERPRINT_METADATA_KEY.encode()
# A run's record beyond the model's fingerprint: what decides how its documents were cut into chunks (and so their
# point ids). chunk_context and decoder_max_length are in the fingerprint; document_prompt is compared here, as a
# collection only records it.
CHUNKING_FIELDS = ("chunk_size", "chunk_overlap", "chunk_context", "decoder_max_length", "document_prompt")
# The local engine's file names, and the hidden name a file has while it is written.
PART_NAME = re.compile(r"part-(\d+)\.parquet")
IN_PROGRESS = ".inprogress"
# The file a run locks, in the folder (hidden: Parquet readers of the folder skip it).
LOCK_NAME = ".embed.lock"


def part_name(number: int) -> str:
    """The name of the local engine's ``number``-th file: ``part-00000.parquet``, ..."""
    return f"part-{number:05d}.parquet"


def in_progress(path: Path) -> Path:
    """The hidden name ``path`` has while it is written (Parquet readers of the folder skip names that start with
    a dot)."""
    return path.with_name(f".{path.name}{IN_PROGRESS}")


@dataclass(frozen=True)
class EmbedFolder:
    """A folder ``embed`` writes to, as it stands before a run: ``files`` are the Parquet files earlier runs wrote
    there, ``recorded`` their record (None: no such file), ``stored`` the point ids they hold."""

    path: Path
    recorded: dict[str, Any] | None = None
    stored: PointIdSet = field(default_factory=PointIdSet)
    files: tuple[Path, ...] = ()

    @classmethod
    @contextlib.contextmanager
    def locked(cls, out: str | Path) -> Iterator[EmbedFolder]:
        """The folder ``out`` (created if need be) as it stands, held for the block: another run into it is refused
        until the block ends (:class:`~c2v_rag.store.errors.StoreLockedError`, at once)."""
        folder = Path(out).expanduser()
        if folder.exists() and not folder.is_dir():
            raise NotADirectoryError(f"out={folder} is a file; pass a folder for the Parquet files")
        folder.mkdir(parents=True, exist_ok=True)
        with _held(
            folder, f"another embed (or a load) is using {folder}", "wait for it to end, or pass another folder"
        ):
            yield cls.read(folder, fix="pass a new or empty folder (nothing is overwritten)")

    @classmethod
    @contextlib.contextmanager
    def loading(cls, path: str | os.PathLike[str]) -> Iterator[EmbedFolder]:
        """The folder ``path`` that runs of ``embed`` wrote, as it stands, to read its vectors (not its ids) in the
        block: an embed run into it meanwhile is refused, as is this while one writes (where the folder is read-only,
        no lock is taken)."""
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(
                f"{folder} is not a folder; pass the folder (--out) that c2v-rag embed wrote"
                if folder.exists()
                else f"{folder} does not exist; pass the folder (--out) that c2v-rag embed wrote"
            )
        with _held(
            folder, f"another embed or load is using {folder}", "load it once that run has ended", optional=True
        ):
            fix = "move the other files out, or load each run's files from a folder of their own"
            held = cls.read(folder, ids=False, fix=fix)
            if not held.files:
                raise FileNotFoundError(
                    f"{folder} holds no Parquet files; pass the folder (--out) that c2v-rag embed wrote"
                )
            yield held

    @classmethod
    def read(cls, folder: Path, *, ids: bool = True, fix: str = "pass a new or empty folder") -> EmbedFolder:
        """What ``folder`` holds (the schema of each file, and with ``ids`` its ``id`` column), refusing a Parquet file
        that cannot be read or that ``embed`` did not write, and files of two records (``fix``: what the error tells
        the caller to do then). Read it under :meth:`locked`."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        files = tuple(sorted(folder.glob("*.parquet"))) if folder.is_dir() else ()
        if not files:
            return cls(folder)
        recorded: dict[str, Any] | None = None
        for file in files:
            try:
                raw = (pq.read_schema(file).metadata or {}).get(RECORD_KEY)
            except (OSError, pa.ArrowException) as err:
                raise ValueError(
                    f"{file} cannot be read as Parquet ({err}); a run stopped while writing it? Delete it (the next "
                    "run embeds its chunks again), or pass a new folder"
                ) from None
            if raw is None:
                raise FileExistsError(f"{folder} holds Parquet files that embed did not write ({file.name}); {fix}")
            record = json.loads(raw)
            if recorded is None:
                recorded = record  # the first file's, which later runs were checked against
            elif differ := differences(recorded, record):
                raise ValueError(
                    f"{folder} holds Parquet files written with different settings ({file.name}: "
                    f"{', '.join(differ)}); {fix}"
                )
        stored = (
            PointIdSet.from_arrow(
                batch.column(0) for file in files for batch in pq.ParquetFile(file).iter_batches(columns=["id"])
            )
            if ids
            else PointIdSet()
        )
        return cls(folder, recorded, stored, files)

    def check(self, record: Mapping[str, Any]) -> None:
        """Refuse a run whose ``record`` (:func:`embed_record`) differs from the folder's in what makes its vectors
        comparable or its chunks the same."""
        if self.recorded is None:
            return
        if differ := differences(self.recorded, record):
            raise ValueError(
                f"{self.path} holds chunks that embed wrote with other settings "
                f"({', '.join(f'{f}={self.recorded.get(f)!r}' for f in differ)}; this run has "
                f"{', '.join(f'{f}={record.get(f)!r}' for f in differ)}): resuming would mix vectors that cannot be "
                "compared, or documents cut two ways. Re-run with the model and settings that wrote it, or pass a "
                "new folder"
            )

    def prepare(self) -> None:
        """Delete the hidden files a killed run left half written (their chunks are embedded again): under
        :meth:`locked`, no other run is writing them."""
        for left in self.path.glob(f".part-*.parquet{IN_PROGRESS}"):
            logger.info("Deleting %s, which a stopped run left half written; its chunks are embedded again", left)
            left.unlink(missing_ok=True)

    def drop_cut_files(self) -> list[Path]:
        """Delete the Parquet files that appeared since the folder was read and cannot be read (a Ray run stopped
        while its tasks wrote them; call it once they are stopped); returns the files kept, which are whole."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        kept = []
        for file in sorted(set(self.path.glob("*.parquet")) - set(self.files)):
            try:
                pq.read_schema(file)
            except (OSError, pa.ArrowException):
                logger.warning(
                    "Deleting %s, which the stopped run left half written; its chunks are embedded again", file
                )
                file.unlink(missing_ok=True)
            else:
                kept.append(file)
        return kept

    def next_part(self) -> int:
        """The number of the local engine's next file: after the highest of the files already there."""
        numbers = [int(m.group(1)) for f in self.files if (m := PART_NAME.fullmatch(f.name))]
        return max(numbers) + 1 if numbers else 0


@contextlib.contextmanager
def _held(folder: Path, busy: str, fix: str, *, optional: bool = False) -> Iterator[None]:
    """The folder's lock for the block; :class:`~c2v_rag.store.errors.StoreLockedError` (``busy``; ``fix``) at once
    where another run holds it. ``optional``: go on without it where the lock file cannot be made (a read-only
    folder)."""
    from filelock import FileLock, Timeout

    lock = FileLock(folder / LOCK_NAME)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise StoreLockedError(f"{busy} (it holds {folder / LOCK_NAME}); {fix}") from None
    except OSError:
        if not optional:
            raise
        logger.debug("Reading %s without its lock: the folder is read-only", folder)
        held = False
    else:
        held = True
    try:
        yield
    finally:
        if held:
            lock.release()


def differences(recorded: Mapping[str, Any], record: Mapping[str, Any]) -> list[str]:
    """The fields on which two runs' records differ in what makes their vectors comparable (as a collection decides:
    float and int8 vectors of one model mix) or their chunks the same."""
    return fingerprint_differences(recorded, record) + [f for f in CHUNKING_FIELDS if recorded.get(f) != record.get(f)]


def embed_record(fingerprint: Mapping[str, Any], chunk_size: int, chunk_overlap: int) -> dict[str, Any]:
    """What each file of a run records: the model's ``fingerprint`` and the chunking settings."""
    return {**fingerprint, "chunk_size": chunk_size, "chunk_overlap": chunk_overlap}


def record_fingerprint(record: Mapping[str, Any]) -> dict[str, Any]:
    """The model's fingerprint in a run's ``record`` (:func:`embed_record`): what a collection of its vectors
    records."""
    return {k: v for k, v in record.items() if k not in ("chunk_size", "chunk_overlap")}


def with_record(table: Any, record: Mapping[str, Any]) -> Any:
    """``table`` (a ``pyarrow.Table`` of :func:`~c2v_rag.rag.ingestion.parquet_rows.chunk_table`) with ``record`` in
    its schema's metadata, which every Parquet file written from it keeps."""
    return table.replace_schema_metadata({RECORD_KEY: json.dumps(record, sort_keys=True).encode()})
