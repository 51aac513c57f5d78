"""GNU Info manuals as makeinfo writes them: a document per node, named by the file and the node; the preamble,
menus, index and licence nodes and the tag table left out; a split manual's numbered parts read as files of their
own, compressed or not; and the ingest of such a folder end to end."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from c2v_rag.documents.documents import iter_documents
from c2v_rag.documents.files import ReadLog
from c2v_rag.documents.formats import format_of

US = "\x1f"
INDEX = "\x00\x08[index\x00\x08]"

PREAMBLE = """This is tides.info, produced by makeinfo version 6.8 from tides.texi.

This manual is for Tides, version 1.0.

   Copyright (C) 2024 Free Software Foundation, Inc.

     Permission is granted to copy, distribute and/or modify this
     document under the terms of the GNU Free Documentation License.
INFO-DIR-SECTION Science
START-INFO-DIR-ENTRY
* Tides: (tides).               Predicting the sea.
END-INFO-DIR-ENTRY

"""

TOP = """File: tides.info,  Node: Top,  Next: Spring tides,  Up: (dir)

Tides
*****

This manual is for Tides, version 1.0.

* Menu:

* Spring tides::              When the Sun and the Moon align.
* GNU Free Documentation License:: Copying and sharing this manual.
* Concept Index::             A menu with all the topics in this manual.

"""

SPRING = """File: tides.info,  Node: Spring tides,  Next: Neap tides,  Prev: Top,  Up: Top

1 Spring tides
**************

Spring tides happen when the Sun and the Moon align, *note Neap tides::
for the opposite case, and *note the lunar cycle: Lunar
cycle. for the dates.  See *note Neap tides: Neap tides. How high they run: *note Their height::.

1.1 Their height
================

The range is about a fifth above the mean.
--------------
A line of dashes that underlines nothing.

"""

CHAPTER = """File: tides.info,  Node: Tables,  Next: Neap tides,  Prev: Spring tides,  Up: Top

2 Tables
********

* Menu:

* Harbours::    Tables of the harbours.

"""

NEAP = """File: tides.info,  Node: Neap tides,  Next: GNU Free Documentation License,  Prev: Spring tides,  Up: Top

2 Neap tides
************

Neap tides come at the quarter moons.  *Note Spring tides::.

"""

LICENCE = """File: tides.info,  Node: GNU Free Documentation License,  Next: Concept Index,  Prev: Neap tides,  Up: Top

Appendix A GNU Free Documentation License
*****************************************

Everyone is permitted to copy and distribute verbatim copies.

"""

CONCEPT_INDEX = f"""File: tides.info,  Node: Concept Index,  Prev: GNU Free Documentation License,  Up: Top

Concept Index
*************

{INDEX}
* Menu:

* moon:                                  Spring tides.          (line 6)
* quarter moon:                          Neap tides.            (line 6)

"""

TAG_TABLE = f"""{US}
Tag Table:
Node: Top\x7f400
Node: Spring tides\x7f800
{US}
End Tag Table

