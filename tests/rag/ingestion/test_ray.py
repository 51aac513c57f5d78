"""The Ray engine on a real local Ray cluster (2 CPUs), checked against the in-process engine.

Every Ray run here is compared with an in-process run of the same input: the same point ids, the
same payloads, vectors within float32 tolerance. One cluster serves the module; each Ray run
starts its own actors, so the module keeps to a few runs.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from contextlib import closing

import numpy as np
import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity", "ray", "ray.data", "pyarrow", "qdrant_edge"):
    pytest.importorskip(_module)

import pyarrow as pa
import pyarrow.parquet as pq
import ray
from rag_helpers import compare, make_text, points, ray_console_on_stderr

import c2v_rag
from c2v_rag.rag import CollectionMismatchError, QdrantConfig, RayOptions, load_model
from c2v_rag.rag.ingestion.ray_engine import RayIngestRun
from c2v_rag.store.backends import store_kind

ACTOR_CLASS = "ChunkEmbedActor"
# Two actors, small batches (several per actor), one reading/chunking task: the module's runs fit a
# 2-CPU cluster and little memory.
TWO_ACTORS = RayOptions(actors=2, docs_per_batch=2, chunk_tasks=1)


@pytest.fixture(scope="module", autouse=True)
def ray_cluster():
    # Workers keep the driver's niceness (Ray would renice them to 15 otherwise, which starves
    # them on a shared machine) and find c2v_rag where the driver does.
    os.environ.setdefault("RAY_worker_niceness", "0")
    # address="local": a cluster of its own, even while test_ray_two_nodes' Cluster (which registers itself as this
    # machine's cluster, for ray.init() to join) runs in another pytest-xdist worker.
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture
def sources(tmp_path):
    """A folder with every format the engines read: .txt, .md, .jsonl and .parquet."""
    folder = tmp_path / "sources"
    folder.mkdir()
    for i in range(3):
        (folder / f"note-{i}.txt").write_text(make_text(100 + i))
    # Plain text: its "#" line is a root prompt, not a heading (no section, and no lead names it).
    (folder / "note-0.txt").write_text(f"Setup notes\n\n{make_text(100)}\n\n# apt install tides\n\n{make_text(101)}")
    (folder / "readme.md").write_text("# Title\n\n" + make_text(200, sentences=9) + "\n\n## Usage\n\n" + make_text(201))
    with (folder / "records.jsonl").open("w") as handle:
        for i in range(4):
            handle.write(json.dumps({"id": f"rec-{i}", "text": make_text(300 + i), "year": 2000 + i}) + "\n")
    pq.write_table(
        pa.table(
            {
                "id": [f"row-{i}" for i in range(4)],
                "text": [make_text(400 + i) for i in range(4)],
                "lang": ["en", "de", "en", "fr"],
            }
        ),
        folder / "table.parquet",
    )
    return folder


def test_ray_ingest_equals_the_local_one_then_reruns_and_replaces(
    tmp_path, sources, tiny_variant, ingest_config, monkeypatch, capsys, caplog
):
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    kwargs = dict(collection="kb", model=str(tiny_variant), config=ingest_config)
    expected = c2v_rag.ingest(sources, path=local, **kwargs)
    seen: list[tuple[str, float, float]] = []  # each row's document, its weight on the bar, and the bar's total
    ray_bars: set[bool] = set()  # whether Ray Data's own bars were on as the rows came in
    real_count = RayIngestRun._count

    def count(self, row, progress):
        seen.append((row["doc_id"], row["weight"], progress.total))
        ray_bars.add(ray.data.DataContext.get_current().enable_progress_bars)
        return real_count(self, row, progress)

    monkeypatch.setattr(RayIngestRun, "_count", count)
    monkeypatch.setattr(ray.data.DataContext.get_current(), "enable_progress_bars", True)  # as a user's Ray has it
    with ray_console_on_stderr():
        capsys.readouterr()
        result = c2v_rag.ingest(sources, path=on_ray, engine="ray", ray=TWO_ACTORS, **kwargs)
        # Ray Data's notes on the driver (the dataset's start, its plan, its end) stayed off the console.
        assert "Execution plan of Dataset" not in capsys.readouterr().err
    # Ray Data's bars were off for the run (they garbled the run's own), and are as the user had them after.
    assert ray_bars == {False} and ray.data.DataContext.get_current().enable_progress_bars is True
    monkeypatch.undo()
    # The bar weighs the files' bytes as the in-process bar does; every document comes back with its share of its
    # file (a record or a row by its span), in whatever order the actors finish: the shares add up to the total.
    files = {f.resolve().as_posix(): f.stat().st_size + 1024 for f in sources.iterdir()}
    assert len(seen) == 12 and {total for _, _, total in seen} == {sum(files.values())}
    assert sum(weight for _, weight, _ in seen) == pytest.approx(sum(files.values()))
    whole = [(doc_id, weight) for doc_id, weight, _ in seen if doc_id.endswith((".txt", ".md"))]
    assert len(whole) == 4 and all(weight == files[doc_id] for doc_id, weight in whole)  # one document, the file
    got, want = points(on_ray), points(local)
    difference = compare(got, want)
    print(
        f"\nray vs local: {result.documents}/{expected.documents} documents, {len(got)}/{len(want)} points, "
        f"ids equal, payloads equal, max |vector difference| {difference:.2e}"
    )
    assert (result.documents, result.chunks, result.chunks_written) == (12, expected.chunks, expected.chunks)
    assert result.ok and difference < 1e-5
    assert {p["metadata"].get("lang") for p, _ in got.values()} >= {"en", "de", "fr"}  # Parquet columns

    # A re-run adds nothing. With c2v_rag logging at INFO (the CLI's -v), Ray's notes show.
    caplog.set_level(logging.INFO, logger="c2v_rag")
    with ray_console_on_stderr():
        again = c2v_rag.ingest(sources, path=on_ray, engine="ray", ray=TWO_ACTORS, **kwargs)
        assert "Execution plan of Dataset" in capsys.readouterr().err
    assert (again.chunks_written, again.chunks_unchanged) == (0, expected.chunks)
    assert sorted(points(on_ray)) == sorted(want)

    # A changed document replaces its chunks; here the one actor writes itself (the worker path).
    (sources / "note-1.txt").write_text(make_text(999))
    c2v_rag.ingest(sources, path=local, **kwargs)
    one_writer = RayOptions(actors=1, write="workers", chunk_tasks=1)
    changed = c2v_rag.ingest(sources, path=on_ray, engine="ray", ray=one_writer, **kwargs)
    assert changed.ok and changed.chunks_written > 0 and changed.chunks_unchanged > 0
    assert compare(points(on_ray), points(local)) < 1e-5


def test_ray_reads_other_suffixes_as_text_office_files_and_archives_as_the_local_engine_does(
    tmp_path, tiny_variant, ingest_config
):
    """text_suffixes (the empty one, files without a suffix, compressed too), the Office 97-2003 readers and
    archives (text_suffixes inside them too) travel to the workers in the read options and the registry; a file a
    worker skips is counted and named in the result, as the local engine's are."""
    import gzip
    import zipfile

    pytest.importorskip("olefile")
    from legacy_office_files import write_doc, write_msg

    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "tides.py").write_text('def height(t):\n    """The tide\'s height at hour t."""\n    return 2 * t\n')
    (folder / "notes.txt").write_text(make_text(7))
    (folder / "INTRO").write_text(make_text(10))
    (folder / "NEWS.gz").write_bytes(gzip.compress(make_text(11).encode()))
    write_doc(folder / "report.doc", [("Tide report", 2, None), (make_text(8), 0, None)])
    write_msg(folder / "mail.msg")
    with zipfile.ZipFile(folder / "export.zip", "w") as archive:
        archive.writestr("src/flow.py", "def flow(t):\n    return -t\n")
        archive.writestr("guide.md", make_text(9))
    (folder / "scan.pdf").write_bytes(b"%PDF-1.4 cut short")  # listed, then skipped by whoever reads it
    common = dict(model=str(tiny_variant), config=ingest_config, text_suffixes=[".py", ""], on_error="continue")
    kwargs = dict(collection="kb", **common)
    expected = c2v_rag.ingest(folder, path=tmp_path / "local", **kwargs)
    result = c2v_rag.ingest(folder, path=tmp_path / "ray", engine="ray", ray=TWO_ACTORS, **kwargs)
    assert expected.documents == result.documents == 8 and result.ok
    embedded = c2v_rag.embed(folder, tmp_path / "vectors", engine="ray", ray=TWO_ACTORS, **common)
    for run in (expected, result, embedded):
        assert (run.files_skipped, [s.where for s in run.skipped]) == (1, [str(folder / "scan.pdf")])
        assert "; skipped 1 file" in run.summary()
    got, want = points(tmp_path / "ray"), points(tmp_path / "local")
    assert compare(got, want) < 1e-5
    names = {"tides.py", "notes.txt", "report.doc", "mail.msg", "flow.py", "guide.md", "INTRO", "NEWS.gz"}
    assert {p["metadata"]["file_name"] for p, _ in got.values()} == names


