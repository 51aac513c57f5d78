"""Files of records, one document per record: JSONL lines and Parquet rows (``from_record``: the text field, an id
field or ``path:n``, the other scalar fields as metadata)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from c2v_rag.core.extras import Requirement
from c2v_rag.documents.formats.base import FileFormat, opens_as_text
from c2v_rag.documents.payload_keys import RECORD_METADATA_KEY
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument, from_record

# (where, record, span): span is the share of the file before the record and up to its end, for progress.
Span = tuple[float, float]


class Jsonl(FileFormat):
    name = "JSONL"
    suffixes = (".jsonl",)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        from c2v_rag.core.jsonl import iter_jsonl_spans

        if not opens_as_text(file, log):
            return

        def bad_line(number: int, err: ValueError) -> None:
            if options.on_error == "raise":
                raise err
            where = f"{file}:{number}"
            log.skip_record(where, file, _reason(where, err))

        size = file.stat().st_size or 1
        records = (
            (f"{file}:{n}", r, (min(1.0, start / size), min(1.0, end / size)))  # a file growing as it is read
            for n, (start, end), r in iter_jsonl_spans(file, on_error=bad_line)
        )
        yield from record_documents(records, file, root, options, log)


class Parquet(FileFormat):
    name = "Parquet"
    suffixes = (".parquet",)
    requires = (Requirement("pyarrow", "pyarrow", "parquet"),)

    def refuses(self, file: Path) -> str | None:
        """An ``embed`` file: its rows are chunks with their vectors, which read as documents would be chunked and
        embedded again (its footer tells, read without the rows)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            metadata = pq.read_schema(file).metadata
        except (OSError, pa.ArrowException):
            return None  # not readable as Parquet: reading it says so
        return self._refusal(metadata, file)

    @staticmethod
    def _refusal(metadata: dict[bytes, bytes] | None, file: Path) -> str | None:
        if RECORD_METADATA_KEY.encode() not in (metadata or {}):
            return None
        return (
            "it holds the chunks and vectors that c2v-rag embed wrote, not documents; store them with "
            f"`c2v-rag load {file.parent}` (c2v_rag.load_embedded), which does not embed them again"
        )

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        from c2v_rag.core.extras import require

        parquet = require("pyarrow.parquet", "reading .parquet files", "parquet", distribution="pyarrow")
        with file.open("rb") as handle:
            head = handle.read(4)
        if head != b"PAR1":
            log.skip_file(file, "not a Parquet file (no PAR1 signature)")
            return
        table = parquet.ParquetFile(file)
        if (reason := self._refusal(table.schema_arrow.metadata, file)) is not None:  # written since it was listed
            if options.on_error == "raise":
                raise ValueError(f"{file}: {reason}")
            log.skip_file(file, reason)
            return
        rows = (record for batch in table.iter_batches(batch_size=1024) for record in batch.to_pylist())
        total = table.metadata.num_rows or 1
        records = ((f"{file}:{n}", r, ((n - 1) / total, n / total)) for n, r in enumerate(rows, start=1))
        yield from record_documents(records, file, root, options, log)


def record_documents(
    records: Iterator[tuple[str, dict, Span]], file: Path, root: str, options: ReadOptions, log: ReadLog
) -> Iterator[SourceDocument]:
    """Documents from ``(where, record, span)`` triples; a bad record is skipped and logged, or raised under
    ``on_error="raise"``."""
    for where, record, span in records:
        try:
            doc = from_record(record, where, default_id=where, source=str(file))
        except (ValueError, TypeError) as err:
            if options.on_error == "raise":
                raise
            log.skip_record(where, file, _reason(where, err))
            continue
        log.document_span = span
        yield doc.with_root(root)


def _reason(where: str, err: Exception) -> str:
    """``err``'s message as the reason a record at ``where`` was skipped: without ``where`` in front, which the
    messages carry for the error a run raises, and the log names already ("Skipped the record F:4: F:4 is not
    valid JSON")."""
    message = str(err)
    if not message.startswith(where):
        return message
    rest = message[len(where) :]
    return f"it{rest}" if rest.startswith(" ") else rest
