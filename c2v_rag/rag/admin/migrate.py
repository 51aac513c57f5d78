"""``migrate``: copy a collection between stores (local mode, Qdrant Edge, a server) without re-embedding.

Points keep their ids, payloads and vectors (dense and sparse); the collection keeps its vector
names, sizes and distance, and its recorded model and layout, so the copy is searched exactly
like the original and refuses other models the same way. Both ends go through the same
:class:`~c2v_rag.store.edge_client.StoreClient` calls as ingest and search.

A copy is an idempotent upsert by point id: a migration stopped midway is resumed by running it
again (an existing target collection is checked against the source, then filled up).
"""

from __future__ import annotations

import logging
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from tqdm.auto import tqdm

from c2v_rag.core.arguments import check_count
from c2v_rag.core.progress_bar import unsized_terminal
from c2v_rag.core.wording import counted
from c2v_rag.rag.errors import CollectionMismatchError
from c2v_rag.rag.extras import require_rag
from c2v_rag.store.aliases import alias_target, switch_alias
from c2v_rag.store.collection import (
    FINGERPRINT_METADATA_KEY,
    QdrantConfig,
    check_collection_name,
    collection_not_found,
    store_names,
)
from c2v_rag.store.retry import call_with_retry

logger = logging.getLogger(__name__)

# Tries to reach a server at either end before giving up (a restarting server answers within seconds).
_CONNECT_ATTEMPTS = 3


class MigrateResult(BaseModel):
    """What a migration copied, from where to where."""

    collection: str
    source: str
    target_collection: str
    target: str
    points: int
    alias: str | None = None
    seconds: float

    def summary(self) -> str:
        return (
            f"{counted(self.points, 'point')} of {self.collection!r} at {self.source} copied into "
            f"{self.target_collection!r} at {self.target} in {self.seconds:.1f} s"
            + (f"; alias {self.alias!r} points at it" if self.alias else "")
        )


def migrate_collection(
    collection: str,
    src: QdrantConfig,
    dst: QdrantConfig,
    target_collection: str | None = None,
    batch_size: int = 256,
    show_progress: bool = True,
) -> MigrateResult:
    """Copy ``collection`` (or the collection an alias names) from ``src`` into ``dst``, vectors unchanged:
    :meth:`c2v_rag.Collection.migrate`, which documents the arguments."""
    require_rag("c2v_rag.migrate")
    check_collection_name(collection)
    check_count("batch_size", batch_size)
    started = time.perf_counter()
    src.check_present(collection)
    with _opened(src) as reader:
        concrete = alias_target(reader, collection) or collection
        if not reader.collection_exists(concrete):
            raise collection_not_found(collection, src, store_names(reader))
        name = target_collection or concrete
        check_collection_name(name)
        if src.location == dst.location and name == concrete:
            raise ValueError(
                f"source and target are both {concrete!r} at {src.location}; pass another "
                "target_path/target_url or target_collection"
            )
        info = reader.get_collection(concrete)
        total = reader.count(concrete, exact=True).count
        progress = tqdm(
            total=total,
            desc=f"Copying {concrete}",
            unit="point",
            disable=not show_progress,
            **unsized_terminal(sys.stderr),
        )
        with _opened(dst) as writer, progress:
            copied = copy_collection(
                reader, writer, concrete, name, info, dst, src.location, batch_size, on_copied=progress.update
            )
            stored = writer.count(name, exact=True).count
            if stored < total:
                raise RuntimeError(
                    f"{name!r} at {dst.location} holds {stored} points after copying {copied} of "
                    f"{total}; run the same migrate again to finish"
                )
            alias = collection if collection != concrete else None
            if alias is not None:
                switch_alias(writer, alias, name)
    result = MigrateResult(
        collection=concrete,
        source=src.location,
        target_collection=name,
        target=dst.location,
        points=copied,
        alias=alias,
        seconds=time.perf_counter() - started,
    )
    logger.info("Migrated: %s", result.summary())
    return result


