"""Errors of the Qdrant store: a collection that is missing or built for other vectors, a store that is locked, of
the other engine, unreachable or answering with an error."""

from __future__ import annotations

from c2v_rag.core.errors import C2VError


class CollectionMismatchError(C2VError, ValueError):
    """An existing collection was built for other vectors (size, distance, name or model)."""


class CollectionNotFoundError(C2VError, LookupError):
    """The collection to search does not exist."""


class StoreLockedError(C2VError, RuntimeError):
    """The embedded Qdrant directory is open in another client (this process or another one), or another ``embed``
    is writing into the Parquet folder."""


class StoreKindError(C2VError, ValueError):
    """A store directory was written by the other embedded engine (Qdrant Edge vs qdrant-client's local mode)."""


class QdrantUnreachableError(C2VError, ConnectionError):
    """The Qdrant server did not answer, after the configured retries."""


class QdrantRequestError(C2VError, RuntimeError):
    """The Qdrant server answered with an error status (4xx/5xx) to a request made before any write."""


def server_error(location: str, err: BaseException, attempts: int) -> BaseException:
    """``err`` from the Qdrant server at ``location`` as one of these errors, naming the URL (never the key): a
    transport failure :class:`QdrantUnreachableError`, an error status :class:`QdrantRequestError`; any other
    error is returned as it is."""
    from qdrant_client.http.exceptions import UnexpectedResponse

    from c2v_rag.store.retry import is_transient

    if isinstance(err, C2VError):  # already this package's own (QdrantUnreachableError is a ConnectionError)
        return err
    if isinstance(err, UnexpectedResponse):
        status = f"{err.status_code} {err.reason_phrase}".strip()
        detail = " ".join(err.content.decode("utf-8", errors="replace").split())[:300] if err.content else ""
        hint = ""
        if err.status_code in (401, 403):
            hint = "; check the API key (api_key=, or $QDRANT_API_KEY)"
        return QdrantRequestError(f"Qdrant at {location} answered {status}{f': {detail}' if detail else ''}{hint}")
    if is_transient(err):
        return QdrantUnreachableError(
            f"cannot reach Qdrant at {location} after {attempts} attempt{'s' if attempts != 1 else ''} "
            f"({type(err).__name__}: {err}); check that the server is running and that the URL and port "
            "are right"
        )
    return err
