"""A document's chunks as Qdrant points to write, and writing embedded chunks into a collection idempotently.

What a point holds (its id, payload and vector names) is :mod:`c2v_rag.store.point_schema`; this
module turns documents into such points and writes them.

Every engine goes through here, so they cannot drift apart: the chunks of the pipeline
(:mod:`c2v_rag.rag.ingestion.pipeline`, and the Ray engine's chunking tasks) come from
:func:`document_chunks`, and every write into a collection, by the in-process engine, a Ray actor or
the Ray driver, is :class:`~c2v_rag.rag.ingestion.sinks.QdrantSink` calling the same :class:`PointWriter`.

- :func:`document_chunks` turns a document into chunks with their deterministic point ids
  (document id, chunk index, content hash) and their payloads (:func:`~c2v_rag.store.point_schema.chunk_point`);
- :class:`SeenDocuments` tells a document met again in the same input (skipped) from two documents
  that share an id (refused, or the second skipped and recorded with ``on_error="continue"``);
- :meth:`PointWriter.not_stored` drops chunks already stored (a re-run embeds nothing twice) and
  records this run's source root on the stored ones;
- :meth:`PointWriter.write` upserts a batch and, for the documents whose every chunk is now
  stored, deletes their other points (an older version's chunks), counting what it replaced
  (:class:`Replaced`) where its lookup saw the document stored before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from c2v_rag.documents.payload_keys import DOC_HASH_KEY
from c2v_rag.store.point_schema import DOC_ID_KEY, PAYLOAD_LAYOUT, SOURCE_ROOT_KEY, chunk_point, content_hash

if TYPE_CHECKING:
    from c2v_rag.documents.chunking import TokenChunker
    from c2v_rag.documents.reading import ReadLog
    from c2v_rag.documents.source_document import SourceDocument
    from c2v_rag.store.point_id_set import PointIdSet
    from c2v_rag.store.vectors import CollectionVectors

T = TypeVar("T")
# Points a stored-document lookup reads per request.
_SCROLL_PAGE = 1024
# call(fn, what): runs a Qdrant request ``fn`` (with retries, under a lock where needed); ``what``
# names it in messages.
Call = Callable[[Callable[[], T], str], T]


@dataclass
class PendingChunk:
    """A chunk ready to embed: its point id, text and payload, and the source root it came through."""

    point_id: str
    text: str
    payload: dict[str, Any]
    source_root: str | None = None
    # Where the chunk ends in its document's text (None: not known): how far a long document's progress bar is.
    end_char: int | None = None


@dataclass(frozen=True)
class DocumentState:
    """What a sink is asked about a document before it is chunked: whether it holds it whole under this hash."""

    doc_id: str
    # document_hash: the document's content and how it is chunked.
    doc_hash: str
    # The root this run reads it through: a document stored under another is not skipped, so that its points
    # are claimed for this root (see :meth:`PointWriter.not_stored`).
    source_root: str | None


@dataclass
class Replaced:
    """What a run replaced of the documents its lookup (:meth:`PointWriter.unchanged_documents`) found stored but
    not unchanged: the documents stored whole before under another hash (edited since, or chunked another way),
    and the old points of those and of documents a cut-off run left half stored, deleted once their new chunks
    were all stored."""

    documents: int = 0
    chunks: int = 0


@dataclass(frozen=True)
class _StoredBefore:
    """A looked-up document's points before this run (their ids), and whether it was stored whole under another
    hash."""

    ids: frozenset[str]
    changed: bool


def document_chunks(doc: SourceDocument, chunker: TokenChunker) -> Iterator[PendingChunk]:
    """``doc``'s chunks in order, with their point ids and payloads (streamed as the splitter cuts)."""
    for chunk in chunker.iter_chunks(doc.text, doc.lead, plain_text=doc.plain_text):
        pid, payload = chunk_point(doc, chunk)
        yield PendingChunk(pid, chunk.text, payload, doc.source_root, chunk.end_char)


def not_in(stored: PointIdSet, chunks: Sequence[PendingChunk]) -> list[PendingChunk]:
    """The ``chunks`` whose point ids ``stored`` (a snapshot of ids taken as a run began) does not hold, in order."""
    held = stored.isin([c.point_id for c in chunks])
    return [c for c, is_held in zip(chunks, held) if not is_held]


def document_fingerprint(doc: SourceDocument) -> str:
    """16 hex digits of the document's content: tells a repeated document from an id clash."""
    return content_hash(doc.text, doc.metadata)[:16]


def document_hash(doc: SourceDocument, chunker: TokenChunker) -> str:
    """A hash of all that decides ``doc``'s points: its id, text, metadata, source, pages and lead, how ``chunker``
    cuts, and the payload layout. A document stored whole under the same hash has the same points, so a re-run
    need not chunk it again (:meth:`PointWriter.unchanged_documents`)."""
    head = [PAYLOAD_LAYOUT, chunker.signature, doc.doc_id, doc.source, doc.lead, doc.pages, doc.metadata]
    return content_hash(doc.text, {"document": head})[:32]


