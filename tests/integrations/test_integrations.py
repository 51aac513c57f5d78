"""The LlamaIndex and LangChain embedding classes, and both frameworks reading a c2v_rag collection."""

from __future__ import annotations

import asyncio
import json
import pickle
import threading

import numpy as np
import pytest

# The RAG extras (pip install 'c2v-rag[all]'); without them these tests are skipped, visibly.
for _module in ("qdrant_client", "tenacity", "llama_index.vector_stores.qdrant", "langchain_qdrant"):
    pytest.importorskip(_module)

from langchain_causal2vec import Causal2VecEmbeddings
from llama_index.embeddings.causal2vec import Causal2VecEmbedding
from qdrant_client import QdrantClient
from rag_helpers import make_text

import c2v_rag
from c2v_rag.rag import DEFAULT_QUERY_TASK

TEXTS = [make_text(i, sentences=2) for i in range(5)]
EMBEDDING_CLASSES = [Causal2VecEmbedding, Causal2VecEmbeddings]


def embed_docs(emb, texts):
    return np.array(
        emb.get_text_embedding_batch(texts) if isinstance(emb, Causal2VecEmbedding) else emb.embed_documents(texts)
    )


def embed_query(emb, text):
    return np.array(emb.get_query_embedding(text) if isinstance(emb, Causal2VecEmbedding) else emb.embed_query(text))


@pytest.mark.parametrize("cls", EMBEDDING_CLASSES)
def test_vectors_are_the_models_with_instructions_on_the_query_side(cls, tiny_variant, tiny_model):
    emb = cls(model=str(tiny_variant))
    np.testing.assert_allclose(
        embed_docs(emb, TEXTS), tiny_model.encode_documents(TEXTS, normalize_embeddings=True), atol=1e-5
    )
    query = "vitamin and bone loss"
    expected = tiny_model.encode_queries(query, task=DEFAULT_QUERY_TASK, normalize_embeddings=True)
    np.testing.assert_allclose(embed_query(emb, query), expected, atol=1e-5)
    assert not np.allclose(embed_query(emb, query), embed_docs(emb, [query])[0], atol=1e-3)

    custom = cls(model=str(tiny_variant), query_instruction="Find pets", text_instruction="Represent the text")
    np.testing.assert_allclose(
        embed_query(custom, query),
        tiny_model.encode_queries(query, instruction="Find pets", normalize_embeddings=True),
        atol=1e-5,
    )
    np.testing.assert_allclose(
        embed_docs(custom, TEXTS[:2]),
        tiny_model.encode_documents(TEXTS[:2], instruction="Represent the text", normalize_embeddings=True),
        atol=1e-5,
    )
    # A symmetric task puts its instruction on documents too.
    sts = cls(model=str(tiny_variant), task="STSBenchmark", normalize=False)
    np.testing.assert_allclose(embed_docs(sts, TEXTS[:2]), tiny_model.encode(TEXTS[:2], task="STSBenchmark"), atol=1e-5)


def test_instances_naming_the_same_model_share_it(tiny_variant, tiny_model):
    a = Causal2VecEmbedding(model=str(tiny_variant))
    b = Causal2VecEmbeddings(model=str(tiny_variant), task="SciFact")
    assert a.loaded_model() is b.loaded_model() is tiny_model
    # Another max_length is an encode option, not another model (tests/rag/test_model_cache.py).
    short = Causal2VecEmbedding(model=str(tiny_variant), max_length=16)
    assert short.loaded_model() is tiny_model and short.embedder().max_length == 16
    assert tiny_model.config.max_length == 128


def test_max_length_truncates_like_a_model_built_with_it(tiny_variant, tiny_model, tiny_model_factory):
    long_text = make_text(9, sentences=20)
    short = Causal2VecEmbeddings(model=str(tiny_variant), max_length=16, normalize=False)
    # Same seed and base weights, so the same model; loaded in the shared model's precision.
    reference = tiny_model_factory("llama", max_length=16, dtype=str(tiny_model.dtype).removeprefix("torch."))
    np.testing.assert_allclose(short.embed_documents([long_text])[0], reference.encode_documents(long_text), atol=1e-5)
    full = Causal2VecEmbeddings(model=str(tiny_variant), normalize=False)
    assert not np.allclose(full.embed_documents([long_text])[0], reference.encode_documents(long_text), atol=1e-3)


