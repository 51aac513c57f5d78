"""End-to-end ingest and search on embedded Qdrant with a tiny model.

Every check compares against an independent computation: vectors recomputed with the model,
a clean ingest of the same input, or the chunk ids recomputed from the chunker.
"""

from __future__ import annotations

import json
import logging
import threading
from contextlib import closing

import numpy as np
import pytest
import torch

# The RAG extras (pip install 'c2v-rag[all]'); without them these tests are skipped, visibly.
for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from hub_cache import publish_snapshot
from qdrant_client import QdrantClient
from qdrant_client.http import models
from rag_helpers import make_text, stored_points, stored_vectors

import c2v_rag
from c2v_rag.documents.chunking import TokenChunker
from c2v_rag.documents.documents import iter_documents
from c2v_rag.rag import DEFAULT_QUERY_TASK, CollectionMismatchError, CollectionNotFoundError, IngestError


def expected_scores(model, payloads: dict[str, dict], query: str) -> dict[str, float]:
    """Cosine of the query (with the default retrieval instruction) and every stored chunk."""
    ids = list(payloads)
    docs = model.encode_documents([payloads[i]["page_content"] for i in ids], normalize_embeddings=True)
    q = model.encode_queries([query], task=DEFAULT_QUERY_TASK, normalize_embeddings=True)[0]
    return dict(zip(ids, (docs @ q).tolist()))


def chunk_sequence(model, corpus, config) -> list[tuple[str, str]]:
    """(doc_id, chunk text) in ingest order, from the chunker alone."""
    chunker = TokenChunker(model, config.chunk_size, config.chunk_overlap)
    return [(d.doc_id, c.text) for d in iter_documents(corpus) for c in chunker.chunk(d.text)]


def test_ingest_then_search_matches_an_independent_computation(
    tmp_path, tiny_variant, tiny_model, corpus, ingest_config
):
    result = c2v_rag.ingest(corpus, path=tmp_path, collection="kb", model=tiny_variant, config=ingest_config)
    expected_chunks = chunk_sequence(tiny_model, corpus, ingest_config)
    assert (result.documents, result.chunks, result.chunks_written) == (6, len(expected_chunks), len(expected_chunks))
    assert result.ok and result.chunks_unchanged == 0

    with closing(QdrantClient(path=str(tmp_path))) as client:
        payloads = stored_points(client, "kb")
        assert sorted((p["doc_id"], p["page_content"]) for p in payloads.values()) == sorted(expected_chunks)
        # The stored vectors are the model's normalized document vectors.
        point = client.retrieve("kb", [next(iter(payloads))], with_vectors=True)[0]
        own = tiny_model.encode_documents(point.payload["page_content"], normalize_embeddings=True)
        np.testing.assert_allclose(point.vector, own, rtol=1e-4, atol=1e-5)

        query = corpus[2]["text"][:60]
        scores = expected_scores(tiny_model, payloads, query)
        hits = c2v_rag.search(query, top_k=4, collection="kb", client=client)  # model read from the collection
    assert [round(h.score, 4) for h in hits] == [round(s, 4) for s in sorted(scores.values(), reverse=True)[:4]]
    for hit in hits:
        assert hit.score == pytest.approx(scores[hit.id], abs=1e-4)
        assert hit.text == payloads[hit.id]["page_content"] and hit.doc_id == payloads[hit.id]["doc_id"]
        assert hit.metadata["n"] == int(hit.doc_id.split("-")[1]) and hit.chunk_index is not None


def test_search_filters_on_metadata(tmp_path, tiny_variant, corpus, ingest_config):
    c2v_rag.ingest(corpus, path=tmp_path, collection="kb", model=tiny_variant, config=ingest_config)
    hits = c2v_rag.search("vitamin bone", top_k=50, path=tmp_path, collection="kb", filter={"topic": "odd"})
    assert hits and {h.doc_id for h in hits} == {"doc-1", "doc-3", "doc-5"}
    hits = c2v_rag.search("vitamin bone", top_k=50, path=tmp_path, collection="kb", filter={"n": [0, 4]})
    assert {h.doc_id for h in hits} == {"doc-0", "doc-4"}


def test_rerun_adds_nothing(tmp_path, tiny_variant, corpus, ingest_config):
    first = c2v_rag.ingest(corpus, path=tmp_path, collection="kb", model=tiny_variant, config=ingest_config)
    with closing(QdrantClient(path=str(tmp_path))) as client:
        before = stored_points(client, "kb")
    again = c2v_rag.ingest(
        corpus + corpus[:2], path=tmp_path, collection="kb", model=tiny_variant, config=ingest_config
    )
    assert (again.chunks_written, again.chunks_unchanged, again.duplicate_documents) == (0, first.chunks, 2)
    with closing(QdrantClient(path=str(tmp_path))) as client:
        assert stored_points(client, "kb") == before


class _CountingClient:
    """A real embedded client that counts the requests made through it (each a round trip on a server)."""

    def __init__(self, client: QdrantClient) -> None:
        self._client = client
        self.requests: dict[str, int] = {}

    def __getattr__(self, name):
        attribute = getattr(self._client, name)
        if not callable(attribute) or name.startswith("_"):
            return attribute

        def counted(*args, **kwargs):
            self.requests[name] = self.requests.get(name, 0) + 1
            return attribute(*args, **kwargs)

        return counted


def test_an_ingest_reads_the_collection_before_its_model_loads_and_once_after(
    tmp_path, tiny_variant, tiny_variant_qwen, corpus, ingest_config
):
    """Each store request is a round trip to a Qdrant server. An ingest into an existing collection asked for its
    info seven times and whether it exists three times; once before the model loads and once after it suffice."""
    with closing(QdrantClient(path=str(tmp_path))) as opened:
        client = _CountingClient(opened)
        c2v_rag.ingest(corpus[:3], client=client, collection="kb", model=tiny_variant, config=ingest_config)
        assert (client.requests.get("collection_exists"), client.requests.get("get_collection")) == (2, None)
        client.requests.clear()
        more = c2v_rag.ingest(corpus, client=client, collection="kb", model=tiny_variant, config=ingest_config)
        assert (client.requests["collection_exists"], client.requests["get_collection"]) == (2, 2)
        assert more.documents == 6 and more.chunks_written > 0 and more.chunks_unchanged > 0
        client.requests.clear()
        with pytest.raises(CollectionMismatchError, match="another model"):  # the check still reads what it needs
            c2v_rag.ingest(corpus, client=client, collection="kb", model=tiny_variant_qwen, config=ingest_config)
        assert client.requests["get_collection"] == 1 and "upsert" not in client.requests


