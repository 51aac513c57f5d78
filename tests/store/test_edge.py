"""The Qdrant Edge backend (``store="edge"``) against qdrant-client's local mode and independent computations.

Every test runs the real qdrant-edge-py engine. Local mode searches exactly, and at these sizes
Edge's segments are below its indexing threshold, so it searches exactly too: the two must
return the same points, payloads, vectors and scores.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity", "qdrant_edge"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from qdrant_client.http import models
from rag_helpers import make_text

import c2v_rag
from c2v_rag.rag import (
    DEFAULT_QUERY_TASK,
    CollectionMismatchError,
    QdrantConfig,
    QdrantUnreachableError,
    StoreLockedError,
)
from c2v_rag.rag.errors import StoreKindError
from c2v_rag.store.backends import store_kind
from c2v_rag.store.edge_client import EdgeClient


def edge_points(path, collection: str = "kb") -> dict[str, tuple[dict, np.ndarray]]:
    """Every point of the Edge store at ``path``: id -> (payload, dense vector)."""
    with closing(EdgeClient(path)) as client:
        return _all_points(client, collection)


def local_points(path, collection: str = "kb") -> dict[str, tuple[dict, np.ndarray]]:
    with closing(QdrantClient(path=str(path))) as client:
        return _all_points(client, collection)


def _all_points(client, collection: str) -> dict[str, tuple[dict, np.ndarray]]:
    found, offset = {}, None
    while True:
        batch, offset = client.scroll(collection, limit=64, offset=offset, with_payload=True, with_vectors=True)
        for p in batch:
            vector = p.vector["text-dense"] if isinstance(p.vector, dict) else p.vector
            found[str(p.id)] = (p.payload, np.asarray(vector, dtype=np.float32))
        if offset is None:
            return found


def same_points(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b) and a
    for pid, (payload, vector) in a.items():
        assert b[pid][0] == payload, pid
        np.testing.assert_allclose(b[pid][1], vector, atol=1e-6)


def test_edge_stores_the_points_local_mode_stores(tmp_path, tiny_variant, corpus, ingest_config):
    edge = c2v_rag.ingest(
        corpus, path=tmp_path / "edge", store="edge", collection="kb", model=tiny_variant, config=ingest_config
    )
    local = c2v_rag.ingest(corpus, path=tmp_path / "local", collection="kb", model=tiny_variant, config=ingest_config)
    assert edge.ok and (edge.chunks, edge.chunks_written) == (local.chunks, local.chunks_written) and edge.chunks > 6
    assert edge.location == f"Qdrant Edge at {tmp_path / 'edge'}"
    assert store_kind(tmp_path / "edge") == "edge" and store_kind(tmp_path / "local") == "local"
    same_points(local_points(tmp_path / "local"), edge_points(tmp_path / "edge"))


def test_edge_dense_search_matches_exact_cosine(tmp_path, tiny_variant, tiny_model, corpus, ingest_config):
    store = tmp_path / "edge"
    c2v_rag.ingest(corpus, path=store, store="edge", collection="kb", model=tiny_variant, config=ingest_config)
    stored = edge_points(store)
    ids = list(stored)
    docs = np.stack([stored[i][1] for i in ids])
    query = corpus[2]["text"][:60]
    q = tiny_model.encode_queries([query], task=DEFAULT_QUERY_TASK, normalize_embeddings=True)[0]
    scores = docs @ q
    order = np.argsort(-scores)[:4]
    # The store's engine is detected from the directory: no store= needed to read it.
    hits = c2v_rag.search(query, top_k=4, path=store, collection="kb")
    assert [h.id for h in hits] == [ids[i] for i in order]
    np.testing.assert_allclose([h.score for h in hits], scores[order], atol=1e-5)
    assert all(h.text == stored[h.id][0]["page_content"] and h.doc_id == stored[h.id][0]["doc_id"] for h in hits)
    many = c2v_rag.search_many([query, corpus[4]["text"][:50]], top_k=3, path=store, collection="kb")
    assert [h.id for h in many[0]] == [h.id for h in hits[:3]] and len(many[1]) == 3

    import asyncio

    async_hits = asyncio.run(c2v_rag.asearch(query, top_k=4, path=store, collection="kb"))
    assert [h.id for h in async_hits] == [h.id for h in hits]


@pytest.fixture
def two_stores(tmp_path, tiny_variant, corpus, ingest_config):
    """The corpus with BM25 vectors in an Edge store and in a local-mode store."""
    for store, where in (("edge", tmp_path / "edge"), ("local", tmp_path / "local")):
        c2v_rag.ingest(
            corpus, path=where, store=store, collection="kb", model=tiny_variant, config=ingest_config, sparse="bm25"
        )
    return tmp_path / "edge", tmp_path / "local"


def same_ranking(got, want) -> None:
    """The same hits in the same order and with the same scores; points tied on score may come in
    either order (BM25 ties often), and a tie cut by top_k may keep either point."""
    np.testing.assert_allclose([h.score for h in got], [h.score for h in want], atol=1e-5)
    assert len(got) == len(want)
    # runs of tied scores (within 1e-4 of the previous, not by rounding, which splits a tie that straddles a
    # rounding boundary, as 0.97015 against 0.97016 did in CI): the same points in each run but the last,
    # which top_k may cut anywhere
    starts = [0] + [i for i in range(1, len(want)) if want[i - 1].score - want[i].score > 1e-4]
    for start, end in zip(starts[:-1], starts[1:]):
        assert {h.id for h in got[start:end]} == {h.id for h in want[start:end]}, (start, end)
    by_id = {h.id: h for h in want}
    assert all(h.metadata == by_id[h.id].metadata and h.text == by_id[h.id].text for h in got if h.id in by_id)


FILTERS = [
    {"topic": "odd"},
    {"n": [0, 4]},
    {"n": {"gte": 2, "lt": 5}, "must_not": {"topic": "even"}},
    models.Filter(
        should=[
            models.FieldCondition(key="metadata.n", match=models.MatchValue(value=1)),
            models.FieldCondition(key="doc_id", match=models.MatchValue(value="doc-5")),
        ]
    ),
    models.Filter(must_not=[models.FieldCondition(key="metadata.n", match=models.MatchExcept(**{"except": [2, 3]}))]),
]


@pytest.mark.parametrize("mode", ["dense", "sparse"])
def test_edge_answers_every_mode_and_filter_as_local_mode_does(two_stores, mode):
    edge, local = two_stores
    query = "vitamin deficiency bone loss in older adults"
    for flt in [None, *FILTERS]:
        for grouped in (False, True):
            kwargs = dict(top_k=5, collection="kb", mode=mode, filter=flt, group_by_document=grouped)
            got = c2v_rag.search(query, path=edge, **kwargs)
            want = c2v_rag.search(query, path=local, **kwargs)
            assert got, (flt, grouped)
            same_ranking(got, want)
            if grouped:
                assert len({h.doc_id for h in got}) == len(got)


def rrf_bounds(*rankings: list) -> dict[str, tuple[float, float]]:
    """Reciprocal rank fusion as Qdrant computes it (k=2, ranks from 0), as the (lowest, highest) score a point can
    get: points tied in a list may take any rank of their tie group, in whatever order the engine holds them."""
    fused: dict[str, tuple[float, float]] = {}
    for ranking in rankings:
        scores = [round(hit.score, 6) for hit in ranking]
        for hit, score in zip(ranking, scores):
            first, last = scores.index(score), len(scores) - 1 - scores[::-1].index(score)
            lo, hi = fused.get(hit.id, (0.0, 0.0))
            fused[hit.id] = (lo + 1.0 / (last + 2), hi + 1.0 / (first + 2))
    return fused


@pytest.mark.parametrize("flt", [None, *FILTERS])
def test_edge_hybrid_is_the_rrf_of_its_dense_and_bm25_lists(two_stores, flt):
    # BM25 ties are ordered arbitrarily inside the engine, which moves RRF ranks: each fused score is checked
    # against the fusion of the store's own two lists, within what its ties allow (the prefetch depth is 50).
    edge, _ = two_stores
    query = "vitamin deficiency bone loss in older adults"
    lists = [
        c2v_rag.search(query, top_k=50, path=edge, collection="kb", mode=m, filter=flt) for m in ("dense", "sparse")
    ]
    fused = rrf_bounds(*lists)
    hits = c2v_rag.search(query, top_k=5, path=edge, collection="kb", mode="hybrid", filter=flt)
    assert hits and [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    for hit in hits:
        lo, hi = fused[hit.id]
        assert lo - 1e-6 <= hit.score <= hi + 1e-6, (hit.id, hit.score, lo, hi)
    # no point is sure to score above the best hit
    assert hits[0].score >= max(lo for lo, _ in fused.values()) - 1e-6
    # Grouped by document: each document once, at one of its chunks' fused scores, best documents first.
    groups = c2v_rag.search(
        query, top_k=3, path=edge, collection="kb", mode="hybrid", filter=flt, group_by_document=True
    )
    docs = {h.id: h.doc_id for lst in lists for h in lst}
    assert len({h.doc_id for h in groups}) == len(groups) == min(3, len(set(docs.values())))
    assert [h.score for h in groups] == sorted((h.score for h in groups), reverse=True)
    for hit in groups:
        lo, hi = fused[hit.id]
        assert lo - 1e-6 <= hit.score <= hi + 1e-6 and docs[hit.id] == hit.doc_id


def test_edge_filter_keeps_only_matching_points(two_stores):
    edge, _ = two_stores
    hits = c2v_rag.search("vitamin bone", top_k=50, path=edge, collection="kb", filter={"topic": "odd"})
    assert hits and {h.doc_id for h in hits} == {"doc-1", "doc-3", "doc-5"}
    hits = c2v_rag.search("vitamin bone", top_k=50, path=edge, collection="kb", mode="hybrid", filter={"n": {"gte": 4}})
    assert {h.doc_id for h in hits} == {"doc-4", "doc-5"}


def test_edge_rerun_adds_nothing_and_a_changed_document_leaves_no_stale_chunks(
    tmp_path, tiny_variant, corpus, ingest_config
):
    store = tmp_path / "edge"
    first = c2v_rag.ingest(corpus, path=store, store="edge", collection="kb", model=tiny_variant, config=ingest_config)
    again = c2v_rag.ingest(corpus, path=store, collection="kb", model=tiny_variant, config=ingest_config)
    assert (again.chunks_written, again.chunks_unchanged) == (0, first.chunks)
    changed = [dict(d) for d in corpus]
    changed[3]["text"] = make_text(99, sentences=3)
    c2v_rag.ingest(changed, path=store, collection="kb", model=tiny_variant, config=ingest_config)
    c2v_rag.ingest(
        changed, path=tmp_path / "clean", store="edge", collection="kb", model=tiny_variant, config=ingest_config
    )
    same_points(edge_points(tmp_path / "clean"), edge_points(store))


def test_edge_refuses_another_model_and_another_size(tmp_path, tiny_variant, tiny_variant_qwen, corpus, ingest_config):
    store = tmp_path / "edge"
    c2v_rag.ingest(corpus, path=store, store="edge", collection="kb", model=tiny_variant, config=ingest_config)
    with pytest.raises(CollectionMismatchError, match="built with another model"):
        c2v_rag.ingest(corpus, path=store, collection="kb", model=tiny_variant_qwen, config=ingest_config)
    with pytest.raises(CollectionMismatchError, match="another model"):
        c2v_rag.search("vitamin", path=store, collection="kb", model=tiny_variant_qwen)
    with pytest.raises(CollectionMismatchError, match="no sparse vectors"):
        c2v_rag.search("vitamin", path=store, collection="kb", mode="hybrid")
    with pytest.raises(CollectionMismatchError, match="no sparse vectors"):
        c2v_rag.ingest(corpus, path=store, collection="kb", model=tiny_variant, config=ingest_config, sparse="bm25")
    assert len(edge_points(store)) > 0


def test_an_open_edge_store_is_locked_with_a_clear_error(tmp_path, tiny_variant, corpus, ingest_config):
    store = tmp_path / "edge"
    with EdgeClient(store):
        with pytest.raises(StoreLockedError, match="open in another client"):
            EdgeClient(store)
        with pytest.raises(StoreLockedError, match=f"Qdrant Edge at {store}"):
            c2v_rag.ingest(corpus, path=store, collection="kb", model=tiny_variant, config=ingest_config)
    # Released on close: the ingest runs.
    assert c2v_rag.ingest(corpus, path=store, collection="kb", model=tiny_variant, config=ingest_config).ok
    code = (
        "import sys; sys.path.insert(0, sys.argv[2]); from c2v_rag.store.edge_client import EdgeClient; "
        "EdgeClient(sys.argv[1])"
    )
    with EdgeClient(store):  # another process sees the lock too
        out = subprocess.run(
            [sys.executable, "-c", code, str(store), str(Path(c2v_rag.__file__).parents[1])],
            capture_output=True,
            text=True,
        )
    assert out.returncode != 0 and "StoreLockedError" in out.stderr


def test_a_path_of_the_other_engine_is_refused_before_the_model_loads(tmp_path, tiny_variant, corpus, ingest_config):
    local, edge = tmp_path / "local", tmp_path / "edge"
    c2v_rag.ingest(corpus[:2], path=local, collection="kb", model=tiny_variant, config=ingest_config)
    c2v_rag.ingest(corpus[:2], path=edge, store="edge", collection="kb", model=tiny_variant, config=ingest_config)
    # model= names nothing loadable: the store error must come first.
    with pytest.raises(StoreKindError) as err:
        c2v_rag.ingest(corpus, path=local, store="edge", collection="kb", model="no-such-variant")
    message = str(err.value)
    assert "qdrant-client local-mode store (store='local')" in message and "Qdrant Edge store (store='edge')" in message
    assert str(local) in message and "migrate" in message
    with pytest.raises(StoreKindError, match="holds a Qdrant Edge store"):
        c2v_rag.search("vitamin", path=edge, store="local", collection="kb", model="no-such-variant")
    with pytest.raises(StoreKindError):
        QdrantConfig(path=edge).connect()  # a QdrantClient on an Edge directory, refused too
    with pytest.raises(StoreKindError):
        EdgeClient(local)


_KILLED_INGEST = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, sys.argv[1])
    import c2v_rag
    from c2v_rag.rag import IngestConfig
    from c2v_rag.rag.ingestion.points import PointWriter

    writes = 0
    original = PointWriter.write

    def write_then_die(self, points, completed, hashes=None):
        global writes
        original(self, points, completed, hashes)
        writes += 1
        if writes == 3:  # three batches are stored: die as a kill -9 would, no cleanup, no close
            os.kill(os.getpid(), signal.SIGKILL)

    PointWriter.write = write_then_die
    docs = [{"id": f"doc-{i}", "text": t} for i, t in enumerate(sys.argv[4:])]
    c2v_rag.ingest(docs, path=sys.argv[2], store="edge", collection="kb", model=sys.argv[3],
                   config=IngestConfig(chunk_size=24, chunk_overlap=4, batch_size=4, show_progress=False))
""")