{US}
Local Variables:
coding: utf-8
End:
"""


def manual(*nodes: str) -> str:
    return PREAMBLE + "".join(US + "\n" + node for node in nodes) + TAG_TABLE


def test_an_info_manual_gives_a_document_per_node_with_what_a_reader_searches_for(tmp_path: Path):
    info = tmp_path / "tides.info"
    info.write_text(manual(TOP, SPRING, CHAPTER, NEAP, LICENCE, CONCEPT_INDEX), encoding="utf-8")
    docs = list(iter_documents([info], log=(log := ReadLog())))  # the chapter of a heading and a menu alone: none
    path = info.resolve().as_posix()
    assert [d.doc_id for d in docs] == [f"{path}:Top", f"{path}:Spring tides", f"{path}:Neap tides"]
    assert log.files_skipped == 0  # the index node's NUL bytes did not make it binary
    top, spring, neap = docs
    assert top.text == "# Tides\n\nThis manual is for Tides, version 1.0."  # no menu, no preamble
    assert spring.metadata == {"source": str(info.resolve()), "file_name": "tides.info", "node": "Spring tides"}
    assert spring.text == (
        "# 1 Spring tides\n\n"
        "Spring tides happen when the Sun and the Moon align, see Neap tides\n"
        # makeinfo ends a labelled reference with a period even mid-sentence (Sphinx's output has them): dropped
        # there, and the text's own "See" not doubled.
        "for the opposite case, and see the lunar cycle for the dates.  See Neap tides. How high they run: "
        "see Their height.\n\n"
        "## 1.1 Their height\n\n"
        "The range is about a fifth above the mean.\n\n"  # the rule underlines nothing: not a Markdown heading
        "--------------\n"
        "A line of dashes that underlines nothing."
    )
    assert neap.text == "# 2 Neap tides\n\nNeap tides come at the quarter moons.  See Spring tides."


def test_a_split_manuals_parts_are_read_compressed_or_not_and_its_main_file_gives_nothing(tmp_path: Path):
    folder = tmp_path / "info"
    folder.mkdir()
    main = PREAMBLE + f"{US}\nIndirect:\ntides.info-1: 400\ntides.info-2: 900\n" + TAG_TABLE
    (folder / "tides.info.gz").write_bytes(gzip.compress(main.encode()))
    (folder / "tides.info-1.gz").write_bytes(gzip.compress(f"{PREAMBLE}{US}\n{TOP}{US}\n{SPRING}".encode()))
    (folder / "tides.info-2").write_text(f"{PREAMBLE}{US}\n{NEAP}{US}\n{CONCEPT_INDEX}", encoding="utf-8")
    (folder / "notes.txt-2").write_text("a numbered part of a format that has none", encoding="utf-8")
    log = ReadLog()
    docs = list(iter_documents([folder], log=log))
    where = folder.resolve().as_posix()
    assert sorted(d.doc_id.removeprefix(where + "/") for d in docs) == [
        "tides.info-1.gz:Spring tides",
        "tides.info-1.gz:Top",
        "tides.info-2:Neap tides",
    ]
    assert dict(log.not_read) == {".txt-2": 1} and log.files_skipped == 0  # only Info numbers its parts
    assert format_of(Path("tides.info-12")) is format_of(Path("tides.info")) is not None
    assert format_of(Path("notes.txt-2")) is None and format_of(Path("tides.info-x")) is None


def test_an_info_folder_ingests_and_searches_by_node(tmp_path: Path, tiny_variant, ingest_config):
    pytest.importorskip("qdrant_client")
    import c2v_rag

    info = tmp_path / "tides.info.gz"
    info.write_bytes(gzip.compress(manual(TOP, SPRING, NEAP, LICENCE, CONCEPT_INDEX).encode()))
    result = c2v_rag.ingest(info, path=tmp_path / "qd", collection="info", model=tiny_variant, config=ingest_config)
    assert result.documents == 3 and result.files_skipped == 0
    hits = c2v_rag.search("Neap tides come at the quarter moons", path=tmp_path / "qd", collection="info", top_k=50)
    assert {h.metadata["node"] for h in hits} == {"Top", "Spring tides", "Neap tides"}
    assert all(h.source == str(info.resolve()) for h in hits)


def test_the_command_lines_hits_name_their_node(tmp_path: Path, tiny_variant, capsys):
    pytest.importorskip("qdrant_client")
    from c2v_rag.cli import main

    info = tmp_path / "tides.info"
    info.write_text(manual(TOP, SPRING, NEAP), encoding="utf-8")
    store = ["--path", str(tmp_path / "qd"), "--collection", "info"]
    assert main(["ingest", str(info), *store, "--model", str(tiny_variant), "--chunk-size", "100", "-q"]) == 0
    capsys.readouterr()
    assert main(["search", "quarter moons", *store, "--top-k", "10", "--rerank", "none", "--snippet-chars", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    nodes = [re.search(r"tides\.info  node (.+?)(?:  § (.+))?  \(chunk \d+\)$", line) for line in lines]
    assert all(nodes) and {m.group(1) for m in nodes if m} == {"Neap tides", "Spring tides", "Top"}, lines
    # A chunk under a node's section heading names it too (the node's own heading is its title).
    assert {(m.group(1), m.group(2)) for m in nodes if m and m.group(2)} == {("Spring tides", "1.1 Their height")}


def test_a_manual_is_read_in_the_encoding_it_names_its_split_parts_in_their_main_files(tmp_path: Path):
    """makeinfo names a manual's encoding at its end (``coding: iso-8859-1``), in the main file alone where it is
    split; a part's few accents are too little for sniffing (this one reads as cp1257 by its bytes)."""
    neap = NEAP.replace("Neap tides come at the quarter moons.", "A café by the harbour; naïve sailors; déjà vu.")
    latin = TAG_TABLE.replace("coding: utf-8", "coding: iso-8859-1")
    folder = tmp_path / "info"
    folder.mkdir()
    (folder / "tides.info").write_bytes((PREAMBLE + f"{US}\nIndirect:\ntides.info-1: 400\n" + latin).encode("latin-1"))
    (folder / "tides.info-1.gz").write_bytes(gzip.compress(f"{US}\n{neap}".encode("latin-1")))
    (folder / "whole.info").write_bytes(manual(neap).replace("coding: utf-8", "coding: iso-8859-1").encode("latin-1"))
    docs = {d.doc_id.rsplit("/", 1)[1]: d.text for d in iter_documents([folder], log=ReadLog())}
    expected = "# 2 Neap tides\n\nA café by the harbour; naïve sailors; déjà vu.  See Spring tides."
    assert docs == {"tides.info-1.gz:Neap tides": expected, "whole.info:Neap tides": expected}