def test_changed_document_replaces_its_chunks_and_leaves_no_stale_ones(tmp_path, tiny_variant, corpus, ingest_config):
    c2v_rag.ingest(corpus, path=tmp_path / "a", collection="kb", model=tiny_variant, config=ingest_config)
    changed = [dict(d) for d in corpus]
    changed[1]["text"] = make_text(101, sentences=2)  # shorter: fewer chunks
    changed[2]["text"] = corpus[2]["text"] + " " + make_text(102, sentences=3)  # longer, same start
    changed[3]["metadata"] = {"topic": "edited", "n": 3}  # metadata only
    result = c2v_rag.ingest(changed, path=tmp_path / "a", collection="kb", model=tiny_variant, config=ingest_config)
    assert result.chunks_unchanged > 0 and result.chunks_written > 0
    # A clean ingest of the changed corpus is the reference.
    c2v_rag.ingest(changed, path=tmp_path / "b", collection="kb", model=tiny_variant, config=ingest_config)
    with closing(QdrantClient(path=str(tmp_path / "a"))) as client:
        incremental = stored_points(client, "kb")
    with closing(QdrantClient(path=str(tmp_path / "b"))) as client:
        clean = stored_points(client, "kb")
    assert incremental.keys() == clean.keys()
    assert {i: p["metadata"] for i, p in incremental.items()} == {i: p["metadata"] for i, p in clean.items()}
    assert {p["metadata"]["topic"] for p in incremental.values() if p["doc_id"] == "doc-3"} == {"edited"}


def test_duplicate_ids_with_different_content_are_refused(tmp_path, tiny_variant, ingest_config):
    docs = [{"id": "same", "text": "first version"}, {"id": "same", "text": "second version"}]
    with pytest.raises(ValueError, match="document id 'same' appears twice"):
        c2v_rag.ingest(docs, path=tmp_path, collection="kb", model=tiny_variant, config=ingest_config)


def test_on_error_continue_stores_the_first_of_two_documents_sharing_an_id(tmp_path, tiny_variant, ingest_config):
    # A JSONL export with an id given twice (a record edited and appended again): the run goes on, as it does past
    # a bad record, keeping the first and naming the second.
    folder = tmp_path / "docs"
    folder.mkdir()
    records = [{"id": "same", "text": "first version"}, {"id": "other", "text": "another"}]
    export = folder / "export.jsonl"
    export.write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "gone.txt").write_text("a note stored earlier")
    store = tmp_path / "store"
    c2v_rag.ingest(folder, path=store, collection="kb", model=tiny_variant, config=ingest_config)
    with export.open("a") as handle:
        handle.write(json.dumps({"id": "same", "text": "second version"}) + "\n")
    (folder / "gone.txt").unlink()
    (folder / "note.txt").write_text("a note")
    with pytest.raises(
        ValueError,
        match="document id 'same' appears twice.*pass on_error='continue' \\(--on-error continue\\) to store the one",
    ):
        c2v_rag.ingest(folder, path=store, collection="kb", model=tiny_variant, config=ingest_config)
    result = c2v_rag.ingest(
        folder, path=store, collection="kb", model=tiny_variant, config=ingest_config, on_error="continue", sync=True
    )
    assert (result.documents, result.duplicate_documents, result.records_skipped) == (3, 0, 1)
    [skipped] = result.skipped
    assert skipped.where == f"{(folder / 'export.jsonl').resolve()} (id 'same')"
    assert "was met before with other content; the one met first is stored" in skipped.reason
    with closing(QdrantClient(path=str(store))) as client:
        stored = stored_points(client, "kb")
    texts = {p["doc_id"]: p["page_content"] for p in stored.values()}
    assert texts["same"] == "first version" and texts["other"] == "another"
    assert sorted(texts.values()) == ["a note", "another", "first version"]  # the sync deleted gone.txt's


def test_failed_batch_is_reported_and_a_rerun_resumes_without_duplicates(
    tmp_path, tiny_variant, tiny_model, corpus, ingest_config, monkeypatch
):
    client = QdrantClient(path=str(tmp_path / "a"))
    real_upsert, calls = client.upsert, []

    def failing_second_upsert(*args, **kwargs):
        calls.append(len(args[1]))
        if len(calls) == 2:
            raise RuntimeError("injected: disk full")
        return real_upsert(*args, **kwargs)

    monkeypatch.setattr(client, "upsert", failing_second_upsert)
    with pytest.raises(IngestError, match="injected: disk full") as info:
        c2v_rag.ingest(corpus, collection="kb", model=tiny_variant, config=ingest_config, client=client)
    chunks = chunk_sequence(tiny_model, corpus, ingest_config)
    # The second batch holds chunks 4..7; the error names exactly their documents.
    assert info.value.doc_ids == list(dict.fromkeys(doc for doc, _ in chunks[4:8]))
    assert len(calls) == 2  # not retried (not transient) and nothing written after the failure
    assert sorted(p["page_content"] for p in stored_points(client, "kb").values()) == sorted(t for _, t in chunks[:4])
    assert info.value.result.chunks_written == 4

    monkeypatch.setattr(client, "upsert", real_upsert)
    resumed = c2v_rag.ingest(corpus, collection="kb", model=tiny_variant, config=ingest_config, client=client)
    assert (resumed.chunks_unchanged, resumed.chunks_written) == (4, len(chunks) - 4)
    resumed_points = stored_points(client, "kb")
    client.close()
    c2v_rag.ingest(corpus, path=tmp_path / "b", collection="kb", model=tiny_variant, config=ingest_config)
    with closing(QdrantClient(path=str(tmp_path / "b"))) as clean_client:
        assert resumed_points == stored_points(clean_client, "kb")


