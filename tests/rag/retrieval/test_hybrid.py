"""BM25 sparse vectors and dense/sparse/hybrid search on embedded Qdrant, and both frameworks
opening a hybrid collection. Expected scores are computed here from the formulas, not read back."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from contextlib import closing

import numpy as np
import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity", "bm25s", "Stemmer"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from qdrant_client.http import models
from rag_helpers import make_text, stored_points

import c2v_rag
from c2v_rag.rag import DEFAULT_QUERY_TASK, BM25Config, BM25Encoder, CollectionMismatchError
from c2v_rag.store.sparse import term_index

QUERY = "vitamin deficiency and bone loss in older adults"
SMALL = {"chunk_size": 24, "chunk_overlap": 4, "show_progress": False}


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory, tiny_variant):
    """A hybrid collection of 10 short documents, and an open client on it."""
    from c2v_rag.rag import IngestConfig

    path = tmp_path_factory.mktemp("hybrid")
    docs = [{"id": f"doc-{i}", "text": make_text(i, sentences=2), "metadata": {"n": i}} for i in range(10)]
    config = IngestConfig(chunk_size=24, chunk_overlap=4, batch_size=8, show_progress=False)
    result = c2v_rag.ingest(docs, path=path, collection="kb", model=tiny_variant, config=config, sparse="bm25")
    assert result.ok and result.chunks_written == result.chunks > 10
    with closing(QdrantClient(path=str(path))) as client:
        yield client


def test_bm25_weights_follow_the_formula():
    config = BM25Config(k1=1.5, b=0.5, avg_length=4.0)
    encoder = BM25Encoder(config)
    [(indices, values)] = encoder.encode_documents(["The cats chased cats and the dogs, running."])
    terms = ["cat", "chase", "cat", "dog", "run"]  # lower-cased, stopwords out, Snowball-stemmed
    assert encoder.terms(["The cats chased cats and the dogs, running."]) == [terms]
    counts = Counter(terms)
    norm = 1.5 * (1 - 0.5 + 0.5 * len(terms) / 4.0)
    want = {term_index(t): tf * 2.5 / (tf + norm) for t, tf in counts.items()}
    assert dict(zip(indices, values)) == pytest.approx(want)
    [(q_indices, q_values)] = encoder.encode_queries(["cat cats dog"])
    assert sorted(q_indices) == sorted({term_index("cat"), term_index("dog")}) and q_values == [1.0, 1.0]
    assert encoder.encode_documents([""]) == [([], [])]
    # The hash is fixed forever: stored vectors must stay queryable across releases.
    assert term_index("vitamin") == int.from_bytes(
        __import__("hashlib").blake2b(b"vitamin", digest_size=4).digest(), "little"
    )


def test_hybrid_collection_layout_and_stored_sparse_vectors(hybrid):
    info = hybrid.get_collection("kb")
    assert set(info.config.params.vectors) == {"text-dense"}
    assert set(info.config.params.sparse_vectors) == {"text-sparse-new"}
    assert info.config.params.sparse_vectors["text-sparse-new"].modifier == models.Modifier.IDF
    payloads = stored_points(hybrid, "kb")
    pid = next(iter(payloads))
    point = hybrid.retrieve("kb", [pid], with_vectors=True)[0]
    indices, values = BM25Encoder().encode_documents([payloads[pid]["page_content"]])[0]
    stored = point.vector["text-sparse-new"]
    assert dict(zip(stored.indices, stored.values)) == pytest.approx(dict(zip(indices, values)))


def bm25_scores(payloads: dict[str, dict], query: str) -> dict[str, float]:
    """BM25 with Qdrant's IDF, ln((N - df + 0.5) / (df + 0.5) + 1), computed from the texts."""
    encoder = BM25Encoder()
    ids = list(payloads)
    docs = [dict(zip(*pair)) for pair in encoder.encode_documents([payloads[i]["page_content"] for i in ids])]
    query_terms = encoder.encode_queries([query])[0][0]
    n = len(docs)
    idf = {
        t: math.log((n - sum(t in d for d in docs) + 0.5) / (sum(t in d for d in docs) + 0.5) + 1) for t in query_terms
    }
    return {i: sum(idf[t] * d.get(t, 0.0) for t in query_terms) for i, d in zip(ids, docs)}


