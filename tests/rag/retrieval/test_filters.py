"""Metadata filters on embedded Qdrant: the dict form, a qdrant Filter as is, and payload indexes.

Every expected answer is computed in Python from the corpus' metadata, independently of Qdrant.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import warnings
from contextlib import closing

import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from qdrant_client import QdrantClient
from qdrant_client.http import models
from rag_helpers import make_text

import c2v_rag
from c2v_rag.rag import to_qdrant_filter
from c2v_rag.store.filters import OPERATORS

N_DOCS = 8


def meta(i: int) -> dict:
    return {
        "topic": "odd" if i % 2 else "even",
        "n": i,
        "score": i * 0.5,
        "lang": ["en", "de", "fr"][i % 3],
        "published": f"2024-{i + 1:02d}-15T00:00:00Z",
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory, tiny_variant):
    """A collection of N_DOCS documents with varied metadata, and an open client on it."""
    from c2v_rag.rag import IngestConfig

    path = tmp_path_factory.mktemp("filters")
    docs = [{"id": f"doc-{i}", "text": make_text(i, sentences=2), "metadata": meta(i)} for i in range(N_DOCS)]
    config = IngestConfig(chunk_size=24, chunk_overlap=4, batch_size=16, show_progress=False)
    c2v_rag.ingest(
        docs,
        path=path,
        collection="kb",
        model=tiny_variant,
        config=config,
        payload_indexes={"n": "integer", "topic": "keyword"},
    )
    with closing(QdrantClient(path=str(path))) as client:
        yield client


def found(client, filter) -> set[str]:
    hits = c2v_rag.search("vitamin bone", top_k=200, collection="kb", client=client, filter=filter)
    return {h.doc_id for h in hits}


def expected(predicate) -> set[str]:
    return {f"doc-{i}" for i in range(N_DOCS) if predicate(meta(i))}


CASES = [
    ({"topic": "odd"}, lambda m: m["topic"] == "odd"),
    ({"topic": {"eq": "even"}}, lambda m: m["topic"] == "even"),
    ({"n": [0, 4, 7]}, lambda m: m["n"] in (0, 4, 7)),
    ({"lang": {"any": ["de", "fr"]}}, lambda m: m["lang"] in ("de", "fr")),
    ({"n": {"gt": 2}}, lambda m: m["n"] > 2),
    ({"n": {"gte": 2, "lt": 5}}, lambda m: 2 <= m["n"] < 5),
    ({"score": {"lte": 1.5}}, lambda m: m["score"] <= 1.5),
    ({"must_not": {"topic": "odd"}}, lambda m: m["topic"] != "odd"),
    (
        {"n": {"gte": 1}, "must_not": {"lang": ["en"], "n": 7}},
        lambda m: m["n"] >= 1 and m["lang"] != "en" and m["n"] != 7,
    ),
    (
        {"published": {"gte": "2024-03-01", "lt": dt.datetime(2024, 6, 1, tzinfo=dt.UTC)}},
        lambda m: "2024-03" <= m["published"][:7] < "2024-06",
    ),
]


@pytest.mark.parametrize(("filter", "predicate"), CASES, ids=[str(c[0]) for c in CASES])
def test_dict_filters_keep_exactly_the_matching_documents(store, filter, predicate):
    want = expected(predicate)
    assert want and want != expected(lambda m: True)  # each case selects a proper subset
    assert found(store, filter) == want


def test_a_qdrant_filter_is_used_as_is(store):
    odd_or_small = models.Filter(
        should=[
            models.FieldCondition(key="metadata.topic", match=models.MatchValue(value="odd")),
            models.FieldCondition(key="metadata.n", range=models.Range(lt=2)),
        ]
    )
    assert to_qdrant_filter(odd_or_small) is odd_or_small
    assert found(store, odd_or_small) == expected(lambda m: m["topic"] == "odd" or m["n"] < 2)


def test_search_many_applies_the_filter_to_every_query(store):
    results = c2v_rag.search_many(
        ["vitamin bone", "stock market"], top_k=200, collection="kb", client=store, filter={"n": {"lt": 3}}
    )
    assert [{h.doc_id for h in hits} for hits in results] == [expected(lambda m: m["n"] < 3)] * 2


@pytest.mark.parametrize(
    ("filter", "error", "message"),
    [
        ({"n": {"like": 3}}, ValueError, "unknown operator 'like'; allowed operators: " + ", ".join(OPERATORS)),
        ({"n": {}}, ValueError, "empty condition"),
        ({"n": {"gte": "three"}}, TypeError, r"filter\['n'\]\['gte'\] must be a number"),
        ({"n": 1.5}, TypeError, "must be a str, int or bool to match"),
        ({"n": [1, "a"]}, TypeError, "only strings or only integers"),
        ({"must_not": "odd"}, TypeError, "must be a dict of conditions"),
        ({"must_not": {"must_not": {"n": 1}}}, ValueError, "cannot hold another 'must_not'"),
        ("topic=odd", TypeError, "filter must be a dict or a qdrant_client.models.Filter"),
    ],
)
def test_bad_filters_name_the_input_and_the_fix(filter, error, message, tmp_path):
    with pytest.raises(error, match=message):
        to_qdrant_filter(filter)
    # search refuses it before touching Qdrant or loading a model (neither exists here).
    with pytest.raises(error, match=message):
        c2v_rag.search(
            "q", path=tmp_path / "nothing", collection="none", model=str(tmp_path / "no-model"), filter=filter
        )


def test_bad_payload_index_types_are_refused(tmp_path, tiny_variant):
    with pytest.raises(
        ValueError,
        match=r"payload_indexes\['n'\]='int' is not an index type; use one of keyword, "
        "integer, float",
    ):
        c2v_rag.ingest(["text"], path=tmp_path, collection="kb", model=tiny_variant, payload_indexes={"n": "int"})


def test_payload_indexes_are_sent_for_metadata_keys():
    """Embedded Qdrant keeps no payload indexes, so what a server would get is checked on the calls."""
    from c2v_rag.store.collection import payload_index_fields

    assert payload_index_fields({"n": "integer", "topic": "keyword", "when": "datetime"}) == {
        "metadata.n": models.PayloadSchemaType.INTEGER,
        "metadata.topic": models.PayloadSchemaType.KEYWORD,
        "metadata.when": models.PayloadSchemaType.DATETIME,
    }


def test_a_filter_key_no_chunk_carries_is_refused_with_the_keys_there_are(store):
    """A misspelt key matched nothing and the search said "no results"; under must_not it excluded nothing.
    The collection is small enough to be read whole, so the check is certain: an error listing its keys."""
    for bad in ({"topc": "odd"}, {"must_not": {"topc": "odd"}}, {"year": {"gte": 2020}}):
        with pytest.raises(ValueError, match="in no chunk's metadata in collection 'kb'") as info:
            found(store, bad)
        message = str(info.value)
        assert "The chunks carry: chunk_index, doc_id, lang, n, published, score, topic" in message, message
    with pytest.raises(ValueError, match="Did you mean 'topic'"):
        found(store, {"topc": "odd"})
    assert found(store, {"topic": "odd"})  # a key the chunks carry is searched as before


def test_in_a_sampled_collection_an_unseen_key_is_looked_for_in_the_rest(tmp_path, tiny_variant, monkeypatch):
    """Past the sample, a key could be on later chunks only: one filtered read finds it, and the search runs; a key
    no chunk carries is refused as in a small collection (it was a warning, and on the server only a log line, while
    the search answered "no results": a helper's walkthrough of /v1/search)."""
    from c2v_rag.store import filters

    docs = [{"id": f"d{i}", "text": make_text(i, sentences=1), "metadata": {"topic": "t"}} for i in range(6)]
    docs.append({"id": "late", "text": make_text(99, sentences=1), "metadata": {"rare": "yes"}})
    c2v_rag.ingest(docs, path=tmp_path, collection="kb", model=tiny_variant, chunk_size=24, show_progress=False)
    monkeypatch.setattr(filters, "KEY_SAMPLE", 3)  # a small sample stands in for a large collection
    with closing(QdrantClient(path=str(tmp_path))) as client:
        search = lambda filter: c2v_rag.search(  # noqa: E731
            "vitamin", top_k=10, collection="kb", client=client, filter=filter
        )
        looked_up = []
        real_scroll = client.scroll
        monkeypatch.setattr(
            client, "scroll", lambda *a, **k: (looked_up.append("scroll_filter" in k), real_scroll(*a, **k))[1]
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert {h.doc_id for h in search({"rare": "yes"})} == {"late"}
            assert {h.doc_id for h in search({"rare": "yes"})} == {"late"}
        assert looked_up == [False, True, False]  # the key found past the sample is looked for once a process
        with pytest.raises(ValueError, match=r"'rane' is in no chunk's metadata.*The first 3 chunks carry: "):
            search({"rane": "yes"})
        # A qdrant_client Filter (LlamaIndex's MetadataFilters and LangChain's filters become one) is checked on its
        # metadata paths, nested ones too; a condition on another payload path is the caller's own.
        typo = models.FieldCondition(key="metadata.topc", match=models.MatchValue(value="t"))
        nested = models.Filter(should=[models.Filter(must=[typo])])
        with pytest.raises(ValueError, match="'topc' is in no chunk's metadata.*Did you mean 'topic'"):
            search(nested)
        own = models.FieldCondition(key="doc_id", match=models.MatchValue(value="late"))
        assert {h.doc_id for h in search(models.Filter(must=[own]))} == {"late"}
    # The async search (AsyncQdrantClient, as on a server) checks the same way.
    from qdrant_client import AsyncQdrantClient

    async def asearch(filter):
        client = AsyncQdrantClient(path=str(tmp_path))
        try:
            return await c2v_rag.asearch("vitamin", top_k=10, collection="kb", client=client, filter=filter)
        finally:
            await client.close()

    assert {h.doc_id for h in asyncio.run(asearch({"rare": "yes"}))} == {"late"}
    with pytest.raises(ValueError, match="'rane' is in no chunk's metadata"):
        asyncio.run(asearch({"rane": "yes"}))