def test_transient_errors_are_retried(tmp_path, tiny_variant, corpus, ingest_config, monkeypatch):
    client = QdrantClient(path=str(tmp_path))
    real_upsert, calls = client.upsert, []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) in (1, 3):
            raise ConnectionError("connection reset")
        return real_upsert(*args, **kwargs)

    monkeypatch.setattr(client, "upsert", flaky)
    result = c2v_rag.ingest(corpus, collection="kb", model=tiny_variant, config=ingest_config, client=client)
    batches = -(-result.chunks // ingest_config.batch_size)
    assert result.ok and len(calls) == batches + 2
    assert len(stored_points(client, "kb")) == result.chunks
    client.close()


def test_embedding_the_next_batch_overlaps_uploading_the_previous_one(
    tmp_path, tiny_variant, tiny_model, corpus, ingest_config, monkeypatch
):
    client = QdrantClient(path=str(tmp_path))
    real_upsert, real_encode = client.upsert, tiny_model.encode_documents
    second_batch_started, waits = threading.Event(), []
    encodes = []

    def encode(*args, **kwargs):
        encodes.append(1)
        if len(encodes) == 2:
            second_batch_started.set()
        return real_encode(*args, **kwargs)

    def upsert(*args, **kwargs):
        if not waits:  # the first upload waits until the second batch is being embedded
            waits.append(second_batch_started.wait(timeout=20))
        return real_upsert(*args, **kwargs)

    monkeypatch.setattr(tiny_model, "encode_documents", encode)
    monkeypatch.setattr(client, "upsert", upsert)
    result = c2v_rag.ingest(corpus, collection="kb", model=tiny_variant, config=ingest_config, client=client)
    assert waits == [True] and result.ok and len(stored_points(client, "kb")) == result.chunks
    client.close()


def test_on_error_continue_records_the_batch_and_writes_the_rest(
    tmp_path, tiny_variant, tiny_model, corpus, ingest_config, monkeypatch
):
    client = QdrantClient(path=str(tmp_path))
    real_upsert, calls = client.upsert, []

    def failing_first(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("injected")
        return real_upsert(*args, **kwargs)

    monkeypatch.setattr(client, "upsert", failing_first)
    result = c2v_rag.ingest(
        corpus, collection="kb", model=tiny_variant, config=ingest_config, client=client, on_error="continue"
    )
    chunks = chunk_sequence(tiny_model, corpus, ingest_config)
    assert [f.doc_ids for f in result.failed] == [list(dict.fromkeys(d for d, _ in chunks[:4]))]
    assert result.chunks_written == len(chunks) - 4 == len(stored_points(client, "kb"))
    client.close()


def test_existing_collection_with_other_vectors_is_refused_before_writing(
    tmp_path, tiny_variant, tiny_variant_qwen, corpus, ingest_config
):
    with closing(QdrantClient(path=str(tmp_path))) as client:
        client.create_collection("size", vectors_config=models.VectorParams(size=65, distance=models.Distance.COSINE))
        client.create_collection("dist", vectors_config=models.VectorParams(size=64, distance=models.Distance.DOT))
        client.create_collection(
            "named", vectors_config={"text-dense": models.VectorParams(size=64, distance=models.Distance.COSINE)}
        )
    for name, message in [
        ("size", "stores 65-dimensional vectors, but the model makes 64"),
        ("dist", "uses Dot distance, not Cosine"),
        ("named", "has named vectors"),
    ]:
        with pytest.raises(CollectionMismatchError, match=message):
            c2v_rag.ingest(corpus, path=tmp_path, collection=name, model=tiny_variant, config=ingest_config)
    c2v_rag.ingest(corpus[:1], path=tmp_path, collection="llama", model=tiny_variant, config=ingest_config)
    with pytest.raises(CollectionMismatchError, match="built with another model"):
        c2v_rag.ingest(corpus[1:], path=tmp_path, collection="llama", model=tiny_variant_qwen, config=ingest_config)
    with closing(QdrantClient(path=str(tmp_path))) as client:
        counts = {n: client.count(n).count for n in ("size", "dist", "named", "llama")}
    assert counts == {
        "size": 0,
        "dist": 0,
        "named": 0,
        "llama": len(c2v_rag.search("x", top_k=100, path=tmp_path, collection="llama")),
    }
    assert all(h.doc_id == "doc-0" for h in c2v_rag.search("x", top_k=100, path=tmp_path, collection="llama"))


def test_named_vector_collections_work_end_to_end(tmp_path, tiny_variant, corpus, ingest_config):
    qdrant = c2v_rag.QdrantConfig(vector_name="text-dense", distance="dot")
    result = c2v_rag.ingest(
        corpus, path=tmp_path, collection="nv", model=tiny_variant, config=ingest_config, qdrant=qdrant
    )
    hits = c2v_rag.search(corpus[0]["text"], top_k=3, path=tmp_path, collection="nv", qdrant=qdrant)
    assert result.chunks > 0 and len(hits) == 3
    # The collection records its vector's name, so a search needs no vector_name...
    again = c2v_rag.search(corpus[0]["text"], top_k=3, path=tmp_path, collection="nv")
    assert [h.id for h in again] == [h.id for h in hits]
    # ...and a wrong one is refused, naming the ones there are.
    with pytest.raises(CollectionMismatchError, match=r"has named vectors \['text-dense'\] but none named 'other'"):
        c2v_rag.search("q", path=tmp_path, collection="nv", qdrant=c2v_rag.QdrantConfig(vector_name="other"))


def test_search_errors_name_the_fix(tmp_path, tiny_variant):
    with pytest.raises(CollectionNotFoundError, match="does not exist .* Ingest documents first"):
        c2v_rag.search("query", path=tmp_path, collection="missing", model=tiny_variant)
    with pytest.raises(ValueError, match="query must be a non-empty string"):
        c2v_rag.search("  ", path=tmp_path, model=tiny_variant)
    with pytest.raises(ValueError, match="not a valid collection name"):
        c2v_rag.search("query", path=tmp_path, collection="a/b", model=tiny_variant)


def test_ray_options_without_the_ray_engine_are_refused_before_any_work(tmp_path, tiny_variant):
    """ray= alone used to run in this process, the options unused: an ingest meant for a cluster ran locally."""
    from c2v_rag.rag.ingestion.ray_dataflow import RayOptions

    store = tmp_path / "store"
    for call in (
        lambda: c2v_rag.ingest(["a tide"], path=store, model=tiny_variant, ray=RayOptions(actors=2)),
        lambda: c2v_rag.embed(["a tide"], out=tmp_path / "out", model=tiny_variant, ray="auto"),
    ):
        with pytest.raises(ValueError, match="is for engine='ray', and engine='local' runs in this process"):
            call()
    assert not store.exists() and not (tmp_path / "out").exists()


def test_a_collection_not_found_names_those_the_store_holds_and_the_closest(tmp_path, tiny_variant, ingest_config):
    """A mistyped name is the common cause: every entry point lists the store's collections and aliases."""
    import asyncio

    docs = [{"id": f"doc-{i}", "text": make_text(i)} for i in range(2)]
    c2v_rag.ingest(docs, path=tmp_path, collection="notes", model=tiny_variant, config=ingest_config)
    c2v_rag.ingest(docs, path=tmp_path, collection="papers", model=tiny_variant, config=ingest_config, versioned=True)
    held = "which holds 'notes', 'papers' and 'papers_v1'"
    with pytest.raises(CollectionNotFoundError, match=f"{held}; did you mean 'notes'\\? Name one of them"):
        c2v_rag.search("query", path=tmp_path, collection="note", model=tiny_variant)
    with pytest.raises(CollectionNotFoundError, match=f"{held}; did you mean 'papers'\\?"):
        asyncio.run(c2v_rag.asearch("query", path=tmp_path, collection="paper", model=tiny_variant))
    with pytest.raises(CollectionNotFoundError, match=f"'tides' does not exist at .*, {held}\\. Name one of them"):
        c2v_rag.open_collection("tides", path=tmp_path).count()  # nothing close: no guess


def refused_as_another_model(store, built_with, other, corpus, ingest_config, field) -> None:
    """A collection ``built_with`` one variant refuses ``other``'s ingest and search, naming ``field``, and still
    answers its own."""
    c2v_rag.ingest(corpus[:2], path=store, collection="kb", model=built_with, config=ingest_config)
    with pytest.raises(CollectionMismatchError, match=rf"built with another model \({field}="):
        c2v_rag.ingest(corpus[2:], path=store, collection="kb", model=other, config=ingest_config)
    with pytest.raises(CollectionMismatchError, match=rf"built with another model \({field}="):
        c2v_rag.search("x", path=store, collection="kb", model=other)
    assert c2v_rag.search("x", top_k=100, path=store, collection="kb", model=built_with)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("instruction_template", "Task: {instruction}\n"),
        ("prompt_format", {"name": "plain"}),
        ("placement", "before_instruction"),
    ],
)
def test_a_variant_whose_config_changes_the_forward_pass_is_refused(
    tmp_path, tiny_variant, corpus, ingest_config, field, value
):
    # The same weights read another way (a helper's walkthrough edited a preset copy's prompt format and template:
    # its vectors had cosine 0.38-0.50 with the preset's on the decoder part, and ingest and search took it).
    import shutil

    from c2v_rag.core.config import CONFIG_FILE

    edited = tmp_path / "edited"
    shutil.copytree(tiny_variant, edited)
    config = json.loads((edited / CONFIG_FILE).read_text())
    config[field] = value
    (edited / CONFIG_FILE).write_text(json.dumps(config))
    refused_as_another_model(tmp_path / "store", tiny_variant, edited, corpus, ingest_config, field)


