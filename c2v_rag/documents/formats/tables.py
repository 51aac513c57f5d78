"""Tables: CSV and TSV files and Excel workbooks (.xlsx, and .xls as Excel 97-2003 wrote them), one document per row,
the first row the header.

A table with a text column (``text``, ``page_content``, ``content`` or ``body``, as JSONL records have) is a file of
records and reads as JSONL does: that column is the text, ``id`` the id, ``title`` leads the text and the other
columns become metadata. Any other table (an FAQ export, a spreadsheet of products or tickets) reads as LangChain's
and LlamaIndex's CSV loaders read it: each row is its ``column: value`` lines, empty cells left out, so that a
question finds the row by any of its cells. A workbook's sheets are tables of their own, each with its header.
"""

from __future__ import annotations

import csv
import datetime
import io
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from c2v_rag.core.extras import Requirement
from c2v_rag.documents.formats.base import FileFormat, SkipFile, checked_text, parse_file
from c2v_rag.documents.formats.records import Span, record_documents
from c2v_rag.documents.payload_keys import ROW_KEY, SHEET_KEY
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.sniffing import whole_lines
from c2v_rag.documents.source_document import TEXT_KEYS, SourceDocument

logger = logging.getLogger(__name__)

# The delimiters a .csv may use (Excel writes ";" where the decimal mark is a comma).
_CSV_DELIMITERS = ",;\t|"
# The head of a CSV file its encoding and delimiter are found from.
_HEAD_BYTES = 256 * 1024
# The longest cell read (csv's field_size_limit is a C long; 2**31 - 1 fits every platform's).
_MAX_CELL_CHARS = 2**31 - 1


class DelimitedTable(FileFormat):
    name = "CSV"
    suffixes = (".csv", ".tsv")

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        # Streamed, as JSONL is, with no size limit: the encoding and the delimiter come from the file's head.
        with file.open("rb") as handle:
            head = handle.read(_HEAD_BYTES)
        decoded = checked_text(file, whole_lines(head) if len(head) == _HEAD_BYTES else head, options, log)
        if decoded is None:
            return
        dialect = table_dialect(decoded.text, tab_separated=file.suffix.lower() == ".tsv")
        size = file.stat().st_size or 1
        # A cell may hold a whole document; csv's default limit (128 KiB a cell) would stop at the first long one.
        csv.field_size_limit(max(csv.field_size_limit(), min(size, _MAX_CELL_CHARS)))
        # utf-8-sig: a UTF-8 byte-order mark (Excel's "CSV UTF-8") is not part of the first column's name.
        encoding = "utf-8-sig" if decoded.encoding == "utf-8" else decoded.encoding
        with file.open("rb") as raw, io.TextIOWrapper(raw, encoding=encoding, errors="replace", newline="") as text:
            rows = csv.reader(text, dialect)
            try:
                header = column_names(next(rows, []))
            except csv.Error as err:
                log.skip_file(file, f"not a readable table: {err}")
                return
            if not any(header):
                log.skip_file(file, "its first row, the header that names the columns, is empty")
                return
            records = row_records(rows, header, str(file), lambda: raw.tell() / size, file, options, log)
            yield from record_documents(records, file, root, options, log)


class Workbook(FileFormat):
    name = "Excel"
    suffixes = (".xlsx", ".xlsm", ".xltx", ".xltm")  # the macro-enabled workbook and the templates: the same parts
    requires = (Requirement("openpyxl", "openpyxl", "xlsx"),)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        import openpyxl

        # Cached values, not formulas: what the sheet shows. Read-only mode streams the rows.
        load = partial(openpyxl.load_workbook, file, read_only=True, data_only=True)
        book = parse_file(file, options, log, file.suffix.lower(), load)
        if book is None:
            return
        try:
            sheets = list(book.worksheets)
            for place, sheet in enumerate(sheets):
                values = sheet.iter_rows(values_only=True)
                cells = ([cell_text(value) for value in row] for row in values)
                rows, position = _sheet_rows(enumerate(cells, 1), sheet.max_row, sheet.title, place, len(sheets))
                yield from _sheet_documents(file, root, sheet.title, rows, position, options, log)
        except SkipFile as skip:  # a sheet broke off: what was read of it stays, and the file is marked incomplete
            log.skip_file(file, str(skip))
        finally:
            book.close()