def test_sparse_mode_ranks_by_bm25(hybrid):
    scores = bm25_scores(stored_points(hybrid, "kb"), QUERY)
    hits = c2v_rag.search(QUERY, top_k=5, collection="kb", client=hybrid, mode="sparse")
    assert len(hits) == 5
    for hit in hits:
        assert hit.score == pytest.approx(scores[hit.id], rel=1e-4)
    assert [round(h.score, 4) for h in hits] == [round(s, 4) for s in sorted(scores.values(), reverse=True)[:5]]


def test_dense_mode_on_a_hybrid_collection_is_the_models_cosine(hybrid, tiny_model):
    payloads = stored_points(hybrid, "kb")
    ids = list(payloads)
    docs = tiny_model.encode_documents([payloads[i]["page_content"] for i in ids], normalize_embeddings=True)
    q = tiny_model.encode_queries([QUERY], task=DEFAULT_QUERY_TASK, normalize_embeddings=True)[0]
    cosine = dict(zip(ids, (docs @ q).tolist()))
    hits = c2v_rag.search(QUERY, top_k=4, collection="kb", client=hybrid, with_vectors=True)
    assert [round(h.score, 4) for h in hits] == [round(s, 4) for s in sorted(cosine.values(), reverse=True)[:4]]
    for hit in hits:  # with_vectors returns the stored dense vector
        np.testing.assert_allclose(hit.vector, docs[ids.index(hit.id)], atol=1e-5)
    assert c2v_rag.search(QUERY, top_k=1, collection="kb", client=hybrid)[0].vector is None


def test_hybrid_mode_fuses_both_rankings_by_reciprocal_rank(hybrid):
    from qdrant_client.hybrid.fusion import DEFAULT_RANKING_CONSTANT_K as K

    depth = 50  # query.PREFETCH_MIN: each list hands the fusion its top 50
    dense = c2v_rag.search(QUERY, top_k=depth, collection="kb", client=hybrid, mode="dense")
    sparse = c2v_rag.search(QUERY, top_k=depth, collection="kb", client=hybrid, mode="sparse")
    fused: dict[str, float] = {}
    for ranking in (dense, sparse):
        for rank, hit in enumerate(ranking):
            fused[hit.id] = fused.get(hit.id, 0.0) + 1.0 / (rank + K)
    hits = c2v_rag.search(QUERY, top_k=6, collection="kb", client=hybrid, mode="hybrid")
    assert len(hits) == 6
    for hit in hits:
        assert hit.score == pytest.approx(fused[hit.id], rel=1e-6)
    assert [round(h.score, 6) for h in hits] == [round(s, 6) for s in sorted(fused.values(), reverse=True)[:6]]
    # The fused top differs from either list alone on this corpus (else fusion went untested).
    assert [h.id for h in hits] != [h.id for h in dense[:6]] or [h.id for h in hits] != [h.id for h in sparse[:6]]


def test_hybrid_mode_fuses_by_distribution_based_scores_when_asked(hybrid):
    depth = 50
    fused: dict[str, float] = {}
    for mode in ("dense", "sparse"):
        ranking = c2v_rag.search(QUERY, top_k=depth, collection="kb", client=hybrid, mode=mode)
        scores = np.array([h.score for h in ranking])
        # DBSF: each list's scores mapped by mean +- 3 sample standard deviations onto [0, 1], then summed.
        low, high = scores.mean() - 3 * scores.std(ddof=1), scores.mean() + 3 * scores.std(ddof=1)
        for hit, score in zip(ranking, (scores - low) / (high - low)):
            fused[hit.id] = fused.get(hit.id, 0.0) + float(score)
    hits = c2v_rag.search(QUERY, top_k=6, collection="kb", client=hybrid, mode="hybrid", fusion="dbsf")
    assert [h.score for h in hits] == pytest.approx(sorted(fused.values(), reverse=True)[:6], rel=1e-5)
    for hit in hits:
        assert hit.score == pytest.approx(fused[hit.id], rel=1e-5)
    rrf = c2v_rag.search(QUERY, top_k=6, collection="kb", client=hybrid, mode="hybrid")
    assert [h.score for h in rrf] != pytest.approx([h.score for h in hits])
    with pytest.raises(ValueError, match="fusion='max' is not a fusion of hybrid search; use one of rrf, dbsf"):
        c2v_rag.search(QUERY, collection="kb", client=hybrid, mode="hybrid", fusion="max")


