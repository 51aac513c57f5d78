"""POST /v1/search against embedded Qdrant, over real HTTP, with a tiny model."""

from __future__ import annotations

import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity", "fastapi", "uvicorn", "httpx"):
    pytest.importorskip(_module)

import httpx
from rag_helpers import make_text, rerank_auto_in_int8_on_avx2

import c2v_rag
from c2v_rag.rag import Embedder, load_model
from c2v_rag.serving import ServerConfig, ServerThread, create_app


def test_search_endpoint_returns_what_search_returns(tmp_path, tiny_variant, tiny_variant_qwen, corpus, ingest_config):
    c2v_rag.ingest(corpus, path=tmp_path, collection="kb", model=tiny_variant, config=ingest_config)
    c2v_rag.ingest(corpus[:2], path=tmp_path, collection="other_model", model=tiny_variant_qwen, config=ingest_config)
    query = make_text(3)[:50]
    # Embedded Qdrant takes one client per directory: the expected hits are read before the server opens it.
    expected = c2v_rag.search(query, top_k=4, path=tmp_path, collection="kb", model=tiny_variant)
    odd = c2v_rag.search(query, top_k=4, path=tmp_path, collection="kb", model=tiny_variant, filter={"topic": "odd"})
    scifact = c2v_rag.search(query, top_k=4, path=tmp_path, collection="kb", model=tiny_variant, task="SciFact")
    documents = c2v_rag.search(
        query, top_k=6, path=tmp_path, collection="kb", model=tiny_variant, group_by_document=True
    )
    # Grouping checked against an independent reading: every chunk ranked, then each document's first.
    # (Whether the plain top 6 repeats a document depends on the tiny model's random weights and the CPU.)
    every_chunk = c2v_rag.search(query, top_k=1000, path=tmp_path, collection="kb", model=tiny_variant)
    assert len(every_chunk) > 6
    best_chunk: dict = {}
    for hit in every_chunk:  # ranked best first, so the first hit of a document is its best chunk
        best_chunk.setdefault(hit.doc_id, hit)
    best_per_document = list(best_chunk.values())[:6]
    assert [h.id for h in documents] == [h.id for h in best_per_document]
    assert [h.score for h in documents] == pytest.approx([h.score for h in best_per_document], abs=1e-6)

    config = ServerConfig(model_name="tiny", qdrant_path=tmp_path, collection="kb")
    with ServerThread(create_app(load_model(tiny_variant, device="cpu"), config), config) as server:

        def search(**body) -> httpx.Response:
            return httpx.post(server.url + "/v1/search", json={"query": query, "top_k": 4, **body})

        for response, want in (
            (search(), expected),
            (search(filter={"topic": "odd"}), odd),
            (search(task="SciFact"), scifact),
            (search(group_by_document=True, top_k=6), documents),
        ):
            assert response.status_code == 200, response.text
            hits = response.json()["data"]
            assert [h["id"] for h in hits] == [h.id for h in want]
            assert [h["score"] for h in hits] == pytest.approx([h.score for h in want], abs=1e-5)
            assert hits[0]["text"] == want[0].text and hits[0]["metadata"] == want[0].metadata
        assert response.json()["usage"]["prompt_tokens"] > 0

        missing = search(collection="nothing_here")
        assert missing.status_code == 404 and "does not exist" in missing.json()["error"]["message"]
        mismatch = search(collection="other_model")
        assert mismatch.status_code == 409 and "another model" in mismatch.json()["error"]["message"]
        assert search(collection="bad name!").status_code == 400
        assert search(filter={"topic": {"nested": 1}}).status_code == 400
        assert search(top_k=0).status_code == 400
        assert httpx.post(server.url + "/v1/search", json={"query": ""}).status_code == 400


