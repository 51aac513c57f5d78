"""CSV and TSV files: one document per row, read as LangChain's and LlamaIndex's CSV loaders read them, or as
records where the table has a text column; files written as Excel and Python's csv module write them."""

from __future__ import annotations

import csv
import re
import zipfile
from pathlib import Path

import pytest
from format_files import write_xls, write_xlsx
from rag_helpers import make_text

from c2v_rag.documents.documents import iter_documents
from c2v_rag.documents.files import ReadLog, ReadOptions
from c2v_rag.documents.formats.tables import column_names
from c2v_rag.documents.source_document import SourceDocument


def read(path: Path, **options) -> tuple[list[SourceDocument], ReadLog]:
    log = ReadLog()
    return list(iter_documents(path, options=ReadOptions(**options), log=log)), log


def write_csv(path: Path, rows: list[list[str]], encoding: str = "utf-8", **fmt) -> Path:
    with path.open("w", encoding=encoding, newline="") as handle:
        csv.writer(handle, **fmt).writerows(rows)
    return path


FAQ = [
    ["question", "answer", "owner"],
    ["How do I reset my password?", 'Open Settings, then Security, and choose "Reset".\nAn email follows.', ""],
    ["", "", ""],
    ["Where are the invoices?", "Under Billing; the last 24 months.", "finance"],
]


def test_each_row_of_a_table_is_its_column_value_lines(tmp_path):
    """A cell holding the delimiter, quotes and a line break stays one cell; empty cells and rows are left out."""
    faq = write_csv(tmp_path / "faq.csv", FAQ)
    docs, log = read(faq)
    assert [d.text for d in docs] == [
        'question: How do I reset my password?\nanswer: Open Settings, then Security, and choose "Reset".\n'
        "An email follows.",
        "question: Where are the invoices?\nanswer: Under Billing; the last 24 months.\nowner: finance",
    ]
    resolved = faq.resolve()
    assert [d.doc_id for d in docs] == [f"{resolved.as_posix()}:1", f"{resolved.as_posix()}:3"]
    assert [d.metadata for d in docs] == [{"row": 1, "source": str(resolved)}, {"row": 3, "source": str(resolved)}]
    assert log.files_skipped == log.records_skipped == 0


def test_excel_semicolons_legacy_encoding_and_tabs(tmp_path):
    """Excel in a German locale writes ";" (the comma is the decimal mark) in cp1252; a .tsv is tab-separated."""
    rows = [["Produkt", "Preis", "Beschreibung"], ["Käse", "3,50", "Würziger Bergkäse; gereift"]]
    write_csv(tmp_path / "preise.csv", rows, encoding="cp1252", delimiter=";")
    write_csv(tmp_path / "notes.tsv", [["name", "note"], ["alpha", "first, with a comma"]], delimiter="\t")
    excel_utf8 = tmp_path / "bom.csv"  # Excel's "CSV UTF-8" starts with a byte-order mark
    excel_utf8.write_bytes(b"\xef\xbb\xbf" + "Name,Stadt\nJürgen,Köln\n".encode())
    (tmp_path / "unicode.tsv").write_bytes("Wort\tBedeutung\nGrüße\tgreetings\n".encode("utf-16"))  # "Unicode text"
    # Streamed as JSONL is: the size limit for whole files does not apply.
    texts = {Path(d.metadata["source"]).name: d.text for d in read(tmp_path, max_file_bytes=20)[0]}
    assert texts == {
        "preise.csv": "Produkt: Käse\nPreis: 3,50\nBeschreibung: Würziger Bergkäse; gereift",
        "notes.tsv": "name: alpha\nnote: first, with a comma",
        "bom.csv": "Name: Jürgen\nStadt: Köln",
        "unicode.tsv": "Wort: Grüße\nBedeutung: greetings",
    }