def test_modes_take_filters_and_search_many_matches_search(hybrid):
    queries = [QUERY, "stock market announcement", "cats and dogs are popular pets"]
    for mode in ("dense", "sparse", "hybrid"):
        many = c2v_rag.search_many(queries, top_k=3, collection="kb", client=hybrid, mode=mode, filter={"n": {"lt": 5}})
        one_by_one = [
            c2v_rag.search(q, top_k=3, collection="kb", client=hybrid, mode=mode, filter={"n": {"lt": 5}})
            for q in queries
        ]
        assert [[h.id for h in r] for r in many] == [[h.id for h in r] for r in one_by_one]
        assert all(h.metadata["n"] < 5 for r in many for h in r)
        # Sparse search finds only chunks sharing a term with the query; the others fill top_k.
        assert all(len(r) == 3 if mode != "sparse" else 1 <= len(r) <= 3 for r in many)
        for r_many, r_one in zip(many, one_by_one):
            assert [h.score for h in r_many] == pytest.approx([h.score for h in r_one], abs=1e-5)


def test_search_many_embeds_all_queries_in_one_batch(hybrid, tiny_model, monkeypatch):
    calls = []
    real = tiny_model.encode_queries

    def counting(texts, **kwargs):
        calls.append(list(texts))
        return real(texts, **kwargs)

    monkeypatch.setattr(tiny_model, "encode_queries", counting)
    queries = [QUERY, "stock market", "proteins fold"]
    c2v_rag.search_many(queries, top_k=2, collection="kb", client=hybrid, model=tiny_model, mode="hybrid")
    assert calls == [queries]
    assert c2v_rag.search_many([], collection="kb", client=hybrid) == []


def test_asearch_gives_what_search_gives(tmp_path, tiny_variant):
    c2v_rag.ingest(
        [make_text(i, sentences=2) for i in range(5)],
        path=tmp_path,
        collection="kb",
        model=tiny_variant,
        sparse="bm25",
        **SMALL,
    )
    want = {
        m: c2v_rag.search(QUERY, top_k=3, path=tmp_path, collection="kb", mode=m) for m in ("dense", "sparse", "hybrid")
    }

    async def run_all():
        return {m: await c2v_rag.asearch(QUERY, top_k=3, path=tmp_path, collection="kb", mode=m) for m in want}

    got = asyncio.run(run_all())
    for mode in want:
        assert [h.id for h in got[mode]] == [h.id for h in want[mode]] and len(want[mode]) == 3
        assert [h.score for h in got[mode]] == pytest.approx([h.score for h in want[mode]], abs=1e-5)


@pytest.mark.parametrize("store", ["local", "edge"])
def test_concurrent_searches_of_an_embedded_store_take_turns(tmp_path, tiny_variant, store):
    # An async web app calls asearch per request: the helper's walkthrough saw 5 of 6 concurrent calls fail on the
    # directory's lock ("already accessed by another instance of Qdrant client"), and 3 of 4 threads' searches.
    from concurrent.futures import ThreadPoolExecutor

    if store == "edge":
        pytest.importorskip("qdrant_edge")
    c2v_rag.ingest(
        [make_text(i, sentences=2) for i in range(5)],
        path=tmp_path,
        store=store,
        collection="kb",
        model=tiny_variant,
        **SMALL,
    )
    handle = c2v_rag.open_collection("kb", path=tmp_path, model=tiny_variant)
    queries = [QUERY, "stock market", "proteins fold", "bone density", "river tides", "vitamin"]
    want = [[h.id for h in handle.search(q, top_k=3, rerank=None)] for q in queries]

    async def together():
        return await asyncio.gather(*(handle.asearch(q, top_k=3, rerank=None) for q in queries))

    assert [[h.id for h in hits] for hits in asyncio.run(together())] == want
    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda q: handle.search(q, top_k=3, rerank=None), queries))
    assert [[h.id for h in hits] for hits in found] == want


