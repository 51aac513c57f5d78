"""The search options declared once (c2v_rag.rag.options): the keyword forms name the models' fields, the
public functions show and take them, and the CLI and /v1/search build the same SearchOptions."""

from __future__ import annotations

import asyncio
import inspect

import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from c2v_rag.rag.options import ConnectionOptions, ModelOptions, OpenKeywords, SearchKeywords, SearchOptions
from c2v_rag.store.collection import QdrantConfig


def test_each_keyword_form_names_its_models_fields():
    from c2v_rag.rag.handle import IngestKeywords
    from c2v_rag.rag.ingestion.config import IngestConfig

    # The keyword forms type **kwargs; the pydantic models carry the defaults and descriptions: they must agree.
    assert set(OpenKeywords.__annotations__) == {*ConnectionOptions.model_fields, *ModelOptions.model_fields, "client"}
    assert set(SearchKeywords.__annotations__) == ({*SearchOptions.model_fields} - {"collection"}) | {"options"}
    assert set(IngestKeywords.__annotations__) - {"config", "engine", "ray", "versioned"} <= set(
        IngestConfig.model_fields
    )


def test_the_top_level_functions_are_the_handle_opened_for_one_call():
    import c2v_rag
    from c2v_rag.rag.handle import Collection

    # One signature each: the call's own parameters, then the typed keyword forms, never a copied list.
    for function, method in (
        (c2v_rag.search, Collection.search),
        (c2v_rag.search_many, Collection.search_many),
        (c2v_rag.asearch, Collection.asearch),
    ):
        parameters = inspect.signature(function).parameters
        assert list(parameters)[2:] == ["kwargs"] and parameters["top_k"].default == 5
        assert list(inspect.signature(method).parameters)[1:] == [*list(parameters)[:2], "kwargs"]
    assert list(inspect.signature(c2v_rag.ingest).parameters) == ["docs", "qdrant_url", "collection", "kwargs"]
    assert inspect.signature(c2v_rag.ingest).parameters["collection"].default == "c2v_rag"
    assert inspect.iscoroutinefunction(c2v_rag.asearch) and inspect.iscoroutinefunction(Collection.asearch)


def test_an_unknown_keyword_is_refused_as_python_refuses_one(tmp_path):
    import c2v_rag

    # Before anything else: no store, no model, not even the query is looked at.
    with pytest.raises(TypeError, match=r"^search\(\) got an unexpected keyword argument 'topk'$"):
        c2v_rag.search("", topk=3)
    with pytest.raises(TypeError, match=r"^search_many\(\) got an unexpected keyword argument 'client_'$"):
        c2v_rag.search_many(["q"], client_=None)
    with pytest.raises(TypeError, match=r"^asearch\(\) got an unexpected keyword argument 'k'$"):
        asyncio.run(c2v_rag.asearch("q", k=3))
    with pytest.raises(TypeError, match="options must be a SearchOptions, got dict"):
        c2v_rag.search("q", options={"mode": "hybrid"})


def test_the_api_key_stays_out_of_repr_and_the_connection_resolves_as_qdrant_config_does(tmp_path):
    given = ConnectionOptions.as_given({"api_key": "s3cret-key", "path": tmp_path, "mode": "dense"})
    handle = __import__("c2v_rag").open_collection("kb", api_key="s3cret-key", path=tmp_path)
    assert "s3cret-key" not in repr(handle) and "s3cret-key" not in repr(handle.connection)
    built = ConnectionOptions(api_key="s3cret-key", path=tmp_path, store="local")
    for options in (given, built):
        assert "s3cret-key" not in repr(options) and "s3cret-key" not in str(options)
    assert given.resolve() == QdrantConfig.resolve(None, None, tmp_path, "s3cret-key", None, None)
    server = ConnectionOptions(qdrant_url="http://localhost:6333", api_key="s3cret-key", prefer_grpc=True)
    resolved = server.resolve()
    assert resolved == QdrantConfig.resolve(None, "http://localhost:6333", None, "s3cret-key", True, None)
    assert resolved.client_kwargs()["api_key"] == "s3cret-key"