def _every_point(path, collection: str = "kb") -> dict[str, tuple[dict, np.ndarray, tuple]]:
    """id -> (payload, dense vector, sparse (indices, values)) of a store of either embedded engine
    (detected from the directory, as c2v_rag opens it)."""
    with closing(QdrantConfig.resolve(path=path).connect()) as client:
        found, offset = {}, None
        while True:
            batch, offset = client.scroll(collection, limit=256, offset=offset, with_payload=True, with_vectors=True)
            for p in batch:
                sparse = next(v for v in p.vector.values() if hasattr(v, "indices"))
                dense = next(v for v in p.vector.values() if not hasattr(v, "indices"))
                found[str(p.id)] = (
                    p.payload,
                    np.asarray(dense, dtype=np.float32),
                    (list(sparse.indices), np.asarray(sparse.values, dtype=np.float32)),
                )
            if offset is None:
                return found


def test_ray_writes_an_edge_store_from_the_driver_and_from_the_one_writing_actor(
    tmp_path, sources, tiny_variant, ingest_config
):
    """Both of Ray's write modes on Qdrant Edge store what the in-process engine stores in local mode:
    the driver writing the actors' vectors, and one actor writing itself (Edge, like local mode, lets
    one process hold the directory, so the driver hands the store over and takes it back)."""
    kwargs = dict(collection="kb", model=str(tiny_variant), config=ingest_config, sparse="bm25")
    c2v_rag.ingest(sources, path=tmp_path / "local", **kwargs)
    want = _every_point(tmp_path / "local")
    query = make_text(300)[:80]
    expected_hits = [h.id for h in c2v_rag.search(query, top_k=5, path=tmp_path / "local", collection="kb")]
    one_writer = RayOptions(actors=1, write="workers", chunk_tasks=1)
    for name, options in (("driver", TWO_ACTORS), ("workers", one_writer)):
        store = tmp_path / f"edge-{name}"
        result = c2v_rag.ingest(sources, path=store, store="edge", engine="ray", ray=options, **kwargs)
        got = _every_point(store)
        assert result.ok and result.chunks_written == len(want) == len(got), name
        assert store_kind(store) == "edge"
        for pid, (payload, dense, (indices, values)) in want.items():
            assert got[pid][0] == payload, (name, pid)
            assert float(np.abs(got[pid][1] - dense).max()) < 1e-5, (name, pid)
            assert got[pid][2][0] == indices and np.allclose(got[pid][2][1], values, atol=1e-6), (name, pid)
        # The store was handed back: a search opens it and ranks what the actors wrote as local mode does.
        assert [h.id for h in c2v_rag.search(query, top_k=5, path=store, collection="kb")] == expected_hits, name
    # A changed document through the writing actor replaces its chunks on Edge as in local mode.
    (sources / "note-1.txt").write_text(make_text(999))
    c2v_rag.ingest(sources, path=tmp_path / "local", **kwargs)
    changed = c2v_rag.ingest(
        sources, path=tmp_path / "edge-workers", store="edge", engine="ray", ray=one_writer, **kwargs
    )
    assert changed.ok and changed.chunks_written > 0 and changed.chunks_unchanged > 0
    want, got = _every_point(tmp_path / "local"), _every_point(tmp_path / "edge-workers")
    assert sorted(got) == sorted(want)
    assert all(got[p][0] == want[p][0] and np.abs(got[p][1] - want[p][1]).max() < 1e-5 for p in want)
    with pytest.raises(ValueError, match="needs actors=1"):
        c2v_rag.ingest(
            sources, path=tmp_path / "edge-workers", engine="ray", ray=RayOptions(actors=2, write="workers"), **kwargs
        )


