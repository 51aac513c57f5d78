"""Loading documents: every accepted input form, stable ids, and errors that name the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from c2v_rag.documents.documents import content_doc_id, iter_documents


def test_strings_get_content_ids_and_dicts_keep_theirs():
    docs = list(iter_documents(["alpha text", {"id": 7, "text": "beta", "metadata": {"lang": "en"}, "url": "u"}]))
    assert docs[0].doc_id == content_doc_id("alpha text") and docs[0].text == "alpha text"
    assert content_doc_id("alpha text") != content_doc_id("alpha text.")
    assert docs[1].doc_id == "7" and docs[1].text == "beta"
    # Other scalar fields join the metadata; a url is the source when there is no 'source'.
    assert docs[1].metadata == {"lang": "en", "url": "u"} and docs[1].source == "u"


def test_title_is_put_before_the_text():
    (doc,) = iter_documents({"_id": "s1", "title": "Vitamin D", "text": "Bone loss."})
    assert doc.doc_id == "s1" and doc.text == "Vitamin D\n\nBone loss." and doc.metadata["title"] == "Vitamin D"


def test_folder_reads_txt_md_jsonl_and_skips_hidden_and_other_files(tmp_path: Path):
    (tmp_path / "a.txt").write_text("plain text", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("# Title\nmarkdown", encoding="utf-8")
    (tmp_path / "c.jsonl").write_text(
        json.dumps({"_id": "x1", "text": "first"}) + "\n\n" + json.dumps({"text": "no id"}) + "\n", encoding="utf-8"
    )
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "d.txt").write_text("hidden", encoding="utf-8")
    (tmp_path / "e.key").write_bytes(b"PK\x03\x04")  # a Keynote deck: not read
    docs = list(iter_documents(tmp_path))
    jsonl = (tmp_path / "c.jsonl").resolve()
    assert [d.doc_id for d in docs] == [
        (tmp_path / "a.txt").resolve().as_posix(),
        "x1",
        f"{jsonl}:3",
        (tmp_path / "sub" / "b.md").resolve().as_posix(),
    ]
    assert [d.text for d in docs] == ["plain text", "first", "no id", "# Title\nmarkdown"]
    assert docs[0].source == str((tmp_path / "a.txt").resolve()) and docs[0].metadata["file_name"] == "a.txt"
    assert docs[1].source == str(jsonl)
    # A top-level string naming a path is read as a path; in a list, strings are texts.
    assert [d.doc_id for d in iter_documents(str(tmp_path / "a.txt"))] == [docs[0].doc_id]
    # Inside a list a string is a text, so a path string there is refused rather than embedded (the
    # path-strings trap, tests/documents/test_path_strings.py); as a dict it is a text.
    with pytest.raises(ValueError, match="look like file paths"):
        iter_documents([str(tmp_path / "a.txt")])
    assert [d.text for d in iter_documents([{"text": str(tmp_path / "a.txt")}])] == [str(tmp_path / "a.txt")]


def test_framework_documents():
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    from langchain_core.documents import Document as LCDocument
    from llama_index.core import Document as LIDocument
    from llama_index.core.schema import TextNode

    docs = list(
        iter_documents(
            [
                LIDocument(text="llama doc", id_="li-1", metadata={"file_path": "/x/a.txt"}),
                TextNode(text="a node", id_="node-1"),
                LCDocument(page_content="chain doc", metadata={"source": "s.txt"}, id="lc-1"),
                LCDocument(page_content="no id"),
            ]
        )
    )
    assert [(d.doc_id, d.text, d.source) for d in docs] == [
        ("li-1", "llama doc", "/x/a.txt"),
        ("node-1", "a node", None),
        ("lc-1", "chain doc", "s.txt"),
        (content_doc_id("no id"), "no id", None),
    ]


def test_each_item_weighs_the_text_its_document_holds():
    # The bar weighs in-memory items before they are read: by the text each kind's document will hold, whatever key
    # a record keeps it under and with its title before it. Refused items weigh nothing (they fail when read).
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    from langchain_core.documents import Document as LCDocument
    from llama_index.core import Document as LIDocument

    from c2v_rag.documents.documents import InputSize, input_size
    from c2v_rag.documents.files import ReadLog

    items = [
        "a plain string",
        {"text": "a record"},
        {"content": "kept under content", "title": "A title"},
        {"body": "", "title": "only a title"},
        {"page_content": "under page_content", "id": "p"},
        LCDocument(page_content="chain doc"),
        LIDocument(text="llama doc", id_="li-1"),
    ]
    read = [len(doc.text) for doc in iter_documents(items)]
    assert read == [14, 8, 27, 12, 18, 9, 9]  # the title, a blank line, the text; a title alone
    assert input_size(items, ReadLog()) == InputSize("doc", len(items), tuple(read))
    refused = [{"text": 3}, {"body_text": "x"}, 3.5]
    assert input_size(refused, ReadLog()).sizes == (0, 0, 0)


@pytest.mark.parametrize(
    ("docs", "error", "fragment"),
    [
        ([{"body_text": "x"}], ValueError, "docs[0] has no text"),
        ([{"text": "x", "metadata": {"doc_id": "a"}}], ValueError, "layout reserves"),
        ([{"text": "x", "metadata": "oops"}], TypeError, "must be a dict"),
        (["ok", 3.5], TypeError, "docs[1] is a float"),
        (Path("/nonexistent/corpus"), FileNotFoundError, "does not exist"),
        (42, TypeError, "got int"),
    ],
)
def test_bad_input_names_the_input(docs, error, fragment):
    with pytest.raises(error, match=None) as info:
        list(iter_documents(docs))
    assert fragment in str(info.value)


def test_bad_files_name_the_file(tmp_path: Path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{not json\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:2 is not valid JSON"):
        list(iter_documents(bad))
    keynote = tmp_path / "deck.key"
    keynote.write_bytes(b"PK\x03\x04")
    with pytest.raises(ValueError, match=r"unsupported file type '\.key'"):
        list(iter_documents(keynote))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"no files under .*empty \(hidden files"):
        list(iter_documents(empty))
