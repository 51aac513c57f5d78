"""``ingest``: documents -> chunks -> batches -> model -> vectors -> Qdrant, idempotently.

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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, cast

from c2v_rag.documents.chunking import check_chunk_size
from c2v_rag.documents.files import ReadLog
from c2v_rag.rag.extras import require_rag
from c2v_rag.rag.ingestion.config import IngestConfig
from c2v_rag.rag.ingestion.engine import IngestEngine, IngestPlan, IngestStore, choose_engine
from c2v_rag.rag.ingestion.local_engine import LocalEngine
from c2v_rag.rag.ingestion.preflight import check_target, drop_if_empty, open_client, server_error
from c2v_rag.rag.ingestion.ray_dataflow import RayOptions
from c2v_rag.rag.ingestion.ray_engine import RayEngine
from c2v_rag.rag.ingestion.sync import sync_roots
from c2v_rag.rag.options import ConnectionOptions, ModelOptions
from c2v_rag.rag.results import IngestResult
from c2v_rag.rag.store.aliases import resolve_alias, switch_alias, versioned_target
from c2v_rag.rag.store.backends import StoreKind
from c2v_rag.rag.store.collection import DEFAULT_COLLECTION, QdrantConfig, ensure_collection
from c2v_rag.rag.store.sparse import BM25Config, BM25Encoder
from c2v_rag.rag.store.store_backend import StoreClient
from c2v_rag.rag.store.vectors import CollectionVectors

if TYPE_CHECKING:
    from pathlib import Path

    from pydantic import SecretStr
    from qdrant_client import QdrantClient

    from c2v_rag.model.causal2vec import Causal2Vec

__all__ = ["ingest", "ENGINES"]

logger = logging.getLogger(__name__)

# engine= -> the engine that runs the chunk -> embed -> write steps.
ENGINES: dict[str, Callable[..., IngestEngine]] = {"local": LocalEngine, "ray": RayEngine}


def ingest(
    docs: Any,
    qdrant_url: str | None = None,
    collection: str = DEFAULT_COLLECTION,
    *,
    path: str | Path | None = None,
    api_key: str | SecretStr | None = None,
    prefer_grpc: bool | None = None,
    store: StoreKind | None = None,
    qdrant: QdrantConfig | None = None,
    model: str | Path | Causal2Vec | None = None,
    device: str | None = None,
    dtype: str | None = None,
    quantize: str | None = None,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    batch_size: int | None = None,
    on_error: Literal["raise", "continue"] | None = None,
    sync: bool | None = None,
    show_progress: bool | None = None,
    sparse: Literal["bm25"] | BM25Config | None = None,
    payload_indexes: dict[str, str] | None = None,
    versioned: bool = False,
    truncate_dim: int | None = None,
    config: IngestConfig | None = None,
    client: QdrantClient | None = None,
    engine: Literal["local", "ray"] = "local",
    ray: RayOptions | str | None = None,
) -> IngestResult:
    """Chunk, embed and store ``docs`` in a Qdrant collection; safe to re-run.

    Args:
        docs: strings, dicts (``text``, ``metadata``, optional ``id``), LlamaIndex Documents or
            Nodes, LangChain Documents, paths to files or folders of .txt/.md/.jsonl, or an
            iterable of these (streamed).
        qdrant_url: a Qdrant server; None uses embedded Qdrant in ``path`` (default: the user
            data directory, or ``$C2V_RAG_QDRANT_PATH``).
        collection: created on first use for the model's vectors; an existing one must match
            the model's vector size, the distance and the model itself.
        api_key: for the server; defaults to ``$QDRANT_API_KEY``. Never logged.
        model: a preset name, a variant directory or a loaded :class:`~c2v_rag.Causal2Vec`;
            None is the default preset. Loaded models are shared with other callers.
        quantize: ``"int8"`` embeds with the decoder's linear layers in int8 on a CPU; ``"auto"`` only where
            int8 met the quality bound (:meth:`~c2v_rag.Causal2Vec.from_pretrained`). A new collection records it;
            float and int8 vectors of one model may share a collection (they search each other alike, measured).
        sync: make the collection mirror the given files and folders (``docs`` must be paths).
            By default (False) an ingest only adds and updates: a document deleted or renamed
            in a folder keeps its points. With True, after a complete run, the points recorded
            under each given path whose document was not read this time are deleted. Points
            written from other paths or from non-path inputs are never touched; a missing
            path is an error before anything runs; files that could not be read keep their
            points; nothing is deleted after a failed batch (see :mod:`c2v_rag.rag.ingestion.sync`).
        chunk_size, chunk_overlap, batch_size, on_error, show_progress: override ``config``.
            ``on_error="continue"`` also skips unreadable files and bad JSONL records, each
            reported (``file:line``) and counted in the result.
        sparse: ``"bm25"`` also stores a BM25 sparse vector per chunk (vectors named
            ``text-dense`` and ``text-sparse-new``), for ``search(mode="sparse"|"hybrid")``.
        payload_indexes: metadata key -> index type (``keyword``, ``integer``, ``float``, ``bool``,
            ``datetime``, ``text``, ``uuid``), created on the collection for fast filters on a server.
        versioned: ``collection`` is an alias: a new name gets a ``{collection}_v1`` collection and
            the alias once every chunk is written (readers never see it half-built); an existing
            alias takes the chunks into its current collection. :func:`c2v_rag.reindex` later
            rebuilds it with another model and switches the alias.
        truncate_dim: store shorter vectors (Matryoshka): one of the sizes the variant was trained
            for (``config.matryoshka_dims``). The collection records it and refuses another size;
            :func:`~c2v_rag.search` embeds queries at the size the collection stores.
        path, prefer_grpc, store: the embedded Qdrant directory (``store``: its engine, detected from an
            existing directory when unset), or gRPC to the server; ``device``, ``dtype``: how the model loads.
        config, qdrant: the full option sets (:class:`IngestConfig`, :class:`QdrantConfig`).
            The store and model keywords are :class:`~c2v_rag.rag.options.ConnectionOptions` and
            :class:`~c2v_rag.rag.options.ModelOptions`, the ones :func:`~c2v_rag.search` takes; each
            set becomes one object here, handed down whole.
        client: an open ``QdrantClient`` to use instead of connecting (left open).
        engine: ``"local"`` runs in this process; ``"ray"`` reads, chunks, embeds and writes on a Ray
            cluster (:mod:`c2v_rag.rag.ingestion.ray_dataflow`, ``pip install 'c2v-rag[ray]'``): the same point ids,
            payloads and vectors, and the same guarantees, except ``sync=True`` (refused).
        ray: with ``engine="ray"``: a :class:`~c2v_rag.rag.ingestion.ray_dataflow.RayOptions` or a cluster address.

    Everything that needs no model is checked before it loads: the paths and their suffixes,
    the store (a locked embedded directory, an unreachable server, after the configured
    retries), the collection's vector size, distance and model. Files that are not text (NUL
    bytes, a binary format's signature, mostly undecodable) or over ``max_file_bytes`` are
    skipped with one warning each. A run that stops before writing a point removes the
    collection it created.

    Returns:
        An :class:`IngestResult`. With ``on_error="raise"`` (default) a batch that still fails
        after retries raises :class:`IngestError` naming its document ids, and a bad file or
        record raises its error once what was read before it is stored; re-running the same
        call then resumes with no duplicates. Ctrl-C raises :class:`IngestInterrupted` (a
        ``KeyboardInterrupt``) once the batches already embedded are stored.
    """
    connection = ConnectionOptions.from_keywords(
        qdrant_url=qdrant_url, path=path, api_key=api_key, prefer_grpc=prefer_grpc, store=store, qdrant=qdrant
    )
    chosen = ModelOptions.from_keywords(model=model, device=device, dtype=dtype, quantize=quantize)
    require_rag("c2v_rag.ingest")
    settings = IngestConfig.with_overrides(
        config,
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        batch_size=batch_size,
        on_error=on_error,
        sync=sync,
        show_progress=show_progress,
        sparse=sparse,
        payload_indexes=payload_indexes,
        truncate_dim=truncate_dim,
    )
    target = connection.resolve()
    # The engine refuses what it cannot run (engine="ray": Ray missing, sync=True, a model object) at once.
    runner = choose_engine(ENGINES, engine)(model=chosen.model, settings=settings, ray=ray)
    # 1. The input: types, paths, suffixes, folders' files (no file is read yet).
    log = ReadLog()
    read = settings.read_options()
    runner.open_input(docs, read, log)
    roots = sync_roots(docs) if settings.sync else []
    # 2. The model's config (not its weights): chunk size, and what the collection must match.
    reference = chosen.reference()
    model_config = chosen.variant_config()
    weights = chosen.weights_digest()
    quantization = chosen.applied_quantization()
    check_chunk_size(settings.chunk_size, model_config.max_length)
    bm25 = settings.sparse  # "bm25" became a BM25Config when the settings were validated
    layout = CollectionVectors.for_ingest(target, bm25)
    sparse_encoder = BM25Encoder(bm25) if bm25 is not None else None  # fails fast when bm25s is missing
    plan = IngestPlan(
        settings=settings,
        target=target,
        layout=layout,
        sparse_encoder=sparse_encoder,
        model=chosen,
        reference=reference,
        model_config=model_config,
        weights=weights,
        quantization=quantization,
        roots=roots,
    )
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
        else cast(StoreClient, client)
    )
    held = IngestStore(opened, own_client)
    try:
        # An alias is written through to its collection; versioned=True publishes the alias only
        # once the collection is complete.
        held.collection, publish_as = (
            versioned_target(held.client, collection) if versioned else (resolve_alias(held.client, collection), None)
        )
        try:
            check_target(
                held.client,
                held.collection,
                target,
                model_config,
                reference,
                layout,
                weights=weights,
                truncate_dim=settings.truncate_dim,
                quantize=quantization,
            )
        except Exception as err:
            store_error = server_error(target, err, 1)
            if store_error is err:
                raise
            raise store_error from err
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
