"""Ingest: documents -> chunks -> batches -> model -> vectors -> Qdrant, idempotently.

Idempotence rests on deterministic point ids (document id, chunk index, content hash):

- chunks already stored are neither embedded nor written again, so a re-run adds nothing and a
  run that failed half-way resumes where it stopped;
- once all of a document's new chunks are stored, its other points (an older version's) are
  deleted, so a changed document leaves no stale chunks. A document whose upload failed keeps
  its old points until a re-run succeeds: nothing is lost.

Around the run: everything knowable without the model is checked before it loads
(``preflight``), a sync deletes documents gone from their source folders after a complete run
(``sync``), and a run that stops before writing anything removes the collection it created.

The run itself is an engine's (:mod:`c2v_rag.rag.ingestion.engine`), chosen once by ``engine=``: in this
process (:mod:`c2v_rag.rag.ingestion.local_engine`) or on a Ray cluster (:mod:`c2v_rag.rag.ingestion.ray_engine`).
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable
from typing import Any, Literal

from c2v_rag.documents.chunking import check_chunk_size
from c2v_rag.documents.files import NothingToReadError, ReadLog
from c2v_rag.rag.extras import require_rag
from c2v_rag.rag.ingestion.config import IngestConfig
from c2v_rag.rag.ingestion.engine import IngestEngine, IngestPlan, IngestStore, choose_engine
from c2v_rag.rag.ingestion.local_engine import LocalEngine
from c2v_rag.rag.ingestion.preflight import check_target, drop_if_empty, open_client
from c2v_rag.rag.ingestion.ray_dataflow import RayOptions
from c2v_rag.rag.ingestion.ray_engine import RayEngine
from c2v_rag.rag.ingestion.sync import sync_roots
from c2v_rag.rag.options import ModelOptions
from c2v_rag.rag.results import IngestResult
from c2v_rag.store.aliases import resolve_alias, switch_alias, versioned_target
from c2v_rag.store.collection import QdrantConfig, ensure_collection, fingerprint_of
from c2v_rag.store.sparse import BM25Encoder
from c2v_rag.store.store_backend import StoreClient
from c2v_rag.store.vectors import CollectionVectors

__all__ = ["ingest_documents", "ENGINES"]

logger = logging.getLogger(__name__)

# engine= -> the engine that runs the chunk -> embed -> write steps.
ENGINES: dict[str, Callable[..., IngestEngine]] = {"local": LocalEngine, "ray": RayEngine}


def ingest_documents(
    docs: Any,
    collection: str,
    target: QdrantConfig,
    chosen: ModelOptions,
    settings: IngestConfig,
    *,
    client: StoreClient | None = None,
    engine: Literal["local", "ray"] = "local",
    ray: RayOptions | str | None = None,
    versioned: bool = False,
) -> IngestResult:
    """Chunk, embed and store ``docs`` in ``collection`` at ``target``: :meth:`c2v_rag.Collection.ingest`, which
    documents the arguments; ``client`` is an open client to use instead of connecting (left open)."""
    require_rag("c2v_rag.ingest")
    # The engine refuses what it cannot run (engine="ray": Ray missing, sync=True, a model object) at once.
    runner = choose_engine(ENGINES, engine, ray)(model=chosen.model, settings=settings, ray=ray)
    # 1. The input: types, paths, suffixes, folders' files (no file is read yet).
    log = ReadLog()
    read = settings.read_options()
    try:
        runner.open_input(docs, read, log)
    except NothingToReadError as err:
        if not settings.sync:
            raise
        # A sync of a folder emptied on purpose deletes nothing (an unmounted disk looks the same): say how to.
        where = f"--qdrant-url {target.url}" if target.is_server else f"--path {shlex.quote(str(target.path))}"
        command = f"c2v-rag delete --file {shlex.quote(str(err.path))} {where} --collection {collection}"
        raise NothingToReadError(
            f"{err}. A sync deletes nothing then, so the collection keeps the documents read from it before: "
            f"delete them with `{command}` (Collection.delete_documents(files=...))",
            err.path,
        ) from None
    roots = sync_roots(docs) if settings.sync else []
    # 2. The model's config (not its weights): chunk size, and what the collection must match.
    model = chosen.resolve()
    check_chunk_size(settings.chunk_size, model.config.max_length)
    if settings.sparse is not None:  # "bm25" became a BM25Config when the settings were validated
        BM25Encoder(settings.sparse)  # fails fast when bm25s is missing
    # 3. The store: lock, reachability, and an existing collection's size, distance and model.
    own_client = client is None
    opened: StoreClient = (
        open_client(
            target,
            attempts=settings.retry_attempts,
            initial_wait=settings.retry_initial_wait,
            max_wait=settings.retry_max_wait,
        )
        if client is None
        else client
    )
    held = IngestStore(opened, own_client)
    try:
        # An alias is written through to its collection; versioned=True publishes the alias only
        # once the collection is complete.
        held.collection, publish_as = (
            versioned_target(held.client, collection) if versioned else (resolve_alias(held.client, collection), None)
        )
        with target.store_errors():
            # An existing collection keeps what it recorded unless asked otherwise: its quantization, vector size,
            # sparse vectors and, for a model named, part weights. Else the defaults. Read once: the check below
            # takes this info.
            exists = held.client.collection_exists(held.collection)
            info = held.client.get_collection(held.collection) if exists else None
            recorded = fingerprint_of(info) if info is not None else None
            # A collection another tool made records nothing: its chunks are read as one from before the
            # settings were recorded (no lead, whole chunks), as that tool's embedders read them.
            settings = settings.for_collection(None if info is None else recorded or {}, held.collection, model.config)
            layout = CollectionVectors.for_writing(target, settings.sparse, recorded, exists=info is not None)
            settings = settings.model_copy(update={"sparse": layout.bm25})
            model = model.reading(recorded)
            quantization = model.quantization(recorded)
            check_target(
                held.client,
                held.collection,
                target,
                model.config,
                model.reference,
                layout,
                digests=model.digests,
                truncate_dim=settings.prefix_dim,
                quantize=quantization,
                info=info,
                asked=collection,
            )
        plan = IngestPlan(
            settings=settings,
            target=target,
            layout=layout,
            sparse_encoder=BM25Encoder(layout.bm25) if layout.bm25 is not None else None,
            model=model,
            quantization=quantization,
            roots=roots,
        )
        # 4. The model, then the run.
        held.created = ensure_collection(
            held.client, held.collection, target, runner.fingerprint(plan), layout, settings.payload_indexes
        )
        result = runner.run(plan, held)
        return _publish(held.client, held.collection, target, held.created, result, publish_as)
    except BaseException:
        if held.created:
            drop_if_empty(held.client, held.collection, target)
        raise
    finally:
        if own_client:
            held.client.close()


def _publish(
    client, collection: str, target: QdrantConfig, created: bool, result: IngestResult, publish_as: str | None
) -> IngestResult:
    """After a run: drop a collection it created and left empty; switch a versioned alias."""
    if created and result.chunks_written == 0 and result.failed:
        drop_if_empty(client, collection, target)
    if publish_as is not None:
        if result.ok:
            switch_alias(client, publish_as, collection)
        else:
            logger.warning(
                "Alias %r not created: %d batches failed; re-run the ingest to finish %r and publish it",
                publish_as,
                len(result.failed),
                collection,
            )
    return result