def test_ray_refuses_a_mismatched_collection_before_writing(tmp_path, tiny_variant, corpus, ingest_config):
    c2v_rag.ingest(corpus[:2], path=tmp_path, collection="kb", model=str(tiny_variant), config=ingest_config)
    before = points(tmp_path)
    with pytest.raises(CollectionMismatchError, match="distance"):
        c2v_rag.ingest(
            corpus,
            path=tmp_path,
            collection="kb",
            model=str(tiny_variant),
            config=ingest_config,
            qdrant=QdrantConfig(distance="dot"),
            engine="ray",
        )
    with pytest.raises(ValueError, match="sync=True is not supported with engine='ray'"):
        c2v_rag.ingest(
            [tmp_path],
            collection="kb2",
            path=tmp_path / "other",
            model=str(tiny_variant),
            config=ingest_config,
            sync=True,
            engine="ray",
        )
    with pytest.raises(ValueError, match="needs actors=1"):
        c2v_rag.ingest(
            corpus,
            path=tmp_path,
            collection="kb",
            model=str(tiny_variant),
            config=ingest_config,
            engine="ray",
            ray=RayOptions(actors=2, write="workers"),
        )
    assert points(tmp_path).keys() == before.keys()


@pytest.mark.parametrize("context", ["headings", "sections"])
def test_embed_writes_the_same_ids_texts_and_vectors_on_both_engines(
    tmp_path, sources, tiny_variant, ingest_config, context
):
    # Chunks after a document's first lead with its opening and the headings above them on both engines (the Ray
    # chunking tasks too; "sections" also cuts them at headings there), and the decoder reads 12 tokens of each on
    # both (the actors' EmbedJob carries it).
    ingest_config = ingest_config.model_copy(update={"chunk_context": context, "decoder_max_length": 12})
    local = c2v_rag.embed(sources, tmp_path / "local", model=str(tiny_variant), config=ingest_config)
    on_ray = c2v_rag.embed(
        sources,
        tmp_path / "ray",
        model=str(tiny_variant),
        config=ingest_config,
        engine="ray",
        ray=RayOptions(actors=1, docs_per_batch=3, chunk_tasks=1),
    )
    tables = [pq.read_table(r.files).sort_by("id") for r in (local, on_ray)]
    assert (local.chunks, local.documents) == (on_ray.chunks, on_ray.documents) == (tables[0].num_rows, 12)
    for column in ("id", "doc_id", "chunk_index", "text", "metadata", "start_char", "end_char", "source_root"):
        assert tables[0].column(column).to_pylist() == tables[1].column(column).to_pylist(), column
    texts, indexes = tables[1].column("text").to_pylist(), tables[1].column("chunk_index").to_pylist()
    assert any(i and t.startswith("Title\n") for t, i in zip(texts, indexes)), "no later chunk led by its title"
    assert any(t.startswith("Title › Usage\n") for t in texts), "no chunk led by the heading it lies under"
    # Each chunk knows its section on both engines (the metadata above are equal): Markdown's, not plain text's.
    sections = {
        (json.loads(metadata).get("section"), doc_id.rsplit("/", 1)[-1])
        for metadata, doc_id in zip(tables[1].column("metadata").to_pylist(), tables[1].column("doc_id").to_pylist())
    }
    assert ("Usage", "readme.md") in sections and ("apt install tides", "note-0.txt") not in sections
    assert not any("apt install" in t.split("\n\n", 1)[0] for t in texts)
    vectors = [np.asarray(t.column("vector").to_pylist(), dtype=np.float32) for t in tables]
    assert pa.types.is_fixed_size_list(tables[1].schema.field("vector").type)
    assert float(np.abs(vectors[0] - vectors[1]).max()) < 1e-5
    model = load_model(str(tiny_variant), device="cpu")
    cut = model.encode_documents(texts, normalize_embeddings=True, max_length=12)
    assert float(np.abs(vectors[1] - cut).max()) < 1e-5
    assert not np.allclose(cut, model.encode_documents(texts, normalize_embeddings=True), atol=1e-3)
    # The rows are what ingest stores: the same point ids and vectors.
    c2v_rag.ingest(sources, path=tmp_path / "store", collection="kb", model=str(tiny_variant), config=ingest_config)
    stored = points(tmp_path / "store")
    assert sorted(stored) == tables[0].column("id").to_pylist()
    assert np.abs(np.stack([stored[i][1] for i in tables[0].column("id").to_pylist()]) - vectors[0]).max() < 1e-5
    # Loaded, Ray's files make the points the ingest made (but for the document hash only an ingest records).
    c2v_rag.load_embedded(tmp_path / "ray", path=tmp_path / "store", collection="loaded", show_progress=False)
    loaded = points(tmp_path / "store", "loaded")
    assert {p: payload for p, (payload, _) in loaded.items()} == {
        p: {k: v for k, v in payload.items() if k != "_doc_hash"} for p, (payload, _) in stored.items()
    }
    # Ray resumes a folder a local run began: it embeds only the chunks no file holds, and the folder ends as one
    # whole run's.
    begun = c2v_rag.embed(
        sorted(sources.glob("*.txt")), tmp_path / "mixed", model=str(tiny_variant), config=ingest_config
    )
    resumed = c2v_rag.embed(
        sources, tmp_path / "mixed", model=str(tiny_variant), config=ingest_config, engine="ray", ray=TWO_ACTORS
    )
    mixed = pq.read_table(tmp_path / "mixed").sort_by("id")
    assert (begun.chunks, resumed.chunks, mixed.num_rows) == (begun.chunks, local.chunks - begun.chunks, local.chunks)
    # Its result counts what the local engine's would: every document read, and the chunks the folder held.
    assert (resumed.documents, resumed.unchanged) == (local.documents, begun.chunks)
    # A document given twice is read once and counted as a repeat, its rows written once, on both engines.
    twice = [{"id": "d", "text": make_text(1)}, {"id": "e", "text": make_text(2)}, {"id": "d", "text": make_text(1)}]
    counts = {}
    for engine, extra in (("local", {}), ("ray", {"engine": "ray", "ray": TWO_ACTORS})):
        got = c2v_rag.embed(twice, tmp_path / f"twice-{engine}", model=str(tiny_variant), config=ingest_config, **extra)
        rows = pq.read_table(got.files).column("id").to_pylist()
        counts[engine] = (got.documents, got.duplicate_documents, got.chunks, len(rows), len(set(rows)))
    assert counts["ray"] == counts["local"] and counts["local"][:2] == (2, 1)
    # An id given twice with other content is refused on both engines, as ingest refuses it: the second text would be
    # lost.
    clash = [{"id": "d", "text": make_text(1)}, {"id": "d", "text": make_text(3)}]
    for engine, extra in (("local", {}), ("ray", {"engine": "ray", "ray": TWO_ACTORS})):
        with pytest.raises(ValueError, match="document id 'd' appears twice in the input with different content"):
            c2v_rag.embed(clash, tmp_path / f"clash-{engine}", model=str(tiny_variant), config=ingest_config, **extra)
    # With on_error="continue" both keep one, write none of the other's rows, and go on: the local engine the first
    # in the input, Ray the one met first (its batches finish in any order), so either the input's or the swapped
    # input's result; the second can be in the first's batch or in another.
    clash.append({"id": "e", "text": make_text(2)})
    runs = {
        "local": (clash, {}),
        "swapped": ([clash[1], clash[0], clash[2]], {}),
        "ray": (clash, {"engine": "ray", "ray": TWO_ACTORS}),
    }
    kept, stored = {}, {}
    for name, (docs, extra) in runs.items():
        common = dict(model=str(tiny_variant), config=ingest_config, on_error="continue", **extra)
        got = c2v_rag.embed(docs, tmp_path / f"kept-{name}", **common)
        kept[name] = (got.documents, got.duplicate_documents, sorted(pq.read_table(got.files).column("id").to_pylist()))
        # So does ingest, where the driver writes; the skip is counted and named as the local engine's.
        got = c2v_rag.ingest(docs, path=tmp_path / f"store-{name}", collection="kb", **common)
        where = [s.where for s in got.skipped]
        stored[name] = (got.documents, got.records_skipped, where, sorted(points(tmp_path / f"store-{name}")))
    assert kept["local"][:2] == (2, 0) and kept["local"] != kept["swapped"]
    assert kept["ray"] in (kept["local"], kept["swapped"])
    assert stored["local"][:3] == (2, 1, ["the document 'd'"]) and stored["ray"] in (stored["local"], stored["swapped"])
    assert stored["local"][3] == kept["local"][2]
    assert f"{local.chunks} chunks ({resumed.chunks} written, {begun.chunks} already there)" in resumed.summary()
    assert mixed.column("id").to_pylist() == tables[0].column("id").to_pylist()
    assert float(np.abs(np.asarray(mixed.column("vector").to_pylist(), dtype=np.float32) - vectors[0]).max()) < 1e-5
    assert pq.read_schema(resumed.files[0]).metadata == pq.read_schema(begun.files[0]).metadata  # the run's record


