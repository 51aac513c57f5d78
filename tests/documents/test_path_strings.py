"""The path-strings trap: ``ingest(["a.md", "b.md"])`` used to embed the file names as texts."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("qdrant_client")

from rag_helpers import make_text

import c2v_rag
from c2v_rag.documents.documents import iter_documents


@pytest.fixture
def folder(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(3):
        (notes / f"n{i}.md").write_text(make_text(i))
    return notes


def test_a_list_of_existing_file_paths_as_strings_is_refused_with_the_fix(folder, tmp_path):
    paths = [str(p) for p in sorted(folder.glob("*.md"))]
    with pytest.raises(ValueError) as err:
        # model= names nothing loadable: the refusal comes before any model or store is touched.
        c2v_rag.ingest(paths, path=tmp_path / "store", collection="kb", model="no-such-variant")
    message = str(err.value)
    assert "all 3 of them name existing files" in message and f"docs[0]={paths[0]!r} and 2 more" in message
    assert "[Path(p) for p in paths]" in message and "{'text': s}" in message
    assert not (tmp_path / "store").exists()


def test_path_like_strings_that_do_not_exist_are_refused_too(tmp_path):
    # On another machine, or after a typo, the same call would otherwise embed the names silently.
    with pytest.raises(ValueError, match="0 of 2 name existing files or folders"):
        list(iter_documents(["docs/a.md", "docs/b.jsonl"]))


def test_the_fixes_the_error_names_work(folder, tiny_variant, ingest_config, tmp_path):
    paths = sorted(folder.glob("*.md"))
    as_paths = list(iter_documents([Path(p) for p in paths]))
    assert [d.text for d in as_paths] == [p.read_text() for p in paths]
    as_texts = list(iter_documents([{"text": str(p)} for p in paths]))
    assert [d.text for d in as_texts] == [str(p) for p in paths]
    result = c2v_rag.ingest(
        [Path(p) for p in paths], path=tmp_path / "s", collection="kb", model=tiny_variant, config=ingest_config
    )
    assert result.documents == 3 and all(
        h.source and h.source.endswith(".md") for h in c2v_rag.search("vitamin", path=tmp_path / "s", collection="kb")
    )


@pytest.mark.parametrize(
    "texts",
    [
        ["Cats and dogs are popular pets.", "See notes.md for the details."],  # one ordinary sentence is enough
        ["vitamin deficiency", "bone loss"],
        [".", "~"],  # existing, but no separator or suffix: a bare word or symbol stays a text
    ],
)
def test_texts_are_still_texts(texts):
    assert [d.text for d in iter_documents(texts)] == texts


def test_a_lone_path_string_beside_a_dict_is_refused():
    # The dict is a text; every string there looks like a path, so the list is refused.
    with pytest.raises(ValueError, match="look like file paths"):
        list(iter_documents(["report.md", {"text": "a dict next to it"}]))


@pytest.mark.parametrize("typo", ["notes/n9.md", "notes/drafts", "./missing", "/no/such/folder", "report.pdf"])
def test_a_lone_string_that_reads_as_a_missing_path_is_refused(folder, monkeypatch, typo):
    """ingest("folders/awk/nonexist") stored the string as the text of a document, silently (a messy-folder
    walkthrough); an existing path is read, and a string that does not read as a path stays a text."""
    monkeypatch.chdir(folder.parent)
    with pytest.raises(FileNotFoundError, match=rf"docs={typo!r} looks like a path, and no file or folder is there"):
        list(iter_documents(typo))
    assert [d.text for d in iter_documents({"text": typo})] == [typo]  # the fix the error names
    assert len(list(iter_documents("notes/n1.md"))) == 1


@pytest.mark.parametrize("text", ["and/or", "https://example.com/a.html", "vitamin deficiency", "tides", "x/y"])
def test_a_lone_string_that_does_not_read_as_a_path_is_a_text(folder, monkeypatch, text):
    monkeypatch.chdir(folder.parent)
    assert [d.text for d in iter_documents(text)] == [text]
