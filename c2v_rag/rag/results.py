"""What an ingest did: :class:`IngestResult`, with the batches that failed (:class:`FailedBatch`) and the inputs it
skipped (:class:`SkippedInput`); what an ``embed`` wrote: :class:`EmbedResult`. Both report what reading skipped and
left out alike (:class:`ReadingReport`)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from c2v_rag.core.wording import counted

# Defined with the reading that records it (a ReadLog); re-exported here, with the results that list it.
from c2v_rag.documents.files import ReadLog, SkippedInput, not_read_words

# What a result says of the files of other types its folders held.
_FILES_NOT_READ = (
    "files of the folders read that no format reads, by suffix ('' for none; a compressed file's inner one), left "
    "out: text_suffixes reads such files as plain text"
)


_OTHER_FORMATS = (
    "files of the folders read left out as copies of a page read in another format beside them (every_format reads "
    "them)"
)


def _copies_words(copies: int) -> str:
    """``; left out 2 copies of pages read in another format``, or nothing when there were none."""
    return f"; left out {counted(copies, 'copy', 'copies')} of pages read in another format" if copies else ""


def _not_read_words(counts: dict[str, int]) -> str:
    """``; not read: 57 files of other types (no suffix (43), .sed (2))``, or nothing when there were none."""
    words = not_read_words(counts)
    return f"; {words}" if words else ""


class FailedBatch(BaseModel):
    """A batch that could not be embedded or written, after retries."""

    doc_ids: list[str]
    chunks: int
    error: str


class ReadingReport(BaseModel):
    """What reading the inputs skipped and left out, as an ingest and an ``embed`` report it (from their
    :class:`~c2v_rag.documents.files.ReadLog`)."""

    files_skipped: int = 0
    records_skipped: int = 0
    skipped: list[SkippedInput] = Field(default_factory=list, description="the first 1,000 skipped inputs")
    files_not_read: dict[str, int] = Field(default_factory=dict, description=_FILES_NOT_READ)
    files_in_other_formats: int = Field(default=0, description=_OTHER_FORMATS)

    def record_reading(self, log: ReadLog) -> None:
        """Take what reading skipped and left out from ``log``."""
        self.files_skipped = log.files_skipped
        self.records_skipped = log.records_skipped
        self.skipped = list(log.skipped)
        self.files_not_read = dict(log.not_read)
        self.files_in_other_formats = log.other_format_copies

    def _skipped_words(self) -> str:
        """``; skipped 2 files and 1 record``, or nothing when none was."""
        skipped = [
            counted(n, what) for n, what in ((self.files_skipped, "file"), (self.records_skipped, "record")) if n
        ]
        return f"; skipped {' and '.join(skipped)}" if skipped else ""

    def _left_out_words(self) -> str:
        """The copies and the files of other types left out, as the summary's last words (or nothing)."""
        return _copies_words(self.files_in_other_formats) + _not_read_words(self.files_not_read)


class IngestResult(ReadingReport):
    """What an ingest did. ``chunks_unchanged`` were already stored and skipped."""

    collection: str
    location: str
    documents: int = 0
    duplicate_documents: int = 0
    empty_documents: int = Field(
        default=0, description="documents with no text to embed (an empty file, blank lines alone): no chunk"
    )
    documents_unchanged: int = Field(
        default=0, description="documents the collection held whole under the same hash: skipped before chunking"
    )
    documents_changed: int = Field(
        default=0,
        description="documents the collection held whole under another hash (edited since, or chunked another "
        "way), whose chunks this run replaced (counted by the in-process engine, whose lookup sees them)",
    )
    old_chunks_deleted: int = Field(
        default=0,
        description="chunks of the changed documents (and of documents a cut-off run left half stored) that their "
        "new chunks replaced, deleted once those were all stored",
    )
    chunks: int = 0
    chunks_written: int = 0
    chunks_unchanged: int = 0
    failed: list[FailedBatch] = Field(default_factory=list)
    documents_deleted: int = Field(default=0, description="documents gone from their source, deleted by a sync")
    chunks_deleted: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Every batch that was read got stored. Inputs skipped on purpose (files that are not
        text or over ``max_file_bytes``, and with ``on_error="continue"`` unreadable files and bad
        records) do not make it False: they are counted in ``files_skipped``/``records_skipped``,
        listed in ``skipped`` and were warned about one by one."""
        return not self.failed

    @property
    def chunks_per_second(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        notes = [f"{self.documents_unchanged} unchanged"] if self.documents_unchanged else []
        if self.documents_changed:  # a re-run after an edit: the old version's chunks went
            notes.append(f"{self.documents_changed} changed")
        if self.duplicate_documents:  # a file met twice (through a link, or named twice) is stored once
            notes.append(f"{self.duplicate_documents} more met twice, stored once")
        if self.empty_documents:  # "2 documents, 0 chunks" said nothing of why
            notes.append(f"{self.empty_documents} with no text")
        unchanged = f" ({', '.join(notes)})" if notes else ""
        text = (
            f"{counted(self.documents, 'document')}{unchanged}, {counted(self.chunks, 'chunk')} "
            f"({self.chunks_written} written, {self.chunks_unchanged} unchanged) into {self.collection!r} at "
            f"{self.location} in {self.seconds:.1f} s ({self.chunks_per_second:.1f} chunks/s)"
        )
        if self.old_chunks_deleted:
            text += f"; deleted {counted(self.old_chunks_deleted, 'chunk')} of the documents' earlier versions"
        text += self._skipped_words()
        if self.documents_deleted:
            deleted = f"{counted(self.documents_deleted, 'document')} ({counted(self.chunks_deleted, 'chunk')})"
            text += f"; sync deleted {deleted}"
        if self.failed:
            text += f"; {counted(len(self.failed), 'batch', 'batches')} failed"
        return text + self._left_out_words()


class EmbedResult(ReadingReport):
    """What an ``embed`` wrote: ``files`` and ``chunks`` are this run's; ``unchanged`` counts the chunks that files
    already in the folder held, which were not embedded again."""

    out: str
    files: list[str] = Field(default_factory=list)
    documents: int = 0
    duplicate_documents: int = 0
    chunks: int = 0
    unchanged: int = 0
    seconds: float = 0.0

    @property
    def chunks_per_second(self) -> float:
        """The chunks done (written, or found already there) a second, as an ingest counts unchanged ones and
        as the progress bar shows it."""
        return (self.chunks + self.unchanged) / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        counts = counted(self.chunks, "chunk")
        if self.unchanged:
            total = counted(self.chunks + self.unchanged, "chunk")
            counts = f"{total} ({self.chunks} written, {self.unchanged} already there)"
        text = (
            f"{counted(self.documents, 'document')}, {counts} into {counted(len(self.files), 'Parquet file')} under "
            f"{self.out} in {self.seconds:.1f} s ({self.chunks_per_second:.1f} chunks/s)"
        )
        return text + self._skipped_words() + self._left_out_words()
