"""What an ingest engine is: the steps :func:`~c2v_rag.rag.ingestion.ingest.ingest` asks of it, and what it hands over.

``ingest`` checks everything that needs no model, opens the store and the collection, and leaves
the engine the work that differs between running here and running on a cluster:

1. :meth:`IngestEngine.open_input`: check and list the input before the model loads;
2. :meth:`IngestEngine.fingerprint`: what the collection records about the model (the in-process
   engine loads the model for it, the Ray engine reads the variant's config);
3. :meth:`IngestEngine.run`: chunk, embed and write every document, into the collection that
   ``ingest`` created or checked for that fingerprint.

The engines are :class:`~c2v_rag.rag.ingestion.local_engine.LocalEngine` (``engine="local"``) and
:class:`~c2v_rag.rag.ingestion.ray_engine.RayEngine` (``engine="ray"``); :func:`choose_engine` picks one by
name, for ``ingest`` and for ``embed``'s Parquet writers alike.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from c2v_rag.rag.errors import IngestError

if TYPE_CHECKING:
    from c2v_rag.documents.files import ReadLog, ReadOptions
    from c2v_rag.rag.ingestion.config import IngestConfig
    from c2v_rag.rag.options import ResolvedModel
    from c2v_rag.rag.results import IngestResult
    from c2v_rag.store.collection import QdrantConfig
    from c2v_rag.store.sparse import BM25Encoder
    from c2v_rag.store.store_backend import StoreClient
    from c2v_rag.store.vectors import CollectionVectors

logger = logging.getLogger(__name__)

ENGINE_NAMES = ("local", "ray")
T = TypeVar("T")


def choose_engine(engines: Mapping[str, T], engine: str, ray: object = None) -> T:
    """``engines[engine]``, or a ValueError naming the engines there are; ``ray`` (the caller's ``ray=``) with
    another engine than Ray is refused, since this process would otherwise run what was meant for the cluster."""
    if engine not in engines:
        raise ValueError(f"engine={engine!r}: use 'local' (this process) or 'ray' (a Ray cluster)")
    if ray is not None and engine != "ray":
        raise ValueError(
            f"ray={ray!r} is for engine='ray', and engine={engine!r} runs in this process: pass engine='ray' as well "
            "(or leave ray= out)"
        )
    return engines[engine]


@dataclass
class IngestPlan:
    """What ``ingest`` decided before the run, the same whichever engine runs it."""

    settings: IngestConfig
    target: QdrantConfig
    layout: CollectionVectors
    # Built before the model loads, so that a missing bm25s fails fast; the Ray actors build their own.
    sparse_encoder: BM25Encoder | None
    # The model as the caller chose it, resolved once (its name, config and weights' digest, read before the
    # weights load; ``quantize`` as asked: each Ray actor resolves "auto" for its own device when it loads it).
    model: ResolvedModel
    # The quantization it runs with, as the collection records it ("none" or the int8 method).
    quantization: str
    # The resolved paths a sync mirrors (empty without sync=True).
    roots: list[str] = field(default_factory=list)


@dataclass
class IngestStore:
    """The store as the run holds it: the client (which an engine may reopen), and the collection."""

    # A QdrantClient, or an EdgeClient with the same calls (both implement stores.StoreClient).
    client: StoreClient
    # ingest opened the client (and closes it), rather than being handed one.
    own_client: bool
    collection: str = ""
    # The collection was created by this run: nothing in it is stored yet, and a run that writes
    # nothing removes it.
    created: bool = False


class IngestEngine(Protocol):
    """How an ingest's chunk -> embed -> write steps run; see the module docstring for the order."""

    def open_input(self, docs: Any, read: ReadOptions, log: ReadLog) -> None:
        """Check and list ``docs`` (types, paths, suffixes, folders' files) without reading a file;
        ``log`` collects what the reading skips."""
        ...

    def fingerprint(self, plan: IngestPlan) -> dict[str, Any]:
        """What the collection records about the model that fills it (loading the model if this engine
        embeds in this process)."""
        ...

    def run(self, plan: IngestPlan, store: IngestStore) -> IngestResult:
        """Chunk, embed and write every document into ``store.collection``; with ``on_error="raise"`` a
        failed batch raises :class:`~c2v_rag.rag.errors.IngestError` (see :func:`raise_failed`)."""
        ...


def raise_failed(result: IngestResult, settings: IngestConfig) -> None:
    """With ``on_error="raise"``, a failed batch becomes an :class:`IngestError` naming its documents."""
    if result.failed and settings.on_error == "raise":
        failed = result.failed[0]
        shown = ", ".join(failed.doc_ids[:10]) + (" ..." if len(failed.doc_ids) > 10 else "")
        raise IngestError(
            f"a batch of {failed.chunks} chunks from documents [{shown}] failed: {failed.error}. "
            f"Stored so far: {result.chunks_written} chunks. Re-run the same ingest to resume; "
            "stored chunks are skipped and nothing is duplicated.",
            failed.doc_ids,
            result,
        )
    if result.failed:
        logger.warning(
            "Ingest finished with %d failed batches (documents: %s); re-run to retry them",
            len(result.failed),
            ", ".join(d for f in result.failed for d in f.doc_ids[:5]),
        )
