"""search(..., rerank=N): the first stage's top N, re-ordered by their score fused with the decoder's likelihood,
checked against the reranker applied by hand to the first stage's own hits."""

from __future__ import annotations

import asyncio
from contextlib import closing

import numpy as np
import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from rag_helpers import make_text, rerank_auto_in_int8_on_avx2

import c2v_rag
from c2v_rag.rerank import DEFAULT_WEIGHT, Causal2VecReranker, fuse


@pytest.fixture(scope="module")
def store(tmp_path_factory, tiny_lm_variant):
    """An embedded store of six documents, ingested with a variant whose base decoder has a language-model head."""
    path = tmp_path_factory.mktemp("reranked")
    docs = [{"id": f"doc-{i}", "text": make_text(i, sentences=4)} for i in range(6)]
    c2v_rag.ingest(
        docs, path=path, collection="kb", model=tiny_lm_variant, chunk_size=24, chunk_overlap=4, show_progress=False
    )
    return path


QUERY = "vitamin bone proteins"


@pytest.fixture
def client(store):
    with closing(QdrantClient(path=str(store))) as opened:  # embedded Qdrant: one client per directory at a time
        yield opened


def expected_order(first_stage, reranker, query, top_k):
    fused = fuse([h.score for h in first_stage], reranker.score(query, [h.text for h in first_stage]), DEFAULT_WEIGHT)
    order = np.argsort(-fused, kind="stable")[:top_k]
    return [first_stage[i].id for i in order], fused[order]


@pytest.mark.parametrize("group_by_document", [False, True])
def test_rerank_orders_the_first_stages_top_n_by_the_fused_score(client, tiny_lm_variant, group_by_document):
    first = c2v_rag.search(QUERY, top_k=8, collection="kb", client=client, group_by_document=group_by_document)
    hits = c2v_rag.search(
        QUERY, top_k=3, rerank=len(first), collection="kb", client=client, group_by_document=group_by_document
    )
    ids, fused = expected_order(first, Causal2VecReranker(tiny_lm_variant), QUERY, 3)
    assert [h.id for h in hits] == ids
    assert [h.rerank_score for h in hits] == pytest.approx(fused.tolist(), abs=1e-6)
    # Each hit keeps its first-stage score; the reranker changed the order (the check above could fail).
    assert {h.id: h.score for h in hits} == pytest.approx({h.id: h.score for h in first if h.id in ids})
    every = c2v_rag.search(
        QUERY, top_k=len(first), rerank=len(first), collection="kb", client=client, group_by_document=group_by_document
    )
    assert [h.id for h in every] != [h.id for h in first] and [h.id for h in every[:3]] == ids
    assert all(h.rerank_score is None for h in first)


def test_search_many_and_asearch_rerank_as_search_does(store):
    queries = [QUERY, "stock market cats"]
    # float32: on a CPU with avx512_bf16, "auto" is bfloat16, whose kernels in torch 2.6 (the floor) give two
    # queries embedded together cosines up to 1e-3 from each alone, and so other candidates; float32 gives the same.
    options = {"top_k": 2, "rerank": 6, "collection": "kb", "path": store, "dtype": "float32"}
    many = c2v_rag.search_many(queries, **options)
    singles = [c2v_rag.search(q, **options) for q in queries]
    assert [[h.id for h in hits] for hits in many] == [[h.id for h in hits] for hits in singles]
    got = asyncio.run(c2v_rag.asearch(QUERY, **options))
    assert [h.id for h in got] == [h.id for h in singles[0]]
    assert [h.rerank_score for h in got] == pytest.approx([h.rerank_score for h in singles[0]])


def test_search_many_shows_bars_of_its_queries_only_when_asked(client, capsys):
    queries = [QUERY, "stock market cats", "tides and the moon"]
    quiet = c2v_rag.search_many(queries, top_k=2, rerank=4, collection="kb", client=client)
    assert capsys.readouterr().err == ""
    shown = c2v_rag.search_many(queries, top_k=2, rerank=4, collection="kb", client=client, show_progress=True)
    err = capsys.readouterr().err
    assert "Reranking: 100%" in err and "3/3" in err  # a bar of the queries reranked, with its count
    assert [[h.id for h in hits] for hits in shown] == [[h.id for h in hits] for hits in quiet]


