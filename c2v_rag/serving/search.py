"""/v1/search's side of Qdrant: one client, used from one thread, checked against the served model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from c2v_rag.encode.loop import truncate_rows
from c2v_rag.rag.errors import (
    CollectionMismatchError,
    CollectionNotFoundError,
    QdrantRequestError,
    QdrantUnreachableError,
)
from c2v_rag.rag.extras import require_rag
from c2v_rag.rag.handle import CheckedCollection, Collection
from c2v_rag.rag.options import CommonSearchOptions
from c2v_rag.rag.retrieval.search import SearchHit
from c2v_rag.serving.config import ServerConfig
from c2v_rag.serving.schemas import ApiError
from c2v_rag.store.query import check_mode
from c2v_rag.store.vectors import CollectionVectors

if TYPE_CHECKING:
    from c2v_rag.model.causal2vec import Causal2Vec
    from c2v_rag.store.store_backend import StoreClient


class CollectionSearcher:
    """Reads the nearest chunks of Qdrant collections for the served model.

    Embedded Qdrant allows one client per directory, so the server keeps one, opened on first
    use; its calls run in a thread of their own, off the event loop and off the model's thread.
    """

    def __init__(self, model: Causal2Vec, config: ServerConfig) -> None:
        require_rag("c2v-rag serve --qdrant-url/--path")
        self.target = config.connection().resolve()
        self.model = model
        self._client: StoreClient | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="c2v-qdrant")

    def _connect(self) -> StoreClient:
        if self._client is None:
            self._client = self.target.connect()
        return self._client

    def _handle(self, collection: str) -> Collection:
        """A handle on ``collection`` over the server's one client (opened on first use)."""
        return Collection(collection, qdrant=self.target, client=self._connect())

    async def _call(self, fn, *args, **kwargs):
        """``fn`` on the Qdrant thread; a server that does not answer is a 503, one that answers an error a 502, each
        naming the store (never its key)."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, lambda: fn(*args, **kwargs))
        except QdrantUnreachableError as err:
            raise ApiError(503, str(err), code="store_unreachable", type="server_error") from None
        except QdrantRequestError as err:
            raise ApiError(502, str(err), code="store_error", type="server_error") from None

    async def check(self, collection: str, mode: str = "dense") -> CheckedCollection:
        """The concrete collection behind ``collection`` (an alias is resolved here, once) and its record: a 404
        when it is missing, a 409 when its vectors are another model's, a 400 naming ``mode`` when a sparse or
        hybrid search asks for BM25 vectors it does not hold. All before the query is embedded.

        The caller searches what this returns (:meth:`nearest`), so an alias switched by a reindex between the
        check and the search cannot pair this check with the other collection's points, and the search reads
        neither the alias nor the record again.
        """

        def run() -> CheckedCollection:
            self.target.check_present(collection, self._client)  # no store where none is: a 404, nothing created
            checked = self._handle(collection).check_model(self.model)
            if mode != "dense":
                layout = CollectionVectors.from_fingerprint(checked.recorded, self.target)
                try:
                    check_mode(mode, layout, collection, self.target.location)
                except CollectionMismatchError as err:
                    raise ApiError(400, str(err), param="mode") from None
            return checked

        try:
            return await self._call(run)
        except ValueError as err:  # an invalid collection name
            if isinstance(err, CollectionMismatchError):
                raise ApiError(409, str(err), param="collection", code="collection_mismatch") from None
            raise ApiError(400, str(err), param="collection") from None
        except CollectionNotFoundError as err:
            raise ApiError(404, str(err), param="collection", code="collection_not_found") from None

    async def nearest(
        self,
        checked: CheckedCollection,
        vector: Sequence[float] | None,
        top_k: int,
        options: CommonSearchOptions | None = None,
        query: str | None = None,
    ) -> list[SearchHit]:
        """The nearest chunks of the collection :meth:`check` found, filtered and grouped by ``options``.
        ``vector`` is the served model's whole query vector (None for a sparse search); it is cut to the prefix
        the collection stores. ``query``, the query's text, is the BM25 side of a sparse or hybrid search."""
        if vector is not None:
            vector = truncate_rows(np.asarray(vector, dtype=np.float32), checked.truncate_dim).tolist()
        handle = self._handle(checked.name)
        try:
            return await self._call(lambda: handle.search_vector(vector, top_k, options, query=query, checked=checked))
        except (TypeError, ValueError) as err:  # a filter value of the wrong type, an unknown operator
            raise ApiError(400, str(err), param="filter") from None

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        if self._client is not None:
            self._client.close()
