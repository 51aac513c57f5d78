"""experiments/build_docs_corpus.py --pairs: documentation pages become (query, passage) pairs of four kinds, each text
once, whole pages held out, man pages and the benchmarks' packages never read."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_loading import load_script

ROOT = Path(__file__).resolve().parents[2]
builder = load_script(ROOT / "experiments" / "build_docs_corpus.py", "build_docs_corpus_pairs")

BODY = (
    "The session establishes all conversations with the database and represents a holding zone for all the "
    "objects which you have loaded or associated with it during its lifespan. It provides the interface where "
    "queries are made that will return and modify objects, and it keeps track of every change made to them until "
    "the changes are flushed to the database in one transaction."
)
PAGE = f"""<html><head><title>Session Basics - Example docs</title></head><body>
<div class="sphinxsidebar"><p>{BODY.replace("session", "sidebar")} Navigation text that is not content.</p></div>
<div role="main"><h1>Session Basics<a class="headerlink" href="#">\u00b6</a></h1>
<p>{BODY}</p>
<h2>What does the Session do?</h2><p>{BODY.replace("establishes", "opens")}</p>
<div class="highlight"><pre>session = Session(engine)</pre></div>
<dl><dt>Session.commit()</dt><dd><p>{BODY.replace("The session", "Commit")}</p></dd></dl>
<h2>Notes</h2><p>{BODY.replace("holding zone", "staging area")}</p>
</div></body></html>"""


def test_an_html_page_gives_its_content_only_as_pairs_of_each_kind():
    document = builder.html_document(PAGE, "/usr/share/doc/x/html/session.html", "debian:x")
    assert document.title == "Session Basics"
    text = " ".join(document.intro + [p for s in document.sections for p in s.paragraphs])
    assert "Navigation text" not in text and "Session(engine)" not in text and "\u00b6" not in text
    pairs = builder.document_pairs(document, max_chars=1000)
    by_kind = {kind: (query, passage) for kind, query, passage in pairs}
    assert by_kind["title"] == ("Session Basics", BODY)
    assert by_kind["question"][0] == "What does the Session do?"
    assert by_kind["term"][0] == "Session.commit()" and by_kind["term"][1].startswith("Commit")
    # a generic heading gets its page's title; a summary is a first sentence against the rest
    assert ("heading", "Notes (Session Basics)") in {(k, q) for k, q, _ in pairs}
    summary = next(p for p in pairs if p[0] == "summary")
    assert summary[1].startswith("The session opens") and summary[2].startswith("It provides")


def test_info_nodes_give_sections_and_definitions():
    info = (
        "\x1f\nFile: x.info,  Node: Shell Syntax,  Next: Quoting,  Up: Top\n\n3.1 Shell Syntax\n================\n\n"
        "* Menu:\n\n* Quoting::  How to quote.\n\n"
        f"{BODY}\n\n     code that is left out\n\n -- Function: int frob (int x)\n     {BODY}\n\n          frob (1);\n"
    )
    documents = builder.info_documents(info, "/usr/share/info/x.info.gz", "info:x")
    assert len(documents) == 1 and documents[0].title == "Shell Syntax"
    pairs = builder.document_pairs(documents[0], max_chars=1000)
    assert ("term", "int frob (int x)") in {(k, q) for k, q, _ in pairs}
    assert not any("left out" in p or "frob (1)" in p for _, _, p in pairs) and not any(
        "Menu" in q for _, q, _ in pairs
    )


def test_pairs_are_deduplicated_split_by_page_and_capped_per_source():
    pages = [builder.html_document(PAGE, f"/doc/{i}.html", f"debian:p{i % 2}") for i in range(40)]
    records, counts = builder.build_pairs(pages, max_chars=1000, heldout_percent=10, max_share=1.0)
    # the 40 copies of one page give what the page alone gives (its sections share some text: fewer than its pairs)
    alone, _ = builder.build_pairs(pages[:1], max_chars=1000, heldout_percent=10, max_share=1.0)
    assert counts["pairs"] == len(alone) <= len(builder.document_pairs(pages[0], 1000))
    assert counts["dropped"]["duplicate"] >= 39 * len(alone)
    assert len({r["query"] for r in records}) == len(records) == len({r["positive"] for r in records})
    split = {p.path: builder._held_out(p.path, 10) for p in pages}
    assert any(split.values()) and not all(split.values())  # a page's side is a function of its path alone
    assert all(r["split"] == ("heldout" if split[r["path"]] else "train") for r in records)


def test_man_pages_and_the_benchmarks_packages_are_never_read():
    assert builder._doc_file(Path("/usr/share/man/man2/fork.2.gz")) is None
    assert builder._doc_file(Path("/usr/share/doc/git-doc/git-commit.1.html")) is None
    assert builder._doc_file(Path("/usr/share/doc/apache2-doc/manual/mod/core.html.fr")) is None
    with pytest.raises(SystemExit, match="bench/ood"):
        builder.debian_documents("manpages")
    with pytest.raises(SystemExit, match="bench/ood"):
        builder.debian_documents("dict-jargon")
    with pytest.raises(SystemExit, match="bench/ood"):
        builder.debian_documents("postfix-doc")


def test_the_package_list_prints_without_an_output_folder(monkeypatch, capsys):
    # docs/gpu.md feeds it to apt-get: an argparse error here would install nothing, and say so only on stderr
    monkeypatch.setattr("sys.argv", ["build_docs_corpus.py", "--list-debian"])
    builder.main()
    assert capsys.readouterr().out.split() == list(builder.DEBIAN_DOCS)
    monkeypatch.setattr("sys.argv", ["build_docs_corpus.py", "--pairs"])
    with pytest.raises(SystemExit):
        builder.main()
    assert "--out is required" in capsys.readouterr().err
