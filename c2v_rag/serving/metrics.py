"""Prometheus metrics of the server: requests, tokens, batch sizes, queue depth, latency."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_POWERS_OF_TWO = tuple(float(2**k) for k in range(0, 12))


class ServerMetrics:
    """The server's metrics, in a registry of their own (two apps in one process never clash)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "c2v_rag_requests", "HTTP requests by endpoint and status code", ["endpoint", "status"], registry=r
        )
        self.request_seconds = Histogram(
            "c2v_rag_request_seconds",
            "request latency, receipt to response",
            ["endpoint"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.in_progress = Gauge("c2v_rag_requests_in_progress", "requests being handled", registry=r)
        self.texts = Counter("c2v_rag_embedded_texts", "texts embedded", registry=r)
        self.tokens = Counter("c2v_rag_prompt_tokens", "decoder tokens embedded (usage.prompt_tokens)", registry=r)
        self.truncated = Counter("c2v_rag_truncated_texts", "texts cut to fit the model's limits", registry=r)
        self.queue_depth = Gauge("c2v_rag_queue_texts", "texts waiting for the model", registry=r)
        self.queue_wait = Histogram(
            "c2v_rag_queue_wait_seconds",
            "time a request waited before its round ran",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.round_requests = Histogram(
            "c2v_rag_round_requests", "requests merged into one batching round", buckets=_POWERS_OF_TWO, registry=r
        )
        self.round_seconds = Histogram(
            "c2v_rag_round_seconds", "tokenizing and model time of one round", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.batch_texts = Histogram(
            "c2v_rag_batch_texts", "texts per forward pass", buckets=_POWERS_OF_TWO, registry=r
        )
        self.batch_tokens = Histogram(
            "c2v_rag_batch_padded_tokens",
            "padded decoder tokens per forward pass",
            buckets=tuple(float(2**k) for k in range(4, 18)),
            registry=r,
        )
        self.memory_releases = Counter(
            "c2v_rag_memory_releases",
            "times freed memory went back to the system (model work paused, or the busy interval passed)",
            registry=r,
        )

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
