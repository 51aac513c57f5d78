"""Reading PDF, HTML, Word and reStructuredText files: real files written by the libraries' own writers, read back
through the folder walk, and one ingest into embedded Qdrant that checks each chunk's page against pypdf's own
page texts."""

from __future__ import annotations

import importlib.util
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from format_files import (
    OFFICE_VARIANTS,
    office_variant,
    write_docx,
    write_epub,
    write_html,
    write_odp,
    write_odt,
    write_pdf,
    write_pptx,
    write_xls,
    write_xlsx,
)
from legacy_office_files import HEADING_1, HEADING_2, NORMAL, TITLE, AttachedMsg, write_doc, write_msg, write_ppt
from rag_helpers import make_text, stored_points

from c2v_rag.core.errors import MissingPackageError
from c2v_rag.documents.chunking import document_lead
from c2v_rag.documents.documents import iter_documents
from c2v_rag.documents.files import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

pytest.importorskip("pypdf")
pytest.importorskip("docx")
pytest.importorskip("bs4")
pytest.importorskip("markdownify")


def read(path: Path, **options) -> tuple[list[SourceDocument], ReadLog]:
    log = ReadLog()
    return list(iter_documents(path, options=ReadOptions(**options), log=log)), log


def test_a_pdf_is_one_document_led_by_its_title_with_each_page_where_it_starts(tmp_path):
    pdf = write_pdf(
        tmp_path / "handbook.pdf",
        [["Preface to the handbook."], [], ["Chapter one (tides) begins here.", "It goes on."], ["Chap-", "ter two."]],
        title="Ocean  Handbook",
        labels=[(0, 0, "/r", 1), (1, 3, "/D", 1)],
    )
    (doc,), log = read(pdf)
    assert log.files_skipped == 0
    assert doc.doc_id == pdf.resolve().as_posix() and doc.source == str(pdf.resolve())
    assert doc.metadata == {"source": str(pdf.resolve()), "file_name": "handbook.pdf", "title": "Ocean Handbook"}
    assert doc.text == (
        "# Ocean Handbook\n\nPreface to the handbook.\n\nChapter one (tides) begins here.\nIt goes on.\n\n"
        "Chapter two."  # a word hyphenated across lines is joined; the empty page leaves no gap
    )
    # Pages as the PDF labels them: i, then 1, 2, 3 (the second, empty page "1" has no text and no entry).
    assert [label for _, label in doc.pages] == ["i", "2", "3"]
    for offset, label, opening in zip(
        [o for o, _ in doc.pages], ["i", "2", "3"], ["# Ocean", "Chapter one", "Chapter two"]
    ):
        assert doc.text[offset:].startswith(opening) and doc.page_at(offset) == label
    assert doc.page_at(doc.text.index("It goes on")) == "2" and doc.page_at(len(doc.text) - 1) == "3"
    assert doc.lead == "Ocean Handbook"  # the title alone: the lines under a PDF's title are its authors


def test_a_pdfs_dot_leaders_read_as_one_space(tmp_path):
    """A table of contents or an index typeset with dot leaders: the dots are not text (each was a token)."""
    lines = ["1 Introduction . . . . . . . . . . . . . 1", "2.1 ASN.1 syntax. . . . . . . . 2", "Index........3"]
    lines += ["Wait... what? Version 1.2.3.4 and ...."]
    (doc,), _ = read(write_pdf(tmp_path / "manual.pdf", [lines], title="Manual"))
    assert doc.text == "# Manual\n\n" + (
        "1 Introduction 1\n2.1 ASN.1 syntax 2\nIndex 3\nWait... what? Version 1.2.3.4 and"
    )


def test_a_pdfs_ligature_glyphs_are_read_as_the_letters_typed(tmp_path):
    """Typeset PDFs draw "fi" and "fl" as one glyph, and the text layer kept it: 35 of the 51 chunks of fontconfig's
    user manual held "conﬁguration ﬁles", which MiniLM's tokenizer and BM25 do not read as the words."""
    (doc,), _ = read(write_pdf(tmp_path / "manual.pdf", [["Font conﬁguration ﬁles and ﬂags", "café au lait"]]))
    assert "Font configuration files and flags" in doc.text and "café au lait" in doc.text
    assert not any("\ufb00" <= ch <= "\ufb06" for ch in doc.text)


def test_running_headers_footers_and_page_numbers_are_left_out(tmp_path):
    body = ["Tides rise twice a day.", "Ocean Handbook", "Neap tides are weaker."]  # the title inside a page stays
    pages = [["Ocean Handbook", f"Chapter 2: Tides {n}", body[(n - 1) % 3], f"- {n} -"] for n in range(1, 6)]
    pages.append(["Index", "tides, 1"])  # a last page without the header
    (doc,), _ = read(write_pdf(tmp_path / "handbook.pdf", pages, title="Ocean Handbook"))
    starts = [offset for offset, _ in doc.pages] + [len(doc.text)]
    own = [doc.text[a:b].strip() for a, b in zip(starts, starts[1:])]
    # The first page's first line stays, a running header or not: there it is the title.
    assert own == ["Ocean Handbook\n" + body[0]] + [body[(n - 1) % 3] for n in range(2, 6)] + ["Index\ntides, 1"]
    (untitled,), _ = read(write_pdf(tmp_path / "untitled.pdf", pages))
    assert untitled.metadata["title"] == "Ocean Handbook" and untitled.text.startswith("Ocean Handbook\n\n" + body[0])
    # Two pages are too few to tell a running line from a page's own.
    (short,), _ = read(write_pdf(tmp_path / "short.pdf", pages[:2]))
    assert short.text.count("Chapter 2: Tides") == 2 and short.text.count("- 1 -") == 1


def test_chapter_headers_that_name_each_chapter_are_left_out_by_the_page_number_they_carry(tmp_path):
    """A Texinfo manual's header names the chapter and the page ("Chapter 2: Currents 5"): no header recurs on three
    pages, but the top of every page carries its own number, so each goes; a line that only looks numbered stays."""
    headers = ["Chapter 1: Tides 1", "Chapter 1: Tides 2", "3", "Chapter 2: Currents 4", "Chapter 2: Currents 5", "6"]
    body = ["Tides rise twice a day.", "Neap tides are weaker.", "Currents follow the wind.", "Rips pull seaward.",
            "Eddies turn slowly.", "Waves carry energy."]  # fmt: skip
    pages = [[header, text] for header, text in zip(headers, body)]
    pages.append(["7 Wonders of the sea", "are many."])  # page 7 starts with its number: read as its header
    pages.append(["12 tides a week", "is a rough count."])  # page 8: not its number, kept
    (doc,), _ = read(write_pdf(tmp_path / "manual.pdf", pages, title="Ocean Manual"))
    starts = [offset for offset, _ in doc.pages] + [len(doc.text)]
    own = [doc.text[a:b].strip() for a, b in zip(starts, starts[1:])]
    assert own[1:6] == body[1:6] and own[6] == "are many."  # the price: a heading that starts with its page's number
    assert own[7] == "12 tides a week\nis a rough count."
    assert own[0] == "# Ocean Manual\n\nChapter 1: Tides 1\n" + body[0]  # the first page's first line stays


def test_a_pdf_without_a_recorded_title_takes_its_short_first_line(tmp_path):
    pdf = write_pdf(tmp_path / "spec.pdf", [["Shared Database Spec", "Thomas Leonard", "1. Introduction"], ["More."]])
    (doc,), _ = read(pdf)
    assert doc.metadata["title"] == "Shared Database Spec"
    assert doc.text == "Shared Database Spec\n\nThomas Leonard\n1. Introduction\n\nMore."
    assert doc.pages == ((0, "1"), (doc.text.index("More."), "2"))
    long_first = write_pdf(tmp_path / "prose.pdf", [[("word " * 40).strip(), "next line"]])
    (doc,), _ = read(long_first)
    assert "title" not in doc.metadata and doc.text == ("word " * 40).strip() + "\nnext line"


def test_pdfs_that_cannot_be_read_are_skipped_with_the_reason_and_the_folder_goes_on(tmp_path):
    write_pdf(tmp_path / "good.pdf", [["Readable text."]])
    write_pdf(tmp_path / "locked.pdf", [["Secret text."]], password="s3cret")
    write_pdf(tmp_path / "scanned.pdf", [[], []])
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage")
    (tmp_path / "notes.pdf").write_text("plain text saved under the wrong name", encoding="utf-8")
    docs, log = read(tmp_path)
    assert [d.text for d in docs] == ["Readable text."]
    reasons = {Path(s.where).name: s.reason for s in log.skipped}
    assert sorted(reasons) == ["broken.pdf", "locked.pdf", "notes.pdf", "scanned.pdf"]
    assert "encrypted with a password" in reasons["locked.pdf"]
    assert "2 pages have no text layer" in reasons["scanned.pdf"] and "OCR" in reasons["scanned.pdf"]
    assert "not a readable PDF file" in reasons["broken.pdf"]
    assert "no %PDF- header" in reasons["notes.pdf"]
    # A sync never deletes what it failed to read.
    assert all(log.covers(str((tmp_path / name).resolve())) for name in reasons)
    too_big, log = read(tmp_path / "good.pdf", max_file_bytes=100)
    assert too_big == [] and "over the limit of 100" in log.skipped[0].reason