def test_mode_errors_name_the_fix(tmp_path, tiny_variant, hybrid):
    c2v_rag.ingest(["some text about bone loss"], path=tmp_path, collection="dense_only", model=tiny_variant, **SMALL)
    with pytest.raises(
        CollectionMismatchError, match="has no sparse vectors, so mode='hybrid' cannot run.*sparse='bm25'"
    ):
        c2v_rag.search("bone", path=tmp_path, collection="dense_only", mode="hybrid")
    with pytest.raises(ValueError, match="mode='bm25' is not a search mode; use one of dense, sparse, hybrid"):
        c2v_rag.search("bone", collection="kb", client=hybrid, mode="bm25")
    with pytest.raises(CollectionMismatchError, match="has no sparse vectors; it was created without sparse="):
        c2v_rag.ingest(
            ["more text"], path=tmp_path, collection="dense_only", model=tiny_variant, sparse="bm25", **SMALL
        )
    with pytest.raises(ValueError, match="sparse='splade' is not supported"):
        c2v_rag.ingest(["more text"], path=tmp_path, collection="x", model=tiny_variant, sparse="splade", **SMALL)


def test_a_hybrid_collections_new_chunks_get_its_bm25_vectors_unasked(tmp_path, tiny_variant):
    """Re-running an ingest into a hybrid collection without sparse= was refused ('pass sparse='bm25''), while the
    other settings it records were reused; now its new chunks get BM25 vectors made with its recorded settings,
    and sparse settings that differ from them are refused."""
    recorded = BM25Config(k1=0.9, avg_length=12)
    c2v_rag.ingest(["bone loss"], path=tmp_path, collection="kb", model=tiny_variant, sparse=recorded, **SMALL)
    again = c2v_rag.ingest(["bone loss", "calcium intake"], path=tmp_path, collection="kb", model=tiny_variant, **SMALL)
    assert (again.chunks_unchanged, again.chunks_written) == (1, 1)
    with closing(QdrantClient(path=str(tmp_path))) as client:
        payloads = stored_points(client, "kb")
        new = next(i for i, p in payloads.items() if p["page_content"] == "calcium intake")
        stored = client.retrieve("kb", [new], with_vectors=True)[0].vector["text-sparse-new"]
        indices, values = BM25Encoder(recorded).encode_documents(["calcium intake"])[0]
        assert dict(zip(stored.indices, stored.values)) == pytest.approx(dict(zip(indices, values)))
        assert dict(zip(indices, values)) != pytest.approx(
            dict(zip(*BM25Encoder().encode_documents(["calcium intake"])[0]))
        )
        hits = c2v_rag.search("calcium", collection="kb", client=client, mode="sparse", model=tiny_variant)
        assert [h.id for h in hits] == [new]
    with pytest.raises(CollectionMismatchError, match="stores sparse vector 'text-sparse-new' with"):
        c2v_rag.ingest(["more"], path=tmp_path, collection="kb", model=tiny_variant, sparse="bm25", **SMALL)


def test_llama_index_opens_and_queries_a_hybrid_collection(hybrid, tiny_variant, monkeypatch):
    from llama_index.core import Settings, VectorStoreIndex
    from llama_index.embeddings.causal2vec import Causal2VecEmbedding
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    # Building an index caches LlamaIndex's global default transformations; restore them after
    # this test so that tests setting Settings' node parser still see their own.
    monkeypatch.setattr(Settings, "_transformations", Settings._transformations)

    encoder = BM25Encoder()
    # enable_hybrid with the package's BM25 functions: no fastembed model to download.
    store = QdrantVectorStore(
        client=hybrid,
        collection_name="kb",
        enable_hybrid=True,
        sparse_doc_fn=encoder.llama_index_doc_fn,
        sparse_query_fn=encoder.llama_index_query_fn,
    )
    assert (store.dense_vector_name, store.sparse_vector_name) == ("text-dense", "text-sparse-new")
    index = VectorStoreIndex.from_vector_store(store, embed_model=Causal2VecEmbedding(model=str(tiny_variant)))

    def ids(mode: str, k: int = 4) -> list[str]:
        retriever = index.as_retriever(similarity_top_k=k, sparse_top_k=k, vector_store_query_mode=mode)
        return [r.node.node_id for r in retriever.retrieve(QUERY)]

    dense = [h.id for h in c2v_rag.search(QUERY, top_k=4, collection="kb", client=hybrid)]
    sparse = [h.id for h in c2v_rag.search(QUERY, top_k=4, collection="kb", client=hybrid, mode="sparse")]
    assert ids("default") == dense
    assert ids("sparse") == sparse
    fused = ids("hybrid")  # LlamaIndex fuses by relative score, not RRF: its picks come from both lists
    assert len(fused) == 4 and set(fused) <= set(dense) | set(sparse)


