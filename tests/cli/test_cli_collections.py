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
    assert lines[0] == "foreign: 1 point, not made by c2v_rag"
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


def _names(store) -> tuple[list[str], dict[str, str]]:
    """The store's collections and aliases, as qdrant-client reads them."""
    with closing(QdrantClient(path=str(store))) as client:
        names = sorted(c.name for c in client.get_collections().collections)
        return names, {a.alias_name: a.collection_name for a in client.get_aliases().aliases}


def _reindexed(store) -> None:
    """papers as a reindex leaves it: papers_v2 behind the alias, papers_v1 kept for rollback."""
    with closing(QdrantClient(path=str(store))) as client:
        client.create_collection("papers_v2", vectors_config=models.VectorParams(size=7, distance=models.Distance.DOT))
        client.upsert("papers_v2", [models.PointStruct(id=i, vector=[0.1] * 7, payload={}) for i in range(5)])
        client.update_collection_aliases(
            change_aliases_operations=[
                models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name="papers")),
                models.CreateAliasOperation(
                    create_alias=models.CreateAlias(collection_name="papers_v2", alias_name="papers")
                ),
            ]
        )


def test_collections_delete_removes_each_named_collection_and_its_aliases_and_says_what_stays(
    tmp_path, tiny_variant, ingest_config, capsys
):
    store = _store(tmp_path, tiny_variant, ingest_config)
    _reindexed(store)
    notes = c2v_rag.open_collection("notes", path=store).count()
    assert _names(store) == (["foreign", "notes", "papers_v1", "papers_v2"], {"papers": "papers_v2"})

    code = main(["collections", "delete", "notes", "papers", "gone", "--path", str(store), "--yes"])
    out, err = capsys.readouterr()
    assert code == 1  # "gone" named nothing; the others went
    assert _names(store) == (["foreign", "papers_v1"], {})
    assert out.splitlines() == [
        f"deleted collection 'notes' ({notes:,} chunks)",
        "deleted collection 'papers_v2' (5 chunks) and its alias 'papers'",
        "kept: 'papers_v1', other versions of 'papers', each a collection of its own",
    ]
    assert "not found: 'gone'" in err

    # The version left is deleted by its name; the JSON says what went.
    assert main(["collections", "delete", "papers_v1", "--path", str(store), "--yes", "--json"]) == 0
    (deleted,) = json.loads(capsys.readouterr().out)["collections"]
    assert deleted["collection"] == "papers_v1" and deleted["deleted"] and deleted["kept_versions"] == []
    assert _names(store) == (["foreign"], {})
    assert main(["collections", "delete", "foreign", "--path", str(store), "--yes"]) == 0
    assert capsys.readouterr().out == "deleted collection 'foreign' (1 chunk)\n"  # it said "(1 chunks)"


def test_collections_delete_without_a_terminal_needs_yes_and_deletes_nothing(
    tmp_path, tiny_variant, ingest_config, capsys
):
    store = _store(tmp_path, tiny_variant, ingest_config)
    assert main(["collections", "delete", "notes", "--path", str(store)]) == 2  # stdin is no terminal under pytest
    assert "add --yes to delete without asking" in capsys.readouterr().err
    assert main(["collections", "delete", "--path", str(store), "--yes"]) == 2  # no name
    assert main(["collections", "list", "notes", "--path", str(store)]) == 2  # list takes none
    assert _names(store)[0] == ["foreign", "notes", "papers_v1"]


def test_collections_delete_asks_on_a_terminal_and_deletes_only_on_yes(tmp_path, tiny_variant, ingest_config):
    """The real command in a pseudo-terminal: it shows each plan and waits; "n" keeps one, "y" deletes the next."""
    import os
    import select
    import subprocess
    import sys
    import time

    store = _store(tmp_path, tiny_variant, ingest_config)
    leader, follower = os.openpty()
    command = [sys.executable, "-m", "c2v_rag.cli", "collections", "delete", "notes", "papers", "--path", str(store)]
    process = subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower)
    shown = b""

    def until(text: bytes) -> None:
        nonlocal shown
        deadline = time.monotonic() + 60
        while shown.count(text) < expected[text] and select.select([leader], [], [], deadline - time.monotonic())[0]:
            shown += os.read(leader, 1 << 16)
        assert shown.count(text) >= expected[text], shown.decode(errors="replace")

    try:
        expected = {b"[y/N] ": 1}
        until(b"[y/N] ")
        os.write(leader, b"n\n")
        expected[b"[y/N] "] = 2
        until(b"[y/N] ")
        os.write(leader, b"y\n")
        assert process.wait(timeout=60) == 0
        expected[b"\n"] = shown.count(b"\n") + 2
        until(b"\n")
    finally:
        process.kill()
        os.close(leader)
        os.close(follower)
    text = shown.decode().replace("\r\n", "\n")
    assert "delete collection 'notes' (" in text and "delete collection 'papers_v1' (" in text
    assert "and its alias 'papers'? [y/N]" in text
    assert "not deleted: 'notes'" in text and "deleted collection 'papers_v1'" in text
    assert _names(store) == (["foreign", "notes"], {})


@pytest.mark.parametrize("store_kind", ["local", "edge"])
def test_a_handle_deletes_the_collection_behind_its_alias_and_the_alias(
    tmp_path, tiny_variant, ingest_config, store_kind
):
    if store_kind == "edge":
        pytest.importorskip("qdrant_edge")
    store = tmp_path / store_kind
    docs = [{"id": f"doc-{i}", "text": make_text(i)} for i in range(2)]
    c2v_rag.ingest(docs, path=store, store=store_kind, collection="kb", model=tiny_variant, config=ingest_config)
    c2v_rag.ingest(
        docs,
        path=store,
        store=store_kind,
        collection="papers",
        model=tiny_variant,
        config=ingest_config,
        versioned=True,
    )
    papers = c2v_rag.open_collection("papers", path=store, store=store_kind)
    assert papers.exists() and papers.delete()
    assert not papers.exists() and not papers.delete()  # gone, and its alias with it
    assert [c.name for c in c2v_rag.list_collections(path=store, store=store_kind)] == ["kb"]
    missing = tmp_path / "nothing-here"
    assert not c2v_rag.open_collection("kb", path=missing).delete() and not missing.exists()
