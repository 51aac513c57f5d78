"""Delimited tables (CSV and TSV): one document per row, the first row the header.

A table with a text column (``text``, ``page_content``, ``content`` or ``body``, as JSONL records have) is a file of
records and reads as JSONL does: that column is the text, ``id`` the id, ``title`` leads the text and the other
columns become metadata. Any other table (an FAQ export, a spreadsheet of products or tickets) reads as LangChain's
and LlamaIndex's CSV loaders read it: each row is its ``column: value`` lines, empty cells left out, so that a
question finds the row by any of its cells.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from pathlib import Path

from c2v_rag.documents.formats.base import FileFormat, read_text
from c2v_rag.documents.formats.records import Span, record_documents
from c2v_rag.documents.payload_keys import ROW_KEY
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import TEXT_KEYS, SourceDocument

# The delimiters a .csv may use (Excel writes ";" where the decimal mark is a comma).
_CSV_DELIMITERS = ",;\t|"


class DelimitedTable(FileFormat):
    name = "CSV"
    suffixes = (".csv", ".tsv")

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        text = read_text(file, options, log)
        if text is None:
            return
        dialect = table_dialect(text, tab_separated=file.suffix.lower() == ".tsv")
        # A cell may hold a whole document; csv's default limit (128 KiB a cell) would stop at the first long one.
        csv.field_size_limit(max(csv.field_size_limit(), len(text)))
        rows = csv.reader(io.StringIO(text, newline=""), dialect)
        try:
            header = column_names(next(rows, []))
        except csv.Error as err:
            log.skip_file(file, f"not a readable table: {err}")
            return
        if not any(header):
            log.skip_file(file, "its first row, the header that names the columns, is empty")
            return
        lines = text.count("\n") + (not text.endswith("\n")) or 1
        records = _row_records(rows, lambda: rows.line_num, header, lines, file, options, log)
        yield from record_documents(records, file, root, options, log)


def table_dialect(text: str, tab_separated: bool) -> type[csv.Dialect]:
    """The CSV dialect of ``text``: Excel's quoting (double quotes, doubled inside a cell) with tabs for a .tsv,
    and for a .csv the delimiter (``,;\t|``) its header line holds most of (a comma where it holds none).

    The header decides because it is one line of short names; ``csv.Sniffer`` reads the rows too and misreads
    cells that span lines or hold quotes."""
    if tab_separated:
        return csv.excel_tab
    header = text[: text.find("\n") if "\n" in text else len(text)]
    counts = {delimiter: header.count(delimiter) for delimiter in _CSV_DELIMITERS}
    delimiter = max(counts, key=lambda d: counts[d]) if any(counts.values()) else ","
    return type("Table", (csv.excel,), {"delimiter": delimiter})


def column_names(header: list[str]) -> list[str]:
    """The header's cells as column names: trimmed, a blank one named by its place (``column 3``), a repeated
    one numbered (``price (2)``) so that no cell of a row is lost under another's name."""
    names: list[str] = []
    for place, cell in enumerate(header, start=1):
        name = cell.strip() or f"column {place}"
        base, copy = name, 1
        while name in names:
            copy += 1
            name = f"{base} ({copy})"
        names.append(name)
    return names if any(cell.strip() for cell in header) else []


def _row_records(
    rows: Iterator[list[str]],
    lines_read: Callable[[], int],
    header: list[str],
    lines: int,
    file: Path,
    options: ReadOptions,
    log: ReadLog,
) -> Iterator[tuple[str, dict, Span]]:
    """``(where, record, span)`` for each row that holds a value: a record of its cells when the table has a
    text column, else one whose text is the row's ``column: value`` lines. ``lines_read()`` is how many lines of
    the file's ``lines`` the reader has taken (a quoted cell spans several), for the row's span."""
    has_text_column = any(key in header for key in TEXT_KEYS)
    end = 1 / lines
    number = 0
    while True:
        try:
            row = next(rows, None)
        except csv.Error as err:  # a NUL, an unclosed quote: nothing after it can be read as rows
            _bad_row(f"{file}:{number + 1}", f"the table cannot be read from this row on: {err}", file, options, log)
            return
        if row is None:
            return
        number += 1
        start, end = end, min(1.0, lines_read() / lines)
        if not any(cell.strip() for cell in row):
            continue
        where = f"{file}:{number}"
        if len(row) > len(header):
            reason = f"it has {len(row)} cells and the header {len(header)} (quote cells that hold the delimiter)"
            _bad_row(where, reason, file, options, log)
            continue
        cells = {name: value for name, value in zip(header, row, strict=False) if value.strip()}
        if has_text_column:
            yield where, cells, (start, end)
        else:
            lines_of_cells = "\n".join(f"{name}: {value.strip()}" for name, value in cells.items())
            yield where, {"text": lines_of_cells, ROW_KEY: number}, (start, end)


def _bad_row(where: str, reason: str, file: Path, options: ReadOptions, log: ReadLog) -> None:
    """A row that cannot be read: raised under ``on_error="raise"``, else skipped and counted."""
    if options.on_error == "raise":
        raise ValueError(f"{where}: {reason}")
    log.skip_record(where, file, reason)
