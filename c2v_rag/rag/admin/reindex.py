"""``reindex``: rebuild the collection behind an alias with another model, then switch the alias.

Readers keep querying the alias throughout. The new collection (``{alias}_v{n+1}``) is filled
from the stored chunks (texts, payloads and point ids unchanged), embedded with the new model;
only when every chunk is written does the alias move, in one atomic request. The old collection
stays until ``drop_previous=True`` (or you delete it), so a search that resolved the alias just
before the switch still finishes on it. Each collection records its own model, so a search
through the alias always embeds its query with the model of the collection it reads.

Writers should pause during a reindex: chunks ingested into the old collection after its scroll
passed them are not carried over.

A plain collection (an ingest without ``versioned=True``) has no alias to switch. ``convert=True`` puts one in
its place: its points are kept, vectors unchanged, as ``{name}_v1``, the re-embedded chunks go to
``{name}_v2``, and the plain collection is replaced by the alias ``{name}`` -> ``{name}_v2``. Qdrant cannot
rename a collection, so searches on the name fail between that delete and the alias (one request apart); every
later reindex of the name switches without a gap.
"""

from __future__ import annotations

import logging
import sys
import time
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel
from tqdm.auto import tqdm

from c2v_rag.core.arguments import check_count
from c2v_rag.core.progress_bar import unsized_terminal
from c2v_rag.cpu.build_progress import build_bar_shown
from c2v_rag.documents.chunking import decoder_tokens
from c2v_rag.rag.embedding import Embedder
from c2v_rag.rag.extras import require_rag
from c2v_rag.rag.options import ModelOptions
from c2v_rag.store.aliases import alias_target, aliases_of, next_version, switch_alias
from c2v_rag.store.collection import (
    QdrantConfig,
    check_collection_name,
    collection_not_found,
    ensure_collection,
    fingerprint_of,
    model_fingerprint,
    store_names,
    stored_vector_params,
)
from c2v_rag.store.point_schema import HYBRID_DENSE_NAME, payload_text
from c2v_rag.store.retry import call_with_retry
from c2v_rag.store.sparse import BM25Config, BM25Encoder, resolve_sparse
from c2v_rag.store.vectors import CollectionVectors

if TYPE_CHECKING:
    from c2v_rag.store.store_backend import StoreClient

logger = logging.getLogger(__name__)


class ReindexResult(BaseModel):
    """What a reindex did: the alias now points at ``collection`` instead of ``previous``."""

    alias: str
    previous: str
    collection: str
    chunks: int
    seconds: float
    dropped_previous: bool = False
    converted: bool = False

    def summary(self) -> str:
        switched = (
            f"the plain collection {self.alias!r} kept as {self.previous!r}, and {self.alias!r} is now an alias of "
            f"{self.collection!r}"
            if self.converted
            else f"alias {self.alias!r} switched from {self.previous!r}"
        )
        return f"{self.chunks} chunks re-embedded into {self.collection!r}; {switched} in {self.seconds:.1f} s" + (
            f"; {self.previous!r} deleted" if self.dropped_previous else ""
        )


