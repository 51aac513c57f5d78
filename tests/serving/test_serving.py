"""``c2v-rag serve`` over real HTTP, with clients nobody here wrote: openai, LangChain, LlamaIndex.

Each server runs under uvicorn on a free loopback port, in a thread (``ServerThread``) or, for
the CLI and graceful shutdown, in a subprocess. The tiny random models keep it fast; their
vectors are compared with ``Causal2Vec.encode`` of the same texts.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

for _module in ("fastapi", "uvicorn", "prometheus_client", "httpx"):
    pytest.importorskip(_module)

import httpx

from c2v_rag.cli.errors import EXIT_INTERRUPTED
from c2v_rag.rag import DEFAULT_QUERY_TASK
from c2v_rag.serving import ServerConfig, ServerThread, create_app

KEY = "test-key-0123456789"
NAME = "tiny-c2v"
TEXTS = [
    "Vitamin D deficiency is linked to bone loss in older adults.",
    "Cats and dogs are popular pets.",
    "The stock market fell sharply after the announcement. " * 6,
    "Proteins fold into three-dimensional structures.",
    "query passage",
]
REPO = Path(__file__).resolve().parents[2]


def tolerance(model) -> float:
    """bf16 rounds to ~3 significant digits; fp32 batched and single encodes agree far closer."""
    return 2e-2 if model.dtype == torch.bfloat16 else 1e-5


@pytest.fixture(scope="module")
def model(tiny_model_factory):
    return tiny_model_factory("llama", max_length=48)


@pytest.fixture(scope="module")
def server(model):
    config = ServerConfig(
        model_name=NAME, api_key=KEY, max_texts_per_request=8, max_tokens_per_request=300, max_request_bytes=20_000
    )
    with ServerThread(create_app(model, config), config) as running:
        yield running


def post(server, body, *, key: str | None = KEY, path: str = "/v1/embeddings", **kwargs) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if isinstance(body, (bytes, str)):
        return httpx.post(server.url + path, content=body, headers=headers, **kwargs)
    return httpx.post(server.url + path, json=body, headers=headers, **kwargs)


# ------------------------------------------------------------------ real clients


def test_openai_client_gets_the_vectors_encode_gives(server, model):
    import openai

    client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY)
    expected = model.encode_documents(TEXTS, normalize_embeddings=True)
    for encoding_format in ("float", openai.NOT_GIVEN):  # unasked, the client asks for base64 and decodes it
        response = client.embeddings.create(input=TEXTS, model=NAME, encoding_format=encoding_format)
        got = np.array([d.embedding for d in sorted(response.data, key=lambda d: d.index)])
        np.testing.assert_allclose(got, expected, atol=tolerance(model))
    raw = client.embeddings.create(input=TEXTS, model=NAME, encoding_format="base64")  # asked: left encoded
    got = np.stack([np.frombuffer(base64.b64decode(d.embedding), dtype="<f4") for d in raw.data])
    np.testing.assert_allclose(got, expected, atol=tolerance(model))
    single = client.embeddings.create(input=TEXTS[1], model=NAME)
    np.testing.assert_allclose(single.data[0].embedding, expected[1], atol=tolerance(model))

    # usage counts the decoder tokens each input took: instruction, Contextual token, text, EOS.
    pieces, _ = model.prepare(TEXTS, None)
    assert response.usage.prompt_tokens == response.usage.total_tokens == sum(p.length(1) for p in pieces)
    assert response.model == NAME


def test_input_type_and_task_pick_the_instruction(server, model):
    import openai

    client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY)

    def embed(**extra) -> np.ndarray:
        response = client.embeddings.create(input=TEXTS, model=NAME, extra_body=extra)
        return np.array([d.embedding for d in response.data])

    atol = tolerance(model)
    # Queries get the task's instruction; without a task, the RAG default (the tiny variant names none).
    np.testing.assert_allclose(
        embed(input_type="query", task="SciFact"),
        model.encode_queries(TEXTS, task="SciFact", normalize_embeddings=True),
        atol=atol,
    )
    np.testing.assert_allclose(
        embed(input_type="query"),
        model.encode_queries(TEXTS, task=DEFAULT_QUERY_TASK, normalize_embeddings=True),
        atol=atol,
    )
    # Documents get none, unless the task is symmetric: then every input gets it.
    np.testing.assert_allclose(embed(input_type="document", task="SciFact"), embed(), atol=atol)
    np.testing.assert_allclose(
        embed(input_type="document", task="STSBenchmark"),
        model.encode(TEXTS, task="STSBenchmark", normalize_embeddings=True),
        atol=atol,
    )
    assert not np.allclose(embed(input_type="query"), embed(), atol=1e-3)  # the instruction matters


def test_langchain_openai_embeddings(server, model):
    pytest.importorskip("langchain_openai")
    from langchain_openai import OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(
        model=NAME, base_url=server.url + "/v1", api_key=KEY, check_embedding_ctx_length=False
    )
    atol = tolerance(model)
    np.testing.assert_allclose(
        embeddings.embed_documents(TEXTS), model.encode_documents(TEXTS, normalize_embeddings=True), atol=atol
    )
    np.testing.assert_allclose(
        embeddings.embed_query(TEXTS[0]), model.encode_documents(TEXTS[0], normalize_embeddings=True), atol=atol
    )
    aio = asyncio.run(embeddings.aembed_documents(TEXTS[:2]))
    np.testing.assert_allclose(aio, model.encode_documents(TEXTS[:2], normalize_embeddings=True), atol=atol)


def test_llama_index_openai_embedding(server, model):
    pytest.importorskip("llama_index.embeddings.openai")
    from llama_index.embeddings.openai import OpenAIEmbedding

    # model_name= takes any name (model= checks it against OpenAI's own list).
    embedding = OpenAIEmbedding(model_name=NAME, api_base=server.url + "/v1", api_key=KEY, embed_batch_size=4)
    atol = tolerance(model)
    np.testing.assert_allclose(
        embedding.get_text_embedding_batch(TEXTS), model.encode_documents(TEXTS, normalize_embeddings=True), atol=atol
    )
    np.testing.assert_allclose(
        embedding.get_query_embedding(TEXTS[3]), model.encode_documents(TEXTS[3], normalize_embeddings=True), atol=atol
    )


# ------------------------------------------------------------------ batching


def test_concurrent_requests_share_batches_and_each_gets_its_own_rows(model):
    # A long window, so requests sent together surely meet in one round.
    config = ServerConfig(model_name=NAME, max_wait_ms=3000, max_round_texts=4096)
    requests = [(TEXTS[i % 5 :] + TEXTS[: i % 3], "query" if i % 2 else "document") for i in range(16)]
    with ServerThread(create_app(model, config), config) as running:

        async def send_all():
            async with httpx.AsyncClient(base_url=running.url, timeout=120) as client:
                return await asyncio.gather(
                    *(
                        client.post(
                            "/v1/embeddings", json={"input": texts, "input_type": kind, "encoding_format": "base64"}
                        )
                        for texts, kind in requests
                    )
                )

        responses = asyncio.run(send_all())
        metrics = httpx.get(running.url + "/metrics").text
    for (texts, kind), response in zip(requests, responses):
        assert response.status_code == 200, response.text
        data = response.json()["data"]
        assert [d["index"] for d in data] == list(range(len(texts)))
        got = np.stack([np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in data])
        encode = model.encode_queries if kind == "query" else model.encode_documents
        task = {"task": DEFAULT_QUERY_TASK} if kind == "query" else {}
        np.testing.assert_allclose(got, encode(texts, **task, normalize_embeddings=True), atol=tolerance(model))
    rounds = _metric(metrics, "c2v_rag_round_requests_count")
    assert 1 <= rounds < len(requests)  # merged: fewer rounds than requests
    assert _metric(metrics, "c2v_rag_round_requests_sum") == len(requests)


def test_full_queue_gets_503_with_retry_after(model):
    config = ServerConfig(
        model_name=NAME, max_wait_ms=5000, max_queued_texts=4, max_texts_per_request=4, retry_after_s=7
    )
    with ServerThread(create_app(model, config), config) as running:
        first = {}
        sender = threading.Thread(
            target=lambda: first.update(
                r=httpx.post(running.url + "/v1/embeddings", json={"input": TEXTS[:4]}, timeout=60)
            )
        )
        sender.start()
        # The first request waits out its window for company, holding the queue full.
        while httpx.get(running.url + "/health").json()["queued_texts"] < 4:
            assert sender.is_alive()
            time.sleep(0.01)
        refused = httpx.post(running.url + "/v1/embeddings", json={"input": TEXTS[4]})
        sender.join()
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "7"
    assert "at capacity" in refused.json()["error"]["message"]
    assert first["r"].status_code == 200 and len(first["r"].json()["data"]) == 4


# ------------------------------------------------------------------ limits and bad input

LONG = "the stock market fell sharply after the announcement " * 40

BAD_INPUT = [  # (name, body, status, words the message must hold)
    ("malformed JSON", b'{"input": ["a", ', 400, "not valid JSON"),
    ("non-UTF-8 body", b'{"input": "caf\xe9"}', 400, "not valid UTF-8"),
    ("empty body", b"", 400, "empty"),
    ("JSON array body", b'["a"]', 400, "must be a JSON object"),
    ("no input", {"model": NAME}, 400, "'input' is required"),
    ("input is a number", {"input": 42}, 400, "a string or a list of strings"),
    ("empty list", {"input": []}, 400, "empty list"),
    ("empty string", {"input": ""}, 400, "empty string"),
    ("non-string item", {"input": ["a", {"b": 1}]}, 400, "'input[1]' must be a string"),
    ("token ids", {"input": [[1, 2, 3]]}, 400, "token ids"),
    ("unknown encoding_format", {"input": "a", "encoding_format": "hex"}, 400, "'encoding_format'"),
    ("dimensions not allowed", {"input": "a", "dimensions": 16}, 400, "Matryoshka"),
    ("dimensions wrong type", {"input": "a", "dimensions": "all"}, 400, "'dimensions'"),
    ("dimensions as a string", {"input": "a", "dimensions": "64"}, 400, "'dimensions'"),  # was taken as 64
    ("dimensions as a boolean", {"input": "a", "dimensions": True}, 400, "'dimensions'"),  # was taken as 1
    ("unknown model", {"input": "a", "model": "text-embedding-3-small"}, 404, "not served here"),
    ("unknown input_type", {"input": "a", "input_type": "passage"}, 400, "'input_type'"),
    ("unknown task", {"input": "a", "task": "NoSuchTask"}, 400, "unknown task"),
    ("too many texts", {"input": ["a"] * 9}, 413, "limit of 8"),
    ("too many tokens", {"input": [LONG] * 8}, 413, "limit of 300"),
    ("body too large", {"input": ["x" * 5000] * 5}, 413, "bytes"),
]


@pytest.mark.parametrize(("name", "body", "status", "words"), BAD_INPUT, ids=[b[0] for b in BAD_INPUT])
def test_bad_input_gets_a_clear_4xx(server, name, body, status, words):
    response = post(server, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert words in error["message"] and error["type"]


def test_api_key_is_required_and_never_logged(server, caplog):
    caplog.set_level(logging.DEBUG)
    assert post(server, {"input": "a"}, key=None).status_code == 401
    wrong = post(server, {"input": "a"}, key="x" * len(KEY))
    assert wrong.status_code == 401 and wrong.headers["WWW-Authenticate"] == "Bearer"
    assert "Authorization: Bearer" in wrong.json()["error"]["message"]
    assert post(server, {"input": "a"}).status_code == 200
    assert httpx.get(server.url + "/health").status_code == 200  # probes need no key
    assert httpx.head(server.url + "/health").status_code == 200  # nor do those that send HEAD (it was a 405)
    assert KEY not in caplog.text


def test_overlong_text_is_truncated_and_the_response_says_so(server, model):
    texts = ["Cats and dogs.", LONG]
    response = post(server, {"input": texts})
    assert response.status_code == 200
    assert [d["truncated"] for d in response.json()["data"]] == [False, True]
    assert response.headers["X-Truncated-Inputs"] == "1"
    got = np.array([d["embedding"] for d in response.json()["data"]])
    np.testing.assert_allclose(got, model.encode_documents(texts, normalize_embeddings=True), atol=tolerance(model))


def test_unknown_routes_and_methods_answer_in_the_error_shape(server):
    missing = httpx.get(server.url + "/v1/nothing", headers={"Authorization": f"Bearer {KEY}"})
    assert missing.status_code == 404 and "/v1/embeddings" in missing.json()["error"]["message"]
    assert httpx.get(server.url + "/v1/embeddings", headers={"Authorization": f"Bearer {KEY}"}).status_code == 405
    assert post(server, {"query": "x"}, path="/v1/search").status_code == 404  # no Qdrant configured


# ------------------------------------------------------------------ models, health, metrics


def test_models_health_and_metrics(server, model):
    headers = {"Authorization": f"Bearer {KEY}"}
    listed = httpx.get(server.url + "/v1/models", headers=headers).json()["data"]
    assert [m["id"] for m in listed] == [NAME] and listed[0]["dimensions"] == model.embedding_dim
    assert httpx.get(server.url + "/health").json()["status"] == "ok"
    before = httpx.get(server.url + "/metrics").text
    usage = post(server, {"input": TEXTS}).json()["usage"]
    after = httpx.get(server.url + "/metrics")
    assert after.headers["content-type"].startswith("text/plain")
    assert (
        _metric(after.text, "c2v_rag_prompt_tokens_total") - _metric(before, "c2v_rag_prompt_tokens_total")
        == usage["prompt_tokens"]
    )
    assert _metric(after.text, "c2v_rag_embedded_texts_total") - _metric(before, "c2v_rag_embedded_texts_total") == len(
        TEXTS
    )
    for name in (
        "c2v_rag_requests_total",
        "c2v_rag_request_seconds_bucket",
        "c2v_rag_batch_texts_bucket",
        "c2v_rag_batch_padded_tokens_bucket",
        "c2v_rag_queue_texts",
        "c2v_rag_queue_wait_seconds_bucket",
    ):
        assert name in after.text


def _metric(text: str, name: str) -> float:
    """The sum of a metric's samples named exactly ``name`` (all label sets)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


