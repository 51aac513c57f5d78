"""Deleting documents from a collection: by id, by filter, both; in local mode and Qdrant Edge; behind an alias."""

from __future__ import annotations

from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from rag_helpers import make_text

import c2v_rag
from c2v_rag import Collection
from c2v_rag.rag import CollectionNotFoundError
from c2v_rag.store.edge_client import EdgeClient

SMALL = {"chunk_size": 24, "chunk_overlap": 4, "show_progress": False}


def chunks_per_document(store: Path, kind: str, collection: str) -> Counter[str]:
    """Each stored document's count of chunks, read back with the store's own client."""
    opened = EdgeClient(store) if kind == "edge" else QdrantClient(path=str(store))
    counts: Counter[str] = Counter()
    with closing(opened) as client:
        offset = None
        while True:
            points, offset = client.scroll(collection, limit=64, offset=offset, with_payload=True)
            counts.update(str(p.payload["doc_id"]) for p in points)
            if offset is None:
                return counts


@pytest.mark.parametrize("kind", ["local", "edge"])
def test_documents_leave_by_id_by_filter_and_by_both_and_come_back_on_a_reingest(tmp_path, tiny_variant, kind):
    folder = tmp_path / "notes"
    folder.mkdir()
    for i, name in enumerate(["a.md", "b.md"]):
        (folder / name).write_text(make_text(10 + i, sentences=6), encoding="utf-8")
    teams = ["y", "x", "y", "y"]
    records = [
        {"id": f"rec-{i}", "text": make_text(i, sentences=4), "metadata": {"team": t}} for i, t in enumerate(teams)
    ]
    text = make_text(20, sentences=3)
    store = tmp_path / "store"
    kb = Collection("kb", path=store, store=kind, model=tiny_variant)
    kb.ingest(records, **SMALL)
    kb.ingest([text], **SMALL)
    kb.ingest(folder, **SMALL)
    before = chunks_per_document(store, kind, "kb")
    b_md = str((folder / "b.md").resolve())
    assert before[b_md] > 1 and before["rec-0"] > 1  # documents of several chunks go whole

    # By id, one of them stored under no such id: it is named back, nothing else is touched.
    result = kb.delete_documents(["rec-0", "rec-9", b_md])
    assert (result.documents_deleted, result.chunks_deleted) == (2, before["rec-0"] + before[b_md])
    assert result.not_found == ["rec-9"]
    after = chunks_per_document(store, kind, "kb")
    assert after == Counter({k: v for k, v in before.items() if k not in ("rec-0", b_md)})
    hits = kb.search(make_text(0, sentences=4), top_k=50)
    assert {hit.doc_id for hit in hits} == set(after)

    # By filter, as search takes it; then ids narrowed by a filter: only those it matches go.
    result = kb.delete_documents(filter={"file_name": "a.md"})
    assert (result.documents_deleted, result.chunks_deleted, result.not_found) == (
        1,
        after.pop(str((folder / "a.md").resolve())),
        [],
    )
    result = kb.delete_documents(["rec-1", "rec-2", "rec-3"], filter={"team": "x"})
    assert (result.documents_deleted, result.chunks_deleted) == (1, after.pop("rec-1"))
    assert result.not_found == ["rec-2", "rec-3"]  # stored, but not matched by the filter
    assert chunks_per_document(store, kind, "kb") == after

    # A string's id is the hash its hit carries; a re-ingest brings a deleted document back.
    (text_id,) = {hit.doc_id for hit in kb.search(text, top_k=50)} - {"rec-2", "rec-3"}
    assert kb.delete_documents(text_id).documents_deleted == 1  # one id alone is one id
    again = kb.ingest(records[:1], **SMALL)
    assert again.chunks_written == before["rec-0"]
    assert chunks_per_document(store, kind, "kb") == Counter(
        {"rec-2": after["rec-2"], "rec-3": after["rec-3"], "rec-0": before["rec-0"]}
    )