def test_html_is_read_as_markdown_without_the_page_chrome(tmp_path):
    page = write_html(tmp_path / "tides.html")
    (doc,), _ = read(page)
    assert doc.metadata["title"] == "Tides"  # the page's <h1>, not its <title> with the site's name
    # A page of several <h1> sections (Sphinx's one-page manuals: "Abstract", "Contents", ...) is named by its <title>,
    # and without one by its first <h1>.
    sections = "<h1>Abstract</h1><p>This policy covers Python.</p><h1>Contents</h1><p>Packaging.</p>"
    head = "<head><title>Debian Python Policy 0.12.0.0 documentation</title></head>"
    policy = write_html(tmp_path / "policy.html", f"<html>{head}<body>{sections}</body></html>")
    untitled = write_html(tmp_path / "untitled.html", f"<html><body>{sections}</body></html>")
    assert [d.metadata["title"] for d in read(policy)[0] + read(untitled)[0]] == [
        "Debian Python Policy 0.12.0.0 documentation",
        "Abstract",
    ]
    text = doc.text
    assert text.startswith("# Tides\n\nSpring tides happen when the Sun and the Moon align. See the chart.")
    assert "## Neap tides" in text and "café owners" in text  # decoded by its <meta charset>
    assert "- high water\n- low water" in text and "| spring | large |" in text  # a data table stays one
    assert text.endswith("| spring | large |\n\nTables that lay a page out read as text.")
    assert "## Neap tides\n" in text  # its permalink mark dropped
    for chrome in ("tracking", "color: red", "Home", "Sidebar", "Copyright", "https://", "wave.png", "generated"):
        assert chrome not in text, chrome
    assert document_lead(text) == "Tides\nSpring tides happen when the Sun and the Moon align. See the chart."
    bare = write_html(
        tmp_path / "bare.htm", "<html><head><title>Only a title | Site</title></head><body><p>Body.</p></body></html>"
    )
    (doc,), _ = read(bare)
    assert doc.text == "# Only a title\n\nBody." and doc.metadata["title"] == "Only a title"
    binary = tmp_path / "image.html"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    assert read(binary)[0] == [] and "it is a PNG image" in read(binary)[1].skipped[0].reason


def test_a_docbook_chapter_reads_without_its_navigation_and_once_titled(tmp_path):
    """DocBook's HTML (Valgrind's manual, many GNU and Linux manuals): previous/up/next links in a "navheader" div
    and a "nav" table, and a chapter heading with a no-break space after its number, as its <title> has a space."""
    nav = (
        '<div class="navheader"><table width="100%"><tr><td><a href="intro.html">Prev</a></td>'
        '<th>Valgrind User Manual</th><td><a href="next.html">Next</a></td></tr></table></div>'
    )
    footer = (
        '<div><table class="nav" width="100%"><tr><td><a href="intro.html">&lt;&lt;\u00a01. Introduction</a></td>'
        '<td><a href="manual.html">Up</a></td><td><a href="next.html">3. Advanced&nbsp;&gt;&gt;</a></td></tr>'
        '<tr><td colspan="3"><a href="index.html">Home</a></td></tr></table></div>'
    )
    page = write_html(
        tmp_path / "manual-core.html",
        "<html><head><title>2. Using the Valgrind core</title></head><body>"
        f'{nav}<div class="chapter"><h1 class="title">2.&nbsp;Using the Valgrind core</h1>'
        f"<p>This chapter describes the core.</p><p>Run it on your program.</p></div>{footer}</body></html>",
    )
    (doc,), _ = read(page)
    text = doc.text.replace("\u00a0", " ")  # the heading keeps its own space
    assert text == "# 2. Using the Valgrind core\n\nThis chapter describes the core.\n\nRun it on your program."


def test_a_heading_with_inline_code_is_the_title_once(tmp_path):
    """Sphinx's module pages (Python's library reference: 241 of its 317 pages) mark the module's name as code in the
    <h1>: read as text the title has no backticks, converted the heading has them, and the page was led by the title
    again above its own heading, so every later chunk spent its lead on the same line twice."""
    page = write_html(
        tmp_path / "secrets.html",
        "<html><head><title>secrets &mdash; Generate secrets &mdash; Python 3.11 documentation</title></head><body>"
        '<h1><code class="xref">secrets</code> &mdash; Generate <em>secure</em> random numbers</h1>'
        "<p><strong>Source code:</strong> Lib/secrets.py</p><p>The module generates tokens.</p></body></html>",
    )
    (doc,), _ = read(page)
    assert doc.metadata["title"] == "secrets — Generate secure random numbers"
    assert doc.text.startswith("# `secrets` — Generate *secure* random numbers\n\n**Source code:** Lib/secrets.py")
    assert document_lead(doc.text) == "`secrets` — Generate *secure* random numbers\n**Source code:** Lib/secrets.py"


def test_an_example_in_several_code_tabs_reads_a_line_each(tmp_path):
    """Node.js's API pages give each example as ES module and CommonJS, two <code> in one <pre>: they were glued
    into one line (``...promises';const fs = ...``)."""
    page = write_html(
        tmp_path / "fs.html",
        "<html><body><h1>File system</h1><pre><code class='mjs'>import * as fs from 'node:fs';</code>"
        "<code class='cjs'>const fs = require('node:fs');</code></pre>"
        "<pre><code>one;\n</code><code>two;</code></pre></body></html>",
    )
    (doc,), _ = read(page)
    assert doc.text == (
        "# File system\n\n```\nimport * as fs from 'node:fs';\nconst fs = require('node:fs');\n```\n\n"
        "```\none;\ntwo;\n```"
    )


def test_a_page_nested_thousands_deep_reads_whole(tmp_path):
    """Python's HTML parser closes no implied end tags: a test report of 3,000 unclosed <li> nests 3,000 deep, and
    the Markdown converter ran out of stack on it, which stopped the whole ingest. The levels past
    html.MAX_NESTING read as their text."""
    from c2v_rag.documents.formats import html

    items = "".join(f"<li><a href='t{n}.jtr'>test{n}.java</a>: passed in {n} ms\n" for n in range(3000))
    page = write_html(tmp_path / "report.html", f"<html><body><h1>Passed tests</h1><ul>{items}</ul></body></html>")
    (doc,), log = read(page)
    assert log.files_skipped == 0 and doc.metadata["title"] == "Passed tests"
    assert doc.text.startswith("# Passed tests\n\n- test0.java: passed in 0 ms")  # the upper levels: Markdown
    words = " ".join(doc.text.split())
    at = [words.index(f"test{n}.java") for n in range(3000)]
    assert at == sorted(at) and all(f"test{n}.java : passed in {n} ms" in words for n in range(html.MAX_NESTING, 3000))


def test_a_word_document_keeps_its_headings_lists_and_tables(tmp_path):
    (doc,), _ = read(write_docx(tmp_path / "handbook.docx"))
    assert doc.text == (
        "# Release handbook\n\n# Before a release\n\nEvery release starts from a green main branch.\n\n"
        "- Tag the commit\n\n- Build the wheels\n\n## Support windows\n\nversion | supported until\n2.1 | 2027-06\n\n"
        "Security fixes reach the last two versions."
    )
    assert doc.metadata["title"] == "Release handbook"
    (titled,), _ = read(write_docx(tmp_path / "titled.docx", title="Ops Manual"))
    assert titled.metadata["title"] == "Ops Manual" and titled.text.startswith("# Ops Manual\n\n# Release handbook")
    (tmp_path / "fake.docx").write_bytes(b"PK\x03\x04 not really a zip")
    docs, log = read(tmp_path / "fake.docx")
    assert docs == [] and "not a readable .docx file" in log.skipped[0].reason


def test_restructuredtext_and_setext_titles_lead_their_later_chunks(tmp_path):
    (tmp_path / "guide.rst").write_text("=====\nGuide\n=====\n\nFirst words.\n\nMore.", encoding="utf-8")
    (doc,), _ = read(tmp_path / "guide.rst")
    assert document_lead(doc.text) == "Guide\nFirst words."
    assert document_lead("Notes\n-----\n\nBody.") == "Notes\nBody."
    assert document_lead("=====\nGuide\n-----\n\nBody.") == ""  # over and under rules must match
    assert document_lead("x\ny\n\nBody.") == ""