def _embed_actors() -> list[dict]:
    from ray._private import state  # the GCS actor table; ray.util.state needs the dashboard

    return [a for a in state.actors().values() if ACTOR_CLASS in a.get("ActorClassName", "")]


def test_a_killed_actor_is_restarted_and_every_chunk_is_stored_once(tmp_path, tiny_variant, ingest_config):
    docs = [{"id": f"doc-{i}", "text": make_text(i, sentences=4), "metadata": {"n": i}} for i in range(40)]
    kwargs = dict(collection="kb", model=str(tiny_variant), config=ingest_config)
    clean = c2v_rag.ingest(docs, path=tmp_path / "clean", **kwargs)
    known = {a["ActorID"] for a in _embed_actors()}
    outcome: dict = {}

    def run() -> None:
        outcome["result"] = c2v_rag.ingest(
            docs,
            path=tmp_path / "killed",
            engine="ray",
            ray=RayOptions(actors=2, docs_per_batch=1, chunk_tasks=1),
            **kwargs,
        )

    thread = threading.Thread(target=run)
    thread.start()
    victim = None
    deadline = time.monotonic() + 300
    while victim is None and thread.is_alive() and time.monotonic() < deadline:
        alive = [a for a in _embed_actors() if a["ActorID"] not in known and a["State"] == "ALIVE" and a.get("Pid")]
        if alive:
            victim = alive[0]
            os.kill(victim["Pid"], signal.SIGKILL)  # the actor dies with its batch in flight
        time.sleep(0.02)
    killed_mid_run = victim is not None and thread.is_alive()
    thread.join(timeout=600)
    assert killed_mid_run, "the run ended before an actor could be killed"
    restarts = next(a for a in _embed_actors() if a["ActorID"] == victim["ActorID"])["NumRestarts"]

    stored, reference = points(tmp_path / "killed"), points(tmp_path / "clean")
    keys = [(p["doc_id"], p["metadata"]["chunk_index"]) for p, _ in stored.values()]
    duplicates = len(keys) - len(set(keys))
    lost = len(set(reference) - set(stored))
    print(
        f"\nkilled actor {victim['ActorID'][:12]} (pid {victim['Pid']}), restarted {restarts}x: clean run "
        f"{len(reference)} points, killed run {len(stored)} points ({outcome['result'].chunks_written} written); "
        f"duplicates {duplicates}, lost {lost}"
    )
    assert restarts >= 1
    assert outcome["result"].ok and outcome["result"].chunks == clean.chunks
    assert duplicates == 0 and lost == 0 and compare(stored, reference) < 1e-5


