"""Shorter vectors (Matryoshka) end to end: ingest stores a trained prefix and records it, search embeds queries at
that size, a mismatch is refused before the model loads, and the server and both framework adapters take the size
under their own names. Every vector is checked against the model's own encode(truncate_dim=...)."""

from __future__ import annotations

import logging
import shutil
from contextlib import closing

import numpy as np
import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity", "langchain_core", "fastapi", "httpx"):
    pytest.importorskip(_module)

import httpx
from qdrant_client import QdrantClient
from qdrant_client.http import models
from rag_helpers import stored_points

import c2v_rag
from c2v_rag.rag import DEFAULT_QUERY_TASK
from c2v_rag.store.collection import collection_fingerprint

SIZES = [16, 40]  # inside the encoder's 24 values, and inside [encoder; h_C] (24 + 32)


@pytest.fixture(scope="module")
def matryoshka_variant(tiny_model_factory, tmp_path_factory):
    """A saved tiny variant laid out [encoder 24; h_C 32; h_EOS 32] that declares two trained prefixes."""
    path = tmp_path_factory.mktemp("variant-matryoshka")
    model = tiny_model_factory("llama", max_length=128, normalize_parts=True, encoder_share=0.5, matryoshka_dims=SIZES)
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def model(matryoshka_variant):
    return c2v_rag.rag.load_model(matryoshka_variant, device="cpu")


def test_ingest_stores_the_prefix_and_search_embeds_queries_at_that_size(
    tmp_path, matryoshka_variant, model, corpus, ingest_config
):
    c2v_rag.ingest(
        corpus, path=tmp_path, collection="short", model=matryoshka_variant, config=ingest_config, truncate_dim=40
    )
    with closing(QdrantClient(path=str(tmp_path))) as client:
        assert client.get_collection("short").config.params.vectors.size == 40
        assert collection_fingerprint(client, "short")["truncate_dim"] == 40
        payloads = stored_points(client, "short")
        ids = list(payloads)
        texts = [payloads[i]["page_content"] for i in ids]
        point = client.retrieve("short", [ids[0]], with_vectors=True)[0]
        np.testing.assert_allclose(
            point.vector, model.encode_documents(texts[0], truncate_dim=40, normalize_embeddings=True), atol=1e-5
        )
        query = corpus[3]["text"][:50]
        hits = c2v_rag.search(query, top_k=3, collection="short", client=client)  # no size named: the collection's
    docs = model.encode_documents(texts, truncate_dim=40, normalize_embeddings=True)
    q = model.encode_queries(query, task=DEFAULT_QUERY_TASK, truncate_dim=40, normalize_embeddings=True)
    expected = sorted(zip((docs @ q).tolist(), ids), reverse=True)[:3]
    assert [h.id for h in hits] == [i for _, i in expected]
    np.testing.assert_allclose([h.score for h in hits], [s for s, _ in expected], atol=1e-4)


def test_a_size_mismatch_or_an_untrained_size_is_refused_before_the_model_loads(
    tmp_path, matryoshka_variant, corpus, ingest_config
):
    c2v_rag.ingest(
        corpus[:2], path=tmp_path, collection="short", model=matryoshka_variant, config=ingest_config, truncate_dim=16
    )
    # The same config with weights that cannot load: only a check made before loading can answer.
    broken = tmp_path / "broken"
    shutil.copytree(matryoshka_variant, broken)
    (broken / "projector.safetensors").write_bytes(b"not safetensors at all")
    with pytest.raises(ValueError, match=r"'short' records truncate_dim=16.*Leave truncate_dim out"):
        c2v_rag.ingest(
            corpus[2:], path=tmp_path, collection="short", model=broken, config=ingest_config, truncate_dim="full"
        )
    with pytest.raises(
        ValueError, match=r"truncate_dim=20: this variant was trained for the prefix sizes \[16, 40, 88\]"
    ):
        c2v_rag.ingest(
            corpus[2:], path=tmp_path, collection="other", model=broken, config=ingest_config, truncate_dim=20
        )