class LegacyWorkbook(FileFormat):
    """Excel 97-2003 workbooks (.xls, the BIFF format), read with xlrd as .xlsx files are with openpyxl."""

    name = "Excel 97-2003"
    suffixes = (".xls", ".xlt")
    requires = (Requirement("xlrd", "xlrd", "xls"),)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        book = parse_file(file, options, log, file.suffix.lower(), lambda: _open_xls(file))
        if book is None:
            return
        try:
            for place, name in enumerate(book.sheet_names()):
                sheet = _xls_sheet(book, place, name)
                cells = _xls_cells(sheet, book.datemode)
                rows, position = _sheet_rows(cells, sheet.nrows, name, place, book.nsheets)
                yield from _sheet_documents(file, root, name, rows, position, options, log)
                book.unload_sheet(place)
        except SkipFile as skip:  # a sheet broke off: what was read of it stays, and the file is marked incomplete
            log.skip_file(file, str(skip))
        finally:
            book.release_resources()


def _open_xls(file: Path) -> Any:
    import xlrd

    with file.open("rb") as handle:
        if handle.read(4) == b"PK\x03\x04":  # xlrd reads BIFF alone; a zip is a newer workbook misnamed
            suffix = file.suffix.lower()
            raise SkipFile(f"it is an {suffix}x workbook (a zip) under an {suffix} name: rename it to {suffix}x")
    # on_demand: a sheet is parsed when it is read, and let go after. xlrd writes its warnings about a file's
    # structure to stdout unless given a log of its own: ours, at debug level.
    return xlrd.open_workbook(str(file), on_demand=True, logfile=_DebugLog())


class _DebugLog(io.TextIOBase):
    """A text stream whose lines go to this module's log at debug level."""

    def write(self, text: str) -> int:
        if text.strip():
            logger.debug("xlrd: %s", text.strip())
        return len(text)


def _xls_sheet(book: Any, place: int, name: str) -> Any:
    """Sheet ``place`` of an .xls workbook opened on demand, parsed now; :class:`SkipFile` when it is damaged."""
    try:
        return book.sheet_by_index(place)
    except OSError:
        raise  # the file itself unreadable: the caller's on_error decides
    except Exception as err:  # noqa: BLE001 - a damaged sheet fails in xlrd's parser in many ways
        raise SkipFile(f"its sheet {name!r} cannot be read ({type(err).__name__}: {err})") from err


def _xls_cells(sheet: Any, datemode: int) -> Iterator[tuple[int, list[str]]]:
    """An .xls sheet's numbered rows as the sheet shows its cells: dates as dates, not the day numbers xlrd holds,
    booleans and error codes as Excel shows them."""
    import xlrd

    def value(cell: Any) -> Any:
        if cell.ctype == xlrd.XL_CELL_DATE:
            return xlrd.xldate.xldate_as_datetime(cell.value, datemode)
        if cell.ctype == xlrd.XL_CELL_BOOLEAN:
            return bool(cell.value)
        if cell.ctype == xlrd.XL_CELL_ERROR:
            return xlrd.error_text_from_code.get(cell.value, "")
        return cell.value

    for read, row in enumerate(sheet.get_rows(), 1):
        yield read, [cell_text(value(cell)) for cell in row]


class OpenDocumentSpreadsheet(FileFormat):
    name = "OpenDocument spreadsheet"
    suffixes = (".ods", ".ots")

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        from c2v_rag.documents.formats.opendocument import ods_sheets, sheet_rows

        sheets = parse_file(file, options, log, file.suffix.lower(), lambda: ods_sheets(file))
        for place, (name, elements) in enumerate(sheets or []):
            rows, position = _sheet_rows(sheet_rows(elements), len(elements), name, place, len(sheets or []))
            yield from _sheet_documents(file, root, name, rows, position, options, log)


def _sheet_documents(
    file: Path,
    root: str,
    sheet: str,
    rows: Iterator[list[str]],
    position: Callable[[], float],
    options: ReadOptions,
    log: ReadLog,
) -> Iterator[SourceDocument]:
    """A workbook sheet's documents: its ``rows`` (cell texts) read as a table whose header is the first row with a
    value, each record told its ``sheet``; ``position`` is the share of the file read. An empty sheet gives none; a
    sheet whose only row with a value is that first one (a title, a list written across) gives that row's cells."""
    first = next((row for row in rows if any(row)), [])
    header = column_names(first)
    if not header:
        return
    records = row_records(rows, header, f"{file}:{sheet}", position, file, options, log, {SHEET_KEY: sheet})
    read = False
    for document in record_documents(records, file, root, options, log):
        read = True
        yield document
    if not read:
        cells = {"text": " | ".join(cell.strip() for cell in first if cell.strip()), SHEET_KEY: sheet}
        yield from record_documents(iter([(f"{file}:{sheet}:0", cells, (0.0, position()))]), file, root, options, log)