# ------------------------------------------------------------------ the CLI and graceful shutdown


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_serves_and_shuts_down_gracefully(tiny_model_factory, tmp_path):
    variant = tiny_model_factory("llama", max_length=48).save_pretrained(tmp_path / "variant")
    port = _free_port()
    env = {**os.environ, "C2V_RAG_API_KEY": KEY, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        # No -v: a server logs its start and its requests at INFO whatever the command line's level.
        [sys.executable, "-m", "c2v_rag.cli", "serve", str(variant), "--port", str(port), "--max-texts", "2048"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            assert process.poll() is None, process.stdout.read()
            try:
                if httpx.get(url + "/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        assert (
            httpx.get(url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"}).json()["data"][0]["id"]
            == "variant"
        )
        texts = [f"{TEXTS[i % 5]} {i}" for i in range(512)]
        result = {}
        sender = threading.Thread(
            target=lambda: result.update(
                r=httpx.post(
                    url + "/v1/embeddings",
                    json={"input": texts},
                    headers={"Authorization": f"Bearer {KEY}"},
                    timeout=300,
                )
            )
        )
        sender.start()
        # SIGTERM while the request is in flight (this /metrics request counts itself as one).
        while _metric(httpx.get(url + "/metrics").text, "c2v_rag_requests_in_progress") < 2:
            assert sender.is_alive()
            time.sleep(0.005)
        process.send_signal(signal.SIGTERM)
        sender.join()
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert result["r"].status_code == 200 and len(result["r"].json()["data"]) == 512
    # Uvicorn finishes the shutdown, then re-raises SIGTERM so the exit status tells how it ended
    # (systemd counts that as a clean stop).
    assert process.returncode == -signal.SIGTERM and "Application shutdown complete" in output
    assert "Serving variant on http://127.0.0.1" in output and KEY not in output
    assert "INFO c2v_rag.serving.requests: POST /v1/embeddings 200" in output  # the request log, at INFO


def test_ctrl_c_stops_the_server_with_status_130_and_no_error_line(tiny_model_factory, tmp_path):
    """Ctrl-C is how a server in a terminal is stopped: uvicorn shuts it down, and the command ends with the status
    of an interrupt, without an ``error:`` line (it printed "error: interrupted" before)."""
    variant = tiny_model_factory("llama", max_length=48).save_pretrained(tmp_path / "variant")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "c2v_rag.cli", "serve", str(variant), "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        while True:
            assert process.poll() is None, process.stdout.read()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == EXIT_INTERRUPTED and "Application shutdown complete" in output
    assert "error:" not in output, output


@pytest.mark.real_weights
def test_default_preset_served_to_the_openai_client():
    import openai

    from c2v_rag.rag import load_model

    model = load_model(None)
    config = ServerConfig()
    texts = ["What causes spring tides?", "Spring tides happen when the sun and the moon line up. " * 3]
    with ServerThread(create_app(model, config), config) as running:
        client = openai.OpenAI(base_url=running.url + "/v1", api_key="unused")
        got = client.embeddings.create(input=texts, model="c2v-smollm2-135m-minilm")
        query = client.embeddings.create(
            input=texts[0], model="c2v-smollm2-135m-minilm", extra_body={"input_type": "query"}
        )
    atol = 2e-2 if model.dtype == torch.bfloat16 else 1e-4
    np.testing.assert_allclose(
        [d.embedding for d in got.data], model.encode_documents(texts, normalize_embeddings=True), atol=atol
    )
    # The preset names its own default task: query vectors get its instruction.
    np.testing.assert_allclose(
        query.data[0].embedding, model.encode_queries(texts[0], normalize_embeddings=True), atol=atol
    )
    assert got.usage.prompt_tokens == got.usage.total_tokens > 0
