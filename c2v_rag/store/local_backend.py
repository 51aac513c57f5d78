"""qdrant-client's local mode (``store="local"``, the default embedded engine): points in Python objects
in this process, kept in a directory, searched exactly.

For small stores and framework interop (LlamaIndex's and LangChain's ``QdrantVectorStore`` open it).
It accepts the server's storage options and ignores them; a warning names the ones set.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from c2v_rag.store.errors import StoreLockedError
from c2v_rag.store.store_backend import StoreBackend, StoreClient, StoreSettings

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient


class LocalModeBackend(StoreBackend):
    """qdrant-client's local mode in a directory: ``QdrantClient(path=...)``."""

    name: ClassVar[str] = "local"
    description: ClassVar[str] = "a qdrant-client local-mode store (store='local')"
    title: ClassVar[str] = "embedded Qdrant"
    ignores: ClassVar[tuple[str, ...]] = (
        "shard_number",
        "replication_factor",
        "write_consistency_factor",
        "quantization",
        "on_disk",
        "on_disk_payload",
    )

    def holds(self, path: Path) -> bool:
        # Local mode writes meta.json and keeps its collections under collection/.
        return (path / "meta.json").is_file() or (path / "collection").is_dir()

    def ignored_options(self, settings: StoreSettings) -> list[str]:
        ignored = super().ignored_options(settings)
        # Local mode stores float32 whatever the collection says (bench/vector_storage.py), so a float16
        # request there saves nothing.
        if settings.datatype != "float32":
            ignored.append(f"datatype={settings.datatype}")
        return ignored

    def client_kwargs(self, settings: StoreSettings) -> dict[str, Any]:
        return {"path": str(self.directory(settings))}

    def connect(self, settings: StoreSettings) -> StoreClient:
        from qdrant_client import QdrantClient

        self.directory(settings).mkdir(parents=True, exist_ok=True)
        try:
            return QdrantClient(**self.client_kwargs(settings))
        except RuntimeError as err:
            if "already accessed" in str(err):
                raise StoreLockedError(
                    f"{self.location(settings)} is open in another client (this process or another one); embedded "
                    "Qdrant allows one at a time. Close the other client, or run a Qdrant server and "
                    "pass qdrant_url."
                ) from err
            raise

    def connect_async(self, settings: StoreSettings) -> AsyncQdrantClient:
        from qdrant_client import AsyncQdrantClient

        self.directory(settings).mkdir(parents=True, exist_ok=True)
        return AsyncQdrantClient(**self.client_kwargs(settings))