def test_a_table_with_a_text_column_reads_as_records(tmp_path):
    """Like the same rows as JSONL: the id column, the title leading the text, the other columns as metadata."""
    table = write_csv(tmp_path / "corpus.csv", [["id", "title", "text", "year"], ["d1", "Tides", "The moon.", "2020"]])
    write_csv(tmp_path / "no_title.csv", [["text", "lang"], ["Only text", ""], ["", "en"]])
    quoted = tmp_path / "quoted.csv"  # the header's quoted name holds a comma; the delimiter is ";"
    quoted.write_text('"Name, first";"City"\n"Jürgen";"Köln, Ehrenfeld"\n', encoding="utf-8")
    docs = {d.doc_id: d for d in read(tmp_path)[0]}
    assert docs["d1"].text == "Tides\n\nThe moon." and docs["d1"].metadata == {
        "title": "Tides",
        "year": "2020",
        "source": str(table.resolve()),
    }
    no_title = f"{(tmp_path / 'no_title.csv').resolve().as_posix()}:1"
    assert docs[no_title].text == "Only text" and "lang" not in docs[no_title].metadata
    assert docs[no_title[:-1] + "2"].text == "" and docs[no_title[:-1] + "2"].metadata["lang"] == "en"  # not an error
    assert docs[f"{quoted.resolve().as_posix()}:1"].text == "Name, first: Jürgen\nCity: Köln, Ehrenfeld"


def test_an_unclosed_quote_is_named_not_read_as_the_rest_of_the_file(tmp_path):
    """A cell that opened a quote and never closed it took every later row into itself, silently: 1 document of
    4 rows, exit 0. A quoted cell with text after its quote was read as if unquoted."""
    table = tmp_path / "faq.csv"
    table.write_text(
        'q,a\nWhat is alpha?,"Alpha is first\nWhat is beta?,Beta is second\nWhat is gamma?,Gamma is third\n'
    )
    with pytest.raises(ValueError, match=r"faq\.csv:1: a cell of this row opens a quote that nothing closes"):
        read(table)
    docs, log = read(table, on_error="continue")
    assert docs == [] and log.records_skipped == 1 and "close the quote" in log.skipped[0].reason

    stray = tmp_path / "stray.csv"
    stray.write_text('q,a\n"one"x,first\ntwo,second\n')
    docs, log = read(stray, on_error="continue")
    assert [d.metadata["row"] for d in docs] == [2] and log.skipped[0].where.endswith("stray.csv:1")
    assert "a quoted cell must end at its closing quote" in log.skipped[0].reason


def test_a_row_with_more_cells_than_the_header_is_skipped_or_stops_the_read(tmp_path):
    rows = [["name", "note"], ["alpha", "one"], ["beta", "two", "stray"], ["gamma", "x"]]
    table = write_csv(tmp_path / "t.csv", rows)
    docs, log = read(table, on_error="continue")
    assert [d.metadata["row"] for d in docs] == [1, 3] and log.records_skipped == 1
    assert log.skipped[0].where.endswith("t.csv:2") and "3 cells and the header 2" in log.skipped[0].reason
    with pytest.raises(ValueError, match=r"t\.csv:2: it has 3 cells and the header 2 \(quote cells"):
        read(table)


def test_cells_longer_than_the_csv_modules_limit_are_read(tmp_path):
    long_text = make_text(0) * 2000  # over csv's default 128 KiB a field
    assert len(long_text) > csv.field_size_limit()
    docs, _ = read(write_csv(tmp_path / "long.csv", [["text"], [long_text]]))
    assert docs[0].text == long_text
    # A file longer than the head its encoding is found from (256 KiB), its characters of two bytes each.
    rows = [["n", "greeting"]] + [[str(n), "Grüße aus Köln, " * 12] for n in range(2000)]
    docs, _ = read(write_csv(tmp_path / "many.csv", rows))
    assert len(docs) == 2000 and docs[-1].text == f"n: 1999\ngreeting: {('Grüße aus Köln, ' * 12).strip()}"


def test_headers_name_every_column_once():
    assert column_names([" a ", "", "a", "a"]) == ["a", "column 2", "a (2)", "a (3)"]
    assert column_names(["", " "]) == []


def test_an_empty_header_skips_the_file(tmp_path):
    blank = tmp_path / "blank.csv"
    blank.write_text(",,\nx,y,z\n", encoding="utf-8")
    docs, log = read(blank)
    assert docs == [] and log.files_skipped == 1 and "header" in log.skipped[0].reason