def test_langchain_opens_and_queries_a_hybrid_collection(hybrid, tiny_variant):
    from langchain_causal2vec import Causal2VecEmbeddings
    from langchain_qdrant import QdrantVectorStore, RetrievalMode

    from c2v_rag.store.sparse import langchain_sparse_embeddings

    def store(mode):
        return QdrantVectorStore(
            client=hybrid,
            collection_name="kb",
            embedding=Causal2VecEmbeddings(model=str(tiny_variant)),
            retrieval_mode=mode,
            sparse_embedding=langchain_sparse_embeddings(),
            vector_name="text-dense",
            sparse_vector_name="text-sparse-new",
        )

    for mode, ours in ((RetrievalMode.DENSE, "dense"), (RetrievalMode.SPARSE, "sparse")):
        found = store(mode).similarity_search_with_score(QUERY, k=4)
        hits = c2v_rag.search(QUERY, top_k=4, collection="kb", client=hybrid, mode=ours)
        assert [d.metadata["_id"] for d, _ in found] == [h.id for h in hits]
        assert [s for _, s in found] == pytest.approx([h.score for h in hits], rel=1e-4)
    # LangChain's hybrid is Qdrant's RRF too, over prefetches of k: the same as ours over 4-deep lists.
    found = store(RetrievalMode.HYBRID).similarity_search_with_score(QUERY, k=4)
    dense = c2v_rag.search(QUERY, top_k=4, collection="kb", client=hybrid)
    sparse = c2v_rag.search(QUERY, top_k=4, collection="kb", client=hybrid, mode="sparse")
    assert len(found) == 4 and {d.metadata["_id"] for d, _ in found} <= {h.id for h in dense + sparse}


def test_asearch_keeps_the_event_loop_free_and_takes_an_open_async_client(
    tmp_path, tiny_variant, tiny_model, monkeypatch
):
    import threading

    from qdrant_client import AsyncQdrantClient

    c2v_rag.ingest(
        [make_text(i, sentences=2) for i in range(4)], path=tmp_path, collection="kb", model=tiny_variant, **SMALL
    )
    want = c2v_rag.search(QUERY, top_k=2, path=tmp_path, collection="kb", model=tiny_model)
    released, waits = threading.Event(), []
    real = tiny_model.encode_queries

    def gated(*args, **kwargs):
        # Embedding waits until the event loop, still free, runs the coroutine that releases it.
        waits.append(released.wait(timeout=20))
        return real(*args, **kwargs)

    monkeypatch.setattr(tiny_model, "encode_queries", gated)

    async def main():
        client = AsyncQdrantClient(path=str(tmp_path))
        try:
            task = asyncio.create_task(
                c2v_rag.asearch(QUERY, top_k=2, collection="kb", model=tiny_model, client=client)
            )
            await asyncio.sleep(0.05)
            released.set()
            return await task
        finally:
            await client.close()

    hits = asyncio.run(main())
    assert waits == [True]
    assert [(h.id, round(h.score, 5)) for h in hits] == [(h.id, round(h.score, 5)) for h in want]


def test_asearch_on_a_handle_holding_a_synchronous_client_searches_through_it(hybrid):
    # The client holds the embedded store, so asearch can open no other: it reads through this one, in a thread.
    want = c2v_rag.search(QUERY, top_k=3, collection="kb", client=hybrid)
    hits = asyncio.run(c2v_rag.Collection("kb", client=hybrid).asearch(QUERY, top_k=3))
    assert [(h.id, round(h.score, 5)) for h in hits] == [(h.id, round(h.score, 5)) for h in want]