def test_a_retrained_variant_with_the_same_config_is_refused(tmp_path, tiny_variant, corpus, ingest_config, caplog):
    # Same base models, dims and readout, other weights: what a retrained preset under the same name
    # looks like. Only the weights digest tells the two apart.
    import shutil

    from safetensors.torch import load_file, save_file

    from c2v_rag.hub.variants import PROJECTOR_FILE, weights_digest
    from c2v_rag.store.collection import FINGERPRINT_METADATA_KEY

    retrained = tmp_path / "retrained"
    shutil.copytree(tiny_variant, retrained)
    state = load_file(str(retrained / PROJECTOR_FILE))
    save_file({k: v + 0.01 for k, v in state.items()}, str(retrained / PROJECTOR_FILE))
    assert weights_digest(retrained) != weights_digest(tiny_variant) is not None

    store = tmp_path / "store"
    c2v_rag.ingest(corpus[:2], path=store, collection="kb", model=tiny_variant, config=ingest_config)
    with pytest.raises(CollectionMismatchError, match=r"built with another model \(weights="):
        c2v_rag.ingest(corpus[2:], path=store, collection="kb", model=retrained, config=ingest_config)
    with pytest.raises(CollectionMismatchError, match="built with another model"):
        c2v_rag.search("x", path=store, collection="kb", model=retrained)
    assert len(c2v_rag.search("x", top_k=100, path=store, collection="kb", model=tiny_variant)) > 0

    # A collection written before weights were recorded is searched, with one warning that says so.
    with closing(QdrantClient(path=str(store))) as client:
        info = client.get_collection("kb")
        old = {
            k: v
            for k, v in info.config.metadata[FINGERPRINT_METADATA_KEY].items()
            if k not in ("weights", "normalize_parts", "encoder_share")
        }
        client.create_collection(
            "old", vectors_config=info.config.params.vectors, metadata={FINGERPRINT_METADATA_KEY: old}
        )
    with caplog.at_level("WARNING", logger="c2v_rag.store.collection"):
        assert c2v_rag.search("x", path=store, collection="old", model=retrained) == []
        c2v_rag.search("y", path=store, collection="old", model=retrained)
    assert [r.message.count("predates weight fingerprints") for r in caplog.records] == [1]
    assert torch.equal(load_file(str(tiny_variant / PROJECTOR_FILE))[next(iter(state))], next(iter(state.values())))


def test_a_variant_with_the_same_weight_files_and_another_adapter_scale_is_refused(
    tmp_path, tiny_model_factory, corpus, ingest_config
):
    """The same adapter weights at another lora_alpha (an adapter scaled toward its base) make other vectors:
    the collection records the adapters' digest beside the weights' and refuses the other, while a collection
    recorded before adapters were, which cannot tell the two apart, is searched as before."""
    import json
    import shutil

    from tiny_models import with_lora

    from c2v_rag.store.collection import FINGERPRINT_METADATA_KEY

    variant = with_lora(tiny_model_factory("llama", max_length=128)).save_pretrained(tmp_path / "variant")
    scaled = tmp_path / "scaled"
    shutil.copytree(variant, scaled)
    adapter_config = scaled / "decoder_adapter" / "adapter_config.json"
    adapter_config.write_text(json.dumps({**json.loads(adapter_config.read_text()), "lora_alpha": 4}))

    store = tmp_path / "store"
    refused_as_another_model(store, variant, scaled, corpus, ingest_config, "adapters")

    with closing(QdrantClient(path=str(store))) as client:
        info = client.get_collection("kb")
        recorded = info.config.metadata[FINGERPRINT_METADATA_KEY]
        assert recorded["adapters"] is not None
        old = {k: v for k, v in recorded.items() if k != "adapters"}
        client.create_collection(
            "old", vectors_config=info.config.params.vectors, metadata={FINGERPRINT_METADATA_KEY: old}
        )
    assert c2v_rag.search("x", path=store, collection="old", model=scaled) == []