def test_rows_are_ingested_with_their_row_and_found_by_a_filter(tmp_path, tiny_variant, ingest_config, capsys):
    pytest.importorskip("qdrant_client")
    import c2v_rag
    from c2v_rag.cli import main

    folder = tmp_path / "tables"
    folder.mkdir()
    write_csv(folder / "faq.csv", FAQ)
    store = tmp_path / "store"
    c2v_rag.ingest(folder, path=store, collection="kb", model=tiny_variant, config=ingest_config)
    hits = c2v_rag.search("invoices", top_k=50, path=store, collection="kb")
    assert {h.metadata["row"] for h in hits} == {1, 3}  # the tiny model's chunks are short: several a row
    hits = c2v_rag.search("invoices", top_k=50, path=store, collection="kb", filter={"row": 3})
    assert hits and {h.metadata["row"] for h in hits} == {3} and "Under Billing" in " ".join(h.text for h in hits)
    # c2v-rag search names the row of each hit.
    capsys.readouterr()
    assert main(["search", "invoices", "--path", str(store), "--collection", "kb", "--top-k", "2"]) == 0
    hits = c2v_rag.search("invoices", top_k=2, path=store, collection="kb")
    lines = capsys.readouterr().out.splitlines()
    for rank, hit in enumerate(hits, 1):
        row = hit.metadata["row"]
        assert lines[2 * rank - 2].startswith(f"{rank:2d}. {hit.score:.4f}  {hit.source}  row {row}  (chunk ")


def office_rows(book: Path, first_more: str = "", second_more: str = "") -> list[tuple]:
    """What the workbooks of write_xlsx and write_xls read as: ids, texts and metadata (their own columns' lines
    ``first_more`` and ``second_more`` after the shared ones)."""
    return [
        (
            f"{book.as_posix()}:FAQ:1",
            "question: How do I get a badge?\nanswer: Ask the front desk.\nsince: 2024-05-01\ncost: 0" + first_more,
            {"row": 1, "sheet": "FAQ", "source": str(book)},
        ),
        (
            f"{book.as_posix()}:FAQ:2",
            "question: Is parking paid?\nanswer: Yes, per day.\ncost: 4.5" + second_more,
            {"row": 2, "sheet": "FAQ", "source": str(book)},
        ),
        (
            "kb-1",
            "Wi-Fi\n\nThe guest network needs no password.",
            {"title": "Wi-Fi", "sheet": "Docs", "source": str(book)},
        ),
    ]