def test_a_handle_holding_an_async_client_refuses_sync_calls_by_name(tmp_path, tiny_variant, tiny_model):
    """An AsyncQdrantClient serves asearch; search, ingest and the reads say so before touching it, where its
    coroutines would otherwise fail deep inside the call."""
    from qdrant_client import AsyncQdrantClient

    c2v_rag.ingest(
        [make_text(i, sentences=2) for i in range(3)], path=tmp_path, collection="kb", model=tiny_variant, **SMALL
    )
    want = c2v_rag.search(QUERY, top_k=2, path=tmp_path, collection="kb", model=tiny_model)
    chunks = c2v_rag.open_collection("kb", path=tmp_path).count()

    async def main():
        client = AsyncQdrantClient(path=str(tmp_path))
        try:
            handle = c2v_rag.open_collection("kb", client=client, model=tiny_model)
            refusals = []
            for call in (
                lambda: handle.search(QUERY, top_k=2),
                lambda: handle.ingest([make_text(9)]),
                handle.count,
                handle.delete,
            ):
                with pytest.raises(TypeError, match="holds an AsyncQdrantClient, which only asearch") as err:
                    call()
                refusals.append(str(err.value).split("; ", 1)[1].split(" needs", 1)[0])
            return refusals, await handle.asearch(QUERY, top_k=2)
        finally:
            await client.close()

    refusals, hits = asyncio.run(main())
    assert refusals == ["search", "ingest", "this call", "delete"]
    assert [(h.id, round(h.score, 5)) for h in hits] == [(h.id, round(h.score, 5)) for h in want]
    assert c2v_rag.open_collection("kb", path=tmp_path).count() == chunks  # nothing was deleted or added


def test_search_vector_runs_each_mode_from_an_embedded_query(hybrid, tiny_variant):
    """Collection.search_vector (what the server's /v1/search calls) gives search()'s hits in every mode, from the
    query's vector and, for the BM25 side, its text."""
    from c2v_rag.rag import Embedder, load_model
    from c2v_rag.rag.options import CommonSearchOptions

    handle = c2v_rag.open_collection("kb", client=hybrid, model=tiny_variant)
    vector = Embedder(load_model(tiny_variant, device="cpu"), normalize=True).embed_queries([QUERY])[0]
    for mode, fusion in (("dense", "rrf"), ("sparse", "rrf"), ("hybrid", "rrf"), ("hybrid", "dbsf")):
        want = handle.search(QUERY, top_k=5, mode=mode, fusion=fusion)
        options = CommonSearchOptions(mode=mode, fusion=fusion)
        got = handle.search_vector(None if mode == "sparse" else vector, 5, options, query=QUERY)
        assert want and [h.id for h in got] == [h.id for h in want], mode
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)
    with pytest.raises(ValueError, match="needs the query's text"):
        handle.search_vector(vector, 5, CommonSearchOptions(mode="hybrid"))


def test_sparse_search_finds_an_identifier_of_an_html_page(tmp_path, tiny_variant):
    # An HTML page converted with Markdown's escapes stored include\_hidden, which BM25 splits into other terms than
    # the query's include_hidden; a Markdown file with the same words was found, the page was not.
    folder = tmp_path / "pages"
    folder.mkdir()
    (folder / "glob.html").write_text(
        "<html><body><h1>glob</h1><p>Pass <em>include_hidden=True</em> to match hidden files; "
        "<code>root_dir</code> sets the directory.</p></body></html>",
        encoding="utf-8",
    )
    (folder / "other.md").write_text("# Other\n\nNothing about hidden files here.\n", encoding="utf-8")
    c2v_rag.ingest(folder, path=tmp_path / "qd", collection="pages", model=tiny_variant, sparse="bm25", **SMALL)
    hits = c2v_rag.search("include_hidden", path=tmp_path / "qd", collection="pages", mode="sparse", rerank=None)
    assert hits and {h.metadata["file_name"] for h in hits} == {"glob.html"}
    assert "include_hidden=True" in hits[0].text and "\\_" not in hits[0].text
