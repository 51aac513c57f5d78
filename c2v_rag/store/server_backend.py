"""A Qdrant server (``qdrant_url=``), through ``qdrant_client.QdrantClient``.

Every storage option takes effect here: sharding, replication, float16 storage, quantization,
on-disk vectors. The API key defaults to ``$QDRANT_API_KEY`` and is never logged.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, ClassVar

from c2v_rag.store.store_backend import StoreBackend, StoreClient, StoreSettings

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient

API_KEY_ENV = "QDRANT_API_KEY"


class ServerBackend(StoreBackend):
    """A Qdrant server, picked by ``qdrant_url=`` (not by ``store=``)."""

    name: ClassVar[str] = "server"
    description: ClassVar[str] = "a Qdrant server (qdrant_url=)"
    title: ClassVar[str] = "Qdrant server"
    embedded: ClassVar[bool] = False
    uses_directory: ClassVar[bool] = False

    def location(self, settings: StoreSettings) -> str:
        return str(settings.url)

    def client_kwargs(self, settings: StoreSettings) -> dict[str, Any]:
        key = settings.api_key.get_secret_value() if settings.api_key is not None else os.environ.get(API_KEY_ENV)
        kwargs: dict[str, Any] = {
            "url": settings.url,
            "prefer_grpc": settings.prefer_grpc,
            "grpc_port": settings.grpc_port,
            "timeout": settings.timeout,
        }
        if key:
            kwargs["api_key"] = key
        if settings.https is not None:
            kwargs["https"] = settings.https
        return kwargs

    def connect(self, settings: StoreSettings) -> StoreClient:
        from qdrant_client import QdrantClient

        return QdrantClient(**self.client_kwargs(settings))

    def connect_async(self, settings: StoreSettings) -> AsyncQdrantClient:
        from qdrant_client import AsyncQdrantClient

        return AsyncQdrantClient(**self.client_kwargs(settings))
