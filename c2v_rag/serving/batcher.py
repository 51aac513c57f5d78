"""Dynamic batching: concurrent requests share the token-budget batches of one encode pass.

Requests wait in a queue. A worker coroutine takes the first one and everything that arrives
within ``max_wait_s`` (or that is already waiting while the model is busy), tokenizes each
request with its own instruction, and runs them all through :func:`~c2v_rag.encode.loop.embed_prepared`:
the same length-sorted, token-budget batches that ``encode`` plans. Each request then gets its
own rows back, in its own order. Tokenizing and the forward passes run in one worker thread,
never on the event loop, and never two at a time: HF fast tokenizers refuse concurrent use,
and two forward passes would only fight over the same cores.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from c2v_rag.core.devices import configure_cpu_threads
from c2v_rag.encode.loop import PreparedTexts, embed_prepared, normalize_rows, prepare_texts

if TYPE_CHECKING:
    from c2v_rag.core.instructions import Instruction
    from c2v_rag.model.causal2vec import Causal2Vec
    from c2v_rag.serving.metrics import ServerMetrics

logger = logging.getLogger(__name__)

# Only for deciding when to stop waiting for company: a round whose texts probably fill one
# forward pass gains nothing by waiting longer. Limits are checked on the real token counts.
_CHARS_PER_TOKEN = 4


class QueueFullError(Exception):
    """The queue already holds ``max_queued_texts`` texts; the client should retry later."""


class RequestTooLargeError(Exception):
    """One request holds more decoder tokens than ``max_tokens_per_request``."""


@dataclass
class EmbedResult:
    """One request's vectors, in its input order, and what encoding them took."""

    vectors: np.ndarray
    """``(n, dim)`` float32."""
    tokens: list[int]
    """Decoder tokens per input (instruction, Contextual token, text, EOS), after truncation."""
    truncated: list[bool]
    """Per input: cut to fit the decoder's ``max_length`` or the encoder's limit."""


@dataclass
class _Job:
    texts: list[str]
    instruction: Instruction
    future: asyncio.Future
    enqueued: float = field(default_factory=time.perf_counter)