def test_a_base_model_replaced_in_place_is_refused_and_the_same_weights_reinstalled_are_not(
    tmp_path, tiny_dirs, corpus, ingest_config
):
    """A variant names its base by reference: a base replaced under that path (a package release that converts its
    weights otherwise, a checkpoint saved over another) makes other vectors with the same variant files. The
    collection records the bases' contents and refuses it, naming the cause; the same bytes written again are the
    same model; a collection recorded before the bases were is searched as before."""
    import shutil

    from safetensors.torch import load_file, save_file

    from c2v_rag import Causal2Vec
    from c2v_rag.core.config import Causal2VecConfig
    from c2v_rag.store.collection import FINGERPRINT_METADATA_KEY

    base = tmp_path / "base"
    shutil.copytree(tiny_dirs["llama"], base)
    config = Causal2VecConfig(decoder=str(base), encoder=str(tiny_dirs["bert"]), dtype="float32", max_length=128)
    variant = Causal2Vec.from_config(config, device="cpu").save_pretrained(tmp_path / "variant")
    store = tmp_path / "store"
    c2v_rag.ingest(corpus[:2], path=store, collection="kb", model=variant, config=ingest_config)
    before = c2v_rag.search("tides", top_k=100, path=store, collection="kb", model=variant)
    assert before
    held = Causal2Vec.from_pretrained(variant, device="cpu")  # loaded before: it still computes the old vectors

    (weights,) = base.glob("*.safetensors")
    original = weights.read_bytes()
    state = load_file(str(weights))
    save_file({k: v + 0.05 * torch.randn(v.shape, generator=torch.Generator().manual_seed(1)) for k, v in
               state.items()}, str(weights))  # fmt: skip
    fix = r"built with another model \(bases=.*A base model's files changed since it was built"
    with pytest.raises(CollectionMismatchError, match=fix):
        c2v_rag.ingest(corpus[2:], path=store, collection="kb", model=variant, config=ingest_config)
    with pytest.raises(CollectionMismatchError, match=fix):
        c2v_rag.search("tides", path=store, collection="kb", model=variant)
    with pytest.raises(CollectionMismatchError, match=fix):  # a loaded model is checked the same way
        c2v_rag.search("tides", path=store, collection="kb", model=Causal2Vec.from_pretrained(variant, device="cpu"))
    kept = c2v_rag.search("tides", top_k=100, path=store, collection="kb", model=held)
    assert [(h.id, h.score) for h in kept] == [(h.id, h.score) for h in before]

    with closing(QdrantClient(path=str(store))) as client:
        info = client.get_collection("kb")
        recorded = info.config.metadata[FINGERPRINT_METADATA_KEY]
        assert set(recorded["bases"]) == {"decoder", "encoder"}
        old = {k: v for k, v in recorded.items() if k != "bases"}
        client.create_collection(
            "old", vectors_config=info.config.params.vectors, metadata={FINGERPRINT_METADATA_KEY: old}
        )
    assert c2v_rag.search("tides", path=store, collection="old", model=variant) == []

    replaced = weights.read_bytes()
    weights.write_bytes(original)  # reinstalled: the same bytes, new file stamps
    again = c2v_rag.search("tides", top_k=100, path=store, collection="kb", model=variant)
    assert [(h.id, h.score) for h in again] == [(h.id, h.score) for h in before]

    # The fix the error names: re-embed the collection with the base as it is now, behind the same name.
    weights.write_bytes(replaced)
    c2v_rag.reindex("kb", path=store, model=variant, convert=True)
    moved = c2v_rag.search("tides", top_k=100, path=store, collection="kb", model=variant)
    assert sorted(h.id for h in moved) == sorted(h.id for h in before)
    assert [h.score for h in moved] != [h.score for h in before]


def test_a_hub_base_whose_weights_changed_is_refused(tmp_path, tiny_dirs, corpus, ingest_config, monkeypatch):
    """A base named by hub id is digested in its snapshot in the Hugging Face cache (loaded offline here, by real
    transformers): a new revision with other weights is refused as a base replaced in place is; files other tools
    download into the snapshot (sentence-transformers' modules.json, a README) change nothing."""
    import huggingface_hub.constants as hub_constants
    from safetensors.torch import load_file, save_file

    from c2v_rag import Causal2Vec
    from c2v_rag.core.config import Causal2VecConfig
    from c2v_rag.hub.variants import bases_digests
    from c2v_rag.store.collection import FINGERPRINT_METADATA_KEY

    cache = tmp_path / "hf"
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "c2v"))
    snapshot = publish_snapshot(cache, "tiny-org/llama", tiny_dirs["llama"], "a" * 40)
    config = Causal2VecConfig(decoder="tiny-org/llama", encoder=str(tiny_dirs["bert"]), dtype="float32", max_length=128)
    model = Causal2Vec.from_config(config, device="cpu")
    assert model.bases_digests is not None and model.bases_digests["decoder"].startswith("hub-")
    assert bases_digests(config) == model.bases_digests  # read from the snapshot before a load, as after
    variant = model.save_pretrained(tmp_path / "variant")
    store = tmp_path / "store"
    c2v_rag.ingest(corpus[:2], path=store, collection="kb", model=variant, config=ingest_config)
    with closing(QdrantClient(path=str(store))) as client:
        recorded = client.get_collection("kb").config.metadata[FINGERPRINT_METADATA_KEY]
    assert recorded["bases"]["decoder"] == model.bases_digests["decoder"]
    before = c2v_rag.search("tides", top_k=100, path=store, collection="kb", model=variant)
    assert before

    (snapshot / "modules.json").write_text("[]")
    (snapshot / "README.md").write_text("# tiny")
    again = c2v_rag.search("tides", top_k=100, path=store, collection="kb", model=variant)
    assert [(h.id, h.score) for h in again] == [(h.id, h.score) for h in before]

    newer = publish_snapshot(cache, "tiny-org/llama", tiny_dirs["llama"], "b" * 40)
    (weights,) = newer.glob("*.safetensors")
    state = load_file(str(weights))
    save_file({k: v + 0.05 * torch.randn(v.shape, generator=torch.Generator().manual_seed(1)) for k, v in
               state.items()}, str(weights))  # fmt: skip
    fix = r"built with another model \(bases=.*A base model's files changed since it was built"
    with pytest.raises(CollectionMismatchError, match=fix):
        c2v_rag.search("tides", path=store, collection="kb", model=variant)
    with pytest.raises(CollectionMismatchError, match=fix):
        c2v_rag.ingest(corpus[2:], path=store, collection="kb", model=variant, config=ingest_config)


