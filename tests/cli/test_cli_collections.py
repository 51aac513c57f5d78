"""``c2v-rag collections`` and ``c2v_rag.list_collections``: a store's collections as Qdrant holds them, each with
what it recorded when it was filled, checked against the store read directly with qdrant-client."""

from __future__ import annotations

import json
from contextlib import closing

import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient, models
from rag_helpers import make_text

import c2v_rag
from c2v_rag.cli import main


def _store(tmp_path, tiny_variant, ingest_config):
    """A store with a plain collection, a versioned one behind an alias, and one that another tool made; its
    path."""
    store = tmp_path / "store"
    docs = [{"id": f"doc-{i}", "text": make_text(i)} for i in range(3)]
    c2v_rag.ingest(docs, path=store, collection="notes", model=tiny_variant, config=ingest_config)
    c2v_rag.ingest(docs[:2], path=store, collection="papers", model=tiny_variant, config=ingest_config, versioned=True)
    with closing(QdrantClient(path=str(store))) as client:
        client.create_collection("foreign", vectors_config=models.VectorParams(size=7, distance=models.Distance.DOT))
        client.upsert("foreign", [models.PointStruct(id=1, vector=[0.1] * 7, payload={})])
    return store


def test_collections_lists_every_collection_with_its_record(tmp_path, tiny_variant, ingest_config, capsys):
    store = _store(tmp_path, tiny_variant, ingest_config)
    with closing(QdrantClient(path=str(store))) as client:
        counts = {c.name: client.count(c.name).count for c in client.get_collections().collections}
    assert sorted(counts) == ["foreign", "notes", "papers_v1"] and min(counts.values()) > 0

    assert main(["collections", "--path", str(store), "--json"]) == 0
    listed = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    assert list(listed) == sorted(counts)  # sorted by name, each once; the alias is not a collection of its own
    assert {name: c["points"] for name, c in listed.items()} == counts
    assert listed["papers_v1"]["aliases"] == ["papers"] and listed["notes"]["aliases"] == []
    for name in ("notes", "papers_v1"):
        entry = listed[name]
        assert entry["made_by_c2v_rag"] and entry["model"] == str(tiny_variant.resolve())
        assert entry["quantize"] == "none" and not entry["sparse"] and entry["truncate_dim"] is None
        assert entry["vector_size"] == 64 and entry["chunk_context"] == "lead"
    assert listed["foreign"] == {
        "name": "foreign",
        "aliases": [],
        "points": 1,
        "vector_size": 7,
        "made_by_c2v_rag": False,
        "model": None,
        "quantize": None,
        "truncate_dim": None,
        "sparse": False,
        "chunk_context": None,
        "decoder_max_length": None,
    }

    # The library call returns the same, and the text form has a line a collection.
    assert [c.model_dump() for c in c2v_rag.list_collections(path=store)] == list(listed.values())
    assert main(["collections", "--path", str(store)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "foreign: 1 points, not made by c2v_rag"
    assert lines[2].startswith(f"papers_v1 (alias: papers): {counts['papers_v1']} points, model ")
    assert lines[1] == f"notes: {counts['notes']} points, model {tiny_variant.resolve()} (64-dim)"


def test_collections_of_a_store_that_does_not_exist_lists_none_and_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "nothing-here"
    assert main(["collections", "--path", str(missing)]) == 0
    assert "no collections at embedded Qdrant at" in capsys.readouterr().out
    assert c2v_rag.list_collections(path=missing) == [] and not missing.exists()


def test_collections_of_a_hybrid_collection_in_qdrant_edge(tmp_path, tiny_variant, ingest_config):
    pytest.importorskip("qdrant_edge")
    pytest.importorskip("bm25s")
    pytest.importorskip("Stemmer")
    store = tmp_path / "edge"
    docs = [{"id": f"doc-{i}", "text": make_text(i)} for i in range(3)]
    result = c2v_rag.ingest(
        docs, path=store, store="edge", collection="kb", model=tiny_variant, config=ingest_config, sparse="bm25"
    )
    (summary,) = c2v_rag.list_collections(path=store)
    assert summary.name == "kb" and summary.sparse and summary.vector_size == 64
    assert summary.points == result.chunks_written and summary.made_by_c2v_rag