def test_nothing_is_lost_when_an_edge_ingest_is_killed(tmp_path, tiny_variant, ingest_config):
    texts = [make_text(i, sentences=8) for i in range(8)]
    store = tmp_path / "killed"
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            _KILLED_INGEST,
            str(Path(c2v_rag.__file__).parents[1]),
            str(store),
            str(tiny_variant),
            *texts,
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == -9, run.stderr[-2000:]
    survived = edge_points(store)  # the lock died with the process; the WAL kept every stored batch
    assert len(survived) >= 12
    docs = [{"id": f"doc-{i}", "text": t} for i, t in enumerate(texts)]
    resumed = c2v_rag.ingest(docs, path=store, collection="kb", model=tiny_variant, config=ingest_config)
    assert resumed.chunks_unchanged == len(survived) and resumed.chunks_written == resumed.chunks - len(survived)
    c2v_rag.ingest(
        docs, path=tmp_path / "clean", store="edge", collection="kb", model=tiny_variant, config=ingest_config
    )
    same_points(edge_points(tmp_path / "clean"), edge_points(store))


def test_edge_sync_mirrors_a_folder(tmp_path, tiny_variant, ingest_config):
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(4):
        (folder / f"n{i}.md").write_text(make_text(i, sentences=3))
    store = tmp_path / "edge"
    c2v_rag.ingest(folder, path=store, store="edge", collection="kb", model=tiny_variant, config=ingest_config)
    (folder / "n1.md").unlink()
    (folder / "n2.md").rename(folder / "renamed.md")
    result = c2v_rag.ingest(folder, path=store, collection="kb", model=tiny_variant, config=ingest_config, sync=True)
    assert result.documents_deleted == 2
    c2v_rag.ingest(
        folder, path=tmp_path / "clean", store="edge", collection="kb", model=tiny_variant, config=ingest_config
    )
    same_points(edge_points(tmp_path / "clean"), edge_points(store))