def test_the_reranker_loads_once_per_process(client, tiny_lm_variant):
    from c2v_rag.rag.options import ModelOptions
    from c2v_rag.rag.retrieval.reranking import shared_reranker

    c2v_rag.search(QUERY, top_k=2, rerank=4, collection="kb", client=client)
    handle = c2v_rag.open_collection("kb", client=client)
    handle.search(QUERY, top_k=2, rerank=4)
    first = shared_reranker(ModelOptions(), str(tiny_lm_variant))
    assert shared_reranker(ModelOptions(), str(tiny_lm_variant)) is first


@pytest.mark.parametrize(
    ("rerank", "message"),
    [
        (2, r"rerank=2 is less than top_k=5: .* pass rerank >= top_k"),
        (0, "rerank must be a positive integer"),
        (True, "rerank must be a positive integer"),
    ],
)
def test_a_bad_rerank_fails_before_the_store_opens(tmp_path, rerank, message):
    missing = tmp_path / "no-store"
    with pytest.raises(ValueError, match=message):
        c2v_rag.search(QUERY, top_k=5, rerank=rerank, path=missing)
    assert not missing.exists()


def test_the_cli_reranks_and_shows_both_scores(store, capsys):
    import json

    from c2v_rag.cli import main

    args = [QUERY, "--path", str(store), "--collection", "kb", "-k", "2"]
    expected = c2v_rag.search(QUERY, top_k=2, rerank=6, collection="kb", path=store)
    assert main(["search", *args, "--rerank", "6", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [(h["id"], h["score"], h["rerank_score"]) for h in printed] == [
        (h.id, h.score, h.rerank_score) for h in expected
    ]
    assert main(["search", *args, "--rerank", "6"]) == 0
    assert (
        f"{expected[0].score:.4f}" in (out := capsys.readouterr().out)
        and f"(reranked {expected[0].rerank_score:+.3f})" in out
    )
    assert main(["search", *args, "--rerank", "1"]) == 2
    assert "--rerank 1 is less than --top-k 2" in capsys.readouterr().err


def _ranked(hits):
    return [(h.id, None if h.rerank_score is None else round(h.rerank_score, 5)) for h in hits]


@pytest.mark.parametrize("native_bf16", [True, False])
def test_auto_reranks_the_top_20_where_the_decoder_computes_in_bf16(store, tiny_lm_variant, monkeypatch, native_bf16):
    import c2v_rag.core.devices

    monkeypatch.delenv("C2V_RAG_RERANK")  # the suite turns the default off (conftest); this is its test
    monkeypatch.setattr(c2v_rag.core.devices, "cpu_has_native_bf16", lambda: native_bf16)
    options = {"top_k": 3, "collection": "kb", "path": store, "device": "cpu"}
    default = c2v_rag.search(QUERY, **options)
    if native_bf16:  # bf16 where the CPU has it: the top 20 reranked
        assert _ranked(default) == _ranked(c2v_rag.search(QUERY, rerank=20, **options))
        assert all(h.rerank_score is not None for h in default)
    else:  # float32 elsewhere: the vectors' order, as rerank=None
        assert _ranked(default) == _ranked(c2v_rag.search(QUERY, rerank=None, **options))
        assert all(h.rerank_score is None for h in default)
    # A float32 model, asked for by name or loaded, is not reranked by default, whatever the CPU: its reranker
    # would compute in float32 too.
    float32 = c2v_rag.search(QUERY, dtype="float32", **options)
    assert all(h.rerank_score is None for h in float32)
    loaded = c2v_rag.Causal2Vec.from_pretrained(tiny_lm_variant, device="cpu", dtype="float32")
    with_loaded = {k: v for k, v in options.items() if k != "device"}
    assert all(h.rerank_score is None for h in c2v_rag.search(QUERY, model=loaded, **with_loaded))


@pytest.mark.parametrize(("cpu", "depth"), [("avx512_vnni", 20), ("avx512_bf16", 20), ("avx2", 10)])
def test_auto_reranks_with_the_int8_decoder_as_deep_as_the_cpus_int8_products_allow(
    tiny_lm_variant, monkeypatch, cpu, depth
):
    pytest.importorskip("onnxruntime")
    import c2v_rag.core.devices
    from c2v_rag.rag.options import ModelOptions
    from c2v_rag.rag.retrieval.reranking import resolve_rerank

    monkeypatch.delenv("C2V_RAG_RERANK")  # the suite turns the defaults off (conftest); this is their test
    monkeypatch.delenv("C2V_RAG_QUANTIZE")
    monkeypatch.setattr(c2v_rag.core.devices, "cpu_class", lambda: cpu)
    monkeypatch.setattr(c2v_rag.core.devices, "cpu_has_native_bf16", lambda: False)
    on_cpu = ModelOptions(model=str(tiny_lm_variant), device="cpu")
    assert resolve_rerank("auto", 3, on_cpu) == depth
    assert resolve_rerank("auto", 30, on_cpu) == 30  # at least top_k
    # float everywhere ($C2V_RAG_QUANTIZE=none), no int8 extra, or a dtype asked for: float32 here, no reranking
    monkeypatch.setenv("C2V_RAG_QUANTIZE", "none")
    assert resolve_rerank("auto", 3, on_cpu) is None
    monkeypatch.delenv("C2V_RAG_QUANTIZE")
    assert resolve_rerank("auto", 3, ModelOptions(model=str(tiny_lm_variant), device="cpu", dtype="float32")) is None
    monkeypatch.setattr(c2v_rag.core.devices, "int8_runtime_installed", lambda: False)
    assert resolve_rerank("auto", 3, on_cpu) is None


def test_an_auto_search_on_avx2_reranks_its_top_10_with_the_int8_decoder(store, tiny_lm_variant, monkeypatch, tmp_path):
    pytest.importorskip("onnxruntime")
    from c2v_rag.rag.retrieval import reranking

    rerank_auto_in_int8_on_avx2(monkeypatch, tmp_path)  # the tiny decoder's int8 graph, built here
    options = {"top_k": 3, "collection": "kb", "path": store, "device": "cpu"}
    default = c2v_rag.search(QUERY, **options)
    assert all(h.rerank_score is not None for h in default)
    assert [r.precision for r in reranking._cache.values()] == ["int8"]
    assert _ranked(default) == _ranked(c2v_rag.search(QUERY, rerank=10, **options))
    first = c2v_rag.search(QUERY, rerank=None, **{**options, "top_k": 10})
    assert len(first) == 10 and {h.id for h in default} <= {h.id for h in first}


def test_auto_follows_the_dtype_the_variant_records(tmp_path, tiny_lm_variant, monkeypatch):
    """A variant whose config says float32 gets a float32 reranker (as its model loads), so auto does not rerank
    with it even on a CPU with bf16: decided for the collection's own model."""
    import json
    import shutil

    import c2v_rag.core.devices

    monkeypatch.delenv("C2V_RAG_RERANK")
    monkeypatch.setattr(c2v_rag.core.devices, "cpu_has_native_bf16", lambda: True)
    variant = shutil.copytree(tiny_lm_variant, tmp_path / "float32-variant")
    config = json.loads((variant / "causal2vec_config.json").read_text())
    (variant / "causal2vec_config.json").write_text(json.dumps({**config, "dtype": "float32"}))
    docs = [{"id": f"doc-{i}", "text": make_text(i, sentences=4)} for i in range(4)]
    c2v_rag.ingest(docs, path=tmp_path / "store", collection="kb", model=variant, chunk_size=24, show_progress=False)
    hits = c2v_rag.search(QUERY, top_k=2, collection="kb", path=tmp_path / "store", device="cpu")
    assert hits and all(h.rerank_score is None for h in hits)
    assert all(
        h.rerank_score is not None
        for h in c2v_rag.search(QUERY, top_k=2, rerank=4, collection="kb", path=tmp_path / "store", device="cpu")
    )


def test_c2v_rag_rerank_sets_what_auto_does(store, monkeypatch):
    options = {"top_k": 2, "collection": "kb", "path": store, "dtype": "float32"}
    monkeypatch.setenv("C2V_RAG_RERANK", "6")
    assert _ranked(c2v_rag.search(QUERY, **options)) == _ranked(c2v_rag.search(QUERY, rerank=6, **options))
    # A number below top_k reranks top_k hits.
    monkeypatch.setenv("C2V_RAG_RERANK", "1")
    assert _ranked(c2v_rag.search(QUERY, **options)) == _ranked(c2v_rag.search(QUERY, rerank=2, **options))
    monkeypatch.setenv("C2V_RAG_RERANK", "none")
    assert all(h.rerank_score is None for h in c2v_rag.search(QUERY, **options))
    # An explicit number is not the default's to change.
    assert all(h.rerank_score is not None for h in c2v_rag.search(QUERY, rerank=6, **options))
    monkeypatch.setenv("C2V_RAG_RERANK", "always")
    with pytest.raises(ValueError, match=r"\$C2V_RAG_RERANK='always' is not 'auto', 'none' or a number of hits"):
        c2v_rag.search(QUERY, **options)


def test_auto_searches_unreranked_with_a_warning_when_the_reranker_cannot_load(store, monkeypatch, caplog):
    import c2v_rag.rag.retrieval.reranking as reranking

    def unavailable(model, recorded):
        raise OSError("SmolLM2-135M-Instruct: no such file (offline)")

    monkeypatch.setenv("C2V_RAG_RERANK", "6")
    monkeypatch.setattr(reranking, "shared_reranker", unavailable)
    monkeypatch.setattr("c2v_rag.rag.retrieval.search.shared_reranker", unavailable)
    monkeypatch.setattr(reranking, "_failed", set())
    options = {"top_k": 2, "collection": "kb", "path": store, "dtype": "float32"}
    with caplog.at_level("WARNING", logger="c2v_rag"):
        hits = [c2v_rag.search(QUERY, **options) for _ in range(2)]
    assert _ranked(hits[0]) == _ranked(c2v_rag.search(QUERY, rerank=None, **options)) == _ranked(hits[1])
    warned = [r.getMessage() for r in caplog.records if "could not load" in r.getMessage()]
    assert len(warned) == 1 and "no such file (offline)" in warned[0] and "--rerank none" in warned[0]
    # Asked for by number, the same failure is the caller's error.
    with pytest.raises(OSError, match="offline"):
        c2v_rag.search(QUERY, rerank=6, **options)


@pytest.mark.parametrize(("given", "expected"), [("auto", 6), ("none", None), ("0", None), ("4", 4)])
def test_the_cli_takes_a_number_auto_or_none(store, capsys, monkeypatch, given, expected):
    import json

    from c2v_rag.cli import main

    monkeypatch.setenv("C2V_RAG_RERANK", "6")  # what auto does here, whatever the CPU
    args = [QUERY, "--path", str(store), "--collection", "kb", "-k", "2", "--json", "--rerank", given]
    assert main(["search", *args]) == 0
    printed = [(h["id"], h["rerank_score"]) for h in json.loads(capsys.readouterr().out)]
    want = c2v_rag.search(QUERY, top_k=2, rerank=expected, collection="kb", path=store)
    assert printed == [(h.id, h.rerank_score) for h in want]


def test_the_cli_names_a_bad_rerank(capsys):
    from c2v_rag.cli import main

    with pytest.raises(SystemExit):
        main(["search", QUERY, "--rerank", "many"])
    assert "expected a number of hits (e.g. 20), 'auto' or 'none', got 'many'" in capsys.readouterr().err


def test_prepare_search_loads_what_a_search_needs_and_raises_what_it_would(store, tiny_lm_variant, monkeypatch):
    """A handle's prepare_search loads the model and the reranker a search with these options uses (the ones
    the next search takes from the process's caches) and refuses what that search would refuse, with no query."""
    from c2v_rag.rag import CollectionNotFoundError
    from c2v_rag.rag import embedding as shared_models
    from c2v_rag.rag.retrieval import reranking

    # Empty caches for this test; the process's own, which other tests' fixtures fill, come back after it.
    monkeypatch.setattr(shared_models, "_cache", {})
    monkeypatch.setattr(reranking, "_cache", {})
    handle = c2v_rag.open_collection("kb", path=store)
    handle.prepare_search(3, rerank=6)
    (model,) = shared_models._cache.values()
    (reranker,) = reranking._cache.values()
    hits = handle.search(QUERY, 3, rerank=6)
    assert list(shared_models._cache.values()) == [model] and list(reranking._cache.values()) == [reranker]
    assert len(hits) == 3 and all(h.rerank_score is not None for h in hits)

    with pytest.raises(ValueError, match="rerank"):
        handle.prepare_search(8, rerank=6)  # fewer hits reranked than asked for
    with pytest.raises(ValueError, match="has no sparse vectors"):
        handle.prepare_search(mode="hybrid")  # ingested without sparse vectors
    with pytest.raises(CollectionNotFoundError):
        c2v_rag.open_collection("other", path=store).prepare_search()