def test_a_later_ingest_adds_at_the_size_the_collection_recorded(tmp_path, matryoshka_variant, model, corpus, caplog):
    """It was refused ('pass truncate_dim=16') while the collection's other recorded settings were reused."""
    small = {"chunk_size": 24, "chunk_overlap": 4, "show_progress": False}
    c2v_rag.ingest(corpus[:2], path=tmp_path, collection="short", model=matryoshka_variant, truncate_dim=16, **small)
    again = c2v_rag.ingest(corpus[2:4], path=tmp_path, collection="short", model=matryoshka_variant, **small)
    assert again.ok and again.chunks_written > 0
    with closing(QdrantClient(path=str(tmp_path))) as client:
        payloads = stored_points(client, "short")
        latest = [i for i, p in payloads.items() if p["doc_id"] == corpus[3]["id"]]
        point = client.retrieve("short", latest[:1], with_vectors=True)[0]
        expected = model.encode_documents(
            payloads[latest[0]]["page_content"], truncate_dim=16, normalize_embeddings=True
        )
        np.testing.assert_allclose(point.vector, expected, atol=1e-5)
    # The same size written out, or the whole size on a collection of whole vectors, is the collection's too.
    c2v_rag.ingest(corpus[4:5], path=tmp_path, collection="short", model=matryoshka_variant, truncate_dim=16, **small)
    c2v_rag.ingest(corpus[:1], path=tmp_path, collection="whole", model=matryoshka_variant, **small)
    c2v_rag.ingest(
        corpus[1:2],
        path=tmp_path,
        collection="whole",
        model=matryoshka_variant,
        truncate_dim=model.embedding_dim,
        **small,
    )
    # A collection another tool made records no size: the one asked is checked against its vectors alone.
    with closing(QdrantClient(path=str(tmp_path / "other"))) as client:
        client.create_collection("theirs", vectors_config=models.VectorParams(size=16, distance=models.Distance.COSINE))
    added = c2v_rag.ingest(
        corpus[:1], path=tmp_path / "other", collection="theirs", model=matryoshka_variant, truncate_dim=16, **small
    )
    assert added.chunks_written > 0
    # Searched (at the whole size, which a search of an unrecorded collection embeds at), it is said once that
    # nothing but the size is known of its vectors: another tool's, of any model.
    with closing(QdrantClient(path=str(tmp_path / "other"))) as client:
        size = models.VectorParams(size=model.embedding_dim, distance=models.Distance.COSINE)
        client.create_collection("whole_theirs", vectors_config=size)
    c2v_rag.ingest(corpus[:1], path=tmp_path / "other", collection="whole_theirs", model=matryoshka_variant, **small)
    with caplog.at_level(logging.WARNING, logger="c2v_rag.store.collection"):
        for _ in range(2):
            hits = c2v_rag.search("x", path=tmp_path / "other", collection="whole_theirs", model=matryoshka_variant)
    warned = [r.getMessage() for r in caplog.records if "'whole_theirs' at embedded Qdrant" in r.getMessage()]
    assert hits and len(warned) == 1 and "records no model" in warned[0] and "scores mean nothing" in warned[0]
    with pytest.raises(ValueError, match=r"'whole' records whole vectors. Leave truncate_dim out"):
        c2v_rag.ingest(
            corpus[2:3], path=tmp_path, collection="whole", model=matryoshka_variant, truncate_dim=16, **small
        )


def test_an_embed_folder_keeps_its_size_as_a_collection_does(tmp_path, matryoshka_variant, corpus):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    small = {"chunk_size": 24, "chunk_overlap": 4, "show_progress": False, "model": str(matryoshka_variant)}
    out = tmp_path / "out"
    first = c2v_rag.embed(corpus[:2], out, truncate_dim=16, **small)
    more = c2v_rag.embed(corpus[:4], out, **small)  # resumes at the folder's size
    assert more.chunks > 0 and more.unchanged > 0
    assert {len(v) for f in out.glob("*.parquet") for v in pq.read_table(f).column("vector").to_pylist()} == {16}
    files = sorted(str(f) for f in out.glob("*.parquet"))
    with pytest.raises(ValueError, match=r"records truncate_dim=16.*or pass a new folder"):
        c2v_rag.embed(corpus, out, truncate_dim="full", **small)
    assert sorted(str(f) for f in out.glob("*.parquet")) == files and first.files[0] in files


