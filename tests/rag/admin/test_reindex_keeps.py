"""A reindex re-embeds with the new model as the collection was filled: it keeps the recorded truncate_dim,
quantization, part weights (encoder_share), documents' instruction and BM25 vectors. Every vector is checked
against the new model's own encode with those settings."""

from __future__ import annotations

from contextlib import closing

import numpy as np
import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity", "bm25s"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from rag_helpers import make_text

import c2v_rag
from c2v_rag import Causal2Vec
from c2v_rag.core.devices import INT8_METHOD, int8_runtime_installed
from c2v_rag.rag import IngestConfig, load_model
from c2v_rag.store.collection import collection_fingerprint
from c2v_rag.store.errors import CollectionMismatchError

SIZES = [16, 40]
INSTRUCTION = "Represent the passage for retrieval"


def _variant(factory, tmp_path_factory, name, **fields):
    path = tmp_path_factory.mktemp(name)
    factory("llama", max_length=128, **fields).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def old_and_new(tiny_model_factory, tmp_path_factory):
    """Two variants with the same layout and trained prefixes, as a retrained model would be."""
    fields = {"normalize_parts": True, "encoder_share": 0.5, "matryoshka_dims": SIZES}
    return tuple(_variant(tiny_model_factory, tmp_path_factory, name, **fields) for name in ("old", "new"))


def _vectors(tmp_path, collection):
    """The collection's record and info, and id -> (payload, vector) with named vectors as a dict."""
    with closing(QdrantClient(path=str(tmp_path))) as client:
        info = client.get_collection(collection)
        points = client.scroll(collection, limit=10_000, with_payload=True, with_vectors=True)[0]
        return collection_fingerprint(client, collection), info, {str(p.id): (p.payload, p.vector) for p in points}


def _dense(vector):
    return np.asarray(vector["text-dense"] if isinstance(vector, dict) else vector, dtype=np.float32)


def test_reindex_keeps_the_prefix_the_documents_instruction_and_the_sparse_vectors(
    tmp_path, old_and_new, corpus, ingest_config
):
    old, new = old_and_new
    papers = c2v_rag.open_collection("papers", path=tmp_path, model=old)
    config = ingest_config.model_copy(update={"text_instruction": INSTRUCTION})
    titled = {"id": "titled", "text": "# Tides\n\nThe line under it.\n\n" + make_text(9, sentences=8)}
    papers.ingest([*corpus, titled], config=config, truncate_dim=40, sparse="bm25", versioned=True)
    result = papers.reindex(model=new, show_progress=False)
    assert (result.previous, result.collection) == ("papers_v1", "papers_v2")
    recorded, info, points = _vectors(tmp_path, "papers_v2")
    assert recorded["truncate_dim"] == 40 and recorded["embedding_dim"] == 40
    # The chunks keep their leads (stored in their text), and the record says so for later ingests.
    assert recorded["chunk_context"] == "lead" and any(p["metadata"].get("lead_chars") for p, _ in points.values())
    with pytest.raises(ValueError, match="records chunk_context='lead'"):
        papers.ingest(["another"], config=config, chunk_context="none")
    assert recorded["document_prompt"] == {"task": None, "instruction": INSTRUCTION}
    assert recorded["layout"]["sparse"] is not None and info.config.params.sparse_vectors
    model = load_model(new, device="cpu")
    texts = [payload["page_content"] for payload, _ in points.values()]
    expected = model.encode_documents(texts, instruction=INSTRUCTION, truncate_dim=40, normalize_embeddings=True)
    np.testing.assert_allclose(np.stack([_dense(v) for _, v in points.values()]), expected, atol=1e-5)
    assert all(isinstance(v, dict) and "text-sparse-new" in v for _, v in points.values())
    # Without the instruction the vectors would differ: the check above can fail.
    plain = model.encode_documents(texts, truncate_dim=40, normalize_embeddings=True)
    assert not np.allclose(plain, expected, atol=1e-3)
    assert len(papers.search("vitamin", top_k=3, mode="hybrid")) == 3