def _sheet_rows(
    rows: Iterable[tuple[int, list[str]]], size: int | None, sheet: str, place: int, sheets: int
) -> tuple[Iterator[list[str]], Callable[[], float]]:
    """A sheet's ``rows`` (cell texts, each with the rows its reader has read so far), and the share of the workbook
    read so far (sheet ``place`` of ``sheets``, by the ``size`` rows its reader counts); a sheet that fails partway
    raises :class:`SkipFile` naming it and the rows read."""
    size = max(size or 1, 1)
    read = 0

    def counted() -> Iterator[list[str]]:
        nonlocal read
        try:
            for read, row in rows:  # noqa: B007 - read is the nonlocal the progress position reads
                yield row
        except OSError:
            raise  # the file itself unreadable: the caller's on_error decides
        except Exception as err:  # noqa: BLE001 - a damaged sheet fails in its reader or XML parser, in many ways
            raise SkipFile(f"its sheet {sheet!r} breaks off after row {read} ({type(err).__name__}: {err})") from err

    return counted(), lambda: (place + min(read, size) / size) / sheets


def cell_text(value: Any) -> str:
    """A workbook cell's value as the sheet shows it: a whole number without ``.0``, a date without a midnight."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, datetime.datetime) and value.time() == datetime.time():
        return value.date().isoformat()
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return str(value)


def table_dialect(text: str, tab_separated: bool) -> type[csv.Dialect]:
    """The CSV dialect of ``text``: Excel's quoting (double quotes, doubled inside a cell) with tabs for a .tsv,
    and for a .csv the delimiter (``,;\t|``) its header line holds most of (a comma where it holds none).

    The header decides because it is one line of short names; ``csv.Sniffer`` reads the rows too and misreads
    cells that span lines or hold quotes."""
    if tab_separated:
        delimiter = "\t"
    else:
        header = text[: text.find("\n") if "\n" in text else len(text)]
        header = re.sub(r'"[^"]*"', "", header)  # a quoted name may hold another delimiter: "Name, first";"Age"
        counts = {delimiter: header.count(delimiter) for delimiter in _CSV_DELIMITERS}
        delimiter = max(counts, key=lambda d: counts[d]) if any(counts.values()) else ","
    # strict: an unclosed quote is an error at the end of the file, where the lenient reader made everything after
    # it one cell of one row, silently; a quoted cell with text after its closing quote is an error for its row.
    return type("Table", (csv.excel,), {"delimiter": delimiter, "strict": True})


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


def row_records(
    rows: Iterator[list[str]],
    header: list[str],
    where: str,
    position: Callable[[], float],
    file: Path,
    options: ReadOptions,
    log: ReadLog,
    metadata: dict[str, Any] | None = None,
) -> Iterator[tuple[str, dict, Span]]:
    """``(where:n, record, span)`` for each row ``n`` under the header that holds a value: a record of its cells
    when the table has a text column, else one whose text is the row's ``column: value`` lines; either with
    ``metadata``. ``position()`` is the share of the file read once a row is, for the row's span."""
    has_text_column = any(key in header for key in TEXT_KEYS)
    end = 0.0
    number = 0
    while True:
        try:
            row = next(rows, None)
        except csv.Error as err:
            number += 1
            if "end of data" in str(err):  # a quote opened in this row and never closed: the rest is lost to it
                reason = (
                    f"a cell of this row opens a quote that nothing closes, so the rest of the file (to line "
                    f"{getattr(rows, 'line_num', '?')}) would be that one cell: close the quote"
                )
                _bad_row(f"{where}:{number}", reason, file, options, log)
                return
            reason = f"it cannot be read as a row ({err}): a quoted cell must end at its closing quote"
            _bad_row(f"{where}:{number}", reason, file, options, log)
            continue
        if row is None:
            return
        number += 1
        start, end = end, min(1.0, position())
        if not any(cell.strip() for cell in row):
            continue
        if any(cell.strip() for cell in row[len(header) :]):
            reason = f"it has {len(row)} cells and the header {len(header)} (quote cells that hold the delimiter)"
            _bad_row(f"{where}:{number}", reason, file, options, log)
            continue
        # The text column stays when empty (an empty document, as a JSONL record with "text": "" is), so that a
        # blank cell does not fail the row for want of a text.
        cells = {name: value for name, value in zip(header, row, strict=False) if value.strip() or name in TEXT_KEYS}
        if has_text_column:
            yield f"{where}:{number}", {**cells, **(metadata or {})}, (start, end)
        else:
            lines_of_cells = "\n".join(f"{name}: {value.strip()}" for name, value in cells.items())
            yield f"{where}:{number}", {"text": lines_of_cells, ROW_KEY: number, **(metadata or {})}, (start, end)


def _bad_row(where: str, reason: str, file: Path, options: ReadOptions, log: ReadLog) -> None:
    """A row that cannot be read: raised under ``on_error="raise"``, else skipped and counted."""
    if options.on_error == "raise":
        raise ValueError(f"{where}: {reason}")
    log.skip_record(where, file, reason)