def test_both_framework_adapters_take_dimensions(matryoshka_variant, model):
    from langchain_causal2vec import Causal2VecEmbeddings
    from llama_index.embeddings.causal2vec import Causal2VecEmbedding

    texts = ["tides follow the moon", "a cat sat on the mat"]
    expected_docs = model.encode_documents(texts, truncate_dim=16, normalize_embeddings=True)
    expected_query = model.encode_queries(texts[0], task="SciFact", truncate_dim=16, normalize_embeddings=True)
    lc = Causal2VecEmbeddings(model=str(matryoshka_variant), dimensions=16, task="SciFact", device="cpu")
    li = Causal2VecEmbedding(model_name=str(matryoshka_variant), dimensions=16, task="SciFact", device="cpu")
    np.testing.assert_allclose(lc.embed_documents(texts), expected_docs, atol=1e-5)
    np.testing.assert_allclose(lc.embed_query(texts[0]), expected_query, atol=1e-5)
    np.testing.assert_allclose(li.get_text_embedding_batch(texts), expected_docs, atol=1e-5)
    np.testing.assert_allclose(li.get_query_embedding(texts[0]), expected_query, atol=1e-5)
    assert li.embedding_dim == 16
    with pytest.raises(ValueError, match="was trained for the prefix sizes"):
        Causal2VecEmbeddings(model=str(matryoshka_variant), dimensions=20, device="cpu").embed_query("x")


def test_the_server_shortens_vectors_to_the_dimensions_asked(model):
    import openai

    from c2v_rag.serving import ServerConfig, ServerThread, create_app

    texts = ["Spring tides follow the moon.", "Proteins fold into shapes."]
    config = ServerConfig(model_name="tiny")
    with ServerThread(create_app(model, config), config) as running:
        client = openai.OpenAI(base_url=running.url + "/v1", api_key="x")
        for size in (*SIZES, model.embedding_dim):
            response = client.embeddings.create(input=texts, model="tiny", dimensions=size)
            got = np.array([d.embedding for d in response.data])
            np.testing.assert_allclose(
                got, model.encode_documents(texts, truncate_dim=size, normalize_embeddings=True), atol=1e-5
            )
        refused = httpx.post(running.url + "/v1/embeddings", json={"input": "a", "dimensions": 20})
        assert refused.status_code == 400 and "16 or 40 or 88" in refused.json()["error"]["message"]
        listed = httpx.get(running.url + "/v1/models").json()["data"][0]
        assert listed["matryoshka_dimensions"] == [16, 40, 88]


def test_the_server_searches_a_short_collection_at_its_size(tmp_path, matryoshka_variant, model, corpus, ingest_config):
    from c2v_rag.serving import ServerConfig, ServerThread, create_app

    c2v_rag.ingest(
        corpus, path=tmp_path, collection="short", model=matryoshka_variant, config=ingest_config, truncate_dim=16
    )
    query = corpus[1]["text"][:40]
    expected = c2v_rag.search(query, top_k=3, collection="short", path=tmp_path, model=matryoshka_variant)
    config = ServerConfig(model_name="tiny", qdrant_path=tmp_path, collection="short")
    with ServerThread(create_app(model, config), config) as running:
        found = httpx.post(running.url + "/v1/search", json={"query": query, "top_k": 3}).json()["data"]
    assert [h["id"] for h in found] == [h.id for h in expected]
    np.testing.assert_allclose([h["score"] for h in found], [h.score for h in expected], atol=1e-5)


def test_a_short_collection_on_qdrant_edge_searches_as_local_mode_does(
    tmp_path, matryoshka_variant, corpus, ingest_config
):
    pytest.importorskip("qdrant_edge")
    query = corpus[4]["text"][:50]
    hits = {}
    for store in ("local", "edge"):
        path = tmp_path / store
        c2v_rag.ingest(
            corpus,
            path=path,
            store=store,
            collection="short",
            model=matryoshka_variant,
            config=ingest_config,
            truncate_dim=40,
        )
        hits[store] = c2v_rag.search(query, top_k=4, collection="short", path=path, store=store)
    assert [h.id for h in hits["edge"]] == [h.id for h in hits["local"]]
    np.testing.assert_allclose([h.score for h in hits["edge"]], [h.score for h in hits["local"]], atol=1e-5)
    with pytest.raises(ValueError, match="records truncate_dim=40"):
        c2v_rag.ingest(
            corpus,
            path=tmp_path / "edge",
            store="edge",
            collection="short",
            model=matryoshka_variant,
            config=ingest_config,
            truncate_dim="full",
        )
