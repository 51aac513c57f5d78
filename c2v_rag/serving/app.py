"""``create_app``: the FastAPI app, its endpoints, API-key check and error rendering."""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import logging
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from c2v_rag.core.errors import MissingPackageError
from c2v_rag.core.instructions import get_task, query_prompt, resolve_instruction
from c2v_rag.encode.loop import model_max_tokens, truncate_rows
from c2v_rag.hub.presets import DEFAULT_PRESET
from c2v_rag.rag.options import ModelOptions
from c2v_rag.rag.retrieval.reranking import LOAD_ERRORS, check_rerank, rerank_hits, resolve_rerank, warn_unreranked
from c2v_rag.serving.batcher import DynamicBatcher, QueueFullError, RequestTooLargeError
from c2v_rag.serving.config import ServerConfig
from c2v_rag.serving.memory_release import MemoryReleaser
from c2v_rag.serving.metrics import ServerMetrics
from c2v_rag.serving.schemas import ApiError, EmbeddingRequest, RerankRequest, SearchRequest, check_input, parse_body

if TYPE_CHECKING:
    from c2v_rag.core.instructions import Instruction
    from c2v_rag.model.causal2vec import Causal2Vec
    from c2v_rag.rerank import Causal2VecReranker

logger = logging.getLogger(__name__)
request_log = logging.getLogger("c2v_rag.serving.requests")

# On CPU a forward pass costs about the same per token whatever the batch size, so a short text
# padded to a long one's length is wasted work (bench/serve_load.py: rounds of a few mixed-length
# requests padded enough to fall below one-at-a-time throughput).
_CPU_MAX_PAD_FRACTION = 0.25
_OPEN_PATHS = ("/health", "/metrics")  # probes and scrapers: no key, and nothing secret in them
_MODEL_PATHS = ("/v1/embeddings", "/v1/search", "/v1/rerank")  # the requests that run forward passes


def served_name(config: ServerConfig) -> str:
    """The model id clients send: ``model_name``, else the variant's folder or preset name."""
    if config.model_name:
        return config.model_name
    return Path(config.model).name if config.model else DEFAULT_PRESET


def instruction_for(
    model: Causal2Vec, input_type: str, task: str | None, examples: list[tuple[str, str]] | None = None
) -> Instruction:
    """The instruction an input type gets: the RAG layer's policy, so /v1/search and ingest agree.

    Queries get ``task``'s instruction, else the variant's default, else MS MARCO's; documents get
    none unless ``task`` is symmetric (STS, classification...), where every input gets it. In-context
    ``examples`` (None: the task's registered ones) go with the instruction; a 400 for documents that get none.
    """
    try:
        if input_type == "query":
            task, instruction = query_prompt(model.config, task=task)
            return resolve_instruction(task=task, instruction=instruction, is_query=True, examples=examples)
        # Explicit examples for documents of a retrieval task are refused here, not dropped.
        return resolve_instruction(task=task, instruction=None, is_query=False, examples=examples)
    except ValueError as err:
        raise ApiError(400, f"'examples': {err}", param="examples") from None


def create_app(model: Causal2Vec, config: ServerConfig | None = None) -> FastAPI:
    """An app serving ``model``: OpenAI's embeddings API, /v1/search, /v1/rerank, /health and /metrics.

    Start it with any ASGI server (``c2v-rag serve`` uses uvicorn); the batcher starts and, on
    shutdown, drains with the app's lifespan.
    """
    service = EmbeddingService(model, config or ServerConfig())

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await service.start()
        try:
            yield
        finally:
            await service.stop()  # the ASGI server has already let in-flight requests finish

    app = FastAPI(title="c2v_rag embeddings", version="1", lifespan=lifespan)
    app.state.batcher = service.batcher
    app.state.metrics = service.metrics
    app.middleware("http")(service.guard_and_measure)
    app.exception_handler(ApiError)(service.api_error)
    app.exception_handler(StarletteHTTPException)(service.http_error)
    app.post("/v1/embeddings")(service.embeddings)
    app.post("/v1/search")(service.search)
    app.post("/v1/rerank")(service.rerank)
    app.get("/v1/models")(service.models)
    app.api_route("/health", methods=["GET", "HEAD"])(service.health)  # probes that send HEAD get their 200
    app.get("/metrics")(service.prometheus)
    service.routes = {route.path for route in app.routes if isinstance(route, Route)}
    return app


