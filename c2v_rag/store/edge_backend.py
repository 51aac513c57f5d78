"""Qdrant Edge (``store="edge"``): Qdrant's own segment engine (``qdrant-edge-py``) in this process.

HNSW, payload indexes, float16, quantization and on-disk vectors as on a server; one shard, so
sharding and replication are ignored. The client is :class:`~c2v_rag.store.edge_client.EdgeClient`,
the store's files :mod:`c2v_rag.store.edge_directory`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from c2v_rag.store.edge_directory import EDGE_DESCRIPTION, EDGE_MARKER
from c2v_rag.store.store_backend import QDRANT_CLIENT, Requirement, StoreBackend, StoreClient, StoreSettings


class EdgeBackend(StoreBackend):
    """A Qdrant Edge store in a directory, marked by its ``c2v_edge.json``."""

    name: ClassVar[str] = "edge"
    description: ClassVar[str] = EDGE_DESCRIPTION
    title: ClassVar[str] = "Qdrant Edge"
    default_directory: ClassVar[str] = "qdrant-edge"
    # qdrant-client too: requests and results are its models; portalocker holds the store's lock.
    requires: ClassVar[tuple[Requirement, ...]] = (
        QDRANT_CLIENT,
        Requirement("qdrant_edge", "qdrant-edge-py", "edge"),
        Requirement("portalocker", "portalocker", "edge"),
    )
    # One shard in one process.
    ignores: ClassVar[tuple[str, ...]] = ("shard_number", "replication_factor", "write_consistency_factor")

    def holds(self, path: Path) -> bool:
        return (path / EDGE_MARKER).is_file()

    def connect(self, settings: StoreSettings) -> StoreClient:
        from c2v_rag.store.edge_client import EdgeClient

        return EdgeClient(
            self.directory(settings),
            hnsw_m=settings.hnsw_m,
            hnsw_ef_construct=settings.hnsw_ef_construct,
            hnsw_ef=settings.hnsw_ef,
        )