def test_files_whose_package_is_missing_are_skipped_in_a_folder_and_refused_alone(tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text("plain text", encoding="utf-8")
    pdf = write_pdf(tmp_path / "b.pdf", [["A page."]])
    write_pdf(tmp_path / "c.pdf", [["Another page."]])
    monkeypatch.setitem(sys.modules, "pypdf", None)  # an import of it now fails, as when it is not installed
    docs, log = read(tmp_path)
    assert [d.text for d in docs] == ["plain text"]
    assert [Path(s.where).name for s in log.skipped] == ["b.pdf", "c.pdf"]
    assert "pip install 'c2v-rag[pdf]'" in log.skipped[0].reason and "'pypdf'" in log.skipped[0].reason
    assert log.covers(str(pdf)) and log.files_skipped == 2
    with pytest.raises(MissingPackageError, match=r"Reading PDF files \(\.pdf\) needs the package 'pypdf'"):
        iter_documents(pdf)  # refused on the call, before anything is read
    (tmp_path / "a.txt").unlink()
    with pytest.raises(MissingPackageError, match=r"(?s)holds only files whose reader.*c2v-rag\[pdf\]"):
        iter_documents(tmp_path)  # a folder of PDFs alone


def test_the_ray_rows_carry_a_documents_pages():
    pytest.importorskip("ray")
    from c2v_rag.rag.ingestion.ray_dataflow import _doc_row, _row_doc

    doc = SourceDocument("id", "one\n\ntwo", {"title": "T"}, "/x.pdf", "/", pages=((0, "iv"), (5, "1")), lead="T")
    assert _row_doc(_doc_row(doc, 1.0)) == doc
    plain = SourceDocument("id", "text", {}, None, None)
    assert _row_doc(_doc_row(plain, 1.0)) == plain


def test_an_ingested_pdf_records_the_page_each_chunk_starts_on(tmp_path, tiny_variant, ingest_config, monkeypatch):
    pytest.importorskip("qdrant_client")
    from pypdf import PdfReader
    from qdrant_client import QdrantClient

    import c2v_rag

    folder = tmp_path / "docs"
    folder.mkdir()
    pages = [[make_text(seed, sentences=4)] for seed in range(4)]
    pdf = write_pdf(folder / "report.pdf", pages, title="Quarterly report", labels=[(0, 0, "/r", 1), (1, 3, "/D", 1)])
    write_html(folder / "tides.html")
    store = tmp_path / "store"
    first = c2v_rag.ingest(folder, path=store, collection="kb", model=tiny_variant, config=ingest_config)
    assert first.documents == 2 and first.chunks > 8

    # The page of each chunk, found independently: pypdf's own text of each page, searched for the chunk's opening.
    reader = PdfReader(pdf)
    page_texts, labels = [p.extract_text() for p in reader.pages], reader.page_labels
    assert labels == ["i", "1", "2", "3"]
    with closing(QdrantClient(path=str(store))) as client:
        stored = [p for p in stored_points(client, "kb").values() if p["metadata"]["file_name"] == "report.pdf"]
        html = [p for p in stored_points(client, "kb").values() if p["metadata"]["file_name"] == "tides.html"]
    assert len(stored) > 4 and html and all("page_label" not in p["metadata"] for p in html)
    seen = set()
    for payload in stored:
        # Chunks after the first are led by the title alone (the reader's lead), not by the first page's lines.
        lead = "Quarterly report\n\n" if payload["chunk_index"] else ""
        assert payload["page_content"].startswith(lead) and payload["metadata"].get("lead_chars", 0) == len(lead)
        own = payload["page_content"][payload["metadata"].get("lead_chars", 0) :].removeprefix("# Quarterly report\n\n")
        opening = own.split("\n\n")[0]  # the chunk's part on the page it starts on (pages are joined by a blank line)
        found = [n for n, text in enumerate(page_texts) if opening in text]
        assert len(found) == 1, opening
        assert payload["metadata"]["page_label"] == labels[found[0]]
        seen.add(found[0])
    assert seen == {0, 1, 2, 3}

    again = c2v_rag.ingest(folder, path=store, collection="kb", model=tiny_variant, config=ingest_config)
    assert (again.chunks_written, again.chunks_unchanged) == (0, first.chunks)
    # Without pypdf a sync skips the PDF, and keeps its points: it was not read, not removed.
    monkeypatch.setitem(sys.modules, "pypdf", None)
    synced = c2v_rag.ingest(folder, path=store, collection="kb", model=tiny_variant, config=ingest_config, sync=True)
    assert synced.files_skipped == 1 and (synced.documents_deleted, synced.chunks_deleted) == (0, 0)
    with closing(QdrantClient(path=str(store))) as client:
        assert len(stored_points(client, "kb")) == first.chunks


def test_markdown_front_matter_becomes_metadata_and_its_title_leads(tmp_path, caplog):
    page = tmp_path / "note.md"
    page.write_text(
        "---\ntitle: Spring tides\ntags: [ocean, moon]\ndate: 2024-05-01\ndraft: false\nweight: 3\n"
        "author: {name: Ann}\ndoc_id: x\nsource: elsewhere\nempty:\n---\n\nWhen the Sun and the Moon align.\n\nMore.",
        encoding="utf-8",
    )
    (doc,), _ = read(page)
    assert doc.text == "# Spring tides\n\nWhen the Sun and the Moon align.\n\nMore."
    assert doc.metadata == {
        "source": str(page.resolve()),
        "file_name": "note.md",
        "title": "Spring tides",
        "tags": ["ocean", "moon"],
        "date": "2024-05-01",
        "draft": False,
        "weight": 3,
    }  # a nested mapping and empty fields dropped; doc_id and source are not the front matter's to set
    assert sorted(r.args[1] for r in caplog.records if "front matter field" in r.getMessage()) == ["doc_id", "source"]
    assert document_lead(doc.text) == "Spring tides\nWhen the Sun and the Moon align."
    # A body that already opens with the title gets no second heading; no title leaves the body as it is.
    page.write_text("---\ntitle: Tides\n---\n# Tides\n\nBody.", encoding="utf-8")
    assert read(page)[0][0].text == "# Tides\n\nBody."
    page.write_text("---\ntags: a\n---\nBody.", encoding="utf-8")
    assert read(page)[0][0].text == "Body." and read(page)[0][0].metadata["tags"] == "a"
    # Windows line ends: the blank line after the front matter goes whole (a stray \r stayed in front of the body).
    page.write_bytes(b"---\r\ntitle: CRLF Front\r\n---\r\n\r\nWindows body.\r\n")
    assert read(page)[0][0].text.startswith("# CRLF Front\n\nWindows body.")
    # Not front matter: a rule further down, YAML that is not a mapping, broken YAML, or a .txt file.
    for text in ("Intro.\n---\ntitle: no\n---\n", "---\n- a list\n---\nBody.", "---\ntitle: [unclosed\n---\nBody."):
        page.write_text(text, encoding="utf-8")
        (doc,), _ = read(page)
        assert doc.text == text and "title" not in doc.metadata
    plain = tmp_path / "note.txt"
    plain.write_text("---\ntitle: Spring tides\n---\nBody.", encoding="utf-8")
    assert read(plain)[0][0].text == "---\ntitle: Spring tides\n---\nBody."


def test_front_matter_tags_filter_a_search(tmp_path, tiny_variant, ingest_config):
    pytest.importorskip("qdrant_client")
    import c2v_rag

    folder = tmp_path / "notes"
    folder.mkdir()
    for n, tags in enumerate([["ocean", "moon"], ["moon"], ["cats"]]):
        (folder / f"n{n}.md").write_text(f"---\ntags: {tags}\nyear: {2020 + n}\n---\n{make_text(n)}", encoding="utf-8")
    store = tmp_path / "store"
    c2v_rag.ingest(folder, path=store, collection="kb", model=tiny_variant, config=ingest_config)
    hits = c2v_rag.search("vitamin", top_k=50, path=store, collection="kb", filter={"tags": "moon"})
    assert {h.metadata["file_name"] for h in hits} == {"n0.md", "n1.md"}
    hits = c2v_rag.search("vitamin", top_k=50, path=store, collection="kb", filter={"year": {"gte": 2021}})
    assert {h.metadata["file_name"] for h in hits} == {"n1.md", "n2.md"}


def test_an_epub_is_one_document_of_its_chapters_in_reading_order(tmp_path):
    (doc,), _ = read(write_epub(tmp_path / "tides.epub"))
    assert doc.text == (
        "# Tides and Moons\n\n## Spring tides\n\nThe Sun and the Moon align.\n\n## Neap tides\n\n"
        "They stand at right angles."
    )  # the spine's order, not the manifest's; the navigation page and the stylesheet are not chapters
    assert doc.metadata["title"] == "Tides and Moons" and doc.lead == "Tides and Moons"
    # Fonts obfuscated by a publisher do not stop a book; chapters under DRM do.
    (fonts,), _ = read(write_epub(tmp_path / "fonts.epub", encrypt="OEBPS/fonts/a.otf"))
    assert fonts.text == doc.text
    docs, log = read(write_epub(tmp_path / "drm.epub", encrypt="OEBPS/text/ch2.xhtml"))
    assert docs == [] and "encrypted (DRM)" in log.skipped[0].reason
    (tmp_path / "broken.epub").write_bytes(b"PK\x03\x04 not a zip")
    docs, log = read(tmp_path / "broken.epub")
    assert docs == [] and "not a readable EPUB file" in log.skipped[0].reason


def test_a_deck_is_one_document_of_its_slides_each_chunk_told_its_slide(tmp_path):
    pytest.importorskip("pptx")
    deck = write_pptx(tmp_path / "review.pptx")
    (doc,), log = read(deck)
    assert doc.text == (
        "## Quarterly review\n\nPlatform team\n\n"
        "## Incidents\n\n- Two outages in March\n  - Both from an expired certificate\n\nSource: the on-call log\n\n"
        "Notes: Renewals are automated since April.\n\n"
        "## Budget\n\nteam | budget\nplatform | 120\n\nBudgets in thousands"  # shapes top to bottom
    )
    assert [label for _, label in doc.pages] == ["1", "2", "3"]
    assert [doc.text[offset:].split("\n")[0] for offset, _ in doc.pages] == [
        "## Quarterly review",
        "## Incidents",
        "## Budget",
    ]
    # No recorded title (PowerPoint's default is none): the first slide's; a recorded one leads the text.
    assert doc.metadata["title"] == "Quarterly review" and doc.lead == "Quarterly review"
    (named,), _ = read(write_pptx(tmp_path / "named.pptx", title="Q1 review"))
    assert named.text.startswith("# Q1 review\n\n## Quarterly review") and named.metadata["title"] == "Q1 review"
    assert named.text[named.pages[1][0] :].startswith("## Incidents")
    damaged = tmp_path / "damaged.pptx"
    damaged.write_bytes(deck.read_bytes()[:3000])
    assert read(damaged)[0] == [] and "not a readable .pptx file" in read(damaged)[1].skipped[0].reason


NOTEBOOK = {
    "nbformat": 4,
    "nbformat_minor": 5,
    "metadata": {"kernelspec": {"language": "python", "name": "python3"}, "language_info": {"name": "python"}},
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Loading the corpus\n", "\n", "Read it once."]},
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": 1,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": ["5183 documents\n"]}],
            "source": "corpus = load('scifact')\nprint(len(corpus), 'documents')",
        },
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": []},
        {"cell_type": "raw", "metadata": {}, "source": "Exported for the wiki."},
    ],
}