@pytest.mark.parametrize("cls", EMBEDDING_CLASSES)
def test_decoder_max_length_reads_documents_as_an_ingest_does_and_leaves_queries_whole(cls, tiny_variant, caplog):
    """decoder_max_length caps what the decoder reads of each document, as c2v_rag.ingest's does (the encoder
    still reads all of it), silently; a query longer than the cap is still read whole."""
    long_text, query = make_text(9, sentences=20), make_text(3, sentences=12)
    emb = cls(model=str(tiny_variant), decoder_max_length=16, normalize=False)
    model = emb.loaded_model()
    assert len(model.tokenizer(query)["input_ids"]) > 16
    model.truncation_warned = False  # warned once per model: whatever an earlier test left
    with caplog.at_level("WARNING"):
        documents = embed_docs(emb, [long_text, TEXTS[0]])
    assert not [r for r in caplog.records if "decoder" in r.getMessage()]  # the encoder's own limit may be told
    np.testing.assert_allclose(documents, model.encode_documents([long_text, TEXTS[0]], max_length=16), atol=1e-5)
    assert not np.allclose(documents[0], model.encode_documents(long_text), atol=1e-3)
    # (16 decoder tokens would not even hold the query instruction: encode_queries(max_length=16) refuses.)
    np.testing.assert_allclose(embed_query(emb, query), model.encode_queries(query), atol=1e-5)
    assert cls.from_dict(emb.to_dict()).decoder_max_length == 16
    with pytest.raises(ValueError, match="decoder_max_length=4 leaves the decoder no text"):
        cls(decoder_max_length=4)
    assert cls(decoder_max_length=0).decoder_max_length is None  # whole documents, as ingest's 0


@pytest.mark.parametrize("cls", EMBEDDING_CLASSES)
def test_long_texts_chunk_reaches_the_model(cls, tiny_variant):
    long_text = make_text(9, sentences=20)
    emb = cls(model=str(tiny_variant), max_length=32, long_texts="chunk", normalize=False)
    model = emb.loaded_model()
    expected = model.encode([long_text, TEXTS[0]], long_texts="chunk", max_length=32)
    np.testing.assert_allclose(embed_docs(emb, [long_text, TEXTS[0]]), expected, atol=1e-5)
    assert not np.allclose(expected[0], model.encode(long_text, max_length=32), atol=1e-3)
    assert cls.from_dict(emb.to_dict()).long_texts == "chunk"
    with pytest.raises(ValueError, match="long_texts"):
        cls(long_texts="split")


def test_langchain_takes_long_texts_in_encode_kwargs(tiny_variant):
    long_text = make_text(9, sentences=20)
    emb = Causal2VecEmbeddings(model_name=str(tiny_variant), encode_kwargs={"long_texts": "chunk"})
    model = emb.loaded_model()
    np.testing.assert_allclose(
        emb.embed_documents([long_text]),
        model.encode([long_text], long_texts="chunk", normalize_embeddings=True),
        atol=1e-5,
    )
    with pytest.raises(ValueError, match=r"encode_kwargs\['long_texts'\]: long_texts='split'"):
        Causal2VecEmbeddings(encode_kwargs={"long_texts": "split"})


@pytest.mark.parametrize("cls", EMBEDDING_CLASSES)
def test_to_dict_and_pickle_carry_options_not_weights(cls, tiny_variant):
    emb = cls(model=str(tiny_variant), task="SciFact", max_length=64, normalize=False, device="cpu")
    emb.loaded_model()  # loaded: it must still stay out of the serialized forms
    data = emb.to_dict()
    json.dumps(data)
    again = cls.from_dict(data)
    assert (again.model, again.task, again.max_length, again.normalize, again.device) == (
        str(tiny_variant),
        "SciFact",
        64,
        False,
        "cpu",
    )
    blob = pickle.dumps(emb)
    assert len(blob) < 20_000  # the tiny model alone pickles to far more
    np.testing.assert_allclose(embed_query(pickle.loads(blob), "q"), embed_query(emb, "q"), atol=1e-6)


@pytest.mark.parametrize("cls", EMBEDDING_CLASSES)
def test_bad_options_are_refused(cls, tiny_variant):
    with pytest.raises(ValueError, match="either task= or query_instruction="):
        cls(task="SciFact", query_instruction="Find")
    # the custom way these classes take: query_instruction (instruction= would be refused as unknown)
    with pytest.raises(ValueError, match=r"unknown task 'NoSuchTask'.*pass query_instruction='\.\.\.'"):
        cls(task="NoSuchTask")
    # a size the variant was not trained for, named as given and refused before any weights load
    with pytest.raises(ValueError, match=r"dimensions=7: this variant"):
        cls(model=str(tiny_variant), dimensions=7)
    with pytest.raises(ValueError, match=r"dimensions=100: this variant was trained for the prefix sizes \[384, 960"):
        cls(dimensions=100)  # the default preset


@pytest.mark.parametrize(
    ("cls", "method", "arg"),
    [
        (Causal2VecEmbedding, "aget_query_embedding", "q"),
        (Causal2VecEmbedding, "aget_text_embedding_batch", ["a", "b"]),
        (Causal2VecEmbeddings, "aembed_query", "q"),
        (Causal2VecEmbeddings, "aembed_documents", ["a", "b"]),
    ],
)
def test_async_methods_do_not_block_the_event_loop(cls, method, arg, tiny_variant, monkeypatch):
    emb = cls(model=str(tiny_variant))
    model = emb.loaded_model()
    released, waits = threading.Event(), []

    def gated(real):
        def wrapper(*args, **kwargs):
            # Encoding waits until the event loop, still free, runs the coroutine that releases it.
            waits.append(released.wait(timeout=20))
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(model, "encode_queries", gated(model.encode_queries))
    monkeypatch.setattr(model, "encode_documents", gated(model.encode_documents))

    async def main():
        task = asyncio.create_task(getattr(emb, method)(arg))
        await asyncio.sleep(0)
        released.set()
        return await task

    result = asyncio.run(main())
    assert waits == [True] and len(np.asarray(result).reshape(-1)) % model.embedding_dim == 0


