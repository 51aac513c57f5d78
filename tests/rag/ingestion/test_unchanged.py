"""A re-run skips the documents stored whole and unchanged before chunking them, and only those.

Each check counts the documents the chunker really cuts (the real chunker, wrapped to count) and compares the
collection with a clean ingest of the same input.
"""

from __future__ import annotations

import logging
from contextlib import closing

import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from rag_helpers import make_text, stored_points

import c2v_rag
from c2v_rag.documents.chunking import TokenChunker
from c2v_rag.documents.payload_keys import DOC_HASH_KEY


@pytest.fixture
def chunked(monkeypatch) -> list[str]:
    """The texts the chunker cuts, in order (the real chunker does the cutting)."""
    texts: list[str] = []
    real = TokenChunker.iter_chunks

    def counting(self, text, lead=None, **options):
        texts.append(text)
        return real(self, text, lead, **options)

    monkeypatch.setattr(TokenChunker, "iter_chunks", counting)
    return texts


def _points(path, store: str = "local") -> dict[str, dict]:
    """Every point's payload in the store at ``path``."""
    if store == "edge":
        from c2v_rag.store.edge_client import EdgeClient

        opened = EdgeClient(path)
    else:
        opened = QdrantClient(path=str(path))
    with closing(opened) as client:
        return stored_points(client, "kb")


def _clean(tmp_path, docs, model, config, store: str = "local") -> dict[str, dict]:
    c2v_rag.ingest(docs, path=tmp_path / "clean", store=store, collection="kb", model=model, config=config)
    return _points(tmp_path / "clean", store)


# Local mode looks documents up in one read of the collection; Qdrant Edge by their ids, as a server does.
@pytest.mark.parametrize("store", ["local", "edge"])
def test_an_unchanged_rerun_chunks_nothing_and_an_edit_chunks_only_the_edited_document(
    tmp_path, tiny_variant, corpus, ingest_config, chunked, store
):
    if store == "edge":
        pytest.importorskip("qdrant_edge")
    kwargs = {
        "path": tmp_path / "a",
        "store": store,
        "collection": "kb",
        "model": tiny_variant,
        "config": ingest_config,
    }
    first = c2v_rag.ingest(corpus, **kwargs)
    assert len(chunked) == len(corpus)
    points = _points(tmp_path / "a", store)
    # Every point of a document stored whole carries the document's hash, the same for all its points.
    hashes: dict[str, set] = {p["doc_id"]: set() for p in points.values()}
    for p in points.values():
        hashes[p["doc_id"]].add(p[DOC_HASH_KEY])
    assert len(hashes) == len(corpus) and all(len(h) == 1 for h in hashes.values())

    chunked.clear()
    again = c2v_rag.ingest(corpus, **kwargs)
    assert chunked == []
    assert (again.documents, again.documents_unchanged, again.chunks, again.chunks_written, again.chunks_unchanged) == (
        len(corpus),
        len(corpus),
        first.chunks,
        0,
        first.chunks,
    )
    assert again.summary().startswith(f"{len(corpus)} documents ({len(corpus)} unchanged), {first.chunks} chunks")
    assert first.documents_unchanged == 0 and f"{len(corpus)} documents, " in first.summary()

    edited = [dict(d) for d in corpus]
    edited[2]["text"] = " ".join(corpus[2]["text"].split()[:4])  # cut short: fewer chunks than before
    edited[4]["metadata"] = {"topic": "edited", "n": 4}
    chunked.clear()
    changed = c2v_rag.ingest(edited, **kwargs)
    assert sorted(chunked) == sorted([edited[2]["text"], edited[4]["text"]])
    after = _points(tmp_path / "a", store)
    assert after == _clean(tmp_path, edited, tiny_variant, ingest_config, store)
    # The summary counts the two edited documents and the old chunks that went: the points before that are gone.
    gone = set(points) - set(after)
    assert gone and {points[pid]["doc_id"] for pid in gone} <= {corpus[2]["id"], corpus[4]["id"]}
    assert (changed.documents_unchanged, changed.documents_changed, changed.old_chunks_deleted) == (
        len(corpus) - 2,
        2,
        len(gone),
    )
    assert f"({len(corpus) - 2} unchanged, 2 changed)" in changed.summary()
    assert f"; deleted {len(gone)} chunk" in changed.summary()


def test_other_chunking_settings_chunk_every_document_again(tmp_path, tiny_variant, corpus, ingest_config, chunked):
    c2v_rag.ingest(corpus, path=tmp_path / "a", collection="kb", model=tiny_variant, config=ingest_config)
    smaller = ingest_config.model_copy(update={"chunk_size": 16})
    chunked.clear()
    c2v_rag.ingest(corpus, path=tmp_path / "a", collection="kb", model=tiny_variant, config=smaller)
    assert len(chunked) == len(corpus)
    with closing(QdrantClient(path=str(tmp_path / "a"))) as client:
        assert stored_points(client, "kb") == _clean(tmp_path, corpus, tiny_variant, smaller)