# What meeting a document's id tells (SeenDocuments.meet): met for the first time, the same document again (skipped),
# or another document under an id met before (refused, or skipped with on_error="continue").
Met = Literal["new", "repeat", "clash"]


class SeenDocuments:
    """The document ids met so far in one run, each with its content fingerprint (one entry per document).

    ``in`` asks whether an id was met (sync deletes the documents of a folder that were not).

    Args:
        on_error: what :meth:`meet` does with an id met before with other content: ``"raise"`` a ValueError, or
            ``"continue"``: tell the caller (``"clash"``), who skips the second document and records why
            (:func:`skip_clash`); the first one met stays (on Ray, whichever batch came back first).
    """

    def __init__(self, on_error: Literal["raise", "continue"] = "raise") -> None:
        self.on_error = on_error
        self._fingerprints: dict[str, str] = {}

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._fingerprints

    def __len__(self) -> int:
        return len(self._fingerprints)

    def meet(self, doc_id: str, fingerprint: str, source: str | None = None) -> Met:
        """``"new"`` the first time ``doc_id`` is met, ``"repeat"`` for the same document again (to skip).

        Raises:
            ValueError: ``doc_id`` was met before with other content (``source``, when known, names where the
                second one came from); with ``on_error="continue"``, ``"clash"`` is returned instead.
        """
        previous = self._fingerprints.get(doc_id)
        if previous is None:
            self._fingerprints[doc_id] = fingerprint
            return "new"
        if previous == fingerprint:
            return "repeat"
        if self.on_error == "raise":
            raise ValueError(
                f"document id {doc_id!r} appears twice in the input with different content"
                f"{f' (second one from {source})' if source else ''}; document ids must be unique: fix the input, "
                "or pass on_error='continue' (--on-error continue) to store the one met first and skip the others"
            )
        return "clash"


def skip_clash(log: ReadLog, doc_id: str, source: str | None) -> None:
    """Record in ``log`` the document skipped as a ``"clash"`` (:meth:`SeenDocuments.meet`), with its file (read
    incompletely: a sync keeps what the file held before)."""
    where = f"{source} (id {doc_id!r})" if source else f"the document {doc_id!r}"
    reason = (
        f"its document id {doc_id!r} was met before with other content; the one met first is stored "
        "(ids must be unique)"
    )
    log.skip_record(where, source, reason)


