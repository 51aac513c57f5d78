"""``load_embedded`` / ``c2v-rag load``: an ``embed`` folder stored in a collection is the collection an ingest of the
same documents makes (ids, payloads, vectors, sparse vectors, search results), without a model; a load resumes, keeps
what is stored, and refuses another model's collection and folders embed did not write."""

from __future__ import annotations

import json
from contextlib import closing

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("qdrant_client")

from qdrant_client import QdrantClient  # noqa: E402
from qdrant_client.http import models  # noqa: E402
from rag_helpers import make_text, stored_vectors  # noqa: E402

import c2v_rag  # noqa: E402
from c2v_rag.cli import main  # noqa: E402
from c2v_rag.core.errors import VariantLoadError  # noqa: E402
from c2v_rag.documents.payload_keys import DOC_HASH_KEY  # noqa: E402
from c2v_rag.rag import CollectionMismatchError, RunInterrupted  # noqa: E402
from c2v_rag.store.point_schema import SOURCE_ROOT_KEY  # noqa: E402

# What an ingest adds that embed's files cannot hold: the hash of a document stored whole.
BOOKKEEPING = (DOC_HASH_KEY,)


@pytest.fixture
def folder(tmp_path):
    """Eight text files of a few chunks each at chunk_size=24, and one with a title (its later chunks get a lead)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(8):
        (docs / f"note-{i}.txt").write_text(make_text(i, sentences=5))
    (docs / "guide.md").write_text("# Tidal pools\n\n" + make_text(99, sentences=8))
    return docs


def points(store, collection: str) -> dict[str, tuple[dict, np.ndarray]]:
    with closing(QdrantClient(path=str(store))) as client:
        return stored_vectors(client, collection)


def without_bookkeeping(payload: dict) -> dict:
    return {k: v for k, v in payload.items() if k not in BOOKKEEPING}


def test_a_loaded_folder_is_the_collection_an_ingest_makes(tmp_path, folder, tiny_variant, ingest_config):
    store = tmp_path / "store"
    ingested = c2v_rag.ingest(folder, collection="ingested", path=store, model=str(tiny_variant), config=ingest_config)
    embedded = c2v_rag.embed(folder, tmp_path / "vectors", model=str(tiny_variant), config=ingest_config)

    result = c2v_rag.load_embedded(tmp_path / "vectors", collection="loaded", path=store, show_progress=False)
    assert (result.chunks, result.written, result.unchanged) == (ingested.chunks, ingested.chunks, 0)
    assert result.chunks == embedded.chunks and result.files == len(embedded.files)

    expected, loaded = points(store, "ingested"), points(store, "loaded")
    rows = {r["id"]: np.asarray(r["vector"], np.float32) for r in pq.read_table(tmp_path / "vectors").to_pylist()}
    assert loaded.keys() == expected.keys() == rows.keys()
    for pid, (payload, vector) in expected.items():
        assert loaded[pid][0] == without_bookkeeping(payload), pid
        assert np.array_equal(loaded[pid][1], rows[pid]), pid  # the file's vector, as it is
        # embed and ingest batch the chunks alike but not identically: float rounding apart, the same vectors
        assert float(np.abs(loaded[pid][1] - vector).max()) < 1e-5, pid
    assert any("lead_chars" in p["metadata"] for p, _ in expected.values())  # the lead and char spans came through
    assert all(json.loads(p["_node_content"])["end_char_idx"] for p, _ in loaded.values())
    assert {p[SOURCE_ROOT_KEY] for p, _ in loaded.values()} == {str(folder.resolve())}

    # The collection records the files' model: a search with no model named finds what the ingested one finds.
    recorded = c2v_rag.open_collection("loaded", path=store).recorded()
    assert recorded["model"] == str(tiny_variant)
    for query in (make_text(3, sentences=1), "tidal pools", make_text(7, sentences=2)):
        a = c2v_rag.search(query, collection="ingested", path=store, top_k=5, rerank=None)
        b = c2v_rag.search(query, collection="loaded", path=store, top_k=5, rerank=None)
        assert [(h.id, round(h.score, 5)) for h in a] == [(h.id, round(h.score, 5)) for h in b]


def test_a_load_resumes_and_a_later_ingest_embeds_nothing_but_adds_its_bookkeeping(
    tmp_path, folder, tiny_variant, ingest_config
):
    store, vectors = tmp_path / "store", tmp_path / "vectors"
    c2v_rag.embed(folder, vectors, model=str(tiny_variant), config=ingest_config, rows_per_file=10)
    handle = c2v_rag.open_collection("kb", path=store, model=str(tiny_variant))
    first = handle.load_embedded(vectors, batch_size=7, show_progress=False)
    assert first.files > 1 and first.written == first.chunks

    # A load cut short: the points it had not stored come back, and nothing stored is rewritten.
    dropped = sorted(points(store, "kb"))[::3]
    with closing(QdrantClient(path=str(store))) as client:
        client.delete("kb", models.PointIdsList(points=dropped), wait=True)
        client.set_payload("kb", {"note": "kept"}, points=[p for p in points_ids(client) if p not in dropped][:2])
    again = handle.load_embedded(vectors, show_progress=False)
    assert (again.written, again.unchanged) == (len(dropped), first.chunks - len(dropped))
    assert sum(p.get("note") == "kept" for p, _ in points(store, "kb").values()) == 2

    later = handle.ingest(folder, config=ingest_config)
    assert (later.chunks_written, later.chunks_unchanged) == (0, first.chunks)
    stored = points(store, "kb")
    assert len(stored) == first.chunks
    assert all(p[DOC_HASH_KEY] and p[SOURCE_ROOT_KEY] == str(folder.resolve()) for p, _ in stored.values())


def points_ids(client) -> list[str]:
    return [str(p.id) for p in client.scroll("kb", limit=1000)[0]]


def test_bm25_vectors_are_the_ones_ingest_stores_and_a_hybrid_collection_keeps_its_layout(
    tmp_path, folder, tiny_variant, ingest_config
):
    pytest.importorskip("bm25s")
    store, vectors = tmp_path / "store", tmp_path / "vectors"
    model = str(tiny_variant)
    c2v_rag.ingest(folder, collection="ingested", path=store, model=model, config=ingest_config, sparse="bm25")
    c2v_rag.embed(folder, vectors, model=str(tiny_variant), config=ingest_config)
    c2v_rag.load_embedded(vectors, collection="loaded", path=store, sparse="bm25", show_progress=False)
    # Into an existing hybrid collection (an ingest's), with no sparse= given: its layout decides.
    with closing(QdrantClient(path=str(store))) as client:
        client.delete("ingested", models.FilterSelector(filter=models.Filter()), wait=True)
    refill = c2v_rag.load_embedded(vectors, collection="ingested", path=store, show_progress=False)
    assert refill.written == refill.chunks > 0

    with closing(QdrantClient(path=str(store))) as client:
        a = {str(p.id): p.vector for p in client.scroll("loaded", limit=1000, with_vectors=True)[0]}
        b = {str(p.id): p.vector for p in client.scroll("ingested", limit=1000, with_vectors=True)[0]}
    assert a.keys() == b.keys()
    for pid, vector in a.items():
        assert vector.keys() == b[pid].keys() == {"text-dense", "text-sparse-new"}
        assert vector["text-sparse-new"] == b[pid]["text-sparse-new"]
    hits = c2v_rag.search("tidal pools", collection="loaded", path=store, mode="sparse", top_k=1)
    assert hits[0].metadata["file_name"] == "guide.md"


def test_another_models_collection_is_refused_before_anything_is_written(
    tmp_path, folder, tiny_variant, tiny_variant_qwen, tiny_model_factory, ingest_config
):
    store, vectors = tmp_path / "store", tmp_path / "vectors"
    c2v_rag.ingest(["one text"], collection="kb", path=store, model=str(tiny_variant_qwen), config=ingest_config)
    c2v_rag.embed(folder, vectors, model=str(tiny_variant), config=ingest_config)
    with pytest.raises(CollectionMismatchError, match=r"'kb' .* holds vectors made with another model") as refused:
        c2v_rag.load_embedded(vectors, collection="kb", path=store, show_progress=False)
    assert "Load into another collection" in str(refused.value) and "decoder=" in str(refused.value)
    assert len(points(store, "kb")) == 1
    # Another size of one model's vectors (truncate_dim), likewise: named, and nothing written.
    sized = tmp_path / "sized"
    tiny_model_factory("llama", max_length=128, matryoshka_dims=[32]).save_pretrained(sized)
    c2v_rag.embed(folder, tmp_path / "full", model=str(sized), config=ingest_config)
    c2v_rag.embed(folder, tmp_path / "short", model=str(sized), config=ingest_config, truncate_dim=32)
    full = c2v_rag.load_embedded(tmp_path / "full", collection="full", path=store, show_progress=False)
    with pytest.raises(CollectionMismatchError, match=r"truncate_dim=None there, 32 in the files"):
        c2v_rag.load_embedded(tmp_path / "short", collection="full", path=store, show_progress=False)
    assert len(points(store, "full")) == full.written


@pytest.mark.parametrize("case", ["missing", "file", "empty", "not-embed", "bad-vectors"])
def test_a_folder_embed_did_not_write_is_refused_with_the_fix(tmp_path, folder, tiny_variant, ingest_config, case):
    store, vectors = tmp_path / "store", tmp_path / "vectors"
    if case in ("not-embed", "bad-vectors", "file"):
        c2v_rag.embed(folder, vectors, model=str(tiny_variant), config=ingest_config)
    if case == "empty":
        vectors.mkdir()
    if case == "not-embed":
        pq.write_table(pa.table({"text": ["a document"]}), vectors / "mine.parquet")
    if case == "bad-vectors":  # a file edited by hand: its vectors are not the recorded size
        file = sorted(vectors.glob("*.parquet"))[0]
        table = pq.read_table(file)
        short = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(table.num_rows * 3, np.float32)), 3)
        pq.write_table(table.set_column(table.schema.get_field_index("vector"), "vector", short), file)
    given = sorted(vectors.glob("*.parquet"))[0] if case == "file" else vectors
    words = {
        "missing": "does not exist; pass the folder",
        "file": "is not a folder; pass the folder",
        "empty": "holds no Parquet files",
        "not-embed": "holds Parquet files that embed did not write (mine.parquet); move the other files out",
        "bad-vectors": "vector column is fixed_size_list<element: float>[3]",
    }[case]
    with pytest.raises(TypeError, match="colection"):  # a misspelt keyword, refused before anything is read
        c2v_rag.load_embedded(given, colection="kb", path=store)  # type: ignore[call-arg]
    with pytest.raises((ValueError, FileNotFoundError, FileExistsError)) as refused:
        c2v_rag.load_embedded(given, collection="kb", path=store, show_progress=False)
    assert words in str(refused.value)
    with closing(QdrantClient(path=str(store))) as client:
        assert not client.collection_exists("kb")  # refused before the collection was made


def test_files_from_before_the_char_spans_load_without_them(tmp_path, folder, tiny_variant, ingest_config):
    store, vectors = tmp_path / "store", tmp_path / "vectors"
    c2v_rag.embed(folder, vectors, model=str(tiny_variant), config=ingest_config)
    for file in vectors.glob("*.parquet"):
        table = pq.read_table(file)
        pq.write_table(table.drop_columns(["start_char", "end_char", "source_root"]), file)  # schema metadata kept
    result = c2v_rag.load_embedded(vectors, collection="kb", path=store, show_progress=False)
    assert result.written > 0
    loaded = [p for p, _ in points(store, "kb").values()]
    nodes = [json.loads(p["_node_content"]) for p in loaded]
    assert all(n["start_char_idx"] is None and n["end_char_idx"] is None for n in nodes)
    assert not any(SOURCE_ROOT_KEY in p for p in loaded)
    # An ingest of the documents through their folder embeds nothing and claims the points for it.
    later = c2v_rag.ingest(folder, collection="kb", path=store, model=str(tiny_variant), config=ingest_config)
    assert later.chunks_written == 0
    assert {p[SOURCE_ROOT_KEY] for p, _ in points(store, "kb").values()} == {str(folder.resolve())}


def test_a_sync_after_a_load_deletes_the_documents_gone_from_the_folder(tmp_path, folder, tiny_variant, ingest_config):
    store, vectors = tmp_path / "store", tmp_path / "vectors"
    c2v_rag.embed(folder, vectors, model=str(tiny_variant), config=ingest_config)
    c2v_rag.load_embedded(vectors, collection="kb", path=store, show_progress=False)
    (folder / "note-3.txt").unlink()
    synced = c2v_rag.ingest(
        folder, collection="kb", path=store, model=str(tiny_variant), config=ingest_config, sync=True
    )
    assert synced.documents_deleted == 1 and synced.chunks_written == 0
    sources = {p["metadata"]["source"] for p, _ in points(store, "kb").values()}
    assert str(folder.resolve() / "note-3.txt") not in sources and len(sources) == 8


def test_ingest_refuses_embeds_files_and_names_load(tmp_path, folder, tiny_variant, ingest_config):
    vectors = tmp_path / "vectors"
    c2v_rag.embed(folder, vectors, model=str(tiny_variant), config=ingest_config)
    refusal = r"c2v-rag embed wrote, not documents; store them with `c2v-rag load "
    # Refused as the folder is listed, before the model is even looked for (this one does not exist).
    with pytest.raises(ValueError, match=refusal):
        c2v_rag.ingest(vectors, path=tmp_path / "store", model=str(tmp_path / "no-variant"), config=ingest_config)
    with pytest.raises(ValueError, match=refusal):  # a file named alone, likewise
        c2v_rag.ingest(sorted(vectors.glob("*.parquet"))[0], path=tmp_path / "store", config=ingest_config)
    skipped = c2v_rag.ingest(
        vectors, path=tmp_path / "store", model=str(tiny_variant), config=ingest_config, on_error="continue"
    )
    assert (skipped.chunks, skipped.files_skipped) == (0, 1)


def test_the_command_loads_resumes_and_reports_ctrl_c(tmp_path, folder, tiny_variant, ingest_config, capsys):
    store, vectors = tmp_path / "store", tmp_path / "vectors"
    embedded = c2v_rag.embed(folder, vectors, model=str(tiny_variant), config=ingest_config)
    args = ["load", str(vectors), "--path", str(store), "--collection", "kb", "-q"]
    assert main(args) == 0
    assert f"loaded {embedded.chunks} chunks ({embedded.chunks} written, 0 already there) from 1 Parquet" in (
        capsys.readouterr().out
    )
    assert main(args) == 0
    assert f"({0} written, {embedded.chunks} already there)" in capsys.readouterr().out

    import c2v_rag.rag.ingestion.points as points_module

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(points_module.PointWriter, "write", interrupted)
        with pytest.raises(RunInterrupted, match="interrupted; 0 chunks were loaded into 'fresh'"):
            c2v_rag.load_embedded(vectors, collection="fresh", path=store, show_progress=False)
    with closing(QdrantClient(path=str(store))) as client:
        assert not client.collection_exists("fresh")  # created by the run, left empty: removed


def test_a_folder_embedded_elsewhere_is_searched_with_the_variants_path_here(
    tmp_path, folder, tiny_variant, ingest_config, capsys
):
    import shutil

    there = tmp_path / "cluster" / "variant"  # where the embed ran
    shutil.copytree(tiny_variant, there)
    c2v_rag.embed(folder, tmp_path / "vectors", model=str(there), config=ingest_config)
    shutil.rmtree(there)
    store = tmp_path / "store"
    c2v_rag.load_embedded(tmp_path / "vectors", collection="kb", path=store, show_progress=False)
    with pytest.raises(VariantLoadError, match=rf"records its model as '{there}', which is not found on this machine"):
        c2v_rag.search("tidal pools", collection="kb", path=store, rerank=None)
    assert main(["search", "tidal pools", "--path", str(store), "--collection", "kb", "--rerank", "none"]) == 2
    assert "Pass --model MODEL the same variant's folder" in capsys.readouterr().err
    # The same weights under their path here: accepted (the weights are compared, not the path).
    hits = c2v_rag.search("tidal pools", collection="kb", path=store, model=str(tiny_variant), rerank=None, top_k=1)
    assert len(hits) == 1 and hits[0].id in points(store, "kb")


def test_a_versioned_load_publishes_a_new_models_vectors_behind_the_alias_once_complete(
    tmp_path, folder, tiny_variant, tiny_variant_qwen, ingest_config, capsys
):
    store = tmp_path / "store"
    llama, qwen = tmp_path / "llama", tmp_path / "qwen"
    c2v_rag.embed(folder, llama, model=str(tiny_variant), config=ingest_config, rows_per_file=10)
    c2v_rag.embed(folder, qwen, model=str(tiny_variant_qwen), config=ingest_config, rows_per_file=10)
    handle = c2v_rag.open_collection("kb", path=store)

    first = handle.load_embedded(llama, versioned=True, show_progress=False)
    assert (first.collection, first.alias, first.previous) == ("kb_v1", "kb", None)
    assert handle.recorded()["model"] == str(tiny_variant)  # read through the alias
    # The folder grew (another run of embed): same vectors, so into the alias' collection, nothing to switch.
    again = handle.load_embedded(llama, versioned=True, show_progress=False)
    assert (again.collection, again.alias, again.written) == ("kb_v1", None, 0)

    # Another model's vectors: a new version, stopped after its first batch, left unpublished ...
    import c2v_rag.rag.ingestion.points as points_module

    real_write, calls = points_module.PointWriter.write, []

    def stopped_after_one(self, *args, **kwargs):
        if calls:
            raise KeyboardInterrupt
        calls.append(1)
        return real_write(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(points_module.PointWriter, "write", stopped_after_one)
        with pytest.raises(RunInterrupted, match="were loaded into 'kb_v2'"):
            handle.load_embedded(qwen, versioned=True, batch_size=4, show_progress=False)
    assert handle.recorded()["model"] == str(tiny_variant) and 0 < len(points(store, "kb_v2")) < first.chunks
    # ... which the same load run again resumes, then publishes; the previous version is kept.
    resumed = handle.load_embedded(qwen, versioned=True, show_progress=False)
    assert (resumed.collection, resumed.alias, resumed.previous) == ("kb_v2", "kb", "kb_v1")
    assert resumed.unchanged == len(points(store, "kb_v2")) - resumed.written > 0
    assert handle.recorded()["model"] == str(tiny_variant_qwen) and len(points(store, "kb_v1")) == first.chunks
    assert "alias 'kb' now points at it (it pointed at 'kb_v1', which is kept)" in resumed.summary()
    hits = c2v_rag.search(make_text(3, sentences=1), collection="kb", path=store, rerank=None, top_k=3)
    assert {h.id for h in hits} <= set(points(store, "kb_v2"))  # searched with the new version's model, no flag

    # A plain collection has no alias to publish behind.
    c2v_rag.load_embedded(llama, collection="plain", path=store, show_progress=False)
    with pytest.raises(ValueError, match="'plain' is a plain collection, not an alias"):
        c2v_rag.load_embedded(llama, collection="plain", path=store, versioned=True, show_progress=False)
    capsys.readouterr()
    assert main(["load", str(llama), "--path", str(store), "--collection", "kb", "--versioned", "-q"]) == 0
    assert "into 'kb_v3' at" in (out := capsys.readouterr().out) and "(it pointed at 'kb_v2', which is kept)" in out


def test_a_folder_an_embed_is_writing_is_refused_until_it_ends(tmp_path, folder, tiny_variant, ingest_config):
    from c2v_rag.rag import StoreLockedError
    from c2v_rag.rag.ingestion.parquet_folder import EmbedFolder

    vectors = tmp_path / "vectors"
    c2v_rag.embed(folder, vectors, model=str(tiny_variant), config=ingest_config)
    with EmbedFolder.locked(vectors):  # as a run of embed into it holds it
        with pytest.raises(
            StoreLockedError, match="another embed or load is using .*; load it once that run has ended"
        ):
            c2v_rag.load_embedded(vectors, collection="kb", path=tmp_path / "store", show_progress=False)
    assert c2v_rag.load_embedded(vectors, collection="kb", path=tmp_path / "store", show_progress=False).written > 0