@pytest.mark.parametrize("kind", ["local", "edge"])
def test_files_and_folders_take_out_every_document_read_from_them(tmp_path, tiny_variant, kind):
    import json
    import zipfile

    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text(make_text(0, sentences=5), encoding="utf-8")
    (folder / "sub" / "b.md").write_text(make_text(1, sentences=5), encoding="utf-8")
    rows = [{"id": "r1", "text": make_text(2, sentences=3)}, {"text": make_text(3, sentences=3)}]
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with zipfile.ZipFile(folder / "pack.zip", "w") as pack:
        pack.writestr("guide/c.md", make_text(4, sentences=5))
        pack.writestr("d.md", make_text(5, sentences=5))
    (tmp_path / "docs-old.md").write_text(
        make_text(6, sentences=2), encoding="utf-8"
    )  # a name that begins as the folder's
    store = tmp_path / "store"
    kb = Collection("kb", path=store, store=kind, model=tiny_variant)
    kb.ingest(folder, **SMALL)
    kb.ingest(tmp_path / "docs-old.md", **SMALL)
    before = chunks_per_document(store, kind, "kb")
    root = str(folder.resolve())
    assert set(before) == {
        f"{root}/a.md", f"{root}/sub/b.md", "r1", f"{root}/rows.jsonl:2", f"{root}/pack.zip/guide/c.md",
        f"{root}/pack.zip/d.md", str((tmp_path / "docs-old.md").resolve()),
    }  # fmt: skip

    # A JSONL file's records and an archive's members go with their file; the file need not exist any more.
    (folder / "rows.jsonl").unlink()
    result = kb.delete_documents(files=[folder / "rows.jsonl", folder / "pack.zip", folder / "gone.md"])
    went = ["r1", f"{root}/rows.jsonl:2", f"{root}/pack.zip/guide/c.md", f"{root}/pack.zip/d.md"]
    assert (result.documents_deleted, result.chunks_deleted) == (4, sum(before[d] for d in went))
    assert result.not_found == [f"{root}/gone.md"]
    # Files that hold nothing stored delete nothing (not everything).
    left = chunks_per_document(store, kind, "kb")
    nothing = kb.delete_documents(files=[folder / "never.md", tmp_path / "elsewhere"])
    assert (nothing.documents_deleted, nothing.not_found) == (0, [f"{root}/never.md", str(tmp_path / "elsewhere")])
    assert chunks_per_document(store, kind, "kb") == left
    # A folder: what was read under it, and not a file beside it whose name only begins the same.
    result = kb.delete_documents(files=str(folder))
    assert result.documents_deleted == 2 and result.not_found == []
    assert set(chunks_per_document(store, kind, "kb")) == {str((tmp_path / "docs-old.md").resolve())}


def test_the_top_level_call_writes_through_an_alias(tmp_path, tiny_variant):
    docs = [{"id": f"doc-{i}", "text": make_text(i, sentences=3)} for i in range(3)]
    c2v_rag.ingest(docs, path=tmp_path, collection="papers", model=tiny_variant, versioned=True, **SMALL)
    result = c2v_rag.delete_documents(["doc-1"], path=tmp_path, collection="papers")
    assert result.collection == "papers_v1" and result.documents_deleted == 1
    assert set(chunks_per_document(tmp_path, "local", "papers_v1")) == {"doc-0", "doc-2"}


def test_a_call_that_names_no_documents_is_refused_before_the_store_opens(tmp_path, tiny_variant):
    store = tmp_path / "never"
    kb = Collection("kb", path=store, model=tiny_variant)
    with pytest.raises(ValueError, match=r"doc_ids=\[...\] .* or filter=\{...\}.*Collection.delete\(\)"):
        kb.delete_documents()
    with pytest.raises(ValueError, match="doc_ids is empty"):
        kb.delete_documents([])
    with pytest.raises(ValueError, match="Collection.delete"):
        kb.delete_documents(filter={})  # an empty filter matches everything
    with pytest.raises(TypeError, match=r"doc_ids\[1\] is a PosixPath; .*str\(Path\(...\).resolve\(\)\)"):
        kb.delete_documents(["a", Path("b.md")])
    with pytest.raises(ValueError, match="files is empty"):
        kb.delete_documents(files=[])
    with pytest.raises(TypeError, match=r"files\[0\] is a int"):
        kb.delete_documents(files=[3])
    with pytest.raises(ValueError, match="unknown operator|operator"):
        kb.delete_documents(filter={"team": {"like": "x"}})
    assert not store.exists()
    with pytest.raises(CollectionNotFoundError, match="kb"):
        kb.delete_documents(["a"])


def test_finding_files_documents_shows_a_bar_of_the_chunks_read(tmp_path, tiny_variant, monkeypatch, capsys):
    from c2v_rag.rag.admin import delete

    monkeypatch.setattr(delete, "BAR_DELAY_S", 0)  # shown at once; by default only once the scan takes a second
    kb = Collection("kb", path=tmp_path, model=tiny_variant)
    kb.ingest([{"id": f"r{i}", "text": make_text(i, sentences=3)} for i in range(4)], **SMALL)
    chunks = kb.count()
    capsys.readouterr()
    kb.delete_documents(files=[tmp_path / "nothing.md"])
    bar = capsys.readouterr().err
    assert "Reading the sources in kb: 100%" in bar and f"{chunks}/{chunks}" in bar
    kb.delete_documents(files=[tmp_path / "nothing.md"], show_progress=False)
    assert capsys.readouterr().err == ""