def test_edge_versioned_ingest_and_reindex_switch_the_alias(
    tmp_path, tiny_variant, tiny_variant_qwen, corpus, ingest_config
):
    store = tmp_path / "edge"
    first = c2v_rag.ingest(
        corpus, path=store, store="edge", collection="papers", model=tiny_variant, config=ingest_config, versioned=True
    )
    assert first.collection == "papers_v1"
    before = c2v_rag.search("vitamin bone", top_k=3, path=store, collection="papers")
    result = c2v_rag.reindex("papers", path=store, model=tiny_variant_qwen, show_progress=False, drop_previous=True)
    assert (result.previous, result.collection, result.chunks) == ("papers_v1", "papers_v2", first.chunks)
    with closing(EdgeClient(store)) as client:
        assert [(a.alias_name, a.collection_name) for a in client.get_aliases().aliases] == [("papers", "papers_v2")]
        assert [c.name for c in client.get_collections().collections] == ["papers_v2"]
    after = c2v_rag.search("vitamin bone", top_k=3, path=store, collection="papers")  # with the new model
    assert len(after) == 3 and {h.doc_id for h in before} and after[0].score != before[0].score
    with pytest.raises(CollectionMismatchError, match="another model"):
        c2v_rag.search("vitamin bone", path=store, collection="papers", model=tiny_variant)
    # The reindexed copy holds the same chunks, re-embedded by the new model.
    stored = edge_points(store, "papers_v2")
    q = {p["page_content"] for p, _ in stored.values()}
    assert q == {h.text for h in c2v_rag.search("vitamin bone", top_k=100, path=store, collection="papers")}