def test_a_notebook_is_its_markdown_and_fenced_code_without_outputs(tmp_path):
    import json

    notebook = tmp_path / "load.ipynb"
    notebook.write_text(json.dumps(NOTEBOOK), encoding="utf-8")
    (doc,), _ = read(notebook)
    assert doc.text == (
        "# Loading the corpus\n\nRead it once.\n\n"
        "```python\ncorpus = load('scifact')\nprint(len(corpus), 'documents')\n```\n\n"
        "Exported for the wiki."
    )
    # nbformat 3 (before 2015): cells in worksheets, a code cell's source under "input".
    old = {
        "nbformat": 3,
        "metadata": {"language": "python"},
        "worksheets": [
            {"cells": [{"cell_type": "markdown", "source": "Old notes"}, {"cell_type": "code", "input": "x = 1"}]}
        ],
    }
    (tmp_path / "v3.ipynb").write_text(json.dumps(old), encoding="utf-8")
    assert read(tmp_path / "v3.ipynb")[0][0].text == "Old notes\n\n```\nx = 1\n```"
    (tmp_path / "v3.ipynb").unlink()
    (tmp_path / "broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    (tmp_path / "other.ipynb").write_text('{"name": "not a notebook"}', encoding="utf-8")
    docs, log = read(tmp_path)
    assert [d.text for d in docs] == [doc.text] and log.files_skipped == 2
    assert all("not a Jupyter notebook" in skip.reason for skip in log.skipped)


def test_asciidoc_and_org_titles_lead_without_their_header_options(tmp_path):
    (tmp_path / "guide.adoc").write_text(
        "// written by hand\n= Install Guide\nDoc Writer <doc@example.com>\n:toc: left\n:icons: font\n\n"
        "== Requirements\n\nPython 3.10.\n",
        encoding="utf-8",
    )
    (tmp_path / "plain.asciidoc").write_text(":experimental:\nNo title here.\n\nSecond paragraph.", encoding="utf-8")
    (tmp_path / "notes.org").write_text(
        "#+TITLE: Lab notes\n#+AUTHOR: Me\n#+OPTIONS: toc:nil\n\n* Tuesday\nRan the sweep.\n", encoding="utf-8"
    )
    (tmp_path / "bare.org").write_text("* Heading\nText.\n#+BEGIN_SRC python\nx = 1\n#+END_SRC\n", encoding="utf-8")
    docs = {Path(d.doc_id).name: d for d in read(tmp_path)[0]}
    assert docs["guide.adoc"].text == (
        "# Install Guide\n\nDoc Writer <doc@example.com>\n\n== Requirements\n\nPython 3.10."
    )
    assert document_lead(docs["guide.adoc"].text) == "Install Guide\nDoc Writer <doc@example.com>"
    assert docs["plain.asciidoc"].text == "No title here.\n\nSecond paragraph."
    assert docs["notes.org"].text == "# Lab notes\n\n* Tuesday\nRan the sweep."
    # Keyword lines inside the text are the text's own (a source block's markers).
    assert docs["bare.org"].text == "* Heading\nText.\n#+BEGIN_SRC python\nx = 1\n#+END_SRC"


def test_mdx_is_read_as_markdown_with_its_front_matter(tmp_path):
    (tmp_path / "intro.mdx").write_text(
        "---\ntitle: Getting started\ntags: [setup]\n---\nimport Tabs from '@theme/Tabs';\n\nInstall it first.\n",
        encoding="utf-8",
    )
    (doc,), _ = read(tmp_path)
    assert doc.text == "# Getting started\n\nimport Tabs from '@theme/Tabs';\n\nInstall it first.\n"
    assert doc.metadata["title"] == "Getting started" and doc.metadata["tags"] == ["setup"]


def test_an_odt_reads_as_markdown_without_its_index_notes_and_comments(tmp_path):
    write_odt(tmp_path / "tides.odt")
    (doc,), _ = read(tmp_path / "tides.odt")
    assert doc.text == (
        "Tide Tables\n\n# Why tides happen\n\nThe Moon pulls the sea. Twice a day.\n\n## Kinds\n\n"
        "- Spring tides\n\n  - at new and full moon\n\n- Neap tides\n\nPort | Range\nBrest | 7 m\n\n"
        "See the box.\n\nBoxed note.\n\nAppendix text."
    )
    # No recorded title: the paragraph in the Title style (through its automatic style) is the title.
    assert doc.metadata["title"] == "Tide Tables" and document_lead(doc.text) == "Tide Tables"
    write_odt(tmp_path / "tides.odt", title="Tides of Brittany")
    (doc,), _ = read(tmp_path / "tides.odt")
    assert doc.text.startswith("# Tides of Brittany\n\nTide Tables\n\n")
    assert doc.metadata["title"] == "Tides of Brittany"


def test_odt_files_that_are_not_text_documents_are_skipped_with_the_reason(tmp_path, monkeypatch):
    import zipfile

    from c2v_rag.documents.formats import opendocument

    write_odt(tmp_path / "good.odt")
    (tmp_path / "broken.odt").write_bytes(b"PK\x03\x04 not a zip")
    with zipfile.ZipFile(tmp_path / "sheet.odt", "w") as archive:  # a spreadsheet's content under an .odt name
        archive.writestr(
            "content.xml",
            '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0">'
            "<office:body><office:spreadsheet/></office:body></office:document-content>",
        )
    docs, log = read(tmp_path)
    assert [Path(d.doc_id).name for d in docs] == ["good.odt"] and log.files_skipped == 2
    reasons = " ".join(s.reason for s in log.skipped)
    assert "not a readable .odt file" in reasons and "no text body" in reasons
    monkeypatch.setattr(opendocument, "MAX_UNPACKED_BYTES", 100)  # what a zip bomb meets
    docs, log = read(tmp_path / "good.odt")
    assert docs == [] and "unpacks to" in log.skipped[0].reason


def _message(subject: str, body: str, *, html: str | None = None, attachment: str | None = None, **headers: str):
    from email.message import EmailMessage

    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = headers.get("sender", "Ada Lovelace <ada@example.org>")
    message["To"] = "tides@example.org"
    message["Date"] = headers.get("date", "Tue, 05 Mar 2024 09:30:00 +0100")
    if body:
        message.set_content(body)
    if html is not None:
        if body:
            message.add_alternative(html, subtype="html")
        else:
            message.set_content(html, subtype="html")
    if attachment:
        message.add_attachment(b"%PDF-1.4", maintype="application", subtype="pdf", filename=attachment)
    return message


def test_an_eml_is_its_subject_headers_and_plain_body_without_attachments(tmp_path):
    message = _message(
        "Spring tides next week",
        "The range peaks on Friday.\n\n-- \nAda",
        html="<p>The range peaks on <b>Friday</b>.</p>",
        attachment="tables.pdf",
    )
    (tmp_path / "spring.eml").write_bytes(bytes(message))
    (doc,), _ = read(tmp_path / "spring.eml")
    assert doc.text == (
        "# Spring tides next week\n\nFrom: Ada Lovelace <ada@example.org>\nTo: tides@example.org\n"
        "Date: Tue, 05 Mar 2024 09:30:00 +0100\n\nThe range peaks on Friday.\n\n-- \nAda"
    )
    assert {k: doc.metadata[k] for k in ("title", "from", "to", "date", "attachments")} == {
        "title": "Spring tides next week",
        "from": "Ada Lovelace <ada@example.org>",
        "to": "tides@example.org",
        "date": "2024-03-05T09:30:00+01:00",
        "attachments": ["tables.pdf"],
    }
    assert document_lead(doc.text).startswith("Spring tides next week\nFrom: Ada")
    # A message with only an HTML body reads it as Markdown; a subject in another charset is decoded.
    html_only = _message("=?iso-8859-1?q?Mar=E9e_haute?=", "", html="<h2>Port</h2><ul><li>Brest</li></ul>")
    (tmp_path / "html.eml").write_bytes(bytes(html_only))
    (doc,), _ = read(tmp_path / "html.eml")
    assert doc.metadata["title"] == "Marée haute" and doc.text.endswith("\n\n## Port\n\n- Brest")


def test_a_mailbox_is_one_document_per_message_known_by_its_message_id(tmp_path):
    import mailbox

    from c2v_rag.documents.source_document import content_doc_id

    box = mailbox.mbox(tmp_path / "archive.mbox")
    for n in range(3):
        message = _message(f"Note {n}", f"Body {n}.", date=f"Wed, 0{n + 1} May 2024 10:00:00 +0000")
        message["Message-ID"] = f" <note-{n}@example.org>"  # the header's own spaces are not the id's
        box.add(message)
    box.add(_message("Note 1 again", "A copy.", date="Thu, 09 May 2024 10:00:00 +0000"))
    box.add(_message("No id", "Sent by a script.", date="Fri, 10 May 2024 10:00:00 +0000"))
    box.flush()
    box.close()
    # The copy carries note 1's Message-ID, as a list's echo of a sent message does.
    text = (tmp_path / "archive.mbox").read_text(encoding="utf-8")
    at = text.index("Subject: Note 1 again")
    (tmp_path / "archive.mbox").write_text(text[:at] + "Message-ID: <note-1@example.org>\n" + text[at:], "utf-8")
    docs, log = read(tmp_path)
    where = (tmp_path / "archive.mbox").resolve()
    keys = [d.doc_id.removeprefix(f"{where}:") for d in docs]
    assert keys[:4] == [f"<note-{n}@example.org>" for n in (0, 1, 2)] + ["<note-1@example.org>#2"]
    assert keys[4] == content_doc_id(docs[4].text) and log.files_skipped == 0
    assert [d.metadata["title"] for d in docs] == ["Note 0", "Note 1", "Note 2", "Note 1 again", "No id"]
    assert docs[2].text.endswith("Body 2.") and docs[2].metadata["date"] == "2024-05-03T10:00:00+00:00"
    assert {d.source for d in docs} == {str(where)}


def _read_in_mailbox(message: Any, path: Path) -> tuple[list[SourceDocument], str]:
    """The documents of ``message`` alone in a new mailbox at ``path``, and the mailbox's path as ids hold it."""
    import mailbox

    box = mailbox.mbox(path)
    box.add(message)
    box.flush()
    box.close()
    docs, _ = read(path)
    return docs, path.resolve().as_posix()


def test_attachments_a_format_reads_are_documents_of_their_own_named_through_the_message(tmp_path):

    pytest.importorskip("docx")
    message = _message("Offer", "See the attached terms.")
    message["Message-ID"] = "<offer-1@example.org>"
    terms = write_docx(tmp_path / "terms.docx")
    word = "vnd.openxmlformats-officedocument.wordprocessingml.document"
    message.add_attachment(terms.read_bytes(), maintype="application", subtype=word, filename="terms.docx")
    message.add_attachment(b"# Notes\n\nBring boots.", maintype="text", subtype="markdown", filename="notes.md")
    message.add_attachment(b"# Notes\n\nA second copy.", maintype="text", subtype="markdown", filename="notes.md")
    message.add_attachment(b"\x89PNG\r\n\x1a\n", maintype="image", subtype="png", filename="logo.png")
    folder = tmp_path / "mail"
    folder.mkdir()
    (folder / "offer.eml").write_bytes(bytes(message))
    docs, log = read(folder)
    eml = (folder / "offer.eml").resolve().as_posix()
    assert [d.doc_id for d in docs] == [eml, f"{eml}/terms.docx", f"{eml}/notes.md", f"{eml}/notes-2.md"]
    assert log.files_skipped == 0 and docs[0].metadata["attachments"] == [
        "terms.docx",
        "notes.md",
        "notes.md",
        "logo.png",
    ]
    (alone,), _ = read(terms)  # an attachment reads as the file itself does
    assert docs[1].text == alone.text and docs[1].metadata["title"] == alone.metadata["title"]
    assert docs[1].metadata["attachment_of"] == eml and docs[1].metadata["file_name"] == "terms.docx"
    assert docs[1].source == f"{eml}/terms.docx" and docs[3].text == "# Notes\n\nA second copy."
    docs, _ = read(folder, exclude=("*.docx",))  # patterns match through the message, as through a folder
    assert [d.doc_id for d in docs] == [eml, f"{eml}/notes.md", f"{eml}/notes-2.md"]
    # In a mailbox: the mailbox, the message's Message-ID, the attachment's name.
    docs, where = _read_in_mailbox(message, tmp_path / "inbox.mbox")
    assert [d.doc_id for d in docs] == [
        f"{where}:<offer-1@example.org>",
        f"{where}/<offer-1@example.org>/terms.docx",
        f"{where}/<offer-1@example.org>/notes.md",
        f"{where}/<offer-1@example.org>/notes-2.md",
    ]
    assert docs[1].metadata["attachment_of"] == docs[0].doc_id and docs[1].text == alone.text


def test_an_attached_message_reads_as_a_message_file_its_attachments_too(tmp_path):

    forwarded = _message("Fwd: Q3 numbers", "Numbers are up.", sender="Grace Hopper <grace@example.org>")
    forwarded.add_attachment(b"# Q3\n\nUp 4%.", maintype="text", subtype="markdown", filename="q3.md")
    message = _message("Offer", "Forwarding the numbers.")
    message["Message-ID"] = "<offer-2@example.org>"
    message.add_attachment(forwarded)  # message/rfc822, with no file name: named by its subject
    named = _message("Minutes", "Agreed on Friday.")
    message.add_attachment(named, filename="minutes")  # a name without .eml gets it
    (tmp_path / "offer.eml").write_bytes(bytes(message))
    docs, log = read(tmp_path / "offer.eml")
    eml = (tmp_path / "offer.eml").resolve().as_posix()
    fwd = f"{eml}/Fwd - Q3 numbers.eml"
    assert [d.doc_id for d in docs] == [eml, fwd, f"{fwd}/q3.md", f"{eml}/minutes.eml"] and log.files_skipped == 0
    assert docs[0].metadata["attachments"] == ["Fwd - Q3 numbers.eml", "minutes.eml"]
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "fwd.eml").write_bytes(bytes(forwarded))
    alone, _ = read(tmp_path / "saved" / "fwd.eml")
    assert docs[1].text == alone[0].text  # as the message saved as a file reads
    assert docs[1].metadata["from"] == "Grace Hopper <grace@example.org>" and docs[1].metadata["attachment_of"] == eml
    assert docs[2].text == "# Q3\n\nUp 4%." and docs[2].metadata["attachment_of"] == fwd
    # In a mailbox, under the message's Message-ID, as its files are.
    docs, where = _read_in_mailbox(message, tmp_path / "inbox.mbox")
    assert [d.doc_id for d in docs][1:3] == [f"{where}/<offer-2@example.org>/Fwd - Q3 numbers.eml"] + [
        f"{where}/<offer-2@example.org>/Fwd - Q3 numbers.eml/q3.md"
    ]