class PointWriter:
    """Writes embedded chunks into one collection: skips stored ones, upserts, deletes stale ones.

    Args:
        client: an open ``QdrantClient``.
        layout: the vectors each point carries (dense, and sparse for a hybrid collection).
        call: runs each request (retries; a lock for embedded Qdrant).
        fresh: the collection was created by this run, so nothing in it is stored or stale.
        scan_once: look stored documents up in one read of the whole collection (its ids, hashes and roots) rather
            than by their ids, a request per group of documents. qdrant-client's local mode filters in Python, each
            point against each id asked for, so the one read is far cheaper there; a server or Qdrant Edge filters
            on its index.
    """

    def __init__(
        self,
        client: Any,
        collection: str,
        layout: CollectionVectors,
        call: Call,
        *,
        fresh: bool,
        scan_once: bool = False,
    ) -> None:
        self.client = client
        self.collection = collection
        self.layout = layout
        self.call = call
        self.fresh = fresh
        self.scan_once = scan_once
        self._scanned: dict[str, list[tuple[Any, Any, str]]] | None = None
        # Documents looked up and found stored but not unchanged, until a batch completes them (then counted).
        self._before: dict[str, _StoredBefore] = {}
        self.replaced = Replaced()

    def not_stored(self, chunks: Sequence[PendingChunk]) -> list[PendingChunk]:
        """The chunks not in the collection yet. Stored ones are not rewritten; their recorded source
        root follows this run's, so a sync of the folder they are now read from sees them as its own."""
        from c2v_rag.rag.ingestion.sync import roots_to_claim

        if self.fresh or not chunks:
            return list(chunks)
        ids = [c.point_id for c in chunks]
        records = self.call(
            lambda: self.client.retrieve(self.collection, ids, with_payload=[SOURCE_ROOT_KEY], with_vectors=False),
            "checking stored chunks",
        )
        stored = {str(r.id) for r in records}
        claims = roots_to_claim(records, {c.point_id: c.source_root for c in chunks})
        for root, claimed in claims.items():
            self.call(
                functools.partial(
                    self.client.set_payload, self.collection, {SOURCE_ROOT_KEY: root}, points=claimed, wait=True
                ),
                f"recording the source root of {len(claimed)} stored chunks",
            )
        return [c for c in chunks if c.point_id not in stored]

    def points(
        self,
        chunks: Sequence[PendingChunk],
        vectors: Any,
        sparse: Sequence[tuple[list[int], list[float]]] | None = None,
    ) -> list[Any]:
        """``PointStruct``s of embedded ``chunks`` (``vectors`` in the same order)."""
        from qdrant_client.http import models

        return [
            models.PointStruct(
                id=c.point_id, vector=self.layout.point_vector(v, sparse[i] if sparse else None), payload=c.payload
            )
            for i, (c, v) in enumerate(zip(chunks, vectors))
        ]

    def unchanged_documents(self, states: Sequence[DocumentState]) -> dict[str, int]:
        """doc id -> its points, for the documents of ``states`` stored whole under the same hash and source root.

        A document qualifies when every point with its id carries its hash, which :meth:`write` puts on a
        document's points only once all of them are stored; a run cut off midway, an edited document, other
        chunking settings or points still waiting to be deleted leave a point without it, and the document is
        chunked again.
        """
        if self.fresh or not states:
            return {}
        if not self.scan_once:
            stored = self._stored_documents([s.doc_id for s in states])
        else:
            if self._scanned is None:
                self._scanned = self._stored_documents(None)
            stored = self._scanned
        unchanged = {}
        for state in states:
            points = stored.get(state.doc_id)
            if not points:
                continue
            if all((doc_hash, root) == (state.doc_hash, state.source_root) for doc_hash, root, _ in points):
                unchanged[state.doc_id] = len(points)
            else:  # chunked again: what its completion deletes is counted then
                changed = all(doc_hash is not None for doc_hash, _, _ in points) and any(
                    doc_hash != state.doc_hash for doc_hash, _, _ in points
                )
                self._before[state.doc_id] = _StoredBefore(frozenset(pid for _, _, pid in points), changed)
        return unchanged

    def _stored_documents(self, doc_ids: list[str] | None) -> dict[str, list[tuple[Any, Any, str]]]:
        """doc id -> (hash, source root, point id) of each of its points, for ``doc_ids`` (None: every document)."""
        from qdrant_client.http import models

        match = (
            None
            if doc_ids is None
            else models.Filter(must=[models.FieldCondition(key=DOC_ID_KEY, match=models.MatchAny(any=doc_ids))])
        )
        stored: dict[str, list[tuple[Any, Any, str]]] = {}
        offset = None
        while True:
            records, offset = self.call(
                functools.partial(
                    self.client.scroll,
                    self.collection,
                    scroll_filter=match,
                    limit=_SCROLL_PAGE,
                    offset=offset,
                    with_payload=[DOC_ID_KEY, DOC_HASH_KEY, SOURCE_ROOT_KEY],
                    with_vectors=False,
                ),
                "looking up stored documents",
            )
            for record in records:
                payload = record.payload or {}
                doc_id = payload.get(DOC_ID_KEY)
                if doc_id is not None:
                    stored.setdefault(str(doc_id), []).append(
                        (payload.get(DOC_HASH_KEY), payload.get(SOURCE_ROOT_KEY), str(record.id))
                    )
            if offset is None:
                return stored

    def write(
        self, points: Sequence[Any], completed: dict[str, list[str]], hashes: Mapping[str, str] | None = None
    ) -> None:
        """Upsert ``points``; then, for each document in ``completed`` (doc id -> all its point ids,
        every one now stored), record its hash (``hashes``, where known) on all its points and delete its other
        points."""
        from qdrant_client.http import models

        hashes = {d: h for d, h in (hashes or {}).items() if d in completed}
        for point in points:  # a completed document's new points carry its hash as they are written
            doc_hash = hashes.get(str(point.payload.get(DOC_ID_KEY)))
            if doc_hash is not None:
                point.payload[DOC_HASH_KEY] = doc_hash
        if points:
            self.call(
                lambda: self.client.upsert(self.collection, list(points), wait=True), f"uploading {len(points)} chunks"
            )
        written = {str(p.id) for p in points}
        # ... and its points stored before (in an earlier batch or run): one request for the batch's documents.
        marks = [
            models.SetPayloadOperation(set_payload=models.SetPayload(payload={DOC_HASH_KEY: doc_hash}, points=earlier))
            for doc_id, doc_hash in hashes.items()
            if (earlier := [pid for pid in completed[doc_id] if pid not in written])
        ]
        if marks:
            self.call(
                functools.partial(self.client.batch_update_points, self.collection, marks, wait=True),
                f"recording the hashes of {len(marks)} documents",
            )
        if completed and not self.fresh:
            keep: list[Any] = [pid for ids in completed.values() for pid in ids]
            stale = models.Filter(
                must=[models.FieldCondition(key=DOC_ID_KEY, match=models.MatchAny(any=list(completed)))],
                must_not=[models.HasIdCondition(has_id=keep)] if keep else None,
            )
            self.call(
                lambda: self.client.delete(self.collection, models.FilterSelector(filter=stale), wait=True),
                f"deleting stale chunks of {len(completed)} documents",
            )
            for doc_id, ids in completed.items():
                before = self._before.pop(doc_id, None)
                if before is not None:
                    self.replaced.documents += before.changed
                    self.replaced.chunks += len(before.ids.difference(ids))