def reindex_collection(
    collection: str,
    target: QdrantConfig,
    chosen: ModelOptions,
    *,
    sparse: Literal["keep", "bm25"] | BM25Config | None = "keep",
    batch_size: int = 256,
    drop_previous: bool = False,
    convert: bool = False,
    show_progress: bool = True,
    decoder_max_length: int | None = None,
    client: StoreClient | None = None,
) -> ReindexResult:
    """Re-embed the chunks behind alias ``collection`` with ``chosen`` and switch the alias to them:
    :meth:`c2v_rag.Collection.reindex`, which documents the arguments.

    The new collection keeps what the old one recorded: its ``truncate_dim``, its quantization (unless
    ``chosen.quantize`` names one), its part weights (``encoder_share``), its documents' instruction,
    (``sparse="keep"``) its BM25 vectors and, unless ``decoder_max_length`` names another (0: whole chunks), the
    decoder tokens its chunks were read with.
    """
    from c2v_rag.rag.ingestion.config import IngestConfig

    require_rag("c2v_rag.reindex")
    check_collection_name(collection)
    check_count("batch_size", batch_size)
    if decoder_max_length is not None:
        IngestConfig(decoder_max_length=decoder_max_length)  # refused here as an ingest refuses it, before any work
    target.check_present(collection, client)
    with target.opened(client) as qdrant_client:
        previous = alias_target(qdrant_client, collection)
        plain = None
        if previous is None:
            if not qdrant_client.collection_exists(collection):
                raise collection_not_found(collection, target, store_names(qdrant_client))
            behind = aliases_of(qdrant_client, collection)
            if behind:
                # Converting it would delete it, and with it the alias that readers use.
                raise ValueError(
                    f"collection {collection!r} at {target.location} is behind the alias {behind[0]!r}: reindex "
                    f"that (c2v-rag reindex --collection {behind[0]}), which re-embeds these chunks into a new "
                    f"collection and switches {behind[0]!r} to it. Converting {collection!r} itself would leave "
                    f"{behind[0]!r} with no collection."
                )
            if not convert:
                raise ValueError(
                    f"collection {collection!r} at {target.location} is a plain collection, not an alias, so "
                    "readers cannot be switched over. Pass convert=True (c2v-rag reindex --convert) to keep its "
                    f"points as '{collection}_v1' and put an alias in its place (searches on it fail for a moment), "
                    "or ingest into an alias with versioned=True (c2v-rag ingest --versioned) and reindex that."
                )
            plain = collection
        # The chunks' collection (the plain one, or the alias' current one) says how they were embedded.
        recorded = fingerprint_of(qdrant_client.get_collection(plain or previous or collection)) or {}
        resolved = chosen.resolve()
        with build_bar_shown(show_progress):  # a first int8 load's bar, like the reindex's
            reference, c2v = resolved.reference, resolved.as_recorded(recorded)  # a failed load changes nothing
        # The summary's seconds are the re-embedding's, as an ingest's are: a first int8 load builds for a while.
        started = time.perf_counter()
        truncate_dim = recorded.get("truncate_dim")
        documents = recorded.get("document_prompt") or {}
        made: list[str] = []  # the collections this call creates: dropped if it fails before publishing
        try:
            if plain is not None:
                previous = next_version(qdrant_client, plain)
                made.append(previous)
                _keep_plain(qdrant_client, plain, previous, target, batch_size)
            assert previous is not None
            info = qdrant_client.get_collection(previous)
            source = CollectionVectors.from_fingerprint(
                fingerprint_of(info), target.model_copy(update={"vector_name": ""})
            )
            bm25 = source.bm25 if sparse == "keep" else resolve_sparse(sparse)
            layout = CollectionVectors(
                dense=source.dense or (HYBRID_DENSE_NAME if bm25 else ""),
                sparse=(source.sparse or target.sparse_vector_name) if bm25 else None,
                bm25=bm25,
            )
            # The new collection measures similarity as the old one did; storage options come from qdrant=.
            params = stored_vector_params(info, previous, target.model_copy(update={"vector_name": source.dense}))
            if params.distance.value.lower() in ("cosine", "dot", "euclid"):
                target = target.model_copy(update={"distance": params.distance.value.lower()})
            new = next_version(qdrant_client, collection)
            made.append(new)
            # the chunks are read as they were: their instruction and the decoder tokens recorded (or asked)
            read = (
                recorded.get("decoder_max_length") if decoder_max_length is None else decoder_tokens(decoder_max_length)
            )
            fingerprint = model_fingerprint(
                c2v, reference, truncate_dim, recorded.get("document_prompt"), recorded.get("chunk_context"), read
            )
            ensure_collection(qdrant_client, new, target, fingerprint, layout)
            _copy_indexes(qdrant_client, info, new)
            chunks = _refill(
                qdrant_client,
                previous,
                new,
                layout,
                Embedder(
                    c2v,
                    task=documents.get("task"),
                    text_instruction=documents.get("instruction"),
                    batch_size=batch_size,
                    truncate_dim=truncate_dim,
                    decoder_max_length=read,
                ),
                BM25Encoder(bm25) if bm25 else None,
                batch_size,
                show_progress,
            )
            stored = _count(qdrant_client, new)
            if stored != chunks:
                left = (
                    f"{plain!r} was left as it was" if plain else f"the alias {collection!r} was left on {previous!r}"
                )
                raise RuntimeError(f"{new!r} holds {stored} points after copying {chunks} chunks; {left}")
            if plain is not None and _count(qdrant_client, plain) != _count(qdrant_client, previous):
                raise RuntimeError(
                    f"{plain!r} changed while it was re-embedded (writers did not pause); it was left as it was: "
                    "pause the writers and run the reindex again"
                )
        except BaseException:
            # Nothing half-built is ever published; drop what this call made so that a re-run starts clean.
            for name in made:
                if qdrant_client.collection_exists(name):
                    qdrant_client.delete_collection(name)
            raise
        if plain is not None:
            _replace_with_alias(qdrant_client, plain, new, previous)
        else:
            switch_alias(qdrant_client, collection, new)
        logger.info("Alias %r now points at %r (was %r)", collection, new, previous)
        if drop_previous:
            qdrant_client.delete_collection(previous)
        return ReindexResult(
            alias=collection,
            previous=previous,
            collection=new,
            chunks=chunks,
            seconds=time.perf_counter() - started,
            dropped_previous=drop_previous,
            converted=plain is not None,
        )