def test_messages_forwarded_inside_one_another_are_read_four_deep(tmp_path):
    inner = _message("Level 6", "The innermost.")
    for level in range(5, 0, -1):
        outer = _message(f"Level {level}", f"Forwarding level {level + 1}.")
        outer.add_attachment(inner, filename=f"level-{level + 1}.eml")
        inner = outer
    (tmp_path / "chain.eml").write_bytes(bytes(inner))
    docs, log = read(tmp_path / "chain.eml")
    assert [d.metadata["title"] for d in docs] == [f"Level {n}" for n in range(1, 6)]  # the file and four inside it
    assert log.files_skipped == 1 and "more than 4 deep inside archives or messages" in log.skipped[0].reason


def test_mail_files_that_are_not_mail_are_skipped_with_the_reason(tmp_path):
    (tmp_path / "notes.mbox").write_text("just some text\nwith no From line\n", encoding="utf-8")
    (tmp_path / "photo.eml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    docs, log = read(tmp_path)
    assert docs == [] and log.files_skipped == 2
    reasons = {Path(s.where).name: s.reason for s in log.skipped}
    assert "not an mbox mailbox" in reasons["notes.mbox"] and "not a text file" in reasons["photo.eml"]


def test_an_odp_reads_as_a_deck_each_chunk_told_its_slide(tmp_path):
    write_odp(tmp_path / "tides.odp")
    (doc,), _ = read(tmp_path / "tides.odp")
    assert doc.text == (
        "## Tides in one hour\n\n- The Moon pulls\n\n  - and the Sun\n\n"
        "## Ranges\n\nBrest | 7 m\n\nNotes: Mention the equinox."
    )
    assert doc.metadata["title"] == "Tides in one hour"
    assert doc.page_at(doc.text.index("## Ranges")) == "2" and doc.page_at(doc.text.index("- The Moon")) == "1"
    write_odp(tmp_path / "tides.odp", title="Tide lecture")
    (doc,), _ = read(tmp_path / "tides.odp")
    assert doc.text.startswith("# Tide lecture\n\n## Tides in one hour") and doc.lead == "Tide lecture"
    write_odp(tmp_path / "pictures.odp", "<draw:page><draw:frame><draw:image/></draw:frame></draw:page>")
    write_odt(tmp_path / "letter.odp")  # a text document under a presentation's name
    docs, log = read(tmp_path)
    assert [Path(d.doc_id).name for d in docs] == ["tides.odp"]
    reasons = {Path(s.where).name: s.reason for s in log.skipped}
    assert "no text" in reasons["pictures.odp"] and "holds no slides" in reasons["letter.odp"]


LATEX_PAPER = r"""\documentclass[11pt]{article}
\usepackage{amsmath,listings}
\newcommand{\method}{\textsc{TideNet}}
\newcommand{\vect}[1]{\mathbf{#1}}
\def\port{Brest}
\newcommand{\again}{\again again}
\def\pair#1#2{#1 and #2}
\newcommand{\unit}[2][m]{#2~#1}
\title{Tides and the \emph{Moon}: a short study}
\author{Ada Lovelace \and Mary Somerville\thanks{University of Somewhere}}
\date{\today}
% a comment, left out
\begin{document}
\maketitle
\begin{abstract}
Spring tides come when the Sun and the Moon align~\cite{darwin1898}.
\end{abstract}

\section{Introduction}\label{sec:intro}
Tides rise twice a day (Section~\ref{sec:method}), \again.
\method{} costs 50\% less.\footnote{On a quiet day.} The pull is $\vect{F}$, with $\alpha \leq 2$.
\pair {Spring} {neap} tides alternate, from \unit{2} to \unit[km]{3}.
\subsection*{Ranges}
\begin{itemize}
  \item the Bay of Fundy
  \item[\port] seven metres
\end{itemize}
\begin{table}[h]
\begin{tabular}{lr}
\toprule
Place & Range (m) \\
\midrule
Bay of Fundy & 16 \\
\end{tabular}
\caption{Tidal ranges.}
\end{table}
\section{Method}\label{sec:method}
We run \texttt{tide\_model.py}; see \href{https://example.org}{the tables}.
\begin{lstlisting}[language=Python]
def height(t):
    return 2 * t  # metres
\end{lstlisting}
\input{appendix}
\bibliographystyle{plain}
\bibliography{refs}
\end{document}
"""


def test_a_latex_paper_reads_as_text_its_sections_as_headings(tmp_path):
    pytest.importorskip("pylatexenc")
    (tmp_path / "paper.tex").write_text(LATEX_PAPER, encoding="utf-8")
    (tmp_path / "appendix.tex").write_text("\\section{Appendix}\nThe data: \\url{https://example.org/data}.\n")
    docs = {Path(d.doc_id).name: d for d in read(tmp_path)[0]}
    assert docs["paper.tex"].text == (
        "# Tides and the Moon: a short study\n\n"
        "## Abstract\n\nSpring tides come when the Sun and the Moon align.\n\n"
        "## Introduction\n\nTides rise twice a day (Section), again.\n"
        "TideNet costs 50% less. (On a quiet day.) The pull is F, with α≤2.\n"
        "Spring and neap tides alternate, from 2 m to 3 km.\n\n"
        "### Ranges\n\n* the Bay of Fundy\n\n* Brest: seven metres\n\n"
        "Place | Range (m)\nBay of Fundy | 16\n\nTidal ranges.\n\n"
        "## Method\n\nWe run tide_model.py; see the tables.\n\n"
        "def height(t):\n    return 2 * t  # metres"
    )
    assert docs["paper.tex"].metadata["title"] == "Tides and the Moon: a short study"
    assert docs["paper.tex"].metadata["author"] == "Ada Lovelace, Mary Somerville"
    # An \input file is a document of its own, not read again into the one that names it.
    assert docs["appendix.tex"].text == "## Appendix\n\nThe data: https://example.org/data."
    assert "title" not in docs["appendix.tex"].metadata


def test_latex_files_without_text_are_skipped_with_the_reason(tmp_path):
    pytest.importorskip("pylatexenc")
    (tmp_path / "macros.tex").write_text(
        "% shared macros\n\\makeatletter\n\\newcommand{\\R}{\\mathbb{R}}\n\\def\\norm#1{\\lVert #1\\rVert}\n"
        "\\newtheorem{lemma}{Lemma}\n\\setlist[1]{leftmargin=2em}\n\\makeatother\n",
        encoding="utf-8",
    )
    (tmp_path / "empty.tex").write_text("\\vspace{1em}\\clearpage\n", encoding="utf-8")
    (tmp_path / "figure.tex").write_bytes(b"%PDF-1.5\n" + bytes(range(256)) * 8)
    (tmp_path / "open.tex").write_text("\\begin{lstlisting}\nx = 1  # never closed\n", encoding="utf-8")
    docs, log = read(tmp_path)
    assert [(Path(d.doc_id).name, d.text) for d in docs] == [("open.tex", "x = 1 # never closed")]
    reasons = {Path(s.where).name: s.reason for s in log.skipped}
    assert "defines macros and holds no text of its own" in reasons["macros.tex"]
    assert "no text once its commands are left out" in reasons["empty.tex"]
    assert "not a text file" in reasons["figure.tex"]


# An RTF file as WordPad writes one: font and colour tables, a generator and an \info group, a picture, a link field,
# a table row, a footnote; \'e9 and \u8364 escapes.
RTF_MEMO = r"""{\rtf1\ansi\ansicpg1252\deff0\nouicompat\deflang1033{\fonttbl{\f0\fnil\fcharset0 Calibri;}}
{\colortbl ;\red0\green0\blue255;}
{\*\generator Riched20 10.0.19041}{\info{\title Harbour memo}{\author Port Office}}\viewkind4\uc1
\pard\sa200\sl276\slmult1\b\f0\fs32\lang9 Tide schedule\b0\fs22\par
The caf\'e9 opens when the tide is high \endash  twice a day.\par
Spring tides\rquote  range is largest: \u8364? 5 per boat.\par
{\pict{\*\picprop}\wmetafile8\picw1000\pich1000 0100090000036e0000000000450000000000040000000301080005}\par
{\field{\*\fldinst{HYPERLINK "https://example.org"}}{\fldrslt{\ul\cf1 the port site}}}\f0\fs22\par
\trowd\cellx2000\cellx4000 Brest\cell 7 m\cell\row
}
"""


def test_an_rtf_file_is_its_text_led_by_its_recorded_title(tmp_path):
    pytest.importorskip("striprtf")
    (tmp_path / "memo.rtf").write_text(RTF_MEMO, encoding="ascii")
    # Cyrillic in the code page the header names; no \info title.
    (tmp_path / "tides.rtf").write_bytes(
        b"{\\rtf1\\ansi\\ansicpg1251{\\fonttbl{\\f0 Arial;}}\\f0 \\'cf\\'f0\\'e8\\'eb\\'e8\\'e2 \\'e8 "
        b"\\'ee\\'f2\\'eb\\'e8\\'e2\\par}"
    )
    docs = {Path(d.doc_id).name: d for d in read(tmp_path)[0]}
    assert docs["memo.rtf"].text == (
        "# Harbour memo\n\nTide schedule\nThe café opens when the tide is high – twice a day.\n"
        "Spring tides’ range is largest: € 5 per boat.\n\nthe port site\nBrest | 7 m"
    )
    assert docs["memo.rtf"].metadata["title"] == "Harbour memo"
    assert docs["tides.rtf"].text == "Прилив и отлив" and "title" not in docs["tides.rtf"].metadata


def test_rtf_files_without_text_are_skipped_with_the_reason(tmp_path):
    pytest.importorskip("striprtf")
    (tmp_path / "picture.rtf").write_text(r"{\rtf1\ansi{\pict\pngblip 89504e470d0a1a0a}\par}", encoding="ascii")
    (tmp_path / "notes.rtf").write_text("Plain notes saved under an RTF name.", encoding="utf-8")
    docs, log = read(tmp_path)
    reasons = {Path(s.where).name: s.reason for s in log.skipped}
    assert docs == [] and "holds no text" in reasons["picture.rtf"]
    assert "not an RTF file (it does not open with {\\rtf)" in reasons["notes.rtf"]


TIDE_PARAGRAPHS = [
    ("Tide tables", TITLE, None),
    ("Spring tides", HEADING_1, None),
    ("The range peaks two days after the new moon.", NORMAL, None),
    ("Ports", HEADING_2, None),
    ("port", NORMAL, "cell"),
    ("range", NORMAL, "cell"),
    ("", NORMAL, "row"),
    ("Brest", NORMAL, "cell"),
    ("7 m", NORMAL, "cell"),
    ("", NORMAL, "row"),
    # A field: its code (between \x13 and \x14) is left out, its result (up to \x15) kept.
    ('See \x13 HYPERLINK "https://tides.example" \x14the tide\x0bservice\x15 for more.', NORMAL, None),
    ("Ångström’s note: ≈ 7 m", NORMAL, None),  # stored as UTF-16 (≈ is not in cp1252)
]
TIDE_TEXT = (
    "# Tide tables\n\n# Spring tides\n\nThe range peaks two days after the new moon.\n\n## Ports\n\n"
    "port | range\nBrest | 7 m\n\nSee the tide service for more.\n\nÅngström’s note: ≈ 7 m\n\nMeasured in 2024."
)


def test_a_word_97_document_reads_as_markdown_with_headings_tables_fields_and_footnotes(tmp_path):
    pytest.importorskip("olefile")
    write_doc(tmp_path / "tides.doc", TIDE_PARAGRAPHS, footnotes=["Measured in 2024."], title="Tide tables")
    (doc,), log = read(tmp_path)
    assert log.files_skipped == 0 and doc.text == TIDE_TEXT and doc.metadata["title"] == "Tide tables"
    # Without a recorded title, its Title paragraph is the title; headings at istd 3 read by their style's sti.
    write_doc(tmp_path / "tides.doc", TIDE_PARAGRAPHS)
    (doc,), _ = read(tmp_path)
    assert doc.metadata["title"] == "Tide tables" and "\n## Ports\n" in doc.text and "≈" in doc.text


def test_doc_files_that_are_rtf_or_text_inside_are_read_as_that_and_others_skipped_with_the_reason(tmp_path):
    pytest.importorskip("olefile")
    pytest.importorskip("striprtf")
    import zipfile

    (tmp_path / "memo.doc").write_text(RTF_MEMO, encoding="ascii")  # Word saves RTF under .doc
    (tmp_path / "security.doc").write_text("Plain notes on security.\n", encoding="utf-8")  # as Debian's docs
    write_doc(tmp_path / "locked.doc", TIDE_PARAGRAPHS, encrypted=True)
    with zipfile.ZipFile(tmp_path / "report.doc", "w") as archive:
        archive.writestr("word/document.xml", "<w:document/>")
    (tmp_path / "photo.doc").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    damaged = write_doc(tmp_path / "damaged.doc", TIDE_PARAGRAPHS).read_bytes()
    (tmp_path / "damaged.doc").write_bytes(damaged[:1536])  # cut inside its first streams
    docs, log = read(tmp_path)
    texts = {Path(d.doc_id).name: d.text for d in docs}
    assert texts == {"memo.doc": texts["memo.doc"], "security.doc": "Plain notes on security.\n"}
    assert texts["memo.doc"].startswith("# Harbour memo\n\nTide schedule")
    reasons = {Path(s.where).name: s.reason for s in log.skipped}
    assert "encrypted (password-protected)" in reasons["locked.doc"]
    assert "Rename it to .docx" in reasons["report.doc"] and "not a text file" in reasons["photo.doc"]
    assert "not a readable .doc file" in reasons["damaged.doc"]


def test_a_damaged_doc_is_read_or_skipped_never_an_error(tmp_path):
    pytest.importorskip("olefile")
    import random

    good = write_doc(tmp_path / "tides.doc", TIDE_PARAGRAPHS, footnotes=["Measured in 2024."]).read_bytes()
    outcomes = {"read": 0, "skipped": 0}
    for seed in range(60):
        rng = random.Random(seed)
        data = bytearray(good)
        for _ in range(8):  # overwrite a few runs of bytes after the compound file's header
            at, size = rng.randrange(512, len(data) - 16), rng.randrange(1, 16)
            data[at : at + size] = rng.randbytes(size)
        (tmp_path / "tides.doc").write_bytes(bytes(data))
        docs, log = read(tmp_path / "tides.doc")
        outcomes["read" if docs else "skipped"] += 1
        assert len(docs) + log.files_skipped == 1
    assert outcomes["read"] and outcomes["skipped"]  # both paths were taken


def same_documents(got: list[SourceDocument], want: list[SourceDocument], got_file: Path, want_file: Path) -> None:
    """``got`` (read from ``got_file``) are ``want`` (read from ``want_file``) but for the file they name."""

    def named(docs: list[SourceDocument], file: Path) -> list[tuple]:
        where = str(file.resolve())
        return [
            (d.doc_id.replace(where, "FILE"), d.text, d.pages, d.lead, {**d.metadata, "source": 0, "file_name": 0})
            for d in docs
        ]

    assert got and named(got, got_file) == named(want, want_file)


@pytest.mark.parametrize("suffix", sorted(OFFICE_VARIANTS))
def test_macro_enabled_files_templates_and_shows_read_as_their_plain_format(tmp_path, suffix):
    """What Word, PowerPoint and Excel save as a macro-enabled file, a template or a show (.docm, .dotx, .ppsx,
    .xlsm...: the same parts, another main content type, a VBA part) reads as the .docx/.pptx/.xlsx it holds."""
    kind = OFFICE_VARIANTS[suffix][0].split("/")[0]
    package, write, plain_suffix = {
        "word": ("docx", write_docx, ".docx"),
        "ppt": ("pptx", write_pptx, ".pptx"),
        "xl": ("openpyxl", write_xlsx, ".xlsx"),
    }[kind]
    library = pytest.importorskip(package)
    plain = write(tmp_path / f"plain{plain_suffix}")
    variant = office_variant(plain, tmp_path / f"variant{suffix}")
    got, log = read(variant)
    assert log.files_skipped == 0
    same_documents(got, read(plain)[0], variant, plain)
    if kind == "word" or suffix in (".ppsx", ".ppsm", ".potx", ".potm"):  # the library's own opener refuses it
        with pytest.raises(ValueError, match="content type"):
            (library.Document if kind == "word" else library.Presentation)(str(variant))


def test_an_office_file_under_another_applications_suffix_is_skipped_with_what_it_holds(tmp_path):
    pytest.importorskip("pptx")
    (tmp_path / "deck.docx").write_bytes(write_pptx(tmp_path / "deck.pptx").read_bytes())
    (tmp_path / "letter.pptx").write_bytes(write_docx(tmp_path / "letter.docx").read_bytes())
    for name, reason in (
        (
            "deck.docx",
            "not a Word document (its main part is application/vnd.openxmlformats-officedocument.presentationml",
        ),
        (
            "letter.pptx",
            "not a PowerPoint deck (its main part is application/vnd.openxmlformats-officedocument.wordprocessingml",
        ),
    ):
        docs, log = read(tmp_path / name)
        assert docs == [] and reason in log.skipped[0].reason


def test_opendocument_templates_read_as_their_documents(tmp_path):
    """LibreOffice's templates (.ott, .otp, .ots): the same parts, a mimetype of '...-template'."""
    import zipfile

    from format_files import write_ods

    for write, plain_suffix, suffix in (
        (write_odt, ".odt", ".ott"),
        (write_odp, ".odp", ".otp"),
        (write_ods, ".ods", ".ots"),
    ):
        plain = write(tmp_path / f"plain{plain_suffix}")
        template = tmp_path / f"template{suffix}"
        with zipfile.ZipFile(plain) as source, zipfile.ZipFile(template, "w") as target:
            for item in source.infolist():
                data = source.read(item)
                target.writestr(item, data + b"-template" if item.filename == "mimetype" else data)
        assert zipfile.ZipFile(template).read("mimetype").endswith(b"-template")
        got, log = read(template)
        assert log.files_skipped == 0
        same_documents(got, read(plain)[0], template, plain)


def test_word_powerpoint_and_excel_97_templates_and_shows_read_as_their_documents(tmp_path):
    pytest.importorskip("olefile")
    pairs = [
        (write_doc(tmp_path / "tides.doc", TIDE_PARAGRAPHS, title="Tide tables"), ".dot"),
        (write_ppt(tmp_path / "tides.ppt", title="Tide talk"), ".pps"),
        (write_ppt(tmp_path / "tides.ppt"), ".pot"),
    ]
    if all(importlib.util.find_spec(name) for name in ("xlrd", "xlwt")):
        pairs.append((write_xls(tmp_path / "office.xls"), ".xlt"))
    for plain, suffix in pairs:
        variant = tmp_path / f"variant{suffix}"
        variant.write_bytes(plain.read_bytes())
        got, log = read(variant)
        assert log.files_skipped == 0
        same_documents(got, read(plain)[0], variant, plain)
    (tmp_path / "newer.pps").write_bytes(write_pptx(tmp_path / "newer.pptx").read_bytes())
    docs, log = read(tmp_path / "newer.pps")
    assert (
        docs == []
        and "a zip file under a .pps name: a .ppsx saved as .pps? Rename it to .ppsx" in log.skipped[0].reason
    )


def test_a_graphviz_dot_file_is_no_word_template_and_is_read_as_text_only_when_asked(tmp_path):
    pytest.importorskip("olefile")
    from c2v_rag.documents.formats import checked_text_suffixes, format_of

    folder = tmp_path / "docs"
    folder.mkdir()
    template = folder / "tides.dot"
    template.write_bytes(write_doc(tmp_path / "tides.doc", TIDE_PARAGRAPHS, title="Tide tables").read_bytes())
    graph = folder / "flow.dot"
    graph.write_text('digraph flow {\n  moon -> tide [label="pulls"];\n  tide -> shore;\n}\n')
    (folder / "notes.md").write_text("# Notes\n\n" + make_text(1))
    docs, log = read(folder)
    assert sorted(Path(d.source or "").name for d in docs) == ["notes.md", "tides.dot"]
    assert (log.files_skipped, dict(log.not_read)) == (0, {".dot": 1})  # a file of another type, as a .py is
    assert format_of(graph) is None and format_of(template) is not None and format_of(template).name == "Word 97-2003"
    assert checked_text_suffixes(["dot"]) == [".dot"]  # a suffix Word shares may be read as text...
    with pytest.raises(ValueError, match="read as Word 97-2003 already"):
        checked_text_suffixes([".doc"])  # ...one it does not share, not
    docs, log = read(folder, text_suffixes=(".dot",))
    by_name = {Path(d.source or "").name: d for d in docs}
    assert sorted(by_name) == ["flow.dot", "notes.md", "tides.dot"] and not log.not_read
    assert "moon -> tide" in by_name["flow.dot"].text and "Tide tables" in by_name["tides.dot"].text


def test_a_powerpoint_97_deck_reads_as_a_pptx_one_its_current_slides_in_order(tmp_path):
    pytest.importorskip("olefile")
    deck = write_ppt(tmp_path / "tides.ppt", title="Tide talk")
    (doc,), log = read(deck)
    # Slide 1's title and body come from the slide list its shapes point at; slide 2 is the second save's (the
    # first save's "Old draft" is superseded), though it lies first in the stream.
    assert doc.text == (
        "# Tide talk\n\n## Tides\n\n- The Moon pulls\n- and the Sun\n\nSource: the tide log\n\n"
        "Notes: Mention the equinox.\n\n## Ranges\n\n- Brest 7 m"
    )
    assert doc.metadata["title"] == "Tide talk" and log.files_skipped == 0
    assert doc.page_at(doc.text.index("## Ranges")) == "2" and doc.page_at(doc.text.index("- The Moon")) == "1"
    write_ppt(tmp_path / "tides.ppt")  # no recorded title: the first slide's
    (doc,), _ = read(deck)
    assert doc.metadata["title"] == "Tides" and doc.text.startswith("## Tides")


def test_ppt_files_encrypted_misnamed_or_damaged_are_skipped_with_the_reason(tmp_path):
    pytest.importorskip("olefile")
    import random
    import zipfile

    write_ppt(tmp_path / "locked.ppt", encrypted=True)
    with zipfile.ZipFile(tmp_path / "talk.ppt", "w") as archive:
        archive.writestr("ppt/presentation.xml", "<p:presentation/>")
    write_doc(tmp_path / "letter.ppt", TIDE_PARAGRAPHS)  # a Word file under a PowerPoint name
    docs, log = read(tmp_path)
    reasons = {Path(s.where).name: s.reason for s in log.skipped}
    assert docs == [] and "encrypted" in reasons["locked.ppt"] and "Rename it to .pptx" in reasons["talk.ppt"]
    assert "without a PowerPoint Document stream" in reasons["letter.ppt"]
    # Seeded corruptions of a good deck: each is read or skipped, never an error.
    good = write_ppt(tmp_path / "tides.ppt").read_bytes()
    for seed in range(40):
        rng = random.Random(seed)
        data = bytearray(good)
        for _ in range(8):
            at, size = rng.randrange(512, len(data) - 16), rng.randrange(1, 16)
            data[at : at + size] = rng.randbytes(size)
        (tmp_path / "tides.ppt").write_bytes(bytes(data))
        docs, log = read(tmp_path / "tides.ppt")
        assert len(docs) + log.files_skipped == 1


def test_an_outlook_message_reads_as_an_eml_does(tmp_path):
    pytest.importorskip("olefile")
    write_msg(tmp_path / "tides.msg", attachments=("tables.pdf", "photo.jpg"))
    (doc,), log = read(tmp_path)
    # The sender's SMTP address, not its Exchange directory path; the time Outlook recorded, in UTC.
    assert doc.text == (
        "# Spring tides next week\n\nFrom: Ada Lovelace <ada@example.org>\nTo: Tide desk\nCc: Harbour office\n"
        "Date: Wed, 03 Apr 2024 09:30:00 +0000\n\nThe range peaks on Friday.\n\n-- \nAda"
    )
    assert (
        doc.metadata["title"] == "Spring tides next week" and doc.metadata["from"] == "Ada Lovelace <ada@example.org>"
    )
    assert doc.metadata["date"] == "2024-04-03T09:30:00+00:00" and doc.metadata["to"] == "Tide desk"
    assert doc.metadata["attachments"] == ["tables.pdf", "photo.jpg"] and log.files_skipped == 0
    # An attached file a format reads (stored by value) is a document of its own, as an .eml's is. (4 KB or more:
    # the test's compound file records a shorter stream's padded size.)
    content = b"# Notes\n\n" + b"Bring boots.\n" * 400
    attached = ("tables.pdf", ("notes.md", content), ("photo.jpg", b"\xff\xd8\xff"))
    write_msg(tmp_path / "tides.msg", attachments=attached)
    (message, notes), log = read(tmp_path)
    where = (tmp_path / "tides.msg").resolve().as_posix()
    assert notes.doc_id == f"{where}/notes.md" and notes.text == content.decode() and log.files_skipped == 0
    assert notes.metadata["attachment_of"] == message.doc_id == where and notes.metadata["file_name"] == "notes.md"
    assert message.metadata["attachments"] == ["tables.pdf", "notes.md", "photo.jpg"]
    # An HTML body alone, as Markdown; an 8-bit subject in the code page of the message's locale (Russian: cp1251).
    html = b"<html><body><p>The <b>range</b> peaks.</p></body></html>"
    write_msg(tmp_path / "tides.msg", subject="Прилив", body=None, html=html, attachments=(), locale=1049)
    (doc,), _ = read(tmp_path)
    assert doc.metadata["title"] == "Прилив" and doc.text.endswith("\n\nThe **range** peaks.")
    assert "attachments" not in doc.metadata


def test_a_message_attached_to_an_outlook_message_reads_as_a_message_with_its_attachments(tmp_path):
    """Outlook stores a mail dragged into another as a message inside the attachment, not as bytes: it is read as
    an attached .eml is, a document of its own, and so are the files attached to it, at any depth."""
    pytest.importorskip("olefile")
    notes = b"# Notes\n\n" + b"Bring boots.\n" * 400
    inner = AttachedMsg(None, "Harbour works: Friday", "The quay closes at noon.", (("notes.md", notes),))
    outer = AttachedMsg("earlier.msg", "Re: tides", "See below.", (inner,))
    write_msg(tmp_path / "tides.msg", attachments=("tables.pdf", outer))
    docs, log = read(tmp_path)
    assert log.files_skipped == 0, log.skipped
    by_id = {doc.doc_id: doc for doc in docs}
    where = (tmp_path / "tides.msg").resolve().as_posix()
    assert by_id[where].metadata["attachments"] == ["tables.pdf", "earlier.eml"]
    forwarded = by_id[f"{where}/earlier.eml"]
    assert forwarded.metadata["attachment_of"] == where
    assert forwarded.metadata["attachments"] == ["Harbour works - Friday.eml"]
    # The attached message as the outer one reads: its subject leading, its header lines, its body. (Outlook keeps
    # recipients' names without their addresses; the e-mail reader quotes a recipient that has no address.)
    assert forwarded.text == (
        '# Re: tides\n\nFrom: Ada Lovelace <ada@example.org>\nTo: "Tide desk"\nCc: "Harbour office"\n'
        "Date: Wed, 03 Apr 2024 09:30:00 +0000\n\nSee below."
    )
    assert forwarded.metadata["date"] == "2024-04-03T09:30:00+00:00"
    deeper = by_id[f"{where}/earlier.eml/Harbour works - Friday.eml"]
    assert deeper.metadata["title"] == "Harbour works: Friday" and deeper.text.endswith("The quay closes at noon.")
    assert by_id[f"{where}/earlier.eml/Harbour works - Friday.eml/notes.md"].text == notes.decode()
    assert len(docs) == 4


def test_msg_files_that_are_not_outlook_messages_are_skipped_with_the_reason(tmp_path):
    pytest.importorskip("olefile")
    (tmp_path / "saved.msg").write_text("From: ada@example.org\nSubject: Tides\n\nHello.\n", encoding="utf-8")
    write_doc(tmp_path / "letter.msg", TIDE_PARAGRAPHS)
    good = write_msg(tmp_path / "damaged.msg").read_bytes()
    (tmp_path / "damaged.msg").write_bytes(good[:1024])
    docs, log = read(tmp_path)
    reasons = {Path(s.where).name: s.reason for s in log.skipped}
    assert docs == [] and "Rename it to .eml" in reasons["saved.msg"]
    assert "not an Outlook message" in reasons["letter.msg"] and "not a readable .msg file" in reasons["damaged.msg"]