def test_reindex_keeps_the_part_weights_and_leaves_the_shared_model_as_it_was(
    tmp_path, tiny_model_factory, tmp_path_factory, corpus, ingest_config
):
    old = _variant(tiny_model_factory, tmp_path_factory, "share-half", encoder_share=0.5)
    new = _variant(tiny_model_factory, tmp_path_factory, "share-quarter", encoder_share=0.25)
    papers = c2v_rag.open_collection("papers", path=tmp_path, model=old)
    papers.ingest(corpus, config=ingest_config, versioned=True)
    papers.reindex(model=new, show_progress=False)
    recorded, _, points = _vectors(tmp_path, "papers_v2")
    assert recorded["encoder_share"] == 0.5
    expected_model = Causal2Vec.from_pretrained(new, device="cpu")
    expected_model.set_readout(encoder_share=0.5)
    texts = [payload["page_content"] for payload, _ in points.values()]
    stored = np.stack([_dense(v) for _, v in points.values()])
    np.testing.assert_allclose(stored, expected_model.encode_documents(texts, normalize_embeddings=True), atol=1e-5)
    shared = load_model(new, device="cpu")
    assert shared.config.encoder_share == 0.25  # the cached model was not re-read at another share
    assert not np.allclose(stored, shared.encode_documents(texts, normalize_embeddings=True), atol=1e-3)
    # The reindexed collection is searched with the new model at the share it records.
    assert c2v_rag.open_collection("papers", path=tmp_path, model=new).search("vitamin", top_k=2)


def test_a_collection_keeps_its_part_weights_when_the_variant_changes_its_own(
    tmp_path, tiny_model_factory, tmp_path_factory, corpus, ingest_config
):
    """A collection made at encoder_share 0.5 (as every collection was before part_weights) is searched and
    reindexed at that readout by a variant that now weighs its parts otherwise."""
    old = _variant(tiny_model_factory, tmp_path_factory, "share", normalize_parts=True, encoder_share=0.5)
    weights = {"encoder": 0.7, "eos": 0.3}
    new = _variant(tiny_model_factory, tmp_path_factory, "weighted", normalize_parts=True, part_weights=weights)
    papers = c2v_rag.open_collection("papers", path=tmp_path, model=old)
    papers.ingest(corpus, config=ingest_config, versioned=True)
    recorded, _, points = _vectors(tmp_path, "papers_v1")
    assert recorded["encoder_share"] == 0.5 and recorded["part_weights"] is None
    reader = c2v_rag.open_collection("papers", path=tmp_path, model=new)
    reader.reindex(show_progress=False)
    recorded, _, points = _vectors(tmp_path, "papers_v2")
    assert recorded["encoder_share"] == 0.5 and recorded["part_weights"] is None
    as_old = Causal2Vec.from_pretrained(new, device="cpu")
    as_old.set_readout(part_weights=None, encoder_share=0.5)
    texts = [payload["page_content"] for payload, _ in points.values()]
    stored = np.stack([_dense(v) for _, v in points.values()])
    np.testing.assert_allclose(stored, as_old.encode_documents(texts, normalize_embeddings=True), atol=1e-5)
    # Its queries are read as its documents were: the scores are cosines with the old readout's query vector.
    hits = reader.search("vitamin", top_k=3)
    cosines = stored @ as_old.encode_queries(["vitamin"], normalize_embeddings=True)[0]
    np.testing.assert_allclose([hit.score for hit in hits], np.sort(cosines)[::-1][:3], atol=1e-4)
    # A model object is used as it is: the collection refuses it, naming the readout that reads it, which works.
    loaded = Causal2Vec.from_pretrained(new, device="cpu")
    with pytest.raises(CollectionMismatchError, match=r"model.set_readout\(encoder_share=0.5, part_weights=None\)"):
        c2v_rag.search("vitamin", collection="papers", path=tmp_path, model=loaded)
    loaded.set_readout(encoder_share=0.5, part_weights=None)
    hits_loaded = c2v_rag.search("vitamin", collection="papers", path=tmp_path, model=loaded, top_k=3)
    assert [h.score for h in hits_loaded] == pytest.approx([h.score for h in hits], abs=1e-5)
    # A new collection of the weighted variant records its weights, and its vectors have the weighted layout.
    fresh = c2v_rag.open_collection("weighted", path=tmp_path, model=new)
    fresh.ingest(corpus, config=ingest_config)
    recorded, _, points = _vectors(tmp_path, "weighted")
    assert recorded["part_weights"] == weights and recorded["encoder_share"] == 0.0
    assert recorded["embedding_dim"] == load_model(new, device="cpu").config.parts["full"].stop


