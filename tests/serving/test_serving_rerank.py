"""POST /v1/rerank over real HTTP, in TEI's, Cohere's and Jina's shape, checked against Causal2VecReranker."""

from __future__ import annotations

import logging

import pytest

for _module in ("fastapi", "uvicorn", "httpx"):
    pytest.importorskip(_module)

import httpx

from c2v_rag.rerank import Causal2VecReranker
from c2v_rag.serving import ServerConfig, ServerThread, create_app

KEY = "rerank-secret"
QUERY = "vitamin and bone loss"
DOCS = [
    "The stock market fell sharply after the announcement.",
    "Vitamin deficiency is linked to bone loss in older adults.",
    "Cats and dogs are popular pets.",
]


@pytest.fixture(scope="module")
def server(tiny_lm_variant):
    from c2v_rag.rag import load_model

    config = ServerConfig(model_name="tiny", api_key=KEY, max_texts_per_request=4)
    with ServerThread(create_app(load_model(tiny_lm_variant, device="cpu"), config), config) as running:
        yield running


def rerank(server, body, key=KEY) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(server.url + "/v1/rerank", json=body, headers=headers, timeout=60)


def test_rerank_endpoint_orders_documents_as_the_reranker_does(server, tiny_lm_variant, caplog):
    scores = Causal2VecReranker(tiny_lm_variant, device="cpu").score(QUERY, DOCS)
    order = sorted(range(len(DOCS)), key=lambda i: -scores[i])
    caplog.set_level(logging.INFO, logger="c2v_rag.serving.requests")
    response = rerank(server, {"query": QUERY, "documents": DOCS})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == "tiny" and response.headers["X-Truncated-Inputs"] == "0"
    assert [r["index"] for r in body["results"]] == order
    assert [r["relevance_score"] for r in body["results"]] == pytest.approx([scores[i] for i in order], abs=1e-5)
    assert "POST /v1/rerank 200" in caplog.text and QUERY not in caplog.text  # logged as every route: no bodies

    top = rerank(server, {"query": QUERY, "texts": DOCS, "top_n": 2, "return_documents": True}).json()["results"]
    assert [r["index"] for r in top] == order[:2]
    assert [r["document"]["text"] for r in top] == [DOCS[i] for i in order[:2]]


@pytest.mark.parametrize(
    ("body", "key", "status", "message"),
    [
        ({"query": QUERY, "documents": DOCS}, None, 401, "missing or wrong API key"),
        ({"query": QUERY}, KEY, 400, "'documents' is required"),
        ({"query": QUERY, "documents": "one"}, KEY, 400, "'documents' must be a list of strings"),
        ({"query": QUERY, "documents": ["a", ""]}, KEY, 400, "'documents[1]' is an empty string"),
        ({"query": QUERY, "documents": ["a"] * 5}, KEY, 413, "more than this server's limit of 4"),
        ({"query": "", "documents": DOCS}, KEY, 400, "'query'"),
        ({"query": QUERY, "documents": DOCS, "top_n": 0}, KEY, 400, "'top_n'"),
        ({"query": QUERY, "documents": DOCS, "model": "other"}, KEY, 404, "is not served here"),
    ],
)
def test_bad_rerank_requests_name_the_field_and_the_fix(server, body, key, status, message):
    response = rerank(server, body, key)
    assert response.status_code == status
    assert message in response.json()["error"]["message"]