@pytest.mark.parametrize("direction", ["local->edge", "edge->local"])
def test_migrate_copies_points_unchanged_and_the_copy_searches_the_same(
    tmp_path, tiny_variant, corpus, ingest_config, direction
):
    source_store, target_store = direction.split("->")
    source, target = tmp_path / source_store, tmp_path / f"copy-{target_store}"
    c2v_rag.ingest(
        corpus,
        path=source,
        store=source_store,
        collection="papers",
        model=tiny_variant,
        config=ingest_config,
        sparse="bm25",
        versioned=True,
    )
    result = c2v_rag.migrate("papers", source_path=source, target_path=target, target_store=target_store)
    assert (result.collection, result.target_collection, result.alias) == ("papers_v1", "papers_v1", "papers")
    read = {"local": local_points, "edge": edge_points}
    same_points(read[source_store](source, "papers_v1"), read[target_store](target, "papers_v1"))
    assert store_kind(target) == target_store
    for mode in ("dense", "sparse", "hybrid"):
        got = c2v_rag.search("vitamin bone loss", top_k=4, path=target, collection="papers", mode=mode)
        want = c2v_rag.search("vitamin bone loss", top_k=4, path=source, collection="papers", mode=mode)
        if mode != "hybrid" or source_store == target_store:
            same_ranking(got, want)
    # The copy records the model: another one is refused there too, and a re-run resumes (adds nothing).
    again = c2v_rag.migrate("papers", source_path=source, target_path=target)
    assert again.points == result.points and len(read[target_store](target, "papers_v1")) == result.points
    with pytest.raises(ValueError, match="source and target are both"):
        c2v_rag.migrate("papers", source_path=source, target_path=source)