class EmbeddingService:
    """What the app's routes do, over one model: the batcher, the metrics, the optional collection search and
    the API key."""

    def __init__(self, model: Causal2Vec, config: ServerConfig) -> None:
        self.model = model
        self.config = config
        self.name = served_name(config)
        self.metrics = ServerMetrics()
        self.batcher = DynamicBatcher(
            model,
            max_wait_s=config.max_wait_ms / 1000,
            batch_size=config.batch_size,
            max_batch_tokens=config.max_batch_tokens or model_max_tokens(model),
            max_pad_fraction=config.max_pad_fraction
            if config.max_pad_fraction is not None
            else (None if model.device.type == "cuda" else _CPU_MAX_PAD_FRACTION),
            max_round_texts=config.max_round_texts,
            max_queued_texts=config.max_queued_texts,
            max_tokens_per_request=config.max_tokens_per_request,
            normalize=config.normalize,
            threads=config.threads,
            metrics=self.metrics,
        )
        self.memory = MemoryReleaser(config.release_memory_idle_s, config.release_memory_every_s, self.metrics)
        # /v1/search reads the store ingest and search use by default (the user data directory, or
        # $C2V_RAG_QDRANT_PATH) unless told another; only a missing qdrant-client leaves it off, and then
        # its 404 says what to install. A store named explicitly must work: its missing package is an error.
        self.searcher: Any = None
        self.search_unavailable = ""
        try:
            from c2v_rag.serving.search import CollectionSearcher

            self.searcher = CollectionSearcher(model, config)
        except MissingPackageError as err:
            if config.qdrant_url or config.qdrant_path:
                raise
            self.search_unavailable = str(err)
        self.key = config.api_key.get_secret_value().encode() if config.api_key else None
        # The app's paths, for the metrics' route label (any other path counts as "other").
        self.routes: set[str] = set()
        # /v1/rerank's reranker: loaded on its first request (the base decoder, seconds), then shared.
        self._reranker: Causal2VecReranker | None = None
        self._reranker_lock = asyncio.Lock()
        self._unreranked: set[str] = set()  # the served model, once its reranker failed to load (said once)

    async def start(self) -> None:
        await self.batcher.start()
        self.memory.start()
        logger.info(
            "Serving %s (%d dims)%s", self.name, self.model.embedding_dim, "; API key required" if self.key else ""
        )
        if self.searcher is not None:
            logger.info(
                "/v1/search reads %s (collection %r by default)", self.searcher.target.location, self.config.collection
            )

    async def stop(self) -> None:
        await self.memory.stop()
        await self.batcher.stop()
        if self.searcher is not None:
            self.searcher.close()

    # ------------------------------------------------------------------ around every request

    async def guard_and_measure(self, request: Request, call_next):
        start = time.perf_counter()
        route = request.url.path if request.url.path in self.routes else "other"
        metrics = self.metrics
        metrics.in_progress.inc()
        try:
            if self.key is not None and route not in _OPEN_PATHS and not _authorized(request, self.key):
                response = _error_response(
                    ApiError(
                        401,
                        "missing or wrong API key: send the header 'Authorization: Bearer <key>'",
                        type="authentication_error",
                        code="invalid_api_key",
                        headers={"WWW-Authenticate": "Bearer"},
                    )
                )
            elif route in _MODEL_PATHS:
                with self.memory.working():
                    response = await call_next(request)
            else:
                response = await call_next(request)
        except Exception as err:  # not an ApiError: a bug or a failed forward pass
            logger.exception("Unhandled error on %s %s", request.method, request.url.path)
            response = _error_response(
                ApiError(
                    500, f"internal error: {type(err).__name__}; the server log has the details", type="server_error"
                )
            )
        finally:
            metrics.in_progress.dec()
        seconds = time.perf_counter() - start
        metrics.requests.labels(route, str(response.status_code)).inc()
        metrics.request_seconds.labels(route).observe(seconds)
        # Method, path, status and time only: never headers (the API key) or bodies (users' texts).
        request_log.info("%s %s %d %.1f ms", request.method, request.url.path, response.status_code, 1000 * seconds)
        return response

    async def api_error(self, request: Request, err: ApiError):
        return _error_response(err)

    async def http_error(self, request: Request, err: StarletteHTTPException):
        hint = (
            " (see GET /v1/models, POST /v1/embeddings, POST /v1/search, POST /v1/rerank)"
            if err.status_code == 404
            else ""
        )
        return _error_response(ApiError(err.status_code, f"{err.detail}: {request.method} {request.url.path}{hint}"))

    async def read(self, request: Request, schema):
        limit = self.config.max_request_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _too_large_body(int(declared), limit)
        raw = await request.body()
        if len(raw) > limit:
            raise _too_large_body(len(raw), limit)
        return parse_body(raw, schema)

    async def embed(self, texts: list[str], instruction: Instruction):
        try:
            return await self.batcher.embed(texts, instruction)
        except QueueFullError as err:
            retry = self.config.retry_after_s
            raise ApiError(
                503,
                f"the server is at capacity ({err}): retry after {retry} s",
                type="server_overloaded",
                code="queue_full",
                headers={"Retry-After": str(retry)},
            ) from None
        except RequestTooLargeError as err:
            raise ApiError(413, str(err), param="input", code="too_many_tokens") from None
        except ValueError as err:  # an instruction that leaves no room for text
            raise ApiError(400, str(err)) from None

    # ------------------------------------------------------------------ routes

    def check_model_name(self, asked: str | None) -> None:
        """A 404 when a request names another model than the one served (naming none is fine)."""
        if asked is not None and asked != self.name:
            raise ApiError(
                404,
                f"model {asked!r} is not served here; this server serves {self.name!r} (GET /v1/models)",
                param="model",
                code="model_not_found",
            )

    async def embeddings(self, request: Request):
        body: EmbeddingRequest = await self.read(request, EmbeddingRequest)
        model, name = self.model, self.name
        self.check_model_name(body.model)
        sizes = model.config.vector_sizes
        if body.dimensions is not None and body.dimensions not in sizes:
            raise ApiError(
                400,
                f"'dimensions': {name} makes vectors of {' or '.join(map(str, sizes))} dimensions, "
                f"the sizes it was trained for (Matryoshka), not {body.dimensions}; pass one of them or leave "
                "'dimensions' out for the whole vector",
                param="dimensions",
                code="unsupported_dimensions",
            )
        dimensions = model.config.check_truncate_dim(body.dimensions)
        texts, _ = check_input(body.input, self.config.max_texts_per_request)
        _check_task(body.task)
        input_type = body.input_type or self.config.default_input_type
        result = await self.embed(texts, instruction_for(model, input_type, body.task, body.examples))
        tokens = sum(result.tokens)
        self.metrics.texts.inc(len(texts))
        self.metrics.tokens.inc(tokens)
        self.metrics.truncated.inc(sum(result.truncated))
        # A Matryoshka prefix is a slice of the whole vector, re-normalized: requests of every size share batches.
        vectors = truncate_rows(result.vectors, dimensions)
        data = [
            {"object": "embedding", "index": i, "embedding": _encode_vector(v, body.encoding_format), "truncated": cut}
            for i, (v, cut) in enumerate(zip(vectors, result.truncated))
        ]
        payload = {
            "object": "list",
            "data": data,
            "model": name,
            "input_type": input_type,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        headers = {"X-Truncated-Inputs": str(sum(result.truncated))}
        return Response(json.dumps(payload), media_type="application/json", headers=headers)

    async def search(self, request: Request):
        body: SearchRequest = await self.read(request, SearchRequest)
        if self.searcher is None:
            raise ApiError(
                404, f"search is not available on this server: {self.search_unavailable}", code="search_not_configured"
            )
        options = body.search_options(self.config.collection)
        _check_task(options.task)
        try:
            check_rerank(options.rerank, body.top_k)
            rerank = resolve_rerank(options.rerank, body.top_k, ModelOptions(model=self.model))
        except ValueError as err:
            raise ApiError(400, f"'rerank': {err}", param="rerank") from None
        checked = await self.searcher.check(options.collection, options.mode)
        vector, tokens = None, 0
        if options.mode != "sparse":  # BM25 alone needs no model
            prompt = instruction_for(self.model, "query", options.task, options.examples)
            result = await self.embed([body.query], prompt)
            vector, tokens = result.vectors[0], result.tokens[0]
            self.metrics.texts.inc(1)
            self.metrics.tokens.inc(tokens)
        reranker = await self.search_reranker(options.rerank) if rerank is not None else None
        # With rerank=N the first stage reads the top N and the served variant's reranker keeps the best top_k.
        first_stage = rerank if reranker is not None and rerank is not None else body.top_k
        hits = await self.searcher.nearest(checked, vector, first_stage, options, query=body.query)
        if reranker is not None:
            self.metrics.texts.inc(len(hits))  # the reranker reads every first-stage hit, as /v1/rerank counts
            hits = await asyncio.to_thread(rerank_hits, reranker, body.query, hits, body.top_k)
        return {
            "object": "list",
            "model": self.name,
            "collection": options.collection,
            "data": [h.model_dump(exclude={"vector"}) for h in hits],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    async def rerank(self, request: Request):
        body: RerankRequest = await self.read(request, RerankRequest)
        self.check_model_name(body.model)
        field = "texts" if body.documents is None and body.texts is not None else "documents"
        documents, single = check_input(getattr(body, field), self.config.max_texts_per_request, field)
        if single:
            raise ApiError(400, f"'{field}' must be a list of strings", param=field)
        reranker = await self.reranker()
        try:
            scores, cut = await asyncio.to_thread(reranker.score_with_truncation, body.query, documents)
        except ValueError as err:  # a query that leaves no room for a document
            raise ApiError(400, f"'query': {err}", param="query") from None
        self.metrics.texts.inc(len(documents))
        self.metrics.truncated.inc(cut)
        order = sorted(range(len(documents)), key=lambda i: -scores[i])[: body.top_n]
        results = [
            {"index": i, "relevance_score": float(scores[i])}
            | ({"document": {"text": documents[i]}} if body.return_documents else {})
            for i in order
        ]
        payload = {"object": "list", "model": self.name, "results": results}
        return Response(json.dumps(payload), media_type="application/json", headers={"X-Truncated-Inputs": str(cut)})

    async def search_reranker(self, asked: int | str | None) -> Causal2VecReranker | None:
        """The reranker for a search that reranks. Under ``"auto"``, one that cannot load (its base decoder not on
        this machine) leaves the search unreranked, logged once, as the library's ``auto`` does; a number asked for
        fails the request."""
        try:
            return await self.reranker()
        except LOAD_ERRORS as err:
            if asked != "auto":
                raise
            warn_unreranked(self._unreranked, self.name, err, 'send "rerank": null to silence this')
            return None

    async def reranker(self) -> Causal2VecReranker:
        """The served variant's reranker, loaded in a worker thread on first use."""
        async with self._reranker_lock:
            if self._reranker is None:
                from c2v_rag.rerank import Causal2VecReranker

                self._reranker = await asyncio.to_thread(Causal2VecReranker, self.model)
            return self._reranker

    async def models(self):
        model = self.model
        return {
            "object": "list",
            "data": [
                {
                    "id": self.name,
                    "object": "model",
                    "created": 0,
                    "owned_by": "c2v_rag",
                    "dimensions": model.embedding_dim,
                    "max_input_tokens": model.max_seq_length,
                    "matryoshka_dimensions": model.config.vector_sizes,
                    "default_input_type": self.config.default_input_type,
                }
            ],
        }

    async def health(self):
        return {"status": "ok", "model": self.name, "queued_texts": self.batcher.queued_texts}

    async def prometheus(self):
        content, media_type = self.metrics.render()
        return Response(content, media_type=media_type)


def _check_task(task: str | None) -> None:
    if task is None:
        return
    try:
        get_task(task)
    except KeyError:
        raise ApiError(
            400,
            f"'task': unknown task {task!r}: use a registered name ('c2v-rag tasks' lists "
            "them, e.g. SciFact, NFCorpus, STSBenchmark) or leave it out",
            param="task",
        ) from None


def _authorized(request: Request, key: bytes) -> bool:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    # compare_digest: the time taken does not depend on how much of the key a guess got right.
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key)


def _error_response(err: ApiError) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status, headers=err.headers)


def _too_large_body(size: int, limit: int) -> ApiError:
    return ApiError(
        413,
        f"the request body is {size} bytes, more than this server's limit of {limit}: send "
        "fewer or shorter texts per request",
        code="request_too_large",
    )


def _encode_vector(vector, encoding_format: str) -> Any:
    if encoding_format == "base64":
        # OpenAI's base64 format: the little-endian float32 bytes, as its clients decode them.
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.tolist()
