"""``embed`` into a folder earlier runs wrote: a stopped run resumes to what one whole run writes, and a folder of
other settings, of files ``embed`` did not write, or with a file cut short is refused before any work."""

from __future__ import annotations

import json

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from rag_helpers import make_text  # noqa: E402

import c2v_rag  # noqa: E402
from c2v_rag.rag import EmbedInterrupted  # noqa: E402
from c2v_rag.rag.ingestion.parquet_folder import RECORD_KEY  # noqa: E402
from c2v_rag.rag.ingestion.sinks import ParquetSink  # noqa: E402
from c2v_rag.store.point_id_set import PointIdSet  # noqa: E402


@pytest.fixture
def docs():
    """Twelve documents of a few chunks each at chunk_size=24."""
    return [{"id": f"doc-{i}", "text": make_text(i, sentences=5), "metadata": {"n": i}} for i in range(12)]


def stopped_after(docs: list[dict], count: int):
    """The documents, then a Ctrl-C once ``count`` of them have been read."""
    yield from docs[:count]
    raise KeyboardInterrupt


def wrapped_stop_after(docs: list[dict], count: int):
    """As :func:`stopped_after`, but the Ctrl-C reaches the run as a library's own error raised from it, as Ctrl-C in
    pydantic-core's serializer (LlamaIndex's node dump) does: `Error calling function `custom_model_dump``."""
    yield from docs[:count]
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as interrupt:
        raise RuntimeError("Error calling function `custom_model_dump`: KeyboardInterrupt") from interrupt


def folder_rows(folder) -> dict[str, dict]:
    """Every row of the folder's Parquet files (as a reader of the folder sees them), by point id; an id twice fails."""
    table = pq.read_table(folder)
    rows = table.to_pylist()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "a chunk written twice"
    return {r["id"]: r for r in rows}


def test_a_stopped_embed_resumes_to_the_rows_one_whole_run_writes(tmp_path, docs, tiny_variant, ingest_config):
    whole = c2v_rag.embed(docs, tmp_path / "whole", model=str(tiny_variant), config=ingest_config)
    out = tmp_path / "stopped"
    with pytest.raises(EmbedInterrupted) as stopped:  # a KeyboardInterrupt, with what was written
        c2v_rag.embed(stopped_after(docs, 7), out, model=str(tiny_variant), config=ingest_config, rows_per_file=10)
    before = folder_rows(out)
    assert 0 < len(before) == stopped.value.result.chunks < whole.chunks  # the batches embedded before it were kept
    assert sorted(stopped.value.result.files) == sorted(str(f) for f in out.glob("*.parquet"))
    assert f"interrupted; {len(before)} chunks were written to {out}. Re-run the same embed" in str(stopped.value)
    assert not list(out.glob("*.inprogress"))  # the open file was closed and named
    first_files = sorted(out.glob("*.parquet"))

    resumed = c2v_rag.embed(docs, out, model=str(tiny_variant), config=ingest_config, rows_per_file=10)
    assert (resumed.unchanged, resumed.chunks) == (len(before), whole.chunks - len(before))
    assert f"{whole.chunks} chunks ({whole.chunks - len(before)} written, {len(before)} already there)" in (
        resumed.summary()
    )
    assert all(f in sorted(out.glob("*.parquet")) for f in first_files)  # nothing rewritten
    assert not set(resumed.files) & {str(f) for f in first_files}  # new files after the old ones
    after, reference = folder_rows(out), folder_rows(tmp_path / "whole")
    assert after.keys() == reference.keys()
    for point, row in reference.items():
        assert {k: after[point][k] for k in ("doc_id", "chunk_index", "text", "metadata")} == {
            k: row[k] for k in ("doc_id", "chunk_index", "text", "metadata")
        }
    vectors = np.asarray([after[p]["vector"] for p in reference], dtype=np.float32)
    expected = np.asarray([row["vector"] for row in reference.values()], dtype=np.float32)
    assert float(np.abs(vectors - expected).max()) < 1e-5

    again = c2v_rag.embed(docs, out, model=str(tiny_variant), config=ingest_config)  # a third run: nothing to do
    assert (again.chunks, again.unchanged, again.files) == (0, whole.chunks, [])


def test_a_ctrl_c_a_library_wrapped_stops_the_embed_as_a_plain_one_does(tmp_path, docs, tiny_variant, ingest_config):
    """Seen in CI: a Ctrl-C during a node dump ended `c2v-rag embed` with exit code 2 and pydantic's message."""
    runs = {}
    for name, stop in (("plain", stopped_after), ("wrapped", wrapped_stop_after)):
        with pytest.raises(EmbedInterrupted) as stopped:
            c2v_rag.embed(stop(docs, 7), tmp_path / name, model=str(tiny_variant), config=ingest_config)
        runs[name] = stopped.value.result.chunks
        assert runs[name] == len(folder_rows(tmp_path / name)) > 0
    # Nothing more is embedded after a wrapped Ctrl-C than after a plain one (the batch being read is dropped).
    assert runs["wrapped"] == runs["plain"]


