"""Versioned collections behind an alias, and reindexing with another model without downtime."""

from __future__ import annotations

import threading
import time
from contextlib import closing

import numpy as np
import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from rag_helpers import make_text, stored_points, stored_vectors

import c2v_rag
from c2v_rag.rag import CollectionMismatchError, CollectionNotFoundError
from c2v_rag.store.aliases import alias_target

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
    # A model never queries another model's vectors: the old one is refused on the new collection, and the fix
    # named is a reindex of the alias searched, not of the collection behind it (which would lose the alias).
    with pytest.raises(
        CollectionMismatchError,
        match=r"'papers_v2' \(behind the alias 'papers'\) .* was built with another model.*"
        r"'c2v-rag reindex --collection papers --model MODEL'",
    ) as refused:
        c2v_rag.search(QUERY, collection="papers", client=client, model=tiny_variant)
    assert "--convert" not in str(refused.value)
    for convert in (False, True):  # that collection itself is refused, before any work, naming the alias
        with pytest.raises(ValueError, match=r"'papers_v2' .* is behind the alias 'papers': reindex that"):
            c2v_rag.reindex("papers_v2", client=client, model=tiny_variant, convert=convert)
    assert alias_target(client, "papers") == "papers_v2" and not client.collection_exists("papers_v2_v1")
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
    with pytest.raises(ValueError, match="'plain' .* is a plain collection, not an alias.*convert=True.*versioned="):
        c2v_rag.reindex("plain", model=tiny_variant, path=tmp_path, show_progress=False)
    with pytest.raises(CollectionNotFoundError, match="'missing' does not exist"):
        c2v_rag.reindex("missing", model=tiny_variant, path=tmp_path, show_progress=False)


def test_convert_keeps_a_plain_collection_and_puts_an_alias_in_its_place(tmp_path, tiny_variant, tiny_variant_qwen):
    c2v_rag.ingest(docs(0, 6), path=tmp_path, collection="papers", model=tiny_variant, **SMALL)
    with closing(QdrantClient(path=str(tmp_path))) as client:
        before = stored_vectors(client, "papers")
        old_hits = [(h.id, h.score) for h in c2v_rag.search(QUERY, top_k=5, collection="papers", client=client)]
        # The model a newer release ships is refused on the old collection, and the error names the fix.
        with pytest.raises(CollectionMismatchError, match="--convert"):
            c2v_rag.search(QUERY, collection="papers", client=client, model=tiny_variant_qwen)
        result = c2v_rag.reindex("papers", model=tiny_variant_qwen, client=client, convert=True, show_progress=False)
        assert (result.alias, result.previous, result.collection, result.converted) == (
            "papers",
            "papers_v1",
            "papers_v2",
            True,
        )
        assert "the plain collection 'papers' kept as 'papers_v1'" in result.summary()
        assert alias_target(client, "papers") == "papers_v2"
        assert sorted(c.name for c in client.get_collections().collections) == ["papers_v1", "papers_v2"]
        # The old points are kept as they were, vectors included (re-normalized on upsert by cosine collections:
        # equal to float32 rounding), and still answer the old model's queries.
        kept_points = stored_vectors(client, "papers_v1")
        assert {pid: payload for pid, (payload, _) in kept_points.items()} == {
            pid: payload for pid, (payload, _) in before.items()
        }
        for pid, (_, vector) in before.items():
            np.testing.assert_allclose(kept_points[pid][1], vector, atol=1e-6, err_msg=pid)
        kept = c2v_rag.search(QUERY, top_k=5, collection="papers_v1", client=client)
        assert [h.id for h in kept] == [pid for pid, _ in old_hits]
        assert [h.score for h in kept] == pytest.approx([score for _, score in old_hits], abs=1e-5)
        # The name now serves the new model's vectors of the same chunks.
        assert stored_points(client, "papers_v2") == {pid: payload for pid, (payload, _) in before.items()}
        new_hits = c2v_rag.search(QUERY, top_k=5, collection="papers", client=client, model=tiny_variant_qwen)
        assert [h.id for h in new_hits] == [
            h.id for h in c2v_rag.search(QUERY, top_k=5, collection="papers_v2", client=client)
        ]
        assert [(h.id, h.score) for h in new_hits] != old_hits
    # A plain ingest into the name now writes through the alias; the next reindex switches without a gap.
    more = c2v_rag.ingest(docs(6, 7), path=tmp_path, collection="papers", model=tiny_variant_qwen, **SMALL)
    assert more.collection == "papers_v2"
    again = c2v_rag.reindex("papers", model=tiny_variant, path=tmp_path, show_progress=False, drop_previous=True)
    assert (again.previous, again.collection, again.converted) == ("papers_v2", "papers_v3", False)