def test_hub_and_local_digests_of_a_base_are_compared_only_with_their_own_kind():
    from c2v_rag.store.collection import fingerprint_differences

    hub, local = {"decoder": "hub-0123456789abcdef"}, {"decoder": "0123456789abcdef"}
    assert fingerprint_differences({"bases": hub}, {"bases": {"decoder": "hub-fedcba9876543210"}}) == ["bases"]
    assert fingerprint_differences({"bases": local}, {"bases": {"decoder": "fedcba9876543210"}}) == ["bases"]
    assert fingerprint_differences({"bases": hub}, {"bases": local}) == []  # a local copy of the hub's base
    assert fingerprint_differences({"bases": local}, {"bases": hub}) == []
    assert fingerprint_differences({"bases": hub}, {"bases": None}) == []  # a machine without the snapshot
    # Local digests recorded before their JSON files were read without the transformers version that wrote them
    # (bare hex) are compared with neither kind: the same files give a digest of the new kind now.
    new = {"decoder": "local-0123456789abcdef"}
    assert fingerprint_differences({"bases": new}, {"bases": {"decoder": "local-fedcba9876543210"}}) == ["bases"]
    assert fingerprint_differences({"bases": local}, {"bases": new}) == []
    assert fingerprint_differences({"bases": new}, {"bases": hub}) == []


def test_a_record_from_before_a_field_is_not_compared_on_it_on_either_side():
    # An embed folder written before the forward fields were recorded, loaded into a collection made after: its
    # files' record lacks them, and it was refused as another model's vectors.
    from c2v_rag.store.collection import fingerprint_differences

    newer = {"decoder": "d", "instruction_template": "{instruction}\n", "placement": "after_instruction"}
    older = {"decoder": "d"}
    assert fingerprint_differences(newer, older) == [] and fingerprint_differences(older, newer) == []
    edited = {**newer, "instruction_template": "Task: {instruction}\n"}
    assert fingerprint_differences(newer, edited) == ["instruction_template"]
    assert fingerprint_differences({**older, "decoder": "e"}, newer) == ["decoder"]


def test_chunk_context_lead_is_stored_embedded_and_kept_by_the_collection(
    tmp_path, tiny_variant, tiny_model, ingest_config
):
    """chunk_context="lead": each chunk after a page's first is stored and embedded with the page's opening; the
    collection records it, a later ingest into it keeps it, and asking for the other is refused before work."""
    from c2v_rag.store.collection import collection_fingerprint

    page = "# Tides\n\nTides - the rise and fall of the sea.\n\n" + make_text(2, sentences=12)
    other = "# Neap tides\n\nThe weaker tides.\n\n" + make_text(5, sentences=12)
    settings = ingest_config.model_copy(update={"chunk_size": 48, "chunk_overlap": 6})
    c2v_rag.ingest(
        [{"id": "tides", "text": page}], path=tmp_path, collection="led", model=tiny_variant, config=settings
    )  # fmt: skip  (a new collection: "lead" by default)
    c2v_rag.ingest([{"id": "neap", "text": other}], path=tmp_path, collection="led", model=tiny_variant,
                   config=settings)  # fmt: skip
    with pytest.raises(ValueError, match=r"records chunk_context='lead'.*Pass chunk_context='lead'"):
        c2v_rag.ingest(["more"], path=tmp_path, collection="led", model=tiny_variant, config=settings,
                       chunk_context="none")  # fmt: skip
    c2v_rag.ingest([{"id": "tides", "text": page}], path=tmp_path, collection="plain", model=tiny_variant,
                   config=settings, chunk_context="none")  # fmt: skip
    # A collection made before chunk_context was recorded keeps its chunks alone; a later ingest follows it.
    assert settings.for_collection({"format": 1}, "old", tiny_model.config).chunk_context == "none"
    assert settings.for_collection(None, "new", tiny_model.config).chunk_context == "lead"
    with closing(QdrantClient(path=str(tmp_path))) as client:
        assert collection_fingerprint(client, "led")["chunk_context"] == "lead"
        assert collection_fingerprint(client, "plain")["chunk_context"] == "none"
        led = sorted(stored_vectors(client, "led").values(), key=lambda p: (p[0]["doc_id"], p[0]["chunk_index"]))
        plain = sorted(stored_points(client, "plain").values(), key=lambda p: p["chunk_index"])
    leads = {"tides": "Tides\nTides - the rise and fall of the sea.\n\n", "neap": "Neap tides\nThe weaker tides.\n\n"}
    assert len([p for p, _ in led if p["doc_id"] == "tides"]) == len(plain) > 2
    for payload, vector in led:
        lead = leads[payload["doc_id"]] if payload["chunk_index"] else ""
        assert payload["page_content"].startswith(lead) and payload["metadata"].get("lead_chars", 0) == len(lead)
        own = tiny_model.encode_documents(payload["page_content"], normalize_embeddings=True)
        np.testing.assert_allclose(vector, own, rtol=1e-4, atol=1e-5)
    tides = [p for p, _ in led if p["doc_id"] == "tides"]
    assert [p["page_content"][p["metadata"].get("lead_chars", 0) :] for p in tides] == [
        p["page_content"] for p in plain
    ]


def test_chunk_context_headings_leads_chunks_with_their_sections_and_is_kept(tmp_path, tiny_variant, ingest_config):
    """chunk_context="headings": a chunk under a section starts with the page's title and the headings above it; the
    collection records it and refuses a later ingest asking for "lead", naming what its chunks hold."""
    from c2v_rag.store.collection import collection_fingerprint

    page = "# Tides\n\nThe sea's rise and fall.\n\n## Causes\n\n" + make_text(2, sentences=12)
    page += "\n\n### The Moon\n\n" + make_text(3, sentences=12)
    settings = ingest_config.model_copy(update={"chunk_size": 48, "chunk_overlap": 6})
    c2v_rag.ingest([{"id": "tides", "text": page}], path=tmp_path, collection="placed", model=tiny_variant,
                   config=settings, chunk_context="headings")  # fmt: skip
    with pytest.raises(ValueError, match=r"records chunk_context='headings'.*headings above them.*Pass chunk_cont"):
        c2v_rag.ingest(["more"], path=tmp_path, collection="placed", model=tiny_variant, config=settings,
                       chunk_context="lead")  # fmt: skip
    with closing(QdrantClient(path=str(tmp_path))) as client:
        assert collection_fingerprint(client, "placed")["chunk_context"] == "headings"
        stored = sorted(stored_points(client, "placed").values(), key=lambda p: p["chunk_index"])
    causes, moon = page.index("## Causes"), page.index("### The Moon")
    for payload in stored[1:]:
        lead, own = (payload["page_content"][: payload["metadata"]["lead_chars"]],
                     payload["page_content"][payload["metadata"]["lead_chars"] :])  # fmt: skip
        start = page.index(own)
        # A chunk that opens with a heading shows it: only the headings above its start lead it.
        path = "Tides" + " › Causes" * (start > causes) + " › The Moon" * (start > moon)
        assert lead == f"{path}\nThe sea's rise and fall.\n\n", (start, lead)
    assert {p["page_content"].split("\n", 1)[0] for p in stored[1:]} >= {"Tides › Causes", "Tides › Causes › The Moon"}
    # A hit says where its chunk lies in the page, for a citation: its own text, after the lead.
    hits = c2v_rag.search("the Moon", top_k=4, path=tmp_path, collection="placed", model=tiny_variant, rerank=None)
    assert len(hits) == 4 and any(hit.metadata.get("lead_chars") for hit in hits)
    for hit in hits:
        assert page[hit.start_char : hit.end_char] == hit.text[hit.metadata.get("lead_chars", 0) :]


