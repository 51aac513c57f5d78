"""Versioned collections behind an alias, and reindexing with another model without downtime."""

from __future__ import annotations

import threading
import time
from contextlib import closing

import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from rag_helpers import make_text, stored_points

import c2v_rag
from c2v_rag.rag import CollectionMismatchError, CollectionNotFoundError
from c2v_rag.rag.store.aliases import alias_target

SMALL = {"chunk_size": 24, "chunk_overlap": 4, "show_progress": False}
QUERY = "vitamin deficiency and bone loss"


def docs(start: int, stop: int) -> list[dict]:
    return [{"id": f"doc-{i}", "text": make_text(i, sentences=3), "metadata": {"n": i}} for i in range(start, stop)]


def test_versioned_ingest_writes_a_version_behind_an_alias(tmp_path, tiny_variant):
    first = c2v_rag.ingest(docs(0, 3), path=tmp_path, collection="papers", model=tiny_variant, versioned=True, **SMALL)
    assert first.collection == "papers_v1" and first.ok
    more = c2v_rag.ingest(docs(3, 5), path=tmp_path, collection="papers", model=tiny_variant, versioned=True, **SMALL)
    plain = c2v_rag.ingest(docs(5, 6), path=tmp_path, collection="papers", model=tiny_variant, **SMALL)
    assert more.collection == plain.collection == "papers_v1"  # an alias is written through
    with closing(QdrantClient(path=str(tmp_path))) as client:
        assert alias_target(client, "papers") == "papers_v1"
        assert sorted(c.name for c in client.get_collections().collections) == ["papers_v1"]
        stored = stored_points(client, "papers_v1")
        assert {p["doc_id"] for p in stored.values()} == {f"doc-{i}" for i in range(6)}
        hits = c2v_rag.search(QUERY, top_k=100, collection="papers", client=client)
    assert {h.id for h in hits} == set(stored)
    c2v_rag.ingest(docs(0, 1), path=tmp_path, collection="plain", model=tiny_variant, **SMALL)
    with pytest.raises(ValueError, match="'plain' is a plain collection, not an alias"):
        c2v_rag.ingest(docs(0, 1), path=tmp_path, collection="plain", model=tiny_variant, versioned=True, **SMALL)


def test_reindex_switches_the_alias_while_a_reader_keeps_getting_full_answers(
    tmp_path, tiny_variant, tiny_variant_qwen
):
    c2v_rag.ingest(docs(0, 8), path=tmp_path, collection="papers", model=tiny_variant, versioned=True, **SMALL)
    client = QdrantClient(path=str(tmp_path))  # embedded Qdrant: one client, shared by reader and reindex
    reads: list[tuple[float, list[tuple[str, float]]]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            try:
                hits = c2v_rag.search(QUERY, top_k=5, collection="papers", client=client)
                reads.append((time.perf_counter(), [(h.id, round(h.score, 4)) for h in hits]))
            except BaseException as err:  # noqa: BLE001 - any error fails the test
                errors.append(err)
                return

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        while len(reads) < 3 and not errors:
            time.sleep(0.01)
        started = time.perf_counter()
        # Small batches make the reindex long enough for many reads to land inside it.
        result = c2v_rag.reindex("papers", model=tiny_variant_qwen, client=client, batch_size=2, show_progress=False)
        finished = time.perf_counter()
        count = len(reads)
        while len(reads) < count + 3 and not errors:
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
    assert (result.previous, result.collection, result.alias) == ("papers_v1", "papers_v2", "papers")
    assert alias_target(client, "papers") == "papers_v2"
    old = [(h.id, round(h.score, 4)) for h in c2v_rag.search(QUERY, top_k=5, collection="papers_v1", client=client)]
    new = [(h.id, round(h.score, 4)) for h in c2v_rag.search(QUERY, top_k=5, collection="papers_v2", client=client)]
    assert old != new and len(old) == len(new) == 5
    # Every read is the old index's full answer or the new one's: never empty, never a mix.
    assert all(r in (old, new) for _, r in reads)
    assert any(started <= t <= finished for t, _ in reads)  # reads did happen during the reindex
    assert [r for _, r in reads][0] == old and [r for _, r in reads][-1] == new
    # Same chunks, same ids and payloads; vectors of the new model.
    assert stored_points(client, "papers_v2") == stored_points(client, "papers_v1")
    assert result.chunks == len(stored_points(client, "papers_v1"))
    # A model never queries another model's vectors: the old one is refused on the new collection.
    with pytest.raises(
        CollectionMismatchError,
        match="'papers_v2' .* was built with another model.*c2v-rag reindex --collection papers_v2",
    ):
        c2v_rag.search(QUERY, collection="papers", client=client, model=tiny_variant)
    client.close()


def test_a_failed_reindex_leaves_the_alias_and_no_half_built_collection(
    tmp_path, tiny_variant, tiny_variant_qwen, monkeypatch
):
    c2v_rag.ingest(docs(0, 4), path=tmp_path, collection="papers", model=tiny_variant, versioned=True, **SMALL)
    client = QdrantClient(path=str(tmp_path))
    real_upsert = client.upsert
    calls = []

    def failing_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("injected: disk full")
        return real_upsert(*args, **kwargs)

    monkeypatch.setattr(client, "upsert", failing_second)
    with pytest.raises(RuntimeError, match="injected: disk full"):
        c2v_rag.reindex("papers", model=tiny_variant_qwen, client=client, batch_size=2, show_progress=False)
    assert alias_target(client, "papers") == "papers_v1"
    assert [c.name for c in client.get_collections().collections] == ["papers_v1"]
    assert c2v_rag.search(QUERY, top_k=3, collection="papers", client=client)  # still served by v1
    monkeypatch.setattr(client, "upsert", real_upsert)
    done = c2v_rag.reindex(
        "papers", model=tiny_variant_qwen, client=client, show_progress=False, sparse="bm25", drop_previous=True
    )
    assert (done.collection, done.dropped_previous) == ("papers_v2", True)
    assert [c.name for c in client.get_collections().collections] == ["papers_v2"]
    assert len(c2v_rag.search(QUERY, top_k=3, collection="papers", client=client, mode="hybrid")) == 3
    client.close()


def test_reindex_errors_name_the_fix(tmp_path, tiny_variant):
    c2v_rag.ingest(docs(0, 1), path=tmp_path, collection="plain", model=tiny_variant, **SMALL)
    with pytest.raises(ValueError, match="'plain' .* is a plain collection, not an alias.*versioned=True"):
        c2v_rag.reindex("plain", model=tiny_variant, path=tmp_path, show_progress=False)
    with pytest.raises(CollectionNotFoundError, match="'missing' does not exist"):
        c2v_rag.reindex("missing", model=tiny_variant, path=tmp_path, show_progress=False)
