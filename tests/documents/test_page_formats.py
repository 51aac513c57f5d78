"""One page in several formats in a folder: the walk reads one copy (c2v_rag.documents.page_formats), on real files
read by their real readers."""

from __future__ import annotations

import gzip
import logging
from pathlib import Path

import pytest

from c2v_rag.documents.documents import iter_documents
from c2v_rag.documents.files import ReadLog, ReadOptions
from c2v_rag.documents.page_formats import copies_in_other_formats, page_of

# name -> text: the pages of a documentation folder as packages ship them, some in two formats.
FOLDER = {
    "api/fs.md": "# File system\n\nThe fs module reads and writes files.\n",
    "api/fs.html": "<h1>File system</h1><p>The fs module reads and writes files.</p>",
    "api/dns.html": "<h1>DNS</h1><p>Name resolution.</p>",  # HTML alone: read
    "FAQ.html": "<h1>FAQ</h1><p>Why is the sky blue?</p>",
    "README": "Read me first.\n",
    "README.md": "# Read me\n\nRead me first.\n",
    "parse.py": "x = 1  # read by text_suffixes: no copy of parse.html\n",
    "parse.html": "<p>The parser.</p>",
    "guide.md": "# Guide\n\nOne guide.\n",
    "guide.rst": "Guide\n=====\n\nAnother guide.\n",  # the same rank as guide.md: both read
    "table.csv": "a,b\n1,2\n",  # a table has no page rank: never a copy
    "table.html": "<p>The table explained.</p>",
    "sub/FAQ.txt": "Another folder's FAQ.\n",  # another folder: no copy of FAQ.html
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name, text in FOLDER.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "FAQ.txt.gz").write_bytes(gzip.compress(b"Why is the sky blue?\n"))  # plain text, compressed
    return tmp_path


def read(folder: Path, options: ReadOptions, log: ReadLog) -> list[str]:
    return sorted(
        Path(d.metadata["source"]).relative_to(folder.resolve()).as_posix()
        for d in iter_documents(folder, options=options, log=log)
    )


def test_a_page_in_several_formats_is_read_once_in_the_first_ranked(folder: Path, caplog):
    log = ReadLog()
    with caplog.at_level(logging.INFO, logger="c2v_rag.documents.files"):
        got = read(folder, ReadOptions(text_suffixes=(".py",)), log)
    assert got == [
        "FAQ.html",  # over FAQ.txt.gz: HTML says its headings, plain text does not
        "README.md",  # over README (plain text by its name)
        "api/dns.html",
        "api/fs.md",  # the source over what was made of it
        "guide.md",
        "guide.rst",
        "parse.html",
        "parse.py",
        "sub/FAQ.txt",
        "table.csv",
        "table.html",
    ]
    assert log.other_format_copies == 3 and log.files_listed == len(got)
    assert [r.getMessage() for r in caplog.records if "copy of a page" in r.getMessage()] == [
        f"Left out 3 files under {folder.resolve()}, each a copy of a page read in another format beside it: "
        "FAQ.txt.gz (FAQ.html is read) and 2 more; to read every copy, pass every_format=True (--every-format)"
    ]


def test_every_format_reads_every_copy(folder: Path):
    log = ReadLog()
    got = read(folder, ReadOptions(text_suffixes=(".py",), every_format=True), log)
    assert len(got) == len(FOLDER) + 1 and log.other_format_copies == 0


def test_page_of_names_the_page_and_rank(tmp_path: Path):
    assert page_of(tmp_path / "fs.md") == (tmp_path / "fs", 0)
    assert page_of(tmp_path / "FAQ.txt.gz") == (tmp_path / "FAQ", 2)
    assert page_of(tmp_path / "README") == (tmp_path / "README", 2)
    assert page_of(tmp_path / "paper.pdf") == (tmp_path / "paper", 4)
    for other in ("README.Debian", "data.csv", "docs.tar.gz", "tool.py", "NEWS"):
        assert page_of(tmp_path / other) is None, other
    # The best rank wins whatever order the files come in; ties keep every copy.
    files = [tmp_path / n for n in ("paper.pdf", "paper.docx", "paper.tex", "notes.md", "notes.org")]
    assert copies_in_other_formats(files) == {
        tmp_path / "paper.pdf": tmp_path / "paper.tex",
        tmp_path / "paper.docx": tmp_path / "paper.tex",
    }
    assert copies_in_other_formats(reversed(files)) == copies_in_other_formats(files)