def test_each_file_records_the_run_that_wrote_it(tmp_path, docs, tiny_variant, ingest_config):
    result = c2v_rag.embed(docs[:3], tmp_path / "out", model=str(tiny_variant), config=ingest_config)
    record = json.loads(pq.read_schema(result.files[0]).metadata[RECORD_KEY])
    assert (record["chunk_size"], record["chunk_overlap"], record["model"]) == (24, 4, str(tiny_variant))
    assert record["quantize"] == "none" and record["weights"]  # the model's fingerprint, as a collection's


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"chunk_size": 32}, "chunk_size=24"),
        ({"config": {"task": "STSBenchmark"}}, "document_prompt="),
        ({"config": {"decoder_max_length": 12}}, "decoder_max_length"),
    ],
)
def test_a_run_with_other_settings_is_refused_before_it_embeds(
    tmp_path, docs, tiny_variant, ingest_config, change, named
):
    out = tmp_path / "out"
    first = c2v_rag.embed(docs[:3], out, model=str(tiny_variant), config=ingest_config)
    kwargs = {k: v for k, v in change.items() if k != "config"}
    config = ingest_config.model_copy(update=change.get("config", {}))
    with pytest.raises(ValueError, match=named) as refused:
        c2v_rag.embed(docs, out, model=str(tiny_variant), config=config, **kwargs)
    assert "pass a new folder" in str(refused.value)
    assert sorted(str(f) for f in out.glob("*.parquet")) == first.files  # nothing written


def test_a_folder_embed_did_not_write_or_with_a_file_cut_short_is_refused(tmp_path, docs, tiny_variant, ingest_config):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    pq.write_table(pa.table({"id": ["a"], "text": ["b"]}), foreign / "data.parquet")
    with pytest.raises(FileExistsError, match=r"embed did not write \(data.parquet\)"):
        c2v_rag.embed(docs, foreign, model=str(tiny_variant), config=ingest_config)

    out = tmp_path / "out"
    c2v_rag.embed(docs[:3], out, model=str(tiny_variant), config=ingest_config)
    cut = out / "part-ray-000.parquet"  # a file another writer (Ray) was killed while writing
    cut.write_bytes((out / "part-00000.parquet").read_bytes()[:200])
    with pytest.raises(ValueError, match="part-ray-000.parquet cannot be read as Parquet") as refused:
        c2v_rag.embed(docs, out, model=str(tiny_variant), config=ingest_config)
    assert "Delete it" in str(refused.value)
    cut.unlink()
    # The hidden file a local run killed outright leaves is deleted, and its chunks embedded again.
    left = out / ".part-00001.parquet.inprogress"
    left.write_bytes(b"PAR1 cut short")
    resumed = c2v_rag.embed(docs, out, model=str(tiny_variant), config=ingest_config)
    assert not left.exists() and resumed.chunks > 0 and resumed.files[0].endswith("part-00001.parquet")
    assert len(folder_rows(out)) == resumed.chunks + resumed.unchanged


def test_the_local_writer_closes_a_file_that_has_been_open_long_enough(tmp_path, tiny_model, ingest_config):
    from c2v_rag.rag.embedding import Embedder
    from c2v_rag.rag.ingestion.pipeline import BatchEmbedder, ChunkBatch
    from c2v_rag.rag.ingestion.points import PendingChunk

    embedder = BatchEmbedder(Embedder.for_documents(tiny_model, ingest_config))

    def batch(i: int) -> ChunkBatch:
        chunk = PendingChunk(f"p{i}", f"text {i}", {"doc_id": f"d{i}", "metadata": {"chunk_index": 0}}, None)
        return ChunkBatch.of_documents([(f"d{i}", [chunk], None)])

    for seconds, files in ((3600.0, 1), (0.0, 3)):
        folder = tmp_path / f"s{seconds:g}"
        folder.mkdir()
        sink = ParquetSink(folder, 1000, record={}, seconds_per_file=seconds)
        for i in range(3):
            sink.write(embedder.embed(batch(i), sink))
        sink.close()
        assert (len(sink.files), pq.read_table(folder).num_rows) == (files, 3)


