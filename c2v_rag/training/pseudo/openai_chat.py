"""``openai``: questions from any OpenAI-compatible chat endpoint (Ollama, vLLM, llama.cpp's server, ...).

A bigger model behind a server writes better questions than the bundled 135M one; this sends it the same
prompt (:data:`~c2v_rag.training.pseudo.generation.PROMPT`), one passage per request, several requests at a
time. The API key is read from ``OPENAI_API_KEY`` unless given, and never appears in a log line, an error,
:meth:`OpenAIChatGenerator.describe` or the generator's repr.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

from c2v_rag.core.extras import require
from c2v_rag.training.pseudo.generation import (
    PROMPT,
    GeneratedQuery,
    GeneratorUnavailableError,
    Progress,
    QueryGenerator,
    chat_messages,
    clean_question,
    register,
)

logger = logging.getLogger(__name__)

ATTEMPTS = 3
"""Tries per request on a connection error, a timeout, a 5xx or a 429, with backoff between them."""
BACKOFF_S = 0.5
"""The first wait before a retry; each later one is twice the one before."""
_SETUP_STATUSES = {401: "refused the API key", 403: "refused the API key", 404: "has no such endpoint or model"}


def normalize_url(url: str) -> str:
    """The API's base URL, ending in ``/v1``, from what a user is likely to paste.

    ``http://127.0.0.1:8000``, ``http://127.0.0.1:8000/v1`` and ``http://127.0.0.1:8000/v1/chat/completions``
    all give ``http://127.0.0.1:8000/v1``.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"the query generator's URL (--generator-url) must be a non-empty string, got {url!r}")
    base = url.strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise ValueError(
            f"the query generator's URL {url!r} (--generator-url) must start with http:// or https://, "
            "e.g. http://127.0.0.1:8000/v1"
        )
    for suffix in ("/chat/completions", "/completions", "/models"):
        if base.endswith(suffix):
            base = base[: -len(suffix)].rstrip("/")
            break
    return base if base.endswith("/v1") else base + "/v1"


def _mean_logprob(choice: dict[str, Any]) -> float | None:
    """The mean of the reply's token log-probabilities, if the server sent them (OpenAI's layout)."""
    content = (choice.get("logprobs") or {}).get("content") or []
    logprobs = [t.get("logprob") for t in content if isinstance(t, dict)]
    values = [v for v in logprobs if isinstance(v, (int, float)) and math.isfinite(v)]
    return sum(values) / len(values) if values else None