class DynamicBatcher:
    """Merges concurrent :meth:`embed` calls into shared encode passes on one model.

    Args:
        model: the loaded model; it is put in eval mode and used only from the worker thread.
        max_wait_s: how long the first request of a round waits for others to join it.
        max_batch_tokens: padded decoder tokens per forward pass (``encode``'s token budget).
        batch_size: texts per forward pass, at most.
        max_pad_fraction: split batches where a text would be padded by more than this fraction.
        max_round_texts: stop taking requests into a round once it holds this many texts.
        max_queued_texts: :meth:`embed` raises :class:`QueueFullError` beyond this many waiting texts.
        max_tokens_per_request: a request over this many decoder tokens fails with
            :class:`RequestTooLargeError` (its tokens are known only once tokenized).
        normalize: unit-length vectors.
        threads: intra-op CPU threads of the worker thread (None: torch's default).
        metrics: where batch sizes, queue depth and model time are recorded.
    """

    def __init__(
        self,
        model: Causal2Vec,
        *,
        max_wait_s: float,
        max_batch_tokens: int,
        batch_size: int,
        max_pad_fraction: float | None = None,
        max_round_texts: int,
        max_queued_texts: int,
        max_tokens_per_request: int,
        normalize: bool = True,
        threads: int | None = 1,
        metrics: ServerMetrics | None = None,
    ) -> None:
        self.model = model
        self.max_wait_s = max_wait_s
        self.max_batch_tokens = max_batch_tokens
        self.batch_size = batch_size
        self.max_pad_fraction = max_pad_fraction
        self.max_round_texts = max_round_texts
        self.max_queued_texts = max_queued_texts
        self.max_tokens_per_request = max_tokens_per_request
        self.normalize = normalize
        self.threads = threads
        self.metrics = metrics
        self.queued_texts = 0
        self._queue: asyncio.Queue[_Job | None] | None = None
        self._worker: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the worker; call from the event loop that will call :meth:`embed`."""
        self.model.eval()
        queue: asyncio.Queue[_Job | None] = asyncio.Queue()
        self._queue = queue
        # torch's intra-op thread count is per thread: set it in the thread that runs the model.
        self._executor = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="c2v-encode",
            initializer=configure_cpu_threads,
            initargs=(self.threads, None),
        )
        self._worker = asyncio.create_task(self._run(queue), name="c2v-batcher")

    async def stop(self) -> None:
        """Finish every queued request, then stop the worker (graceful shutdown)."""
        if self._worker is None:
            return
        assert self._queue is not None and self._executor is not None  # start() made them with the worker
        await self._queue.put(None)  # after every job already queued
        await self._worker
        self._executor.shutdown(wait=True)
        self._worker = None

    # ------------------------------------------------------------------ requests

    async def embed(self, texts: list[str], instruction: Instruction) -> EmbedResult:
        """The vectors of ``texts`` (one instruction for all), computed in a shared batch."""
        if self._worker is None:
            raise RuntimeError("the batcher is not running: call start() first")
        assert self._queue is not None  # start() made it with the worker
        if self.queued_texts and self.queued_texts + len(texts) > self.max_queued_texts:
            raise QueueFullError(f"{self.queued_texts} texts are already waiting (limit {self.max_queued_texts})")
        job = _Job(list(texts), instruction, asyncio.get_running_loop().create_future())
        self._set_queued(self.queued_texts + len(job.texts))
        self._queue.put_nowait(job)
        return await job.future

    def _set_queued(self, n: int) -> None:
        self.queued_texts = n
        if self.metrics is not None:
            self.metrics.queue_depth.set(n)

    # ------------------------------------------------------------------ the worker

    async def _run(self, queue: asyncio.Queue[_Job | None]) -> None:
        loop = asyncio.get_running_loop()
        stopping = False
        while not stopping:
            first = await queue.get()
            if first is None:
                break
            jobs, stopping = await self._collect(queue, first, loop)
            self._set_queued(self.queued_texts - sum(len(j.texts) for j in jobs))
            jobs = [j for j in jobs if not j.future.done()]  # callers that went away
            if not jobs:
                continue
            now = time.perf_counter()
            if self.metrics is not None:
                self.metrics.round_requests.observe(len(jobs))
                for job in jobs:
                    self.metrics.queue_wait.observe(now - job.enqueued)
            try:
                outcomes = await loop.run_in_executor(self._executor, self._encode_round, jobs)
            except Exception as err:  # the forward pass itself failed: every caller hears of it
                logger.exception("Encoding a batch of %d requests failed", len(jobs))
                outcomes = [err] * len(jobs)
            for job, outcome in zip(jobs, outcomes):
                if job.future.done():
                    continue
                if isinstance(outcome, BaseException):
                    job.future.set_exception(outcome)
                else:
                    job.future.set_result(outcome)

    async def _collect(
        self, queue: asyncio.Queue[_Job | None], first: _Job, loop: asyncio.AbstractEventLoop
    ) -> tuple[list[_Job], bool]:
        """``first`` and the requests that join it: those waiting now, and those that arrive in the window."""
        jobs = [first]
        texts = len(first.texts)
        chars = sum(len(t) for t in first.texts)
        deadline = loop.time() + self.max_wait_s
        while texts < self.max_round_texts:
            if queue.empty():
                full = texts >= self.batch_size or chars // _CHARS_PER_TOKEN >= self.max_batch_tokens
                remaining = deadline - loop.time()
                if full or remaining <= 0:
                    break
                try:
                    job = await asyncio.wait_for(queue.get(), timeout=remaining)
                except TimeoutError:
                    break
            else:
                job = queue.get_nowait()
            if job is None:
                return jobs, True
            jobs.append(job)
            texts += len(job.texts)
            chars += sum(len(t) for t in job.texts)
        return jobs, False

    def _encode_round(self, jobs: list[_Job]) -> list[EmbedResult | BaseException]:
        """In the worker thread: tokenize each request, encode them all together, split the rows."""
        start = time.perf_counter()
        outcomes: dict[int, EmbedResult | BaseException] = {}
        admitted: list[tuple[int, PreparedTexts]] = []
        for i, job in enumerate(jobs):
            try:
                prepared = prepare_texts(self.model, job.texts, job.instruction)
            except ValueError as err:  # e.g. an instruction longer than max_length
                outcomes[i] = err
                continue
            tokens = sum(prepared.lengths)
            if tokens > self.max_tokens_per_request:
                outcomes[i] = RequestTooLargeError(
                    f"the input holds {tokens} tokens, more than this server's limit of "
                    f"{self.max_tokens_per_request} per request: split it into smaller requests"
                )
                continue
            admitted.append((i, prepared))
        merged = PreparedTexts.concat([p for _, p in admitted])
        out = np.zeros((len(merged), self.model.embedding_dim), dtype=np.float32)
        if len(merged):
            embed_prepared(
                self.model,
                merged,
                out,
                max_tokens=self.max_batch_tokens,
                batch_size=self.batch_size,
                max_pad_fraction=self.max_pad_fraction,
                on_batch=self._observe_batch,
            )
        if self.normalize:
            normalize_rows(out)
        offset = 0
        for i, prepared in admitted:
            n = len(prepared)
            outcomes[i] = EmbedResult(out[offset : offset + n], prepared.lengths, prepared.truncated)
            offset += n
        if self.metrics is not None:
            self.metrics.round_seconds.observe(time.perf_counter() - start)
        return [outcomes[i] for i in range(len(jobs))]

    def _observe_batch(self, texts: int, padded_tokens: int) -> None:
        if self.metrics is not None:
            self.metrics.batch_texts.observe(texts)
            self.metrics.batch_tokens.observe(padded_tokens)