def test_ray_adds_to_a_collection_at_the_part_weights_it_recorded(tmp_path, sources, tiny_model_factory, ingest_config):
    """A variant whose part weights changed since the collection was made: the actors embed at the recorded ones,
    as the in-process engine does (tests/rag/admin/test_reindex_keeps.py)."""
    from c2v_rag import Causal2Vec

    variant = tmp_path / "variant"
    tiny_model_factory("llama", max_length=128, normalize_parts=True, encoder_share=0.5).save_pretrained(variant)
    kwargs = dict(collection="kb", model=str(variant), config=ingest_config)
    c2v_rag.ingest(sources, path=tmp_path / "local", **kwargs)  # at the weights the variant has now
    c2v_rag.ingest([{"id": "first", "text": make_text(7)}], path=tmp_path / "ray", **kwargs)
    model = Causal2Vec.from_pretrained(variant, device="cpu")
    model.set_readout(part_weights={"encoder": 0.7, "eos": 0.3})
    model.save_pretrained(variant)  # the same weights, read otherwise from now on
    c2v_rag.ingest(sources, path=tmp_path / "ray", engine="ray", ray=TWO_ACTORS, **kwargs)
    got = {pid: point for pid, point in points(tmp_path / "ray").items() if point[0]["doc_id"] != "first"}
    assert compare(got, points(tmp_path / "local")) < 1e-5
