"""search(group_by_document=True): the best documents, each by its best chunk (MaxP), checked against the
full chunk ranking reduced to documents in Python."""

from __future__ import annotations

import asyncio
from contextlib import closing

import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from rag_helpers import make_text

import c2v_rag

QUERY = "vitamin bone proteins"


@pytest.fixture(scope="module")
def store(tmp_path_factory, tiny_variant):
    from c2v_rag.rag import IngestConfig

    path = tmp_path_factory.mktemp("grouped")
    docs = [{"id": f"doc-{i}", "text": make_text(i, sentences=6), "metadata": {"n": i}} for i in range(6)]
    config = IngestConfig(chunk_size=24, chunk_overlap=4, batch_size=16, show_progress=False)
    c2v_rag.ingest(docs, path=path, collection="kb", model=tiny_variant, config=config, sparse="bm25")
    with closing(QdrantClient(path=str(path))) as client:
        yield client, path


def best_chunk_per_document(hits):
    best = {}
    for hit in hits:  # best first
        best.setdefault(hit.doc_id, hit)
    return list(best.values())


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_grouped_hits_are_each_documents_best_chunk(store, mode):
    client, _ = store
    chunks = c2v_rag.search(QUERY, top_k=1000, collection="kb", client=client, mode=mode)
    assert len(chunks) > len({h.doc_id for h in chunks})  # documents have several chunks
    grouped = c2v_rag.search(QUERY, top_k=4, collection="kb", client=client, mode=mode, group_by_document=True)
    expected = best_chunk_per_document(chunks)[:4]
    assert [h.doc_id for h in grouped] == [h.doc_id for h in expected]
    assert [h.id for h in grouped] == [h.id for h in expected]
    assert [h.score for h in grouped] == pytest.approx([h.score for h in expected])


def test_grouping_applies_the_filter_and_search_many(store):
    client, _ = store
    grouped = c2v_rag.search(
        QUERY, top_k=10, collection="kb", client=client, group_by_document=True, filter={"n": {"gte": 3}}
    )
    assert sorted(h.doc_id for h in grouped) == ["doc-3", "doc-4", "doc-5"]
    many = c2v_rag.search_many([QUERY, "stock market"], top_k=3, collection="kb", client=client, group_by_document=True)
    assert [len(hits) for hits in many] == [3, 3]
    assert all(len({h.doc_id for h in hits}) == 3 for hits in many)


def test_async_grouping_matches(store):
    client, path = store
    expected = c2v_rag.search(QUERY, top_k=3, collection="kb", client=client, group_by_document=True)
    client.close()  # embedded Qdrant: one client per directory
    got = asyncio.run(c2v_rag.asearch(QUERY, top_k=3, collection="kb", path=path, group_by_document=True))
    assert [h.id for h in got] == [h.id for h in expected]
