"""Terminal output saved as text (logs, nroff's manuals) is read as the screen showed it."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from c2v_rag.documents.documents import iter_documents
from c2v_rag.documents.reading import ReadOptions
from c2v_rag.documents.terminal import screen_text

ESC = "\x1b"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        # SGR: bold, a colour with parameters, reset; grep's "erase in line" (ESC [ K) after each.
        (f"{ESC}[1mman-db{ESC}[0m - the {ESC}[01;31m{ESC}[Kcache{ESC}[m{ESC}[K", "man-db - the cache"),
        # Cursor moves and erases, a private mode (ESC [ ? 25 l hides the cursor).
        (f"{ESC}[?25l{ESC}[2K{ESC}[1Gstep 3/10{ESC}[?25h", "step 3/10"),
        # An OSC 8 hyperlink, ended by ST (ESC \\), and a window title, ended by BEL: the link's text stays.
        (f"see {ESC}]8;;https://example.org/a{ESC}\\the guide{ESC}]8;;{ESC}\\ now", "see the guide now"),
        (f"{ESC}]0;build: ok\x07done", "done"),
        # A character set designation, a two-byte escape (save cursor), a stray ESC at the end.
        (f"{ESC}(Bplain{ESC}7 text{ESC}", "plain text"),
        # An OSC nothing ends stops at the line's end: the next line is kept.
        (f"{ESC}]0;title\nthe next line", "\nthe next line"),
        # nroff's bold (X BS X), underline (_ BS X), both (_ BS X BS X), and a backspace with nothing before it.
        ("N\bNA\bAM\bME\bE _\bi_\bt _\bX\bX\n\bend", "NAME it X\nend"),
        # Line breaks, tabs and carriage returns are the text's own.
        ("a\tb\r\nc\n", "a\tb\r\nc\n"),
        ("", ""),
    ],
)
def test_screen_text_keeps_what_a_terminal_shows(raw: str, shown: str):
    assert screen_text(raw) == shown


def test_text_without_controls_is_returned_as_it_is():
    text = "plain [1m text: brackets and m's are text when no ESC comes before them"
    assert screen_text(text) is text


def test_grep_colour_output_reads_as_the_lines_grep_matched():
    lines = "alpha beta\ngamma beta delta\nepsilon\n"
    coloured = subprocess.run(
        ["grep", "--color=always", "-n", "beta"], input=lines, capture_output=True, text=True, check=True
    ).stdout
    plain = subprocess.run(["grep", "-n", "beta"], input=lines, capture_output=True, text=True, check=True).stdout
    assert ESC in coloured
    assert screen_text(coloured) == plain


@pytest.mark.skipif(shutil.which("groff") is None, reason="needs groff")
def test_a_page_groff_rendered_for_a_terminal_reads_as_its_plain_rendering():
    """grotty's overstrikes (its ``-c`` output, what ``man`` writes to a file) and its SGR codes (``GROFF_SGR``)
    read as the page rendered with neither (``-P-cbou``): its words, once each."""
    page = ".TH DEMO 1\n.SH NAME\ndemo \\- show things\n.SH DESCRIPTION\n.B Bold\nwords and\n.I italic\nones.\n"

    def rendered(*options: str, sgr: bool = False) -> str:
        env = {"PATH": os.environ["PATH"], **({"GROFF_SGR": "1"} if sgr else {})}
        command = ["groff", "-man", "-Tascii", *options]
        return subprocess.run(command, input=page, capture_output=True, text=True, check=True, env=env).stdout

    plain, struck, sgr = rendered("-P-cbou"), rendered("-P-c"), rendered(sgr=True)
    assert "\b" in struck and ESC in sgr and "\b" not in plain and ESC not in plain
    assert "Bold words and italic ones." in plain
    assert screen_text(struck) == plain
    assert screen_text(sgr) == plain


def test_a_log_and_a_compressed_manual_are_ingested_as_their_screen_text(tmp_path: Path):
    raw = f"{ESC}[32mINFO{ESC}[0m server started on {ESC}[1mport 8080{ESC}[0m\n"
    (tmp_path / "server.log").write_text(raw, encoding="utf-8")
    with gzip.open(tmp_path / "manual.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("N\bNA\bAM\bME\bE\n       _\bd_\be_\bm_\bo - show things\n")
    docs = {Path(d.doc_id).name: d.text for d in iter_documents(tmp_path, options=ReadOptions(text_suffixes=(".log",)))}
    assert docs == {
        "server.log": "INFO server started on port 8080\n",
        "manual.txt.gz": "NAME\n       demo - show things\n",
    }
