"""A small fuzz pass (hypothesis): odd inputs to ``encode``, to ``ingest``'s document reader and
to ``/v1/embeddings`` give a valid vector or a clear error, never a crash, a NaN or a hang.

Tiny random models and few examples, so it runs in seconds; ``derandomize`` keeps it
reproducible in CI (the same examples every run).
"""

from __future__ import annotations

import json
import math
import tempfile
from contextlib import closing

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Any code point, surrogates and control characters included, plus the lengths that hurt:
# empty, whitespace only, and long enough to be truncated many times over.
ODD_TEXT = st.one_of(
    st.text(alphabet=st.characters(codec=None), max_size=60),
    st.text(alphabet=st.characters(categories=("Cc", "Cf", "Zs", "Zl", "Zp", "Co", "Mn")), max_size=40),
    st.sampled_from(
        [
            "",
            " ",
            "\x00",
            "\n" * 50,
            "\ufeff",
            "\ud800",
            "a" * 50_000,
            "é" * 20_000,
            "<|im_end|>",
            "</s><s>",
            "[CLS]" * 100,
        ]
    ),
)
WRONG = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.binary(max_size=20),
    st.booleans(),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.lists(st.integers(), min_size=1, max_size=3),
)


@pytest.fixture(scope="module")
def model(tiny_model_factory):
    return tiny_model_factory("llama", max_length=48)


def has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def assert_vectors(vectors: np.ndarray, n: int, dim: int) -> None:
    assert vectors.shape == (n, dim) and vectors.dtype == np.float32
    assert np.isfinite(vectors).all()
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)


@FUZZ
@given(texts=st.lists(ODD_TEXT, max_size=4))
def test_encode_gives_a_unit_vector_for_any_text(model, texts):
    if any(has_surrogate(t) for t in texts):  # not Unicode text: refused, naming the input
        with pytest.raises(ValueError, match="lone surrogate"):
            model.encode_documents(texts)
        return
    vectors = model.encode_documents(texts, normalize_embeddings=True)
    assert_vectors(vectors, len(texts), model.embedding_dim)
    if texts:
        alone = model.encode_documents(texts[0], normalize_embeddings=True)
        assert alone.shape == (model.embedding_dim,)


@FUZZ
@given(
    value=st.one_of(
        WRONG,
        st.lists(st.one_of(ODD_TEXT, WRONG), min_size=1, max_size=3).filter(
            lambda items: not all(isinstance(i, str) for i in items)
        ),
    )
)
def test_encode_refuses_what_is_not_text_by_name(model, value):
    with pytest.raises(TypeError, match="(expected a string|not a str)"):
        model.encode(value)


RECORD = st.one_of(
    ODD_TEXT,
    WRONG,
    st.fixed_dictionaries(
        {"text": st.one_of(ODD_TEXT, WRONG)},
        optional={
            "id": st.one_of(ODD_TEXT, st.integers(), st.none()),
            "metadata": st.one_of(st.dictionaries(ODD_TEXT, ODD_TEXT, max_size=2), WRONG),
            "title": st.one_of(ODD_TEXT, WRONG),
        },
    ),
)


@FUZZ
@given(items=st.lists(RECORD, max_size=4))
def test_the_document_reader_takes_a_document_or_names_the_bad_input(items):
    from c2v_rag.documents.documents import iter_documents

    try:
        docs = list(iter_documents(items))
    except (TypeError, ValueError) as err:
        assert "docs[" in str(err) or "docs must be" in str(err)
        return
    assert len(docs) == len(items)
    assert all(isinstance(d.text, str) and isinstance(d.doc_id, str) and d.doc_id for d in docs)


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(texts=st.lists(ODD_TEXT, min_size=1, max_size=3))
def test_ingest_stores_any_text_and_search_reads_it_back(model, texts):
    for module in ("qdrant_client", "llama_index.core", "tenacity"):
        pytest.importorskip(module)
    from qdrant_client import QdrantClient

    import c2v_rag
    from c2v_rag.rag import IngestConfig

    config = IngestConfig(chunk_size=24, chunk_overlap=4, batch_size=8, show_progress=False)
    with tempfile.TemporaryDirectory() as store:
        if any(has_surrogate(t) for t in texts):
            with pytest.raises(ValueError, match=r"docs\[\d+\] holds a lone surrogate"):
                c2v_rag.ingest(texts, path=store, collection="fuzz", model=model, config=config)
            return
        result = c2v_rag.ingest(texts, path=store, collection="fuzz", model=model, config=config)
        with closing(QdrantClient(path=store)) as client:
            assert client.count("fuzz").count == result.chunks_written == result.chunks
            if result.chunks:
                hits = c2v_rag.search("tide", top_k=2, collection="fuzz", client=client, model=model)
                assert hits and all(math.isfinite(h.score) for h in hits)


@pytest.fixture(scope="module")
def server(model):
    for module in ("fastapi", "uvicorn", "prometheus_client", "httpx"):
        pytest.importorskip(module)
    from c2v_rag.serving import ServerConfig, ServerThread, create_app

    config = ServerConfig(
        model_name="fuzz", max_texts_per_request=8, max_tokens_per_request=4000, max_request_bytes=300_000
    )
    with ServerThread(create_app(model, config), config) as running:
        yield running


BODY = st.one_of(
    st.fixed_dictionaries(
        {"input": st.one_of(ODD_TEXT, st.lists(ODD_TEXT, max_size=10), WRONG, st.lists(WRONG, max_size=3))},
        optional={
            "model": st.one_of(st.just("fuzz"), ODD_TEXT, WRONG),
            "encoding_format": st.one_of(st.sampled_from(["float", "base64"]), ODD_TEXT),
            "input_type": st.one_of(st.sampled_from(["query", "document"]), ODD_TEXT),
            "dimensions": st.one_of(st.just(64), st.integers(), WRONG),
        },
    ),
    WRONG,
)


@FUZZ
@given(body=BODY)
def test_embeddings_endpoint_answers_a_vector_or_a_clear_error(server, model, body):
    import httpx

    try:
        payload = json.dumps(body).encode("utf-8", errors="surrogatepass")
    except (TypeError, ValueError):
        payload = repr(body).encode("utf-8", errors="surrogatepass")  # not JSON at all: must be a 400
    response = httpx.post(
        server.url + "/v1/embeddings", content=payload, headers={"Content-Type": "application/json"}, timeout=60
    )
    assert response.status_code in (200, 400, 404, 413, 422), response.text
    answer = response.json()
    if response.status_code == 200:
        data = answer["data"]
        assert data and all(len(item["embedding"]) == model.embedding_dim or item["embedding"] for item in data)
        for item in data:
            if isinstance(item["embedding"], list):
                assert all(math.isfinite(x) for x in item["embedding"])
    else:
        assert answer["error"]["message"] and isinstance(answer["error"]["message"], str)


def test_a_lone_surrogate_in_a_request_is_a_400_and_the_server_goes_on(server, model):
    import httpx

    # Valid JSON whose string decodes to a lone surrogate: before the check, the tokenizer's
    # TypeError failed the whole batching round (a 500 for every request merged with this one).
    bad = httpx.post(
        server.url + "/v1/embeddings",
        content=b'{"input": ["fine", "x\\ud800y"]}',
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    assert bad.status_code == 400 and "'input[1]' holds a lone surrogate" in bad.json()["error"]["message"]
    good = httpx.post(server.url + "/v1/embeddings", json={"input": "fine"}, timeout=60)
    assert good.status_code == 200 and len(good.json()["data"][0]["embedding"]) == model.embedding_dim