def test_migrate_refuses_a_target_collection_that_is_not_a_copy(
    tmp_path, tiny_variant, tiny_variant_qwen, corpus, ingest_config
):
    c2v_rag.ingest(corpus[:2], path=tmp_path / "a", collection="kb", model=tiny_variant, config=ingest_config)
    c2v_rag.ingest(
        corpus[:2], path=tmp_path / "b", store="edge", collection="kb", model=tiny_variant_qwen, config=ingest_config
    )
    with pytest.raises(CollectionMismatchError, match="is not a copy of 'kb'"):
        c2v_rag.migrate("kb", source_path=tmp_path / "a", target_path=tmp_path / "b")


@pytest.mark.parametrize("end", ["target", "source"])
def test_migrate_names_an_unreachable_server_url_and_writes_nothing(tmp_path, tiny_variant, corpus, ingest_config, end):
    # Nothing listens on the discard port: the server calls fail as they would for a server that is down.
    url = "http://127.0.0.1:9"
    store = tmp_path / "edge"
    c2v_rag.ingest(corpus[:2], path=store, store="edge", collection="kb", model=tiny_variant, config=ingest_config)
    before = edge_points(store)
    ends = (
        {"source_path": store, "target_url": url}
        if end == "target"
        else {"source_url": url, "target_path": tmp_path / "copy", "target_store": "edge"}
    )
    with pytest.raises(QdrantUnreachableError, match=r"cannot reach Qdrant at http://127\.0\.0\.1:9 after 3 attempts"):
        c2v_rag.migrate("kb", **ends)
    assert edge_points(store).keys() == before.keys()
    assert not (tmp_path / "copy").exists() or store_kind(tmp_path / "copy") is None