def test_a_second_run_into_a_folder_another_is_writing_is_refused_at_once(tmp_path, docs, tiny_variant, ingest_config):
    import subprocess
    import sys

    from c2v_rag.rag import StoreLockedError

    out = tmp_path / "out"
    out.mkdir()
    # Another process holds the folder's lock, as a running embed does.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from filelock import FileLock; lock = FileLock(sys.argv[1]); lock.acquire(); "
            "print('held', flush=True); time.sleep(120)",
            str(out / ".embed.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreLockedError, match=f"another embed \\(or a load\\) is using {out}"):
            c2v_rag.embed(docs, out, model=str(tiny_variant), config=ingest_config)
        assert not list(out.glob("*.parquet"))
    finally:
        holder.kill()
        holder.wait()
    assert c2v_rag.embed(docs, out, model=str(tiny_variant), config=ingest_config).chunks > 0  # released


def test_float_and_int8_runs_of_one_model_share_a_folder_as_they_share_a_collection(
    tmp_path, docs, tiny_variant, ingest_config, monkeypatch
):
    from c2v_rag.core.devices import INT8_METHOD, int8_runtime_installed

    if not int8_runtime_installed():
        pytest.skip("needs the int8 extra (onnx, onnxruntime)")
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "cache"))  # the int8 graphs, out of the user's cache
    out = tmp_path / "out"
    kwargs = dict(model=str(tiny_variant), config=ingest_config)
    c2v_rag.embed(docs[:4], out, quantize="none", **kwargs)
    c2v_rag.embed(docs[:8], out, quantize="int8", **kwargs)  # the other kind of the same model: added
    kinds = {json.loads(pq.read_schema(f).metadata[RECORD_KEY])["quantize"] for f in out.glob("*.parquet")}
    assert kinds == {"none", INT8_METHOD}
    third = c2v_rag.embed(docs, out, **kwargs)  # a third run reads a folder of both kinds
    assert third.chunks > 0 and len(folder_rows(out)) == third.chunks + third.unchanged


def test_files_a_stopped_ray_run_left_cut_short_are_deleted_and_whole_ones_kept(tmp_path, docs, tiny_variant):
    from c2v_rag.rag.ingestion.parquet_folder import EmbedFolder

    out = tmp_path / "out"
    c2v_rag.embed(docs[:3], out, model=str(tiny_variant), chunk_size=24, chunk_overlap=4, show_progress=False)
    folder = EmbedFolder.read(out)  # as the Ray run found it
    earlier = out / "part-00000.parquet"
    whole, cut = out / "ray-000000.parquet", out / "ray-000001.parquet"  # what two of its tasks wrote
    whole.write_bytes(earlier.read_bytes())
    cut.write_bytes(earlier.read_bytes()[:300])
    assert folder.drop_cut_files() == [whole]
    assert sorted(out.glob("*.parquet")) == [earlier, whole]  # the earlier run's file is not touched


def test_a_ctrl_c_right_after_a_batch_is_written_still_counts_it(tmp_path, tiny_model, ingest_config, monkeypatch):
    """The count a stopped run reports is what its files hold, even when the Ctrl-C lands between a batch's write
    and its count (seen once in a CLI run: 'interrupted; 12 chunks were written' beside a file of 16)."""
    from c2v_rag.rag.embedding import Embedder
    from c2v_rag.rag.ingestion.pipeline import BatchEmbedder, ChunkBatch
    from c2v_rag.rag.ingestion.points import PendingChunk

    embedder = BatchEmbedder(Embedder.for_documents(tiny_model, ingest_config))
    chunks = [
        PendingChunk(f"p{i}", f"text {i}", {"doc_id": "d", "metadata": {"chunk_index": i}}, None) for i in range(3)
    ]
    sink = ParquetSink(tmp_path, 1000, record={}, stored=PointIdSet.from_ids(["p0"]))
    embedded = embedder.embed(ChunkBatch.of_documents([("d", chunks, None)]), sink)
    written = pq.ParquetWriter.write_table

    def then_ctrl_c(self, table, *args, **kwargs):
        written(self, table, *args, **kwargs)
        raise KeyboardInterrupt  # after the rows are in the file, before the sink counts them

    monkeypatch.setattr(pq.ParquetWriter, "write_table", then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        sink.write(embedded)
    sink.close()
    assert (sink.rows, sink.unchanged) == (pq.read_table(tmp_path).num_rows, 1) == (2, 1)


def test_files_whose_records_predate_a_field_are_still_one_folder(tmp_path):
    from c2v_rag.rag.ingestion.parquet_folder import EmbedFolder, part_name, with_record

    older = {"model": "m", "decoder": "d", "encoder": "e", "embedding_dim": 4, "chunk_size": 24, "chunk_overlap": 4}
    for n in range(2):  # two files of one run of a version that recorded no quantize
        pq.write_table(with_record(pa.table({"id": [f"p{n}"]}), older), tmp_path / part_name(n))
    folder = EmbedFolder.read(tmp_path)
    assert folder.recorded == older and set(folder.stored) == {"p0", "p1"}
    folder.check({**older, "quantize": "none"})  # a float run today resumes it, as it resumes its own files