def test_a_failed_convert_leaves_the_plain_collection_alone(tmp_path, tiny_variant, tiny_variant_qwen, monkeypatch):
    c2v_rag.ingest(docs(0, 4), path=tmp_path, collection="papers", model=tiny_variant, **SMALL)
    client = QdrantClient(path=str(tmp_path))
    before = stored_vectors(client, "papers")
    real_upsert = client.upsert

    def failing_refill(collection_name, *args, **kwargs):
        if collection_name == "papers_v2":
            raise RuntimeError("injected: disk full")
        return real_upsert(collection_name, *args, **kwargs)

    monkeypatch.setattr(client, "upsert", failing_refill)
    with pytest.raises(RuntimeError, match="injected: disk full"):
        c2v_rag.reindex("papers", model=tiny_variant_qwen, client=client, convert=True, show_progress=False)
    assert [c.name for c in client.get_collections().collections] == ["papers"]
    assert alias_target(client, "papers") is None
    after = stored_vectors(client, "papers")  # never rewritten
    assert sorted(after) == sorted(before)
    for pid, (payload, vector) in before.items():
        assert after[pid][0] == payload and np.array_equal(after[pid][1], vector), pid
    with pytest.raises(OSError):  # a model that does not load changes nothing either
        c2v_rag.reindex("papers", model=tmp_path / "no-model", client=client, convert=True, show_progress=False)
    assert [c.name for c in client.get_collections().collections] == ["papers"]
    client.close()


def test_a_convert_refuses_when_the_plain_collection_changes_meanwhile(
    tmp_path, tiny_variant, tiny_variant_qwen, monkeypatch
):
    from qdrant_client.http import models

    from c2v_rag.rag.admin import reindex as reindex_module

    c2v_rag.ingest(docs(0, 3), path=tmp_path, collection="papers", model=tiny_variant, **SMALL)
    client = QdrantClient(path=str(tmp_path))
    real_refill = reindex_module._refill

    def refill_while_a_writer_adds_a_point(qdrant, previous, new, *args):
        chunks = real_refill(qdrant, previous, new, *args)
        (point,), _ = qdrant.scroll("papers", limit=1, with_payload=True, with_vectors=True)
        late = models.PointStruct(id="00000000-0000-0000-0000-000000000001", vector=point.vector, payload=point.payload)
        qdrant.upsert("papers", [late], wait=True)
        return chunks

    monkeypatch.setattr(reindex_module, "_refill", refill_while_a_writer_adds_a_point)
    count = client.count("papers", exact=True).count
    with pytest.raises(RuntimeError, match="'papers' changed while it was re-embedded.*pause the writers"):
        c2v_rag.reindex("papers", model=tiny_variant_qwen, client=client, convert=True, show_progress=False)
    assert [c.name for c in client.get_collections().collections] == ["papers"]
    assert alias_target(client, "papers") is None and client.count("papers", exact=True).count == count + 1
    client.close()


def test_the_reindex_seconds_start_once_the_model_is_loaded(tmp_path, tiny_variant, tiny_variant_qwen, monkeypatch):
    """As an ingest's: a first int8 load may build graphs for half a minute, which the summary's seconds leave out."""
    from c2v_rag.rag import embedding

    c2v_rag.ingest(docs(0, 3), path=tmp_path, collection="papers", model=tiny_variant, versioned=True, **SMALL)
    real_load, load_seconds = embedding.load_model, 2.0

    def slow_load(*args, **kwargs):
        model = real_load(*args, **kwargs)
        time.sleep(load_seconds)
        return model

    monkeypatch.setattr(embedding, "load_model", slow_load)
    started = time.perf_counter()
    result = c2v_rag.reindex("papers", path=tmp_path, model=tiny_variant_qwen, show_progress=False)
    whole = time.perf_counter() - started
    assert result.chunks > 0 and whole > load_seconds
    assert result.seconds < whole - load_seconds
    assert f"in {result.seconds:.1f} s" in result.summary()