def test_search_endpoint_runs_sparse_and_hybrid_as_search_does(tmp_path, tiny_variant, corpus, ingest_config):
    """/v1/search takes the library's mode and fusion: the hits are c2v_rag.search's for the same options; a sparse
    search embeds nothing, and a mode the collection cannot run is refused before the query is embedded."""
    pytest.importorskip("bm25s")
    pytest.importorskip("Stemmer")
    c2v_rag.ingest(corpus, path=tmp_path, collection="kb", model=tiny_variant, config=ingest_config, sparse="bm25")
    c2v_rag.ingest(corpus[:2], path=tmp_path, collection="dense_only", model=tiny_variant, config=ingest_config)
    query = " ".join(make_text(3).split()[:6])  # words the corpus holds, so BM25 finds chunks
    cases = [
        {"mode": "sparse"},
        {"mode": "hybrid"},
        {"mode": "hybrid", "fusion": "dbsf"},
        {"mode": "hybrid", "filter": {"topic": "odd"}},
        {"mode": "sparse", "group_by_document": True},
    ]
    expected = [c2v_rag.search(query, top_k=4, path=tmp_path, collection="kb", model=tiny_variant, **c) for c in cases]
    dense = c2v_rag.search(query, top_k=4, path=tmp_path, collection="kb", model=tiny_variant)
    assert all(expected) and [h.id for h in expected[0]] != [h.id for h in dense]  # the modes differ here

    config = ServerConfig(model_name="tiny", qdrant_path=tmp_path, collection="kb")
    with ServerThread(create_app(load_model(tiny_variant, device="cpu"), config), config) as server:

        def search(**body) -> httpx.Response:
            return httpx.post(server.url + "/v1/search", json={"query": query, "top_k": 4, **body})

        def tokens_embedded() -> float:
            metrics = httpx.get(server.url + "/metrics").text
            line = next(x for x in metrics.splitlines() if x.startswith("c2v_rag_prompt_tokens_total "))
            return float(line.split()[1])

        for case, want in zip(cases, expected):
            before = tokens_embedded()
            response = search(**case)
            assert response.status_code == 200, response.text
            hits = response.json()["data"]
            assert [h["id"] for h in hits] == [h.id for h in want], case
            assert [h["score"] for h in hits] == pytest.approx([h.score for h in want], abs=1e-5)
            used = response.json()["usage"]["prompt_tokens"]
            assert (used == 0) == (case["mode"] == "sparse") and tokens_embedded() - before == used

        refused = search(mode="hybrid", collection="dense_only")
        assert refused.status_code == 400 and refused.json()["error"]["param"] == "mode"
        assert "sparse='bm25'" in refused.json()["error"]["message"]
        assert search(mode="bm25").status_code == 400
        assert search(mode="hybrid", fusion="max").status_code == 400