def test_cli_ingest_search_and_migrate_with_store_edge(tmp_path, tiny_variant, capsys):
    from c2v_rag.cli import main

    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(3):
        (folder / f"n{i}.md").write_text(make_text(i, sentences=3))
    edge, local = tmp_path / "edge", tmp_path / "local"
    assert (
        main(
            [
                "ingest",
                str(folder),
                "--path",
                str(edge),
                "--store",
                "edge",
                "--collection",
                "kb",
                "--model",
                str(tiny_variant),
                "--chunk-size",
                "24",
                "--chunk-overlap",
                "4",
                "-q",
            ]
        )
        == 0
    )
    assert f"Qdrant Edge at {edge}" in capsys.readouterr().out
    assert main(["search", "vitamin bone", "--path", str(edge), "--collection", "kb", "--json"]) == 0
    import json

    hits = json.loads(capsys.readouterr().out)
    assert [h["id"] for h in hits] == [h.id for h in c2v_rag.search("vitamin bone", path=edge, collection="kb")]
    migrate = ["migrate", "--path", str(edge), "--collection", "kb", "--to-path", str(local)]
    assert main(migrate) == 0
    out, err = capsys.readouterr()
    assert "copied into 'kb' at embedded Qdrant at" in out
    points = len(edge_points(edge))
    assert "Copying kb: 100%" in err and f"{points}/{points} [" in err  # a bar, to its end
    same_points(edge_points(edge), local_points(local))
    assert main([*migrate, "-q"]) == 0  # again (a resumed copy), quiet
    out, err = capsys.readouterr()
    assert "copied into 'kb'" in out and "Copying" not in err
    # The wrong engine named on the command line: one error line, exit 2, before the model loads.
    assert main(["search", "vitamin", "--path", str(local), "--store", "edge", "--collection", "kb"]) == 2
    assert "holds a qdrant-client local-mode store" in capsys.readouterr().err


def test_serve_search_reads_an_edge_store(tmp_path, tiny_variant, corpus, ingest_config):
    for _module in ("fastapi", "uvicorn", "httpx"):
        pytest.importorskip(_module)
    import httpx

    from c2v_rag.rag import load_model
    from c2v_rag.serving import ServerConfig, ServerThread, create_app

    c2v_rag.ingest(corpus, path=tmp_path, store="edge", collection="kb", model=tiny_variant, config=ingest_config)
    query = make_text(3)[:50]
    want = c2v_rag.search(query, top_k=4, path=tmp_path, collection="kb", filter={"topic": "odd"})
    config = ServerConfig(model_name="tiny", qdrant_path=tmp_path, collection="kb")  # the engine is detected
    with ServerThread(create_app(load_model(tiny_variant, device="cpu"), config), config) as server:
        response = httpx.post(server.url + "/v1/search", json={"query": query, "top_k": 4, "filter": {"topic": "odd"}})
    assert response.status_code == 200, response.text
    assert [h["id"] for h in response.json()["data"]] == [h.id for h in want]