def test_keyword_options_are_checked_where_search_always_checked_them(tmp_path):
    import c2v_rag

    # A bad mode is no error until the collection is read: the missing collection is reported first.
    from c2v_rag.rag.errors import CollectionNotFoundError

    with pytest.raises(CollectionNotFoundError):
        c2v_rag.search("q", path=tmp_path, collection="missing", mode="bm25")
    # A bad filter fails before the store opens or a model loads, given as a keyword or in options.
    for kwargs in ({"filter": {"n": {"like": 1}}}, {"options": SearchOptions(filter={"n": {"like": 1}})}):
        with pytest.raises(ValueError, match="like"):
            c2v_rag.search("q", path=tmp_path / "nothing", model=str(tmp_path / "no-model"), **kwargs)
    # Keywords replace the fields of options.
    with pytest.raises(CollectionNotFoundError, match="'other'"):
        c2v_rag.search(
            "q",
            path=tmp_path,
            options=SearchOptions(collection="kb", filter={"n": {"like": 1}}),
            collection="other",
            filter=None,
        )


def test_options_and_keywords_give_the_same_hits(tmp_path, tiny_variant, corpus, ingest_config):
    import c2v_rag

    c2v_rag.ingest(corpus, path=tmp_path, collection="kb", model=tiny_variant, config=ingest_config)
    query = corpus[3]["text"][:40]
    fields = {"collection": "kb", "filter": {"topic": "odd"}, "group_by_document": True}
    want = c2v_rag.search(query, 2, path=tmp_path, model=tiny_variant, **fields)
    got = c2v_rag.search(query, 2, path=tmp_path, model=tiny_variant, options=SearchOptions(**fields))
    assert [h.id for h in got] == [h.id for h in want] and len(want) == 2
    assert all(h.metadata["topic"] == "odd" for h in got)


def test_the_cli_and_the_server_build_the_same_search_options(monkeypatch):
    from c2v_rag.cli import main
    from c2v_rag.rag.handle import Collection
    from c2v_rag.serving.schemas import SearchRequest

    seen = {}

    def record(handle, query, top_k, *, options):  # what the command asked of the handle, no search run
        seen.update(query=query, top_k=top_k, options=options, handle=handle)
        return []

    monkeypatch.setattr(Collection, "search", record)
    assert (
        main(
            [
                "search",
                "tides",
                "-k",
                "3",
                "--collection",
                "kb",
                "--task",
                "SciFact",
                "--example",
                "q",
                "r",
                "--filter",
                '{"year": {"gte": 2020}}',
                "--group-by-document",
                "--mode",
                "hybrid",
                "--fusion",
                "dbsf",
                "--path",
                "store",
            ]
        )
        == 0
    )
    body = SearchRequest.model_validate(
        {
            "query": "tides",
            "top_k": 3,
            "task": "SciFact",
            "examples": [["q", "r"]],
            "filter": {"year": {"gte": 2020}},
            "mode": "hybrid",
            "fusion": "dbsf",
            "group_by_document": True,
            "rerank": "auto",
        }
    )
    assert seen["options"].model_copy(update={"collection": "kb"}) == body.search_options("kb")
    # The one default that differs: the command reranks as "auto" decides, the server only when a request asks.
    assert seen["options"].rerank == "auto" and SearchRequest(query="tides").rerank is None
    handle = seen["handle"]
    assert handle.name == "kb" and handle.connection.path == "store" and handle.connection.qdrant_url is None
    assert handle.model.model is None and handle.model.quantize is None


def test_the_search_request_takes_its_fields_in_their_order_and_no_others():
    from pydantic import ValidationError

    from c2v_rag.serving.schemas import SearchRequest

    assert list(SearchRequest.model_fields) == [
        "query",
        "top_k",
        "collection",
        "task",
        "examples",
        "filter",
        "score_threshold",
        "mode",
        "fusion",
        "group_by_document",
        "rerank",
    ]
    for field in ("instruction", "with_vectors", "model"):
        with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
            SearchRequest.model_validate({"query": "x", field: "y"})
    with pytest.raises(ValidationError, match="valid dictionary"):
        SearchRequest.model_validate({"query": "x", "filter": [1]})
    assert SearchRequest(query="x").search_options("served").collection == "served"
    assert SearchRequest(query="x", rerank=20).search_options("served").rerank == 20