@register
class OpenAIChatGenerator(QueryGenerator):
    """One chat request per passage to ``{url}/chat/completions``, ``concurrency`` at a time.

    Each request asks for ``logprobs``; a server that refuses the field (a 4xx naming it) is asked again
    without it, and so is every later request, and then ``mean_logprob`` is ``None``, as it is when a server
    ignores the field. Connection errors, timeouts, 5xx and 429 answers are retried (:data:`ATTEMPTS` tries);
    a passage that still fails, or that the server refuses (another 4xx, e.g. a passage longer than its
    context), gives ``None`` with a warning. A 401, 403 or 404 stops the run: no later request would pass.
    """

    name = "openai"

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        concurrency: int = 4,
        timeout: float = 120.0,
        max_tokens: int = 48,
        temperature: float = 0.0,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(
                f"the query generator needs the server's model name (--generator-model), got {model!r}; "
                "the server's GET /v1/models lists the names"
            )
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"the query generator's concurrency must be a positive integer, got {concurrency!r}")
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"the query generator's max_tokens must be a positive integer, got {max_tokens!r}")
        if not timeout > 0 or not temperature >= 0:
            raise ValueError(
                f"the query generator's timeout must be > 0 and temperature >= 0, got {timeout} and {temperature}"
            )
        self.url = normalize_url(url)
        self.model = model.strip()
        self.concurrency = concurrency
        self.timeout = float(timeout)
        self.max_tokens = max_tokens
        self.temperature = float(temperature)
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._ask_logprobs = True

    def __repr__(self) -> str:
        return f"OpenAIChatGenerator(url={self.url!r}, model={self.model!r})"

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "url": self.url,
            "model": self.model,
            "concurrency": self.concurrency,
            "timeout": self.timeout,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "logprobs": self._ask_logprobs,
            "prompt": PROMPT,
        }

    def _client(self) -> Any:
        httpx = require("httpx", "the 'openai' query generator", "train")
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        return httpx.Client(
            headers=headers,
            timeout=self.timeout,
            limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency),
        )

    def check(self) -> None:
        """``GET {url}/models``: the server answers, takes the key, and serves ``model``."""
        httpx = require("httpx", "the 'openai' query generator", "train")
        with self._client() as client:
            try:
                response = client.get(f"{self.url}/models")
            except httpx.HTTPError as err:
                raise GeneratorUnavailableError(
                    f"cannot reach the query generator's server at {self.url} ({type(err).__name__}: {err}); "
                    "start it, or pass its base URL with --generator-url (e.g. http://127.0.0.1:8000/v1)"
                ) from err
        if response.status_code in (401, 403):
            raise GeneratorUnavailableError(
                f"the query generator's server at {self.url} refused the API key ({response.status_code}); "
                "set OPENAI_API_KEY to a key it accepts"
            )
        if response.status_code != 200:
            raise GeneratorUnavailableError(
                f"the query generator's server at {self.url} answered {response.status_code} to GET /models; "
                "is --generator-url the base URL of an OpenAI-compatible API (e.g. http://127.0.0.1:8000/v1)?"
            )
        try:
            offered = [str(entry["id"]) for entry in response.json()["data"]]
        except (ValueError, KeyError, TypeError) as err:
            raise GeneratorUnavailableError(
                f"the query generator's server at {self.url} answered GET /models with something other than an "
                "OpenAI model list; is --generator-url the base URL of an OpenAI-compatible API?"
            ) from err
        # Ollama lists "llama3.2:latest" and serves it as "llama3.2" too.
        if self.model not in offered and f"{self.model}:latest" not in offered:
            listed = ", ".join(repr(m) for m in offered) if offered else "none"
            raise GeneratorUnavailableError(
                f"the query generator's server at {self.url} does not serve the model {self.model!r} "
                f"(--generator-model); it offers: {listed}"
            )

    def generate(self, passages: Sequence[str], *, progress: Progress | None = None) -> list[GeneratedQuery | None]:
        results: list[GeneratedQuery | None] = [None] * len(passages)
        todo = [i for i, passage in enumerate(passages) if passage and passage.strip()]
        if len(todo) < len(passages) and progress is not None:
            progress(len(passages) - len(todo))
        if not todo:
            return results
        with self._client() as client, ThreadPoolExecutor(self.concurrency, "query-generator") as pool:
            futures = {pool.submit(self._one, client, passages[i]): i for i in todo}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for future in done:
                    error = future.exception()
                    if error is not None:
                        for other in pending:
                            other.cancel()
                        raise error
                    results[futures[future]] = future.result()
                if progress is not None and done:
                    progress(len(done))
        return results

    def _one(self, client: Any, passage: str) -> GeneratedQuery | None:
        """The question for one passage; ``None`` (with a warning) when the server cannot give one."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(passage),
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        while True:
            if self._ask_logprobs:
                body["logprobs"] = True
            else:
                body.pop("logprobs", None)
            response = self._post(client, body)
            if response is None:
                return None
            status = response.status_code
            if 400 <= status < 500 and body.get("logprobs") and "logprob" in response.text.lower():
                logger.info("The server at %s refuses logprobs; asking without them", self.url)
                self._ask_logprobs = False
                continue
            break
        if status in _SETUP_STATUSES:
            raise GeneratorUnavailableError(
                f"the query generator's server at {self.url} {_SETUP_STATUSES[status]} ({status}) for model "
                f"{self.model!r}; check --generator-url, --generator-model and OPENAI_API_KEY"
            )
        if status != 200:
            logger.warning(
                "The query generator's server at %s answered %d for a passage; it gets no question: %s",
                self.url,
                status,
                " ".join(response.text.split())[:200],
            )
            return None
        try:
            choice = response.json()["choices"][0]
            content = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            logger.warning("The query generator's server at %s answered without a chat message", self.url)
            return None
        question = clean_question(content)
        return None if question is None else GeneratedQuery(question, _mean_logprob(choice))

    def _post(self, client: Any, body: dict[str, Any]) -> Any:
        """The response to ``body``, retried on transient failures; ``None`` when every try failed."""
        import httpx

        url = f"{self.url}/chat/completions"
        problem = ""
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(BACKOFF_S * 2 ** (attempt - 1))
            try:
                response = client.post(url, json=body)
            except httpx.TransportError as err:
                problem = f"{type(err).__name__}: {err}"
                continue
            if response.status_code >= 500 or response.status_code == 429:
                problem = f"{response.status_code} {' '.join(response.text.split())[:200]}"
                continue
            return response
        logger.warning(
            "The query generator's server at %s failed %d times for a passage; it gets no question (%s)",
            self.url,
            ATTEMPTS,
            problem,
        )
        return None