@pytest.mark.skipif(not int8_runtime_installed(), reason="needs the int8 extra (onnx, onnxruntime)")
def test_reindex_keeps_the_quantization_unless_another_is_asked_for(
    tmp_path, tmp_path_factory, monkeypatch, tiny_variant, corpus
):
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path_factory.getbasetemp() / "c2v-cache"))
    config = IngestConfig(chunk_size=24, chunk_overlap=4, batch_size=8, show_progress=False)
    papers = c2v_rag.open_collection("papers", path=tmp_path, model=tiny_variant, quantize="int8")
    papers.ingest(corpus[:2], config=config, versioned=True)
    c2v_rag.open_collection("papers", path=tmp_path, model=tiny_variant).reindex(show_progress=False)
    assert _vectors(tmp_path, "papers_v2")[0]["quantize"] == INT8_METHOD
    c2v_rag.reindex("papers", path=tmp_path, model=tiny_variant, quantize="none", show_progress=False)
    assert _vectors(tmp_path, "papers_v3")[0]["quantize"] == "none"


def test_an_ingest_that_names_the_model_adds_at_the_part_weights_the_collection_recorded(
    tmp_path, tiny_model_factory, tmp_path_factory, corpus, ingest_config
):
    """A variant whose part weights changed since a collection was made (as the preset's did between releases)
    adds documents to it at the weights it recorded, by name or by path, locally; a model object is refused."""
    path = _variant(tiny_model_factory, tmp_path_factory, "reweighed", normalize_parts=True, encoder_share=0.5)
    c2v_rag.ingest(corpus[:3], path=tmp_path, collection="notes", model=path, config=ingest_config)
    model = Causal2Vec.from_pretrained(path, device="cpu")
    model.set_readout(part_weights={"encoder": 0.7, "eos": 0.3})
    model.save_pretrained(path)  # the same weights, read at other part weights from now on
    c2v_rag.ingest(corpus[3:6], path=tmp_path, collection="notes", model=path, config=ingest_config)
    recorded, _, points = _vectors(tmp_path, "notes")
    assert recorded["encoder_share"] == 0.5 and recorded["part_weights"] is None
    added = [
        (payload["page_content"], _dense(v))
        for payload, v in points.values()
        if payload["doc_id"] in {str(d["id"]) for d in corpus[3:6]}
    ]
    assert added
    as_recorded = Causal2Vec.from_pretrained(path, device="cpu")
    as_recorded.set_readout(part_weights=None, encoder_share=0.5)
    expected = as_recorded.encode_documents([t for t, _ in added], normalize_embeddings=True)
    np.testing.assert_allclose(np.stack([v for _, v in added]), expected, atol=1e-5)
    with pytest.raises(CollectionMismatchError, match=r"model.set_readout\(encoder_share=0.5, part_weights=None\)"):
        c2v_rag.ingest(corpus[6:8], path=tmp_path, collection="notes", model=model, config=ingest_config)