def test_llama_index_settings_vector_store_index_and_ingestion_pipeline(tiny_variant, tiny_model, monkeypatch):
    from llama_index.core import Document, Settings, VectorStoreIndex
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    emb = Causal2VecEmbedding(model=str(tiny_variant))
    monkeypatch.setattr(Settings, "_embed_model", emb)
    monkeypatch.setattr(Settings, "_node_parser", emb.text_splitter(chunk_size=24, chunk_overlap=4))
    docs = [Document(text=t, id_=f"d{i}") for i, t in enumerate(TEXTS)]
    index = VectorStoreIndex.from_documents(docs)
    query = TEXTS[3][:50]
    retrieved = index.as_retriever(similarity_top_k=3).retrieve(query)
    nodes = list(index.docstore.docs.values())
    vectors = tiny_model.encode_documents(
        [n.get_content(metadata_mode="embed") for n in nodes], normalize_embeddings=True
    )
    q = tiny_model.encode_queries(query, task=DEFAULT_QUERY_TASK, normalize_embeddings=True)
    expected = sorted(vectors @ q, reverse=True)[:3]
    np.testing.assert_allclose([r.score for r in retrieved], expected, atol=1e-4)

    client = QdrantClient(":memory:")
    pipeline = IngestionPipeline(
        transformations=[emb.text_splitter(24, 4), emb],
        vector_store=QdrantVectorStore(client=client, collection_name="li"),
    )
    out = pipeline.run(documents=docs)
    assert client.count("li").count == len(out) == len(nodes)
    point = client.retrieve("li", [out[0].node_id], with_vectors=True)[0]
    vector = point.vector["text-dense"] if isinstance(point.vector, dict) else point.vector
    np.testing.assert_allclose(
        vector,
        tiny_model.encode_documents(out[0].get_content(metadata_mode="embed"), normalize_embeddings=True),
        atol=1e-4,
    )


@pytest.fixture
def ingested(tmp_path, tiny_variant, corpus, ingest_config):
    """A collection written by c2v_rag.ingest, its client, and c2v_rag.search's answer."""
    c2v_rag.ingest(corpus, path=tmp_path, collection="kb", model=tiny_variant, config=ingest_config)
    client = QdrantClient(path=str(tmp_path))
    query = corpus[4]["text"][:70]
    hits = c2v_rag.search(query, top_k=4, collection="kb", client=client)
    yield client, query, hits
    client.close()


def test_llama_index_opens_a_c2v_rag_collection(ingested, tiny_variant):
    from llama_index.core import VectorStoreIndex
    from llama_index.core.vector_stores import ExactMatchFilter, MetadataFilters
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    client, query, hits = ingested
    store = QdrantVectorStore(client=client, collection_name="kb")
    index = VectorStoreIndex.from_vector_store(store, embed_model=Causal2VecEmbedding(model=str(tiny_variant)))
    retrieved = index.as_retriever(similarity_top_k=4).retrieve(query)
    assert [r.node.node_id for r in retrieved] == [h.id for h in hits]
    np.testing.assert_allclose([r.score for r in retrieved], [h.score for h in hits], atol=1e-5)
    for r, h in zip(retrieved, hits):
        assert (r.node.text, r.node.ref_doc_id, r.node.metadata["topic"]) == (h.text, h.doc_id, h.metadata["topic"])
        assert "doc_id" not in r.node.get_content(metadata_mode="llm")  # bookkeeping stays out of prompts
    odd = index.as_retriever(
        similarity_top_k=20, filters=MetadataFilters(filters=[ExactMatchFilter(key="topic", value="odd")])
    ).retrieve(query)
    assert odd and {r.node.ref_doc_id for r in odd} == {"doc-1", "doc-3", "doc-5"}
    # LlamaIndex's own delete-by-document works on the layout too.
    store.delete(ref_doc_id="doc-4")
    assert "doc-4" not in {h.doc_id for h in c2v_rag.search(query, top_k=100, collection="kb", client=client)}


def test_langchain_opens_a_c2v_rag_collection(ingested, tiny_variant):
    from langchain_qdrant import QdrantVectorStore

    client, query, hits = ingested
    store = QdrantVectorStore(
        client=client, collection_name="kb", embedding=Causal2VecEmbeddings(model=str(tiny_variant))
    )
    found = store.similarity_search_with_score(query, k=4)
    assert [d.metadata["_id"] for d, _ in found] == [h.id for h in hits]
    np.testing.assert_allclose([s for _, s in found], [h.score for h in hits], atol=1e-5)
    for (doc, _), hit in zip(found, hits):
        assert (doc.page_content, doc.metadata["doc_id"], doc.metadata["n"]) == (
            hit.text,
            hit.doc_id,
            hit.metadata["n"],
        )
    retrieved = store.as_retriever(search_kwargs={"k": 2}).invoke(query)
    assert [d.metadata["_id"] for d in retrieved] == [h.id for h in hits[:2]]