def test_chunk_context_sections_cuts_chunks_at_headings_and_is_kept(tmp_path, tiny_variant, ingest_config):
    """chunk_context="sections": no stored chunk runs from one section into the next (each section here is longer
    than a chunk), the leads are "headings"', and the collection records it and says so when refusing another."""
    from c2v_rag.store.collection import collection_fingerprint
    from c2v_rag.store.point_schema import payload_char_span

    # Sections of short sentences, a little longer than a chunk: cut by sentences alone, chunks run across headings.
    parts = ["## Causes", "### The Moon", "### The Sun", "## Effects"]
    page = "# Tides\n\nThe sea's rise and fall.\n\n" + "\n\n".join(
        f"{part}\n\n" + " ".join(f"Step {j} of {i}." for j in range(5)) for i, part in enumerate(parts)
    )
    settings = ingest_config.model_copy(update={"chunk_size": 48, "chunk_overlap": 6})
    for context in ("headings", "sections"):
        c2v_rag.ingest([{"id": "tides", "text": page}], path=tmp_path, collection=context, model=tiny_variant,
                       config=settings, chunk_context=context)  # fmt: skip
    with pytest.raises(ValueError, match=r"records chunk_context='sections'.*cut at headings.*Pass chunk_cont"):
        c2v_rag.ingest(["more"], path=tmp_path, collection="sections", model=tiny_variant, config=settings,
                       chunk_context="headings")  # fmt: skip
    spans = {}
    with closing(QdrantClient(path=str(tmp_path))) as client:
        assert collection_fingerprint(client, "sections")["chunk_context"] == "sections"
        for context in ("headings", "sections"):
            stored = sorted(stored_points(client, context).values(), key=lambda p: p["chunk_index"])
            spans[context] = [payload_char_span(p) for p in stored]
            for (start, end), payload in zip(spans[context], stored):
                assert page[start:end] == payload["page_content"][payload["metadata"].get("lead_chars", 0) :]
    headings = [page.index(part) for part in parts]

    def crossing(cut: list[tuple[int, int]]) -> int:
        return sum(start < heading < end for start, end in cut for heading in headings)

    assert crossing(spans["sections"]) == 0 and crossing(spans["headings"]) > 0
    assert {start for start, _ in spans["sections"]} >= set(headings[1:])


def test_decoder_max_length_reads_each_chunk_so_and_the_collection_keeps_it(
    tmp_path, tiny_variant, ingest_config, caplog
):
    """decoder_max_length=L: each chunk is embedded as encode_documents(text, max_length=L) embeds it (the decoder
    reads its first L tokens, the encoder all of it), the collection records L, a later ingest and a reindex read
    its chunks the same way, and another L, or one for a collection of whole chunks, is refused before work.
    0 asks for whole chunks, recorded as a collection from before the setting records them: by nothing, so that a
    later ingest with the default keeps reading them whole. A new collection's default is recorded."""
    from c2v_rag.rag import load_model
    from c2v_rag.rag.ingestion.config import DEFAULT_DECODER_MAX_LENGTH
    from c2v_rag.store.collection import collection_fingerprint

    model = load_model(tiny_variant, device="cpu")
    capped = ingest_config.model_copy(update={"decoder_max_length": 12})  # chunks of 24 tokens: every one is cut
    whole_asked = ingest_config.model_copy(update={"decoder_max_length": 0})
    docs = [{"id": "a", "text": make_text(1, sentences=6)}, {"id": "b", "text": make_text(2, sentences=6)}]
    caplog.set_level(logging.DEBUG, logger="c2v_rag")
    c2v_rag.ingest(docs[:1], path=tmp_path, collection="cap", model=tiny_variant, config=capped, versioned=True)
    c2v_rag.ingest(docs[1:], path=tmp_path, collection="cap", model=tiny_variant, config=ingest_config)  # keeps 12
    c2v_rag.ingest(docs[:1], path=tmp_path, collection="whole", model=tiny_variant, config=whole_asked)
    c2v_rag.ingest(docs[1:], path=tmp_path, collection="whole", model=tiny_variant, config=ingest_config)  # whole
    c2v_rag.ingest(docs[:1], path=tmp_path, collection="default", model=tiny_variant, config=ingest_config)
    refused = (("cap", capped.model_copy(update={"decoder_max_length": 16})), ("cap", whole_asked), ("whole", capped))
    for name, config in refused:
        with pytest.raises(ValueError, match=r"records .*(decoder_max_length=12|whole chunks).*Leave decoder_max_"):
            c2v_rag.ingest(["more"], path=tmp_path, collection=name, model=tiny_variant, config=config)
    c2v_rag.reindex("cap", path=tmp_path, model=tiny_variant, show_progress=False)
    # The cap is chosen, not a loss: neither the ingests nor the reindex warn of the chunks it cuts.
    assert not [r for r in caplog.records if "decoder tokens and were truncated" in r.getMessage()]
    with closing(QdrantClient(path=str(tmp_path))) as client:
        assert "decoder_max_length" not in collection_fingerprint(client, "whole")
        assert collection_fingerprint(client, "default")["decoder_max_length"] == DEFAULT_DECODER_MAX_LENGTH
        found = {}
        for name in ("cap_v1", "cap_v2", "whole"):
            points = stored_vectors(client, name).values()
            found[name] = {p["page_content"]: np.asarray(v) for p, v in points}
            if name != "whole":
                assert collection_fingerprint(client, name)["decoder_max_length"] == 12
    texts = list(found["whole"])
    assert set(found["cap_v1"]) == set(found["cap_v2"]) == set(texts) and len(texts) >= 4
    cut = model.encode_documents(texts, normalize_embeddings=True, max_length=12)
    whole = model.encode_documents(texts, normalize_embeddings=True)
    for name, expected in (("cap_v1", cut), ("cap_v2", cut), ("whole", whole)):
        got = np.stack([found[name][t] for t in texts])
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert not np.allclose(cut, whole, atol=1e-3)  # the cap changes the vectors: the checks above can tell


