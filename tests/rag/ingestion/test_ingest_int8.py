"""quantize="int8" end to end (issue 26): the option's checks, the CPU table "auto" follows, a collection that
records the int8 method and takes float vectors beside them (but refuses the removed torch int8), and search
that embeds queries as asked, else as the collection's documents were. Vectors are checked against the model's
own encode; the int8 arithmetic itself against numpy in tests/cpu/test_int8.py."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
import torch

for _module in ("qdrant_client", "tenacity"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from rag_helpers import stored_points

import c2v_rag
from c2v_rag import Causal2Vec
from c2v_rag.core.devices import (
    INT8_METHOD,
    LEGACY_INT8,
    cpu_class,
    cpu_has_native_bf16,
    int8_runtime_installed,
    resolve_compute_dtype,
    resolve_dtype,
    resolve_quantize,
)
from c2v_rag.rag import DEFAULT_QUERY_TASK, CollectionMismatchError, load_model
from c2v_rag.store.collection import check_model, collection_fingerprint

CPU = torch.device("cpu")
needs_int8_cpu = pytest.mark.skipif(not int8_runtime_installed(), reason="needs the int8 extra (onnx, onnxruntime)")


@pytest.fixture(autouse=True)
def _onnx_cache(tmp_path_factory, monkeypatch):
    # int8 graphs are built once per model; keep them out of the user's cache
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path_factory.getbasetemp() / "c2v-cache"))


def _flags() -> set[str]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    line = next((line for line in text.splitlines() if line.startswith("flags")), "flags:")
    return set(line.split(":", 1)[1].split())


def test_bad_values_are_refused_naming_the_input_and_the_fix():
    with pytest.raises(ValueError, match=r"quantize='int4' is not one of none, int8, auto"):
        resolve_quantize("int4", CPU)
    with pytest.raises(ValueError, match=r"CPU only.*device='cpu'"):
        resolve_quantize("int8", torch.device("cuda"))
    with pytest.raises(ValueError, match=r"dtype='bfloat16' cannot apply.*'float32'"):
        resolve_compute_dtype("bfloat16", CPU, "int8")
    assert resolve_quantize(None, CPU) == resolve_quantize("none", CPU) == "none"
    assert resolve_quantize("auto", torch.device("cuda")) == "none"
    # the recorded name loads as itself, so a collection's record round-trips
    assert resolve_quantize("int8", CPU) == resolve_quantize(INT8_METHOD, CPU) == INT8_METHOD


def test_auto_follows_the_cpu_table():
    """The CPU class comes from /proc/cpuinfo; auto picks int8 where it was measured within the quality bound
    and faster than the float default (AVX2, AVX-512 VNNI, avx512_bf16 without AMX), when the int8 extra is
    installed, and bf16 stays the default dtype only where the CPU has bf16 instructions."""
    flags = _flags()
    if not flags:
        pytest.skip("no /proc/cpuinfo flags to compare with")
    expected = (
        "amx"
        if flags & {"amx_bf16", "amx_tile", "amx_int8"}
        else "avx512_bf16"
        if "avx512_bf16" in flags
        else "avx512_vnni"
        if "avx512_vnni" in flags
        else "avx2"
        if "avx2" in flags
        else "other"
    )
    assert cpu_class() == expected
    picks_int8 = expected in ("avx2", "avx512_vnni", "avx512_bf16") and int8_runtime_installed()
    assert resolve_quantize("auto", CPU) == (INT8_METHOD if picks_int8 else "none")
    # torch's own bf16 check is true on any AVX-512 CPU, where bf16 is emulated: the flags decide
    native = bool(flags & {"avx512_bf16", "amx_bf16"})
    assert cpu_has_native_bf16() is native
    assert resolve_dtype("auto", CPU) == (torch.bfloat16 if native else torch.float32)
    # int8 computes around float32, so auto's dtype follows auto's quantize
    assert resolve_compute_dtype("auto", CPU, "auto") == (torch.float32 if picks_int8 else resolve_dtype("auto", CPU))


@pytest.mark.parametrize(
    "flags, klass, native_bf16, auto_int8",
    [
        (
            {"avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"},
            "amx",
            True,
            False,
        ),  # Sapphire Rapids: bf16 in tiles
        ({"avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"}, "avx512_bf16", True, True),  # Zen 4/5
        ({"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"}, "avx512_vnni", False, True),
        ({"avx2", "fma", "f16c"}, "avx2", False, True),
        ({"sse4_2"}, "other", False, False),
    ],
)
def test_the_cpu_table_row_by_row(monkeypatch, flags, klass, native_bf16, auto_int8):
    """Each row of docs/performance.md's table from a CPU's flags as /proc/cpuinfo lists them (the flag
    sets of real CPUs); Cascade Lake's row is the one torch's own bf16 check gets wrong."""
    from c2v_rag.core import devices

    monkeypatch.setattr(devices, "cpu_flags", lambda: frozenset(flags))
    devices.cpu_has_native_bf16.cache_clear()
    try:
        assert devices.cpu_class() == klass
        assert devices.cpu_has_native_bf16() is native_bf16
        assert resolve_dtype("auto", CPU) == (torch.bfloat16 if native_bf16 else torch.float32)
        picks = auto_int8 and int8_runtime_installed()
        assert resolve_quantize("auto", CPU) == (INT8_METHOD if picks else "none")
    finally:
        devices.cpu_has_native_bf16.cache_clear()


@needs_int8_cpu
def test_a_quantized_model_cannot_be_quantized_again_or_trained_through_adapters(tiny_variant):
    model = Causal2Vec.from_pretrained(tiny_variant, device="cpu", quantize="int8")
    assert model.apply_quantization("int8") is model  # the same setting is a no-op
    assert model.apply_quantization(INT8_METHOD) is model
    with pytest.raises(ValueError, match="already quantized"):
        model.apply_quantization("none")


def test_float_and_int8_vectors_of_one_model_share_a_collection_and_older_collections_count_as_float():
    recorded = {"decoder": "d", "encoder": "e", "embedding_dim": 8, "quantize": "none"}
    check_model(recorded, {**recorded, "quantize": INT8_METHOD}, "docs", "here")  # measured harmless: allowed
    check_model({**recorded, "quantize": INT8_METHOD}, recorded, "docs", "here")
    older = {k: v for k, v in recorded.items() if k != "quantize"}
    check_model(older, recorded, "docs", "here")  # float into an older (float) collection is fine
    check_model(older, {**recorded, "quantize": INT8_METHOD}, "docs", "here")
    # the kinds being interchangeable does not hide another difference
    with pytest.raises(CollectionMismatchError, match=r"embedding_dim=8") as refused:
        check_model(recorded, {**recorded, "embedding_dim": 4, "quantize": INT8_METHOD}, "docs", "here")
    assert "quantize" not in str(refused.value)
    # nor the removed torch int8, whatever the collection holds
    for kind in (recorded, older):
        with pytest.raises(CollectionMismatchError, match=r"quantize"):
            check_model(kind, {**recorded, "quantize": LEGACY_INT8}, "docs", "here")


def test_a_collection_of_the_removed_torch_int8_is_refused_with_the_fix():
    recorded = {"decoder": "d", "encoder": "e", "embedding_dim": 8, "quantize": LEGACY_INT8}
    with pytest.raises(CollectionMismatchError, match=r"torch's dynamic int8.*re-ingest the collection"):
        check_model(recorded, {**recorded, "quantize": INT8_METHOD}, "docs", "here")
    with pytest.raises(CollectionMismatchError) as refused:
        check_model(recorded, {**recorded, "quantize": "none"}, "docs", "here")
    assert "re-ingest" in str(refused.value)


@needs_int8_cpu
def test_ingest_records_int8_and_search_embeds_queries_as_asked_or_as_the_collection_was(
    tmp_path, tiny_variant, corpus, ingest_config
):
    c2v_rag.ingest(corpus, path=tmp_path, collection="q8", model=tiny_variant, config=ingest_config, quantize="int8")
    int8_model = load_model(tiny_variant, device="cpu", quantize="int8")
    float_model = load_model(tiny_variant, device="cpu")
    query = corpus[2]["text"][:50]
    with closing(QdrantClient(path=str(tmp_path))) as client:
        assert collection_fingerprint(client, "q8")["quantize"] == INT8_METHOD
        payloads = stored_points(client, "q8")
        ids = list(payloads)
        texts = [payloads[i]["page_content"] for i in ids]
        stored = np.array([p.vector for p in client.retrieve("q8", ids, with_vectors=True)], dtype=np.float32)
        hits = c2v_rag.search(query, top_k=3, collection="q8", client=client)  # no quantize named: the collection's
        float_hits = c2v_rag.search(query, top_k=3, collection="q8", client=client, quantize="none")
    # Each token gets its own int8 scale, so a chunk's stored vector (embedded in an ingest batch) is the same
    # chunk embedded alone, up to float rounding in the attention.
    alone = int8_model.encode_documents(texts, batch_size=1, normalize_embeddings=True)
    assert ((stored * alone).sum(1) > 0.999).all()
    # A query is embedded alone, in the kind asked for (the collection's by default): the ranking is that
    # vector against the stored ones.
    for model, found in ((int8_model, hits), (float_model, float_hits)):
        q = model.encode_queries(query, task=DEFAULT_QUERY_TASK, normalize_embeddings=True)
        expected = sorted(zip((stored @ q).tolist(), ids), reverse=True)[:3]
        assert [h.id for h in found] == [i for _, i in expected]
        np.testing.assert_allclose([h.score for h in found], [sc for sc, _ in expected], atol=1e-4)
    # Asked for, float vectors go into the int8 collection too; it keeps recording the kind it was created with.
    # Not asked for, an ingest keeps the collection's kind (whatever $C2V_RAG_QUANTIZE says for new collections).
    kinds = {"none": float_model, INT8_METHOD: int8_model}
    for doc_id, quantize, kind in (("float-doc", "none", "none"), ("default-doc", None, INT8_METHOD)):
        extra = [{"id": doc_id, "text": corpus[0]["text"]}]
        c2v_rag.ingest(
            extra, path=tmp_path, collection="q8", model=tiny_variant, config=ingest_config, quantize=quantize
        )
        with closing(QdrantClient(path=str(tmp_path))) as client:
            assert collection_fingerprint(client, "q8")["quantize"] == INT8_METHOD
            added = {i: p for i, p in stored_points(client, "q8").items() if p["doc_id"] == doc_id}
            vectors = np.array([p.vector for p in client.retrieve("q8", list(added), with_vectors=True)], np.float32)
        assert added
        # the vectors of the kind expected (to float rounding), not of the other (int8 moves them by about 1e-4)
        each = {
            name: m.encode_documents([p["page_content"] for p in added.values()], normalize_embeddings=True)
            for name, m in kinds.items()
        }
        np.testing.assert_allclose(vectors, each[kind], atol=1e-5)
        assert not np.allclose(vectors, each[INT8_METHOD if kind == "none" else "none"], atol=1e-5)


# A Python in which the int8 extra's packages cannot be imported: a machine where c2v-rag was installed without it.
# (None in sys.modules: importing the package fails and importlib.util.find_spec finds nothing, as when it is absent.)
_WITHOUT_INT8_EXTRA = """
import json, sys
sys.modules.update(dict.fromkeys(("onnx", "onnxruntime", "onnx_ir")))
import c2v_rag
from c2v_rag.core.devices import int8_runtime_installed
assert not int8_runtime_installed()
hits = c2v_rag.search(sys.argv[1], top_k=3, collection="q8", path=sys.argv[2], model=sys.argv[3])
print(json.dumps([[h.id, h.score] for h in hits]))
"""


@needs_int8_cpu
def test_where_int8_cannot_run_a_search_of_an_int8_collection_embeds_its_query_in_float(
    tmp_path, tiny_variant, corpus, ingest_config
):
    """Float queries search int8 vectors alike (docs/performance.md, "Mixing float and int8 vectors"), so a
    machine without the int8 extra searches an int8 collection in float, as an ingest into it adds float vectors,
    rather than refusing it."""
    import subprocess
    import sys

    store = tmp_path / "store"
    c2v_rag.ingest(corpus, path=store, collection="q8", model=tiny_variant, config=ingest_config, quantize="int8")
    query = corpus[2]["text"][:50]
    with closing(QdrantClient(path=str(store))) as client:
        payloads = stored_points(client, "q8")
        ids = list(payloads)
        stored = np.array([p.vector for p in client.retrieve("q8", ids, with_vectors=True)], dtype=np.float32)
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_INT8_EXTRA, query, str(store), str(tiny_variant)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    q = load_model(tiny_variant, device="cpu").encode_queries(query, task=DEFAULT_QUERY_TASK, normalize_embeddings=True)
    expected = sorted(zip((stored @ q).tolist(), ids), reverse=True)[:3]
    assert [i for i, _ in found] == [i for _, i in expected]
    np.testing.assert_allclose([sc for _, sc in found], [sc for sc, _ in expected], atol=1e-5)
    # not the int8 query's scores: those differ by about 1e-4 (the check above would not tell them apart otherwise)
    q8 = load_model(tiny_variant, device="cpu", quantize="int8").encode_queries(
        query, task=DEFAULT_QUERY_TASK, normalize_embeddings=True
    )
    assert not np.allclose(stored @ q8, stored @ q, atol=1e-5)


@needs_int8_cpu
@pytest.mark.parametrize("show", [False, True], ids=["quiet", "bars"])
def test_a_first_int8_load_shows_its_build_bar_as_the_ingest_shows_its_own(
    tmp_path, tiny_variant, corpus, ingest_config, monkeypatch, capsys, show
):
    """show_progress=False (the CLI's -q) means no bar, the int8 build's included; it builds all the same."""
    import shutil

    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "cache"))  # nothing built yet: this load builds the graphs
    variant = shutil.copytree(tiny_variant, tmp_path / "variant")  # a model no earlier test loaded (shared models)
    settings = ingest_config.model_copy(update={"show_progress": show})
    capsys.readouterr()
    c2v_rag.ingest(corpus[:2], path=tmp_path / "store", collection="c", model=variant, config=settings, quantize="int8")
    shown = capsys.readouterr().err
    assert ("Building the int8 model" in shown) is show, shown
    assert ("Ingesting into" in shown) is show
    assert list((tmp_path / "cache" / "onnx").rglob("decoder-int8-token-sq.onnx"))  # built, shown or not


@needs_int8_cpu
def test_without_quantize_new_vectors_get_auto_and_an_existing_collection_keeps_its_kind(
    tmp_path, tiny_variant, corpus, ingest_config, monkeypatch
):
    monkeypatch.delenv("C2V_RAG_QUANTIZE", raising=False)  # the suite sets it to none (conftest): the default here
    auto = resolve_quantize("auto", CPU)  # int8 on the CPU classes of docs/performance.md's table
    docs, more = corpus[:3], corpus[3:5]
    c2v_rag.ingest(docs, path=tmp_path, collection="new", model=tiny_variant, config=ingest_config)
    c2v_rag.ingest(docs, path=tmp_path, collection="float", model=tiny_variant, config=ingest_config, quantize="none")
    c2v_rag.ingest(more, path=tmp_path, collection="float", model=tiny_variant, config=ingest_config)
    with closing(QdrantClient(path=str(tmp_path))) as client:
        assert collection_fingerprint(client, "new")["quantize"] == auto
        assert collection_fingerprint(client, "float")["quantize"] == "none"
        points = stored_points(client, "float")
        added = [i for i, p in points.items() if p["doc_id"] in {d["id"] for d in more}]
        vectors = np.array([p.vector for p in client.retrieve("float", added, with_vectors=True)], np.float32)
    expected = load_model(tiny_variant, device="cpu", quantize="none").encode_documents(
        [points[i]["page_content"] for i in added], normalize_embeddings=True
    )
    np.testing.assert_allclose(vectors, expected, atol=1e-5)  # the float collection got float vectors
    # $C2V_RAG_QUANTIZE sets the default for new vectors; a bad value is named with the fix
    monkeypatch.setenv("C2V_RAG_QUANTIZE", "none")
    c2v_rag.ingest(docs, path=tmp_path, collection="env", model=tiny_variant, config=ingest_config)
    with closing(QdrantClient(path=str(tmp_path))) as client:
        assert collection_fingerprint(client, "env")["quantize"] == "none"
    monkeypatch.setenv("C2V_RAG_QUANTIZE", "int4")
    with pytest.raises(ValueError, match=r"\$C2V_RAG_QUANTIZE='int4' is not one of none, int8, auto"):
        c2v_rag.ingest(docs, path=tmp_path, collection="bad", model=tiny_variant, config=ingest_config)


@needs_int8_cpu
def test_the_cli_takes_quantize_on_ingest_embed_and_serve():
    from c2v_rag.cli import build_parser

    parser = build_parser()
    for argv in (["ingest", "x"], ["embed", "x", "--out", "y"], ["serve"], ["search", "q"], ["eval", "--data", "d"]):
        assert parser.parse_args([*argv, "--quantize", "int8"]).quantize == "int8"
    with pytest.raises(SystemExit):
        parser.parse_args(["ingest", "x", "--quantize", "int4"])