def test_a_document_cut_off_midway_is_chunked_again_and_the_documents_stored_whole_are_not(
    tmp_path, tiny_variant, ingest_config, monkeypatch, chunked
):
    # Three one-chunk documents, then a long one: the first batch of 4 chunks holds the three whole and the long
    # one's first chunk.
    docs = [{"id": f"short-{i}", "text": " ".join(make_text(i).split()[:3])} for i in range(3)]
    docs.append({"id": "long", "text": make_text(9, sentences=12)})
    client = QdrantClient(path=str(tmp_path / "a"))
    real_upsert, calls = client.upsert, []

    def failing_second_upsert(*args, **kwargs):
        calls.append(args[1])
        if len(calls) == 2:
            raise RuntimeError("injected: disk full")
        return real_upsert(*args, **kwargs)

    monkeypatch.setattr(client, "upsert", failing_second_upsert)
    with pytest.raises(c2v_rag.rag.IngestError, match="injected"):
        c2v_rag.ingest(docs, collection="kb", model=tiny_variant, config=ingest_config, client=client)
    stored = stored_points(client, "kb")
    whole = {p["doc_id"] for p in stored.values() if DOC_HASH_KEY in p}
    assert (whole, {p["doc_id"] for p in stored.values()} - whole) == ({"short-0", "short-1", "short-2"}, {"long"})

    monkeypatch.setattr(client, "upsert", real_upsert)
    chunked.clear()
    resumed = c2v_rag.ingest(docs, collection="kb", model=tiny_variant, config=ingest_config, client=client)
    assert chunked == [docs[3]["text"]]
    assert resumed.chunks_unchanged == len(stored)
    points = stored_points(client, "kb")
    client.close()
    assert points == _clean(tmp_path, docs, tiny_variant, ingest_config)


def test_a_collection_stored_without_hashes_gets_them_on_the_next_run(
    tmp_path, tiny_variant, corpus, ingest_config, chunked
):
    """A collection written before documents were hashed: the first re-run chunks everything and writes nothing
    but the hashes, the next one skips every document."""
    c2v_rag.ingest(corpus, path=tmp_path / "a", collection="kb", model=tiny_variant, config=ingest_config)
    with closing(QdrantClient(path=str(tmp_path / "a"))) as client:
        before = stored_points(client, "kb")
        client.delete_payload("kb", keys=[DOC_HASH_KEY], points=list(before))
    chunked.clear()
    result = c2v_rag.ingest(corpus, path=tmp_path / "a", collection="kb", model=tiny_variant, config=ingest_config)
    assert len(chunked) == len(corpus) and result.chunks_written == 0
    with closing(QdrantClient(path=str(tmp_path / "a"))) as client:
        assert stored_points(client, "kb") == before
    chunked.clear()
    c2v_rag.ingest(corpus, path=tmp_path / "a", collection="kb", model=tiny_variant, config=ingest_config)
    assert chunked == []


def test_a_document_read_through_another_root_is_chunked_to_claim_its_points(
    tmp_path, tiny_variant, ingest_config, chunked
):
    folder = tmp_path / "notes" / "inner"
    folder.mkdir(parents=True)
    for i in range(3):
        (folder / f"n{i}.md").write_text(make_text(i), encoding="utf-8")
    store = tmp_path / "store"
    c2v_rag.ingest(folder, path=store, collection="kb", model=tiny_variant, config=ingest_config)
    chunked.clear()
    c2v_rag.ingest(tmp_path / "notes", path=store, collection="kb", model=tiny_variant, config=ingest_config)
    assert len(chunked) == 3
    with closing(QdrantClient(path=str(store))) as client:
        roots = {p["source_root"] for p in stored_points(client, "kb").values()}
    assert roots == {str((tmp_path / "notes").resolve())}
    chunked.clear()
    c2v_rag.ingest(tmp_path / "notes", path=store, collection="kb", model=tiny_variant, config=ingest_config)
    assert chunked == []


def test_a_mailbox_with_a_message_deleted_chunks_nothing_and_a_sync_deletes_that_message(
    tmp_path, tiny_variant, ingest_config, chunked
):
    import mailbox
    from email.message import EmailMessage

    def write_mailbox(numbers):
        path = tmp_path / "mail" / "inbox.mbox"
        path.parent.mkdir(exist_ok=True)
        path.unlink(missing_ok=True)
        box = mailbox.mbox(path)
        for n in numbers:
            message = EmailMessage()
            message["Subject"], message["Message-ID"] = f"Note {n}", f"<note-{n}@example.org>"
            message.set_content(make_text(n))
            box.add(message)
        box.close()

    write_mailbox(range(6))
    store = tmp_path / "store"
    kwargs = {"path": store, "collection": "kb", "model": tiny_variant, "config": ingest_config, "sync": True}
    c2v_rag.ingest(tmp_path / "mail", **kwargs)
    assert len(chunked) == 6
    write_mailbox([0, 1, 3, 4, 5])  # message 2 deleted, as a mail client's compaction rewrites the file
    chunked.clear()
    result = c2v_rag.ingest(tmp_path / "mail", **kwargs)
    assert chunked == [] and result.documents_unchanged == 5 and result.chunks_written == 0
    assert result.documents_deleted == 1
    assert _points(store) == _clean(tmp_path, tmp_path / "mail", tiny_variant, ingest_config)


def test_a_failed_lookup_chunks_every_document_and_says_so(
    tmp_path, tiny_variant, corpus, ingest_config, monkeypatch, chunked, caplog
):
    client = QdrantClient(path=str(tmp_path / "a"))
    c2v_rag.ingest(corpus, collection="kb", model=tiny_variant, config=ingest_config, client=client)
    before = stored_points(client, "kb")

    def broken_scroll(*args, **kwargs):
        raise ConnectionError("injected: scroll refused")

    monkeypatch.setattr(client, "scroll", broken_scroll)
    chunked.clear()
    with caplog.at_level(logging.WARNING, logger="c2v_rag"):
        result = c2v_rag.ingest(corpus, collection="kb", model=tiny_variant, config=ingest_config, client=client)
    assert len(chunked) == len(corpus) and result.ok and result.chunks_written == 0
    assert "Could not ask which documents are stored unchanged" in caplog.text
    monkeypatch.undo()
    assert stored_points(client, "kb") == before
    client.close()