def test_the_decoder_max_length_default_follows_the_model(tiny_model_factory):
    """A new collection's default: the decoder reads 96 tokens where an encoder's Contextual token reads the whole
    chunk, and whole chunks where the decoder alone reads the text (no encoder, or no Contextual token)."""
    from c2v_rag.rag.ingestion.config import DEFAULT_DECODER_MAX_LENGTH, IngestConfig

    carried = tiny_model_factory("llama").config
    alone = carried.model_copy(update={"num_contextual_tokens": 0})
    assert IngestConfig().for_model(carried).decoder_max_length == DEFAULT_DECODER_MAX_LENGTH
    assert IngestConfig().for_model(alone).decoder_max_length is None
    assert IngestConfig(decoder_max_length=0).for_model(carried).decoder_max_length is None
    assert IngestConfig(decoder_max_length=40).for_model(alone).decoder_max_length == 40
    with pytest.raises(ValueError, match="at least 8 tokens, or 0 for whole chunks"):
        IngestConfig(decoder_max_length=5)


def test_a_collection_made_elsewhere_gets_whole_chunks_without_leads(tmp_path, tiny_variant, ingest_config):
    """An existing collection that records no settings (made by LlamaIndex's or LangChain's Qdrant store, whose
    embedders read whole texts) is read as a collection from before they were recorded: no lead, whole chunks."""
    from qdrant_client.http import models as qm

    from c2v_rag.rag import load_model

    model = load_model(tiny_variant, device="cpu")
    with closing(QdrantClient(path=str(tmp_path))) as client:
        client.create_collection("elsewhere", vectors_config=qm.VectorParams(size=64, distance=qm.Distance.COSINE))
    config = ingest_config.model_copy(update={"chunk_size": 100, "chunk_overlap": 0, "decoder_max_length": None})
    text = "# Tides\n\nThe sea.\n\n" + make_text(3, sentences=30)
    c2v_rag.ingest(
        [{"id": "t", "text": text}], path=tmp_path, collection="elsewhere", model=tiny_variant, config=config
    )
    with closing(QdrantClient(path=str(tmp_path))) as client:
        stored = sorted(stored_vectors(client, "elsewhere").values(), key=lambda p: p[0]["chunk_index"])
    texts = [p["page_content"] for p, _ in stored]
    assert len(texts) > 1 and not any(p["metadata"].get("lead_chars") for p, _ in stored)
    whole = model.encode_documents(texts, normalize_embeddings=True)
    np.testing.assert_allclose(np.stack([v for _, v in stored]), whole, rtol=1e-4, atol=1e-5)
    lengths = [len(model.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    assert max(lengths) > 96  # the default cap would have cut them: the check above can tell


def test_reindex_reads_the_chunks_at_another_decoder_max_length_when_asked(tmp_path, tiny_variant, ingest_config):
    """``reindex(decoder_max_length=N)`` re-embeds the chunks with the decoder at N (0: whole chunks) and records it,
    so that an existing collection can move to the cheaper default; a bad N is refused before the new version."""
    from c2v_rag.rag import load_model
    from c2v_rag.store.collection import collection_fingerprint

    model = load_model(tiny_variant, device="cpu")
    docs = [{"id": "a", "text": make_text(1, sentences=6)}, {"id": "b", "text": make_text(2, sentences=6)}]
    capped = ingest_config.model_copy(update={"decoder_max_length": 12})
    c2v_rag.ingest(docs, path=tmp_path, collection="notes", model=tiny_variant, config=capped, versioned=True)
    with pytest.raises(ValueError, match="at least 8 tokens, or 0 for whole chunks"):
        c2v_rag.reindex("notes", path=tmp_path, model=tiny_variant, show_progress=False, decoder_max_length=5)
    c2v_rag.reindex("notes", path=tmp_path, model=tiny_variant, show_progress=False, decoder_max_length=0)
    c2v_rag.reindex("notes", path=tmp_path, model=tiny_variant, show_progress=False, decoder_max_length=16)
    with closing(QdrantClient(path=str(tmp_path))) as client:
        assert not client.collection_exists("notes_v4")  # the refused call made no version
        recorded = {
            name: collection_fingerprint(client, name).get("decoder_max_length") for name in ("notes_v2", "notes_v3")
        }
        found = {name: {p["page_content"]: np.asarray(v) for p, v in stored_vectors(client, name).values()}
                 for name in ("notes_v2", "notes_v3")}  # fmt: skip
    assert recorded == {"notes_v2": None, "notes_v3": 16}
    texts = list(found["notes_v2"])
    for name, cap in (("notes_v2", None), ("notes_v3", 16)):
        expected = model.encode_documents(texts, normalize_embeddings=True, max_length=cap)
        np.testing.assert_allclose(np.stack([found[name][t] for t in texts]), expected, rtol=1e-4, atol=1e-5)


def test_ctrl_c_wrapped_by_a_library_still_stops_as_an_interrupt(tmp_path, tiny_variant, ingest_config):
    """Ctrl-C in pydantic-core's serializer (LlamaIndex's node dump) reaches the ingest as a PydanticSerializationError
    caused by the KeyboardInterrupt: it must stop as Ctrl-C does (IngestInterrupted, what was embedded stored), not
    as an error in the documents."""
    from c2v_rag.rag import IngestInterrupted

    def documents():
        for i in range(12):
            yield {"id": f"d{i}", "text": make_text(i, sentences=3)}
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise RuntimeError("Error calling function `custom_model_dump`: KeyboardInterrupt") from interrupt

    store = tmp_path / "store"
    with pytest.raises(IngestInterrupted, match="chunks were stored. Re-run the same ingest") as stopped:
        c2v_rag.ingest(documents(), path=store, collection="kb", model=tiny_variant, config=ingest_config)
    written = stopped.value.result.chunks_written
    with closing(QdrantClient(path=str(store))) as client:
        assert written > 0 and len(stored_points(client, "kb")) == written