def test_ties_come_back_in_one_order_every_time(tmp_path, tiny_variant, corpus, ingest_config):
    """RRF gives points with swapped ranks equal scores, and Edge orders ties arbitrarily: c2v_rag orders them
    by (score, id) after over-fetching, so the same query always gets the same hits in the same order."""
    store = tmp_path / "edge"
    c2v_rag.ingest(
        corpus, path=store, store="edge", collection="kb", model=tiny_variant, config=ingest_config, sparse="bm25"
    )
    client = QdrantConfig.resolve(None, None, store, store="edge").connect()
    tied = 0
    try:
        # Whether two points tie varies from run to run (most likely with Edge's order of equal BM25 scores), so
        # many queries make sure some tie: with one per document, about 1 run in 5 had none.
        queries = [doc["text"][start : start + 40] for doc in corpus for start in (0, 40, 80, 120)]
        for query in queries:
            runs = [
                [
                    (h.id, h.score)
                    for h in c2v_rag.search(query, top_k=12, collection="kb", client=client, mode="hybrid")
                ]
                for _ in range(8)
            ]
            assert all(run == runs[0] for run in runs), query
            assert runs[0] == sorted(runs[0], key=lambda hit: (-hit[1], hit[0])), query
            scores = [s for _, s in runs[0]]
            tied += len(set(scores)) < len(scores)
    finally:
        client.close()
    assert tied, "no query had a tie: the test would not exercise the order of ties"


def test_a_large_local_mode_collection_suggests_edge(
    tmp_path, tiny_variant, corpus, ingest_config, monkeypatch, caplog
):
    import logging

    from c2v_rag.rag.ingestion import local_engine as local_ingest

    monkeypatch.setattr(local_ingest, "LOCAL_MODE_POINTS_HINT", 5)  # five points stand in for the real thousands
    with caplog.at_level(logging.WARNING, logger="c2v_rag.rag.ingestion.local_engine"):
        c2v_rag.ingest(corpus, path=tmp_path / "local", collection="kb", model=tiny_variant, config=ingest_config)
        c2v_rag.ingest(
            corpus, path=tmp_path / "edge", store="edge", collection="kb", model=tiny_variant, config=ingest_config
        )
    hints = [r.getMessage() for r in caplog.records if "--to-store edge" in r.getMessage()]
    assert len(hints) == 1 and str(tmp_path / "local") in hints[0]


def _segment_configs(store: Path, collection: str) -> list[dict]:
    """The vector-data config each of the collection's segments was written with (Edge's own segment.json)."""
    import json

    return [
        json.loads(f.read_text())["config"]["vector_data"][""]
        for f in sorted((store / "collections" / collection / "shard" / "segments").glob("*/segment.json"))
    ]


def _unit_vectors(n: int, dims: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dims)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _fill(config: QdrantConfig, vectors: np.ndarray) -> None:
    with closing(config.connect()) as client:  # close() builds what the engine builds (graph, quantization)
        client.create_collection("kb", **config.create_collection_kwargs(vectors.shape[1]))
        for start in range(0, len(vectors), 1024):
            client.upsert(
                "kb",
                [
                    models.PointStruct(id=start + i, vector=v.tolist())
                    for i, v in enumerate(vectors[start : start + 1024])
                ],
            )


def test_edge_stores_float16_and_on_disk_vectors_as_asked(tmp_path):
    vectors = _unit_vectors(300, 64, seed=1)
    plain, compact = (
        QdrantConfig(path=tmp_path / "plain", store="edge"),
        QdrantConfig(path=tmp_path / "f16", store="edge", datatype="float16", on_disk=True),
    )
    for config in (plain, compact):
        _fill(config, vectors)
    as_float16 = vectors.astype(np.float16).astype(np.float32)
    assert np.abs(as_float16 - vectors).max() > 1e-5  # the two storages are distinguishable here
    for config, want in ((plain, vectors), (compact, as_float16)):
        with closing(config.connect()) as client:
            stored = {
                int(r.id): np.asarray(r.vector, dtype=np.float32)
                for r in client.retrieve("kb", list(range(len(vectors))), with_vectors=True)
            }
            np.testing.assert_array_equal(np.stack([stored[i] for i in range(len(vectors))]), want)
            assert client.get_collection("kb").config.params.vectors.datatype == (
                models.Datatype.FLOAT16 if config is compact else None
            )
            # Scores are the cosine of what is stored: float16 vectors score as float16 vectors.
            hit = client.query_points("kb", vectors[7].tolist(), limit=1).points[0]
            assert hit.id == 7 and abs(hit.score - float(want[7] @ vectors[7])) < 1e-4
    storage = {name: {c["storage_type"] for c in _segment_configs(tmp_path / name, "kb")} for name in ("plain", "f16")}
    assert storage == {"plain": {"InRamChunkedMmap"}, "f16": {"ChunkedMmap"}}  # on_disk: memory-mapped, not loaded


