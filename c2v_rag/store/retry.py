"""Retrying transient Qdrant failures with exponential backoff (tenacity).

Only failures that a later attempt can cure are retried: lost connections, timeouts, 429 and
5xx answers, gRPC UNAVAILABLE and the like. A 4xx answer means the request itself is wrong and
fails at once. Upserts are safe to repeat because point ids are deterministic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

_RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_RETRY_GRPC = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED", "INTERNAL"})


def is_transient(err: BaseException) -> bool:
    """Whether ``err`` is worth another attempt."""
    if isinstance(err, (ConnectionError, TimeoutError)):
        return True
    try:
        from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
    except ImportError:  # pragma: no cover - qdrant-client is checked before any upload
        return False
    if isinstance(err, ResponseHandlingException):  # the request never got an answer
        return True
    if isinstance(err, UnexpectedResponse):
        return err.status_code in _RETRY_STATUS
    code = getattr(err, "code", None)
    if callable(code) and type(err).__module__.startswith("grpc"):
        try:
            return getattr(code(), "name", "") in _RETRY_GRPC
        except Exception:
            return False
    try:
        import httpx
    except ImportError:  # pragma: no cover
        return False
    return isinstance(err, httpx.TransportError)


def call_with_retry(
    fn: Callable[[], T],
    *,
    what: str,
    attempts: int,
    initial_wait: float,
    max_wait: float,
    log_level: int = logging.WARNING,
) -> T:
    """Call ``fn`` until it succeeds, retrying transient errors with jittered exponential backoff.

    Each retry is logged at ``log_level`` (a caller that reports the final failure itself lowers it).
    """
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

    def log_retry(state) -> None:
        logger.log(
            log_level,
            "%s failed (attempt %d of %d): %s; retrying in %.1f s",
            what,
            state.attempt_number,
            attempts,
            state.outcome.exception(),
            state.next_action.sleep,
        )

    retrying = Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait_exponential_jitter(initial=initial_wait, max=max_wait),
        retry=retry_if_exception(is_transient),
        before_sleep=log_retry,
        reraise=True,
    )
    return retrying(fn)