def test_each_sheet_of_a_workbook_is_a_table_of_its_own(tmp_path):
    pytest.importorskip("openpyxl")
    book = write_xlsx(tmp_path / "office.xlsx").resolve()
    docs, log = read(book)
    assert [(d.doc_id, d.text, d.metadata) for d in docs] == office_rows(book)
    assert log.files_skipped == 0
    damaged = tmp_path / "damaged.xlsx"
    damaged.write_bytes(book.read_bytes()[:2000])
    docs, log = read(damaged)
    assert docs == [] and log.files_skipped == 1 and "not a readable .xlsx file" in log.skipped[0].reason
    # A sheet whose XML breaks off: its rows before the break are read, the file is recorded as incomplete.
    broken = tmp_path / "broken.xlsx"
    with zipfile.ZipFile(book) as source, zipfile.ZipFile(broken, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            target.writestr(item, data[: int(len(data) * 0.8)] if item.filename.endswith("sheet1.xml") else data)
    docs, log = read(broken)
    assert [d.metadata["row"] for d in docs] == [1] and log.files_skipped == 1
    assert "its sheet 'FAQ' breaks off after row 3 (ParseError" in log.skipped[0].reason
    assert str(broken.resolve()) in log.incomplete


def test_a_sheet_of_one_row_reads_as_that_row_and_an_empty_sheet_as_nothing(tmp_path):
    pytest.importorskip("openpyxl")
    import openpyxl

    book = openpyxl.Workbook()
    book.active.title = "Issues"
    book.active.append([None, "Open issues", "Tides", "Buoys", 3])  # one row only: nothing under a header
    book.create_sheet("Empty")
    book.save(str(tmp_path / "issues.xlsx"))
    (doc,), log = read(tmp_path / "issues.xlsx")
    assert doc.doc_id.endswith("issues.xlsx:Issues:0") and doc.text == "Open issues | Tides | Buoys | 3"
    assert doc.metadata["sheet"] == "Issues" and log.files_skipped == 0


def test_an_xls_workbook_reads_as_an_xlsx_one_does(tmp_path):
    pytest.importorskip("xlrd")
    pytest.importorskip("xlwt")
    book = write_xls(tmp_path / "office.xls").resolve()
    docs, log = read(book)
    # Dates as dates (not Excel's day numbers), booleans and error values as Excel shows them.
    assert [(d.doc_id, d.text, d.metadata) for d in docs] == office_rows(book, "\nopen: True", "\nopen: #DIV/0!")
    assert log.files_skipped == 0
    (tmp_path / "damaged.xls").write_bytes(book.read_bytes()[:1500])
    write_xlsx(tmp_path / "newer.xls")  # an .xlsx saved under the old name
    (tmp_path / "office.xls").unlink()
    docs, log = read(tmp_path)
    reasons = {Path(s.where).name: s.reason for s in log.skipped}
    assert docs == [] and "not a readable .xls file" in reasons["damaged.xls"]
    assert "an .xlsx workbook (a zip) under an .xls name: rename it to .xlsx" in reasons["newer.xls"]


def damaged_after_opening(book: Path, target: Path) -> Path:
    """``book`` with bytes overwritten (seeded) so that xlrd opens it but fails on one of its sheets: the first such
    copy, written to ``target``."""
    import io
    import random

    import xlrd

    data = book.read_bytes()
    for seed in range(500):
        damaged = bytearray(data)
        draw = random.Random(seed)
        for _ in range(30):
            damaged[draw.randrange(1536, len(data) - 512)] = draw.randrange(256)
        target.write_bytes(bytes(damaged))
        try:
            opened = xlrd.open_workbook(str(target), on_demand=True, logfile=io.StringIO())
        except Exception:  # noqa: BLE001 - damaged before its sheets: not the case wanted
            continue
        try:
            for place in range(opened.nsheets):
                list(opened.sheet_by_index(place).get_rows())
        except Exception:  # noqa: BLE001 - damaged in a sheet: wanted
            return target
    raise AssertionError("no seed damaged a sheet alone")


def test_a_damaged_xls_sheet_skips_the_file_with_the_reason_and_prints_nothing(tmp_path, capfd):
    pytest.importorskip("xlrd")
    pytest.importorskip("xlwt")
    damaged = damaged_after_opening(write_xls(tmp_path / "office.xls"), tmp_path / "damaged.xls")
    (tmp_path / "office.xls").unlink()
    (tmp_path / "notes.txt").write_text("The harbour opens at six.", encoding="utf-8")
    docs, log = read(tmp_path)  # the folder goes on past it
    assert "notes.txt" in {Path(d.doc_id).name for d in docs}
    (skip,) = log.skipped
    assert skip.where == str(damaged.resolve()) and re.search(
        r"its sheet '\w+' (cannot be read|breaks off)", skip.reason
    )
    assert str(damaged.resolve()) in log.incomplete  # a sync keeps the points of what was not read
    assert capfd.readouterr().out == ""  # xlrd's warnings about the file are logged, not printed


def test_an_ods_reads_as_an_excel_workbook_does_without_the_repeats_to_the_sheets_edge(tmp_path):
    from format_files import write_ods

    write_ods(tmp_path / "office.ods")
    docs, log = read(tmp_path / "office.ods")
    where = (tmp_path / "office.ods").resolve()
    assert [d.doc_id for d in docs] == [f"{where}:FAQ:1", f"{where}:FAQ:4", "n1"] and log.files_skipped == 0
    assert docs[0].text == "question: When is the tide high?\nanswer: Twice a day.\nupdated: 2024-05-01"
    assert docs[0].metadata["row"] == 1 and docs[0].metadata["sheet"] == "FAQ"
    # Two blank rows written as one repeated row count; a merged cell's covered cell keeps the columns in place.
    assert docs[1].text == "question: Ask the harbour master.\nupdated: 3" and docs[1].metadata["row"] == 4
    assert docs[2].text == "Neap tides are small." and docs[2].metadata["sheet"] == "Notes"