def test_a_search_request_reads_the_alias_and_the_collections_record_once(
    tmp_path, tiny_variant, corpus, ingest_config, monkeypatch
):
    """Against a server each read is a round trip: a /v1/search request resolves the alias and reads the
    collection's record once, for the check and the search together (it read each twice before)."""
    from collections import Counter

    from qdrant_client import QdrantClient

    c2v_rag.ingest(corpus, path=tmp_path, collection="kb", model=tiny_variant, config=ingest_config)
    calls: Counter[str] = Counter()
    for name in ("get_aliases", "get_collection", "collection_exists", "query_batch_points", "query_points"):
        original = getattr(QdrantClient, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(QdrantClient, name, counted)
    config = ServerConfig(model_name="tiny", qdrant_path=tmp_path, collection="kb")
    with ServerThread(create_app(load_model(tiny_variant, device="cpu"), config), config) as server:
        for _ in range(2):
            calls.clear()
            response = httpx.post(server.url + "/v1/search", json={"query": make_text(3)[:50], "top_k": 3})
            assert response.status_code == 200 and len(response.json()["data"]) == 3, response.text
            assert calls["get_aliases"] == 1 and calls["get_collection"] == 1 and not calls["collection_exists"], calls
            assert calls["query_batch_points"] + calls["query_points"] == 1, calls


def test_search_endpoint_reads_the_collection_its_check_resolved(tmp_path, tiny_variant, tiny_variant_qwen):
    """/v1/search resolves an alias once: the collection it checked against the served model is the
    one it searches, even when a reindex moves the alias to another model's collection in between."""
    import asyncio

    from c2v_rag.serving.search import CollectionSearcher
    from c2v_rag.store.aliases import alias_target, switch_alias

    docs = [{"id": f"doc-{i}", "text": make_text(i)} for i in range(4)]
    small = {"chunk_size": 24, "chunk_overlap": 4, "show_progress": False}
    c2v_rag.ingest(docs, path=tmp_path, collection="papers", model=tiny_variant, versioned=True, **small)
    c2v_rag.ingest(docs[:1], path=tmp_path, collection="papers_v2", model=tiny_variant_qwen, **small)
    query = make_text(2)[:50]
    expected = c2v_rag.search(query, top_k=3, path=tmp_path, collection="papers", model=tiny_variant)

    model = load_model(tiny_variant, device="cpu")
    vector = Embedder(model, normalize=True).embed_queries([query])[0]  # the query vector search() makes
    searcher = CollectionSearcher(model, ServerConfig(qdrant_path=tmp_path))

    async def check_switch_search():
        checked = await searcher.check("papers")
        switch_alias(searcher._connect(), "papers", "papers_v2")  # a reindex finishing mid-request
        return checked, await searcher.nearest(checked, vector, 3)

    try:
        checked, hits = asyncio.run(check_switch_search())
        assert alias_target(searcher._connect(), "papers") == "papers_v2"
    finally:
        searcher.close()
    assert checked.name == "papers_v1"
    assert [h.id for h in hits] == [h.id for h in expected]
    assert [h.score for h in hits] == pytest.approx([h.score for h in expected], abs=1e-5)


def test_plain_serve_searches_the_store_ingest_and_search_use(tmp_path, tiny_variant, monkeypatch):
    """``c2v-rag serve`` with no store flag answered /v1/search with 404 "search is not configured", while its
    --help said --path defaults to the user data dir. It now reads the default store, on loopback only."""
    import os
    import socket
    import subprocess
    import sys
    import time
    from pathlib import Path

    from c2v_rag.cli import main

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # the user data dir ingest and serve default to
    monkeypatch.delenv("C2V_RAG_QDRANT_PATH", raising=False)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text(make_text(1), encoding="utf-8")
    assert main(["ingest", str(docs), "--model", str(tiny_variant), "--chunk-size", "24", "-q"]) == 0
    assert (tmp_path / "data" / "c2v_rag" / "qdrant").is_dir()

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "c2v_rag.cli", "serve", str(tiny_variant), "--port", str(port)]
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, server.communicate()[0]
            try:
                if httpx.get(url + "/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.3)
        response = httpx.post(url + "/v1/search", json={"query": "bone loss", "top_k": 2})
        assert response.status_code == 200, response.text
        assert response.json()["data"] and response.json()["data"][0]["source"].endswith("a.txt")
    finally:
        server.terminate()
        log = server.communicate(timeout=60)[0]
    assert "/v1/search reads embedded Qdrant at " + str(tmp_path / "data") in log, log
    assert "http://127.0.0.1:" in log  # loopback unless told otherwise


def test_search_endpoint_reranks_as_search_does(tmp_path, tiny_lm_variant, monkeypatch):
    """``rerank`` on /v1/search: the top N by the served variant's reranker fused with the first stage's scores,
    the hits and rerank scores ``c2v_rag.search(..., rerank=N)`` returns; a bad N is a 400 naming the field."""
    docs = [{"id": f"doc-{i}", "text": make_text(i, sentences=4)} for i in range(6)]
    c2v_rag.ingest(
        docs, path=tmp_path, collection="kb", model=tiny_lm_variant, chunk_size=24, chunk_overlap=4, show_progress=False
    )
    query = "vitamin bone proteins"
    first = c2v_rag.search(query, top_k=8, path=tmp_path, collection="kb", model=tiny_lm_variant)
    reranked = c2v_rag.search(query, top_k=3, rerank=8, path=tmp_path, collection="kb", model=tiny_lm_variant)
    assert [h.id for h in reranked] != [h.id for h in first[:3]]  # the reranker changes the order: the check can fail

    config = ServerConfig(model_name="tiny", qdrant_path=tmp_path, collection="kb")
    with ServerThread(create_app(load_model(tiny_lm_variant, device="cpu"), config), config) as server:

        def search(**body) -> httpx.Response:
            return httpx.post(server.url + "/v1/search", json={"query": query, "top_k": 3, **body}, timeout=60)

        response = search(rerank=8)
        assert response.status_code == 200, response.text
        hits = response.json()["data"]
        assert [h["id"] for h in hits] == [h.id for h in reranked]
        assert [h["rerank_score"] for h in hits] == pytest.approx([h.rerank_score for h in reranked], abs=1e-5)
        assert [h["score"] for h in hits] == pytest.approx([h.score for h in reranked], abs=1e-5)
        plain = search().json()["data"]
        assert [h["id"] for h in plain] == [h.id for h in first[:3]] and plain[0]["rerank_score"] is None
        # The server reranks when a request asks, by number or "auto" (here what $C2V_RAG_RERANK says); a request
        # that does not ask is not reranked even where the library's default would (a server's throughput).
        monkeypatch.setenv("C2V_RAG_RERANK", "8")
        assert [h["id"] for h in search(rerank="auto").json()["data"]] == [h.id for h in reranked]
        assert search().json()["data"][0]["rerank_score"] is None

        refused = (
            (2, "rerank=2 is less than top_k=3"),
            (True, "integer"),
            (0, "positive"),
            ("8", "integer"),
            ("all", "'auto'"),
        )
        for rerank, message in refused:
            bad = search(rerank=rerank)
            assert bad.status_code == 400, bad.text
            error = bad.json()["error"]
            assert error["param"] == "rerank" and message in error["message"], error


def test_search_endpoints_auto_rerank_is_the_librarys_on_an_avx2_cpu(tmp_path, tiny_lm_variant, monkeypatch):
    """The served model stays float (its vectors, as sentence-transformers'), but its reranker under ``"auto"``
    goes as a search's does: on an AVX2 CPU with the int8 extra, the top 10 by the int8 decoder, the hits and
    scores ``c2v_rag.search`` returns (a float32 reranker there would leave ``"auto"`` unreranked)."""
    pytest.importorskip("onnxruntime")
    from c2v_rag.rag.retrieval import reranking

    docs = [{"id": f"doc-{i}", "text": make_text(i, sentences=4)} for i in range(8)]
    c2v_rag.ingest(
        docs,
        path=tmp_path / "store",
        collection="kb",
        model=tiny_lm_variant,
        chunk_size=24,
        chunk_overlap=4,
        show_progress=False,
        quantize="none",
    )
    rerank_auto_in_int8_on_avx2(monkeypatch, tmp_path / "cache")  # the tiny decoder's int8 graph, built here
    query = "vitamin bone proteins"
    options = {"top_k": 3, "path": tmp_path / "store", "collection": "kb", "device": "cpu"}
    library = c2v_rag.search(query, **options)
    assert all(h.rerank_score is not None for h in library)
    assert [r.precision for r in reranking._cache.values()] == ["int8"]

    config = ServerConfig(model_name="tiny", qdrant_path=tmp_path / "store", collection="kb")
    model = load_model(tiny_lm_variant, device="cpu")
    assert model.quantization == "none"
    with ServerThread(create_app(model, config), config) as server:
        response = httpx.post(
            server.url + "/v1/search", json={"query": query, "top_k": 3, "rerank": "auto"}, timeout=120
        )
    assert response.status_code == 200, response.text
    hits = response.json()["data"]
    assert [h["id"] for h in hits] == [h.id for h in library]
    assert [h["rerank_score"] for h in hits] == pytest.approx([h.rerank_score for h in library], abs=1e-5)


def test_search_endpoints_auto_rerank_searches_unreranked_when_the_reranker_cannot_load(
    tmp_path, tiny_lm_variant, monkeypatch, caplog
):
    """As the library's ``rerank="auto"``: a reranker that cannot load (its base decoder missing offline) leaves
    an ``"auto"`` search unreranked, logged once; a number asked for is the request's error."""
    import c2v_rag.rerank

    docs = [{"id": f"doc-{i}", "text": make_text(i, sentences=4)} for i in range(6)]
    c2v_rag.ingest(
        docs, path=tmp_path, collection="kb", model=tiny_lm_variant, chunk_size=24, chunk_overlap=4, show_progress=False
    )
    query = "vitamin bone proteins"
    first = c2v_rag.search(query, top_k=3, path=tmp_path, collection="kb", model=tiny_lm_variant, rerank=None)

    def unavailable(*args, **kwargs):
        raise OSError("SmolLM2-135M-Instruct: no such file (offline)")

    monkeypatch.setattr(c2v_rag.rerank, "Causal2VecReranker", unavailable)
    monkeypatch.setenv("C2V_RAG_RERANK", "8")  # what "auto" does, whatever the CPU
    config = ServerConfig(model_name="tiny", qdrant_path=tmp_path, collection="kb")
    with caplog.at_level("WARNING", logger="c2v_rag"):
        with ServerThread(create_app(load_model(tiny_lm_variant, device="cpu"), config), config) as server:

            def search(**body) -> httpx.Response:
                return httpx.post(server.url + "/v1/search", json={"query": query, "top_k": 3, **body}, timeout=60)

            answers = [search(rerank="auto") for _ in range(2)]
            asked = search(rerank=8)
    for answer in answers:
        assert answer.status_code == 200, answer.text
        hits = answer.json()["data"]
        assert [h["id"] for h in hits] == [h.id for h in first] and all(h["rerank_score"] is None for h in hits)
    warned = [r.getMessage() for r in caplog.records if "could not load" in r.getMessage()]
    assert len(warned) == 1 and "no such file (offline)" in warned[0]
    assert asked.status_code == 500


def test_a_store_server_that_is_away_is_a_503_naming_it(tiny_variant):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        away = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = ServerConfig(model_name="tiny", qdrant_url=away, collection="kb")
    with ServerThread(create_app(load_model(tiny_variant, device="cpu"), config), config) as server:
        response = httpx.post(server.url + "/v1/search", json={"query": "tides"})
        assert httpx.post(server.url + "/v1/embeddings", json={"input": "tides"}).status_code == 200  # still serving
    error = response.json()["error"]
    assert response.status_code == 503 and error["code"] == "store_unreachable"
    assert error["message"].startswith(f"cannot reach Qdrant at {away}")


def test_a_search_on_a_store_that_does_not_exist_is_a_404_that_creates_none(tmp_path, tiny_variant):
    # The server opened its store at the first search, so --path naming no directory got an empty local-mode store
    # made there (which then refused an Edge ingest) and a 404 only after.
    missing = tmp_path / "nostore"
    config = ServerConfig(model_name="tiny", qdrant_path=missing, collection="kb")
    with ServerThread(create_app(load_model(tiny_variant, device="cpu"), config), config) as server:
        response = httpx.post(server.url + "/v1/search", json={"query": "tides", "top_k": 2})
        assert response.status_code == 404, response.text
        assert "there is no store there" in response.json()["error"]["message"]
    assert not missing.exists()