def _count(client: StoreClient, collection: str) -> int:
    return int(client.count(collection, exact=True).count)


def _keep_plain(client: StoreClient, plain: str, copy: str, target: QdrantConfig, batch_size: int) -> None:
    """Copy the plain collection's points, vectors unchanged, into ``copy`` (made like it)."""
    from c2v_rag.rag.admin.migrate import copy_collection

    copied = copy_collection(
        client, client, plain, copy, client.get_collection(plain), target, target.location, batch_size
    )
    stored = _count(client, copy)
    if stored != copied or stored != _count(client, plain):
        raise RuntimeError(
            f"{copy!r} holds {stored} points after copying {copied} of {plain!r}: were chunks written meanwhile? "
            "Nothing was changed; pause the writers and run the reindex again"
        )


def _replace_with_alias(client: StoreClient, plain: str, new: str, kept: str) -> None:
    """Delete the plain collection (its points are in ``kept``) and create the alias of its name to ``new``."""
    client.delete_collection(plain)
    try:
        switch_alias(client, plain, new)
    except BaseException as err:
        raise RuntimeError(
            f"the plain collection {plain!r} was deleted (its points are kept in {kept!r}, re-embedded in {new!r}) "
            f"but the alias could not be created: {err}. Create it with "
            f"c2v_rag.store.aliases.switch_alias(client, {plain!r}, {new!r})"
        ) from err


def _copy_indexes(client: StoreClient, info: Any, new: str) -> None:
    """The old collection's payload indexes (a server's; embedded Qdrant keeps none)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")
        for field, schema in (info.payload_schema or {}).items():
            if field != "doc_id":  # ensure_collection made that one
                client.create_payload_index(new, field, field_schema=schema.data_type, wait=True)


def _refill(
    client: StoreClient,
    previous: str,
    new: str,
    layout: CollectionVectors,
    embedder: Embedder,
    sparse: BM25Encoder | None,
    batch_size: int,
    show_progress: bool,
) -> int:
    from qdrant_client.http import models

    total = client.count(previous, exact=True).count
    progress = tqdm(
        total=total,
        desc=f"Reindexing into {new}",
        unit="chunk",
        disable=not show_progress,
        **unsized_terminal(sys.stderr),
    )
    written, offset = 0, None
    try:
        while True:
            records, offset = client.scroll(
                previous, limit=batch_size, offset=offset, with_payload=True, with_vectors=False
            )
            if records:
                texts = [payload_text(r.payload or {}) for r in records]
                dense = embedder.embed_documents(texts)
                pairs: Sequence[tuple[list[int], list[float]] | None] = [None] * len(texts)
                if sparse is not None:
                    pairs = sparse.encode_documents(texts)
                points = [
                    models.PointStruct(id=r.id, vector=layout.point_vector(d, p), payload=r.payload)
                    for r, d, p in zip(records, dense, pairs)
                ]
                call_with_retry(
                    lambda: client.upsert(new, points, wait=True),  # noqa: B023
                    what=f"uploading {len(points)} chunks",
                    attempts=5,
                    initial_wait=0.5,
                    max_wait=30.0,
                )
                written += len(points)
                progress.update(len(points))
            if offset is None:
                return written
    finally:
        progress.close()