def copy_collection(
    reader: Any,
    writer: Any,
    source_name: str,
    name: str,
    info: Any,
    target: QdrantConfig,
    source_location: str,
    batch_size: int,
    on_copied: Callable[[int], object] | None = None,
) -> int:
    """Copy every point of ``source_name`` (ids, payloads, dense and sparse vectors) into ``name``, created like
    it or checked to be a copy of it; reader and writer may be one client. ``on_copied`` hears how many points
    each request copied (a progress bar). Returns the points copied."""
    from qdrant_client.http import models

    _ensure_copy(writer, name, info, target, source_location, source_name)
    copied, offset = 0, None
    while True:
        records, offset = reader.scroll(
            source_name, limit=batch_size, offset=offset, with_payload=True, with_vectors=True
        )
        if records:
            points = [models.PointStruct(id=r.id, vector=r.vector, payload=r.payload) for r in records]

            def upsert(points: list[Any] = points) -> Any:
                return writer.upsert(name, points, wait=True)

            call_with_retry(upsert, what=f"copying {len(points)} points", attempts=5, initial_wait=0.5, max_wait=30.0)
            copied += len(points)
            if on_copied is not None:
                on_copied(len(points))
        if offset is None:
            return copied


class _opened:
    """A client for ``config`` that has answered (a server that does not is a
    :class:`~c2v_rag.rag.errors.QdrantUnreachableError` naming its URL, as in ingest), closed on
    exit (an Edge target builds its HNSW graph then)."""

    def __init__(self, config: QdrantConfig) -> None:
        from c2v_rag.rag.ingestion.preflight import open_client

        self.client = open_client(config, attempts=_CONNECT_ATTEMPTS, initial_wait=0.5, max_wait=5.0)

    def __enter__(self) -> Any:
        return self.client

    def __exit__(self, *exc: Any) -> None:
        self.client.close()


def _ensure_copy(
    writer: Any, name: str, info: Any, target: QdrantConfig, source_location: str, source_name: str
) -> None:
    """Create the target collection like the source (vectors, sparse vectors, metadata, payload
    indexes), or check that an existing one is a copy of it (a resumed migration)."""
    params = info.config.params
    metadata = getattr(info.config, "metadata", None) or {}
    if writer.collection_exists(name):
        existing = writer.get_collection(name)
        theirs = (getattr(existing.config, "metadata", None) or {}).get(FINGERPRINT_METADATA_KEY)
        if theirs != metadata.get(FINGERPRINT_METADATA_KEY) or _shape(existing.config.params) != _shape(params):
            raise CollectionMismatchError(
                f"collection {name!r} at {target.location} exists and is not a copy of {source_name!r} at "
                f"{source_location} (other vectors or another model); pass target_collection= a new name"
            )
        return
    from qdrant_client.http import models

    writer.create_collection(
        name,
        vectors_config=params.vectors,
        sparse_vectors_config=params.sparse_vectors,
        metadata=metadata or None,
        quantization_config=target.quantization_config(),
        hnsw_config=(
            models.HnswConfigDiff(m=target.hnsw_m, ef_construct=target.hnsw_ef_construct)
            if target.hnsw_m or target.hnsw_ef_construct
            else None
        ),
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")
        indexes = {"doc_id": models.PayloadSchemaType.KEYWORD}
        indexes.update({field: schema.data_type for field, schema in (info.payload_schema or {}).items()})
        for field, schema in indexes.items():
            writer.create_payload_index(name, field, field_schema=schema, wait=True)


def _shape(params: Any) -> Any:
    """Vector names, sizes and distances, and sparse vector names: what must agree for a copy."""
    vectors = params.vectors if isinstance(params.vectors, dict) else {"": params.vectors}
    return (
        {n: (v.size, str(getattr(v.distance, "value", v.distance)).lower()) for n, v in vectors.items()},
        sorted(params.sparse_vectors or {}),
    )