@pytest.mark.parametrize("quantization", ["int8", "binary"])
def test_edge_quantizes_as_asked_and_rescores_with_the_original_vectors(tmp_path, quantization):
    # 8,000 x 384 float32 (12 MB) is past Edge's indexing threshold (10 MB), so close() builds the
    # HNSW graph and the quantized copy, as at scale.
    vectors, queries = _unit_vectors(8000, 384, seed=2), _unit_vectors(20, 384, seed=3)
    config = QdrantConfig(path=tmp_path / quantization, store="edge", quantization=quantization)
    _fill(config, vectors)
    # The indexed segments hold the points and their quantized copy; Edge keeps one empty appendable
    # segment besides for new writes (quantized too with binary, which Edge maintains as it appends).
    indexed = [c for c in _segment_configs(tmp_path / quantization, "kb") if c["index"]["type"] == "hnsw"]
    assert indexed and all(
        (c["quantization_config"] or {}).keys() == {"scalar" if quantization == "int8" else "binary"} for c in indexed
    )
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    with closing(config.connect()) as client:
        info = client.get_collection("kb")
        assert info.indexed_vectors_count == info.points_count == len(vectors)
        found = []
        for q in queries:
            points = client.query_points("kb", q.tolist(), limit=10).points
            # Returned scores are rescored with the float32 originals, not the codes' approximations.
            np.testing.assert_allclose([p.score for p in points], vectors[[p.id for p in points]] @ q, atol=1e-5)
            found.append({p.id for p in points})
    recall = np.mean([len(f & set(e.tolist())) / 10 for f, e in zip(found, exact)])
    print(f"\n{quantization}: recall@10 {recall:.3f} on random 384-d vectors")
    # Random 384-d vectors are the hard case for both the graph and the codes. Measured: without rescoring
    # (Edge's default) the scores were the codes' and binary's recall 0.145; rescored (binary from 4x
    # candidates) int8 0.725 and binary 0.350. The floors catch a search that ignores the originals.
    assert recall > (0.25 if quantization == "binary" else 0.6)


def test_search_ef_is_the_chosen_one_else_grows_with_the_collection(tmp_path):
    from c2v_rag.store.edge_client import AUTO_EF_AT_1M, AUTO_EF_FROM, HNSW_EF, auto_search_ef

    vectors = _unit_vectors(50, 16, seed=4)
    _fill(QdrantConfig(path=tmp_path / "auto", store="edge"), vectors)
    _fill(QdrantConfig(path=tmp_path / "chosen", store="edge", hnsw_ef=64), vectors)
    with closing(EdgeClient(tmp_path / "auto")) as client:
        assert client.search_ef("kb") == HNSW_EF  # 50 points: the base ef
    with closing(EdgeClient(tmp_path / "chosen")) as client:
        assert client.search_ef("kb") == 64  # recorded when the collection was made, used by every reader
    with closing(EdgeClient(tmp_path / "chosen", hnsw_ef=300)) as client:
        assert client.search_ef("kb") == 300  # a reader's own choice wins
        # ... and a request's search params win over both (the answer is the same at this size: exact).
        hits = client.query_points(
            "kb", vectors[3].tolist(), limit=3, search_params=models.SearchParams(hnsw_ef=16)
        ).points
        assert hits[0].id == 3
    sizes = [1_000, AUTO_EF_FROM, 300_000, 1_000_000, 3_000_000]
    efs = [auto_search_ef(n) for n in sizes]
    assert efs[:2] == [HNSW_EF, HNSW_EF] and efs[3] == AUTO_EF_AT_1M and efs == sorted(efs) and efs[2] < efs[3] < efs[4]
