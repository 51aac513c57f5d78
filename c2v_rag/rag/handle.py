"""One handle per collection: the store, the model and the collection's name, resolved once.

:func:`open_collection` (``c2v_rag.open_collection``) returns a :class:`Collection`. Every call on it reuses
what it resolved: the store's location and engine, and the variant (its reference, config and weights' digest,
read before the weights load; the weights themselves load once per process,
:func:`~c2v_rag.rag.embedding.load_model`). What the collection recorded (its vector size, ``truncate_dim``,
quantization, part weights, BM25 vectors, the model that filled it) is read from the store on each call, since a
reindex may switch an alias in between; queries get their instruction from the one policy,
:func:`~c2v_rag.core.instructions.query_prompt`.

The top-level functions (``c2v_rag.ingest``, ``search``, ``search_many``, ``asearch``, ``reindex``, ``migrate``,
``delete_documents``, ``load_embedded``) are this handle, opened for one call.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypedDict

from c2v_rag.documents.chunking import ChunkContext
from c2v_rag.rag.options import (
    OPEN_KEYS,
    SEARCH_KEYS,
    CommonSearchOptions,
    ConnectionOptions,
    ModelOptions,
    OpenKeywords,
    OpenKeywordsWithoutUrl,
    SearchKeywords,
    SearchOptions,
    search_options,
    split_keywords,
)
from c2v_rag.store.collection import DEFAULT_COLLECTION, QdrantConfig, check_collection_name, fingerprint_of

if TYPE_CHECKING:
    from qdrant_client.http import models
    from typing_extensions import Unpack

    from c2v_rag.model.causal2vec import Causal2Vec
    from c2v_rag.rag.admin.delete import DeleteResult
    from c2v_rag.rag.admin.listing import CollectionSummary
    from c2v_rag.rag.admin.load_embedded import LoadResult
    from c2v_rag.rag.admin.migrate import MigrateResult
    from c2v_rag.rag.admin.reindex import ReindexResult
    from c2v_rag.rag.ingestion.config import IngestConfig
    from c2v_rag.rag.ingestion.ray_dataflow import RayOptions
    from c2v_rag.rag.results import IngestResult
    from c2v_rag.rag.retrieval.search import SearchHit
    from c2v_rag.store.filters import FilterLike
    from c2v_rag.store.sparse import BM25Config
    from c2v_rag.store.store_backend import StoreClient


class IngestKeywords(TypedDict, total=False):
    """What one ingest takes besides the documents: :class:`~c2v_rag.rag.IngestConfig`'s common fields (each
    laid over ``config=``), the engine and ``versioned``."""

    chunk_size: int | None
    chunk_overlap: int | None
    batch_size: int | None
    on_error: Literal["raise", "continue"] | None
    sync: bool | None
    exclude: list[str] | None
    text_suffixes: list[str] | None
    every_format: bool | None
    show_progress: bool | None
    sparse: Literal["bm25"] | BM25Config | None
    payload_indexes: dict[str, str] | None
    truncate_dim: int | Literal["full"] | None
    chunk_context: ChunkContext | None
    decoder_max_length: int | None
    config: IngestConfig | None
    engine: Literal["local", "ray"]
    ray: RayOptions | str | None
    versioned: bool


INGEST_KEYS = frozenset(IngestKeywords.__annotations__)


class ReindexKeywords(TypedDict, total=False):
    """What a reindex takes besides the model (:func:`~c2v_rag.rag.admin.reindex.reindex_collection` holds the
    defaults: ``sparse="keep"``, ``batch_size=256``, ``drop_previous=False``, ``convert=False``,
    ``show_progress=True``)."""

    sparse: Literal["keep", "bm25"] | BM25Config | None
    batch_size: int
    drop_previous: bool
    convert: bool
    show_progress: bool
    decoder_max_length: int | None


REINDEX_KEYS = frozenset(ReindexKeywords.__annotations__)


class LoadKeywords(TypedDict, total=False):
    """What loading an ``embed`` folder takes besides the folder (:func:`~c2v_rag.rag.admin.load_embedded.
    load_embedded` holds the defaults: ``sparse=None``, ``payload_indexes=None``, ``batch_size=256``,
    ``show_progress=True``, ``versioned=False``)."""

    sparse: Literal["bm25"] | BM25Config | None
    payload_indexes: dict[str, str] | None
    batch_size: int
    show_progress: bool
    versioned: bool


LOAD_KEYS = frozenset(LoadKeywords.__annotations__)


class CheckedCollection(NamedTuple):
    """What :meth:`Collection.check_model` found: the concrete collection behind the name (an alias resolved), the
    prefix size it stores (None: whole vectors) and its record (``{}`` for a collection another tool made)."""

    name: str
    truncate_dim: int | None
    recorded: dict[str, Any]


class Collection:
    """A Qdrant collection of c2v_rag chunks, with the store that holds it and the model that embeds for it.

    Args:
        name: the collection, or an alias (resolved on each call, so a reindex switching it is never half-seen).
        qdrant_url: a Qdrant server, e.g. ``https://host:6333``; None: embedded Qdrant in ``path``.
        path: the embedded Qdrant directory; None: ``$C2V_RAG_QDRANT_PATH`` or the user data directory.
        api_key: the server's key; None: ``$QDRANT_API_KEY``. Never logged, never in a repr.
        prefer_grpc: gRPC to the server. ``store``: the embedded engine, ``"local"`` (qdrant-client's local
            mode) or ``"edge"`` (Qdrant Edge); None: an existing directory's, else local.
        qdrant: a whole :class:`~c2v_rag.QdrantConfig` (timeouts, vector names, storage); the fields above,
            when set, are laid over it.
        model: a preset name, a variant directory or a loaded :class:`~c2v_rag.Causal2Vec`. None: the default
            preset for an ingest, the model the collection was built with for a search (another is refused).
        device, dtype: how the model loads (None: cuda when present; auto).
        quantize: ``"none"``, ``"int8"`` (CPU, the decoder's linear layers in int8) or ``"auto"`` (int8 where it
            met the quality bound). None: for an ingest, an existing collection's own, else ``"auto"`` (int8 on
            the CPUs of docs/performance.md's table; ``$C2V_RAG_QUANTIZE`` sets another); the collection's own
            for a search and a reindex.
        client: an open ``QdrantClient`` (or ``AsyncQdrantClient`` for :meth:`asearch`) to use, left open.
            Without one each call opens the store and closes it, so an embedded store stays free in between.

    A bad option fails on the call that uses it, before any store opens or model loads.
    """

    def __init__(self, name: str = DEFAULT_COLLECTION, **kwargs: Unpack[OpenKeywords]) -> None:
        split_keywords("Collection", kwargs, OPEN_KEYS)
        self.name = name
        self.connection = ConnectionOptions.as_given(kwargs)
        self.model = ModelOptions.as_given(kwargs)
        self.client = kwargs.get("client")

    def __repr__(self) -> str:
        where = self.connection.qdrant_url or self.connection.path or "the default store"
        return f"Collection({self.name!r} at {where}, model={self.model.model!r})"

    @functools.cached_property
    def target(self) -> QdrantConfig:
        """The store, resolved once: the default directory filled in, an existing directory's engine detected."""
        return self.connection.resolve()

    # ------------------------------------------------------------------ search

    def search(self, query: str, top_k: int = 5, **kwargs: Unpack[SearchKeywords]) -> list[SearchHit]:
        """The ``top_k`` chunks nearest to ``query``, best first.

        The query is embedded with the model the collection was built with (another is refused), at the size
        it stores, with the query instruction: ``instruction``, else ``task``'s, else the variant's default,
        else MS MARCO's (:func:`~c2v_rag.core.instructions.query_prompt`). ``examples`` are in-context
        ``(query, response)`` pairs before it (None: the task's registered ones). ``mode`` is ``"dense"``,
        ``"sparse"`` (BM25) or ``"hybrid"`` (both, fused in Qdrant by ``fusion``: ``"rrf"`` or ``"dbsf"``); the
        last two need an ingest with ``sparse="bm25"``. ``filter`` takes a ``qdrant_client`` Filter or the dict
        form (``{"file_name": "a.md"}``, ``{"year": {"gte": 2020}}``, ``{"must_not": {...}}``).
        ``score_threshold`` drops weaker hits; ``group_by_document`` returns each document's best chunk;
        ``with_vectors`` adds each hit's stored vector. ``rerank=N`` reads the top N hits and returns the best
        ``top_k`` of them by the decoder's likelihood of the query given each hit, fused with their scores (each
        hit's ``rerank_score``; :class:`~c2v_rag.Causal2VecReranker`, loaded once per process). ``options=`` takes all
        of these as one :class:`~c2v_rag.SearchOptions`, the keywords given laid over it.
        """
        from c2v_rag.rag.retrieval.search import check_query

        check_query(query)
        return self._search("search", [query], top_k, kwargs)[0]

    def search_many(
        self, queries: Sequence[str], top_k: int = 5, **kwargs: Unpack[SearchKeywords]
    ) -> list[list[SearchHit]]:
        """:meth:`search` for many queries: embedded in one batch, sent in one Qdrant request; one list of hits
        per query, in their order."""
        return self._search("search_many", queries, top_k, kwargs)

    def prepare_search(self, top_k: int = 5, **kwargs: Unpack[SearchKeywords]) -> None:
        """Do what a :meth:`search` with these arguments does before its query, without one: check the collection,
        its model, the filter's keys and the mode (raising what the search would), then load the model and, where
        the search reranks, the reranker (once per process). A program that answers queries as they come (a
        prompt, a bot) calls it first: a wrong option fails before the first query is asked, and the first search is
        as fast as the next."""
        from c2v_rag.rag.retrieval.search import prepare_search

        options = self._options("prepare_search", kwargs)
        prepare_search(top_k, self.target, self.model, options, self._sync_client("prepare_search"))

    def _search(self, where: str, queries: Sequence[str], top_k: int, kwargs: Any) -> list[list[SearchHit]]:
        from c2v_rag.rag.retrieval.search import search_queries

        options = self._options(where, kwargs)
        return search_queries(queries, top_k, self.target, self.model, options, self._sync_client(where))

    def _options(self, where: str, kwargs: Any) -> SearchOptions:
        """The call's :class:`SearchOptions`: its search keywords (any other is a TypeError) over ``options=``."""
        (given,) = split_keywords(where, kwargs, SEARCH_KEYS)
        return search_options(where, given, self.name)

    async def asearch(self, query: str, top_k: int = 5, **kwargs: Unpack[SearchKeywords]) -> list[SearchHit]:
        """:meth:`search` for asyncio: Qdrant through ``AsyncQdrantClient`` (``client`` when the handle has one),
        the model and the embedding in a worker thread, so the event loop stays free. An embedded store is searched
        whole in a worker thread, concurrent searches of it taking turns (it opens in one client at a time)."""
        from c2v_rag.rag.retrieval.search import asearch_query

        options = self._options("asearch", kwargs)
        return await asearch_query(query, top_k, self.target, self.model, options, self.client)

    def search_vector(
        self,
        vector: Sequence[float] | None,
        top_k: int = 5,
        options: CommonSearchOptions | None = None,
        *,
        query: str | None = None,
        checked: CheckedCollection | None = None,
    ) -> list[SearchHit]:
        """The ``top_k`` chunks nearest to an already-embedded query ``vector`` (of the size the collection
        stores), filtered and grouped by ``options`` (``filter``, ``score_threshold``, ``group_by_document``).
        ``options.mode="sparse"`` or ``"hybrid"`` also needs the query's text, ``query``, for the BM25 side (a
        sparse search takes ``vector=None``). ``checked``, this handle's :meth:`check_model`, saves reading the
        alias and the collection's record again (round trips to a server): its concrete collection is searched."""
        from c2v_rag.rag.retrieval.search import nearest_chunks

        name, recorded = (self.name, None) if checked is None else (checked.name, checked.recorded)
        with self._opened() as client:
            return nearest_chunks(client, name, self.target, vector, top_k, options, query, recorded=recorded)

    def check_model(self, model: Causal2Vec) -> CheckedCollection:
        """The concrete collection behind this name, the prefix size it stores and its record, once it is found to
        hold ``model``'s vectors: :class:`~c2v_rag.CollectionNotFoundError` or
        :class:`~c2v_rag.CollectionMismatchError` otherwise. A server checks its model this way."""
        from c2v_rag.store.collection import check_collection, model_fingerprint

        with self._opened() as client:
            concrete, info = self._concrete(client)
            recorded = fingerprint_of(info) or {}
            truncate_dim = recorded.get("truncate_dim")
            fingerprint = model_fingerprint(model, None, truncate_dim)
            check_collection(client, concrete, self.target, fingerprint, info=info, asked=self.name)
            return CheckedCollection(concrete, truncate_dim, recorded)

    # ------------------------------------------------------------------ writes

    def ingest(self, docs: Any, **kwargs: Unpack[IngestKeywords]) -> IngestResult:
        """Chunk, embed and store ``docs``; safe to re-run (stored chunks are skipped, nothing is duplicated).

        Args:
            docs: strings, dicts (``text``, ``metadata``, optional ``id``), LlamaIndex Documents or Nodes,
                LangChain Documents, paths to files or folders (text, Markdown, HTML, PDF, Word, PowerPoint,
                Excel, CSV, JSONL, Parquet...: docs/ingest-and-search.md), or an iterable of these (streamed). A
                new collection is created for the model's vectors; an existing one must match the model, its
                vector size and distance.
            chunk_size, chunk_overlap: decoder tokens per chunk and shared by neighbours (200 and 20).
            batch_size: chunks embedded and uploaded together (256). ``show_progress``: a bar with an ETA.
            on_error: ``"raise"`` (default) stops at a batch that still fails after retries
                (:class:`~c2v_rag.IngestError`, naming its documents; re-running resumes), an unreadable file
                or a bad JSONL record; ``"continue"`` records each and goes on.
            sync: mirror the given files and folders: after a complete run, delete the points of documents gone
                from them (never points from other paths or from non-path inputs, never after a failed batch).
            exclude: glob patterns of the folders' files and subfolders to leave out, as in a ``.gitignore``
                (``["node_modules", "*.min.html", "drafts/*"]``); with ``sync``, their points are deleted.
            text_suffixes: more suffixes a folder's files are read with, as plain text (``[".py", ".log"]``: source
                code, logs); a suffix a format reads already is refused.
            every_format: read every copy of a page a folder holds in several formats (``guide.md`` beside
                ``guide.html``); by default the first of source markup, HTML, plain text, a word processor's file
                and PDF alone, so that a search finds the page once; with ``sync``, the others' points are deleted.
            sparse: ``"bm25"`` also stores a BM25 sparse vector per chunk, for ``mode="sparse"``/``"hybrid"``
                (None: what an existing collection holds, so a hybrid one's new chunks get theirs, else none).
            payload_indexes: metadata key -> Qdrant index type (``keyword``, ``integer``, ``float``, ``bool``,
                ``datetime``, ``text``, ``uuid``), for fast filters on a server.
            truncate_dim: store shorter vectors, one of the sizes the variant was trained for (its
                ``matryoshka_dims``), or ``"full"``, the whole vector; the collection records it and search
                embeds queries at that size (None: what an existing collection recorded, else the whole vector).
            chunk_context: ``"lead"`` (the default for a new collection) starts each chunk after a document's
                first with the document's opening where it opens with a title (the title and the line under it, at
                most 200 characters, the title alone where that line is a heading; the point's ``lead_chars``
                metadata counts them), stored and embedded with the chunk; ``"headings"``, that opening with the
                headings the chunk lies under after the title (``Title › Chapter › Section``, its title line), for
                long pages; ``"sections"``, as ``"headings"``, with chunks cut at headings (whole short sections
                share a chunk, a long one is cut inside itself); ``"none"``, chunks alone. The collection records
                it, and a later ingest into it uses what it recorded (None: that; a collection made before it was
                recorded, or by another tool, stays ``"none"``).
            decoder_max_length: the decoder tokens each chunk is read with (the encoder, and through it the
                Contextual token, reads all of it); 0 reads whole chunks. The collection records it, and a later
                ingest into it uses what it recorded (None: that, whole chunks where it records none; for a new
                collection, 96 for a model with a Contextual token, whole chunks for one without;
                docs/ingest-and-search.md has the trade).
            config: an :class:`~c2v_rag.IngestConfig` with the rest (retries, a document instruction, file size
                limits...); the keywords above, when not None, are laid over it.
            engine: ``"local"`` (this process) or ``"ray"`` (a Ray cluster, ``ray=`` a
                :class:`~c2v_rag.RayOptions` or an address): the same point ids, payloads and vectors.
            versioned: the name is an alias: a new one gets ``{name}_v1`` and the alias once every chunk is
                written; :meth:`reindex` later rebuilds it behind the alias.

        Everything that needs no model is checked before it loads: the paths and their suffixes, the store (a
        locked directory, an unreachable server), an existing collection's size, distance and model. A run
        that stops before writing a point removes the collection it created; Ctrl-C raises
        :class:`~c2v_rag.IngestInterrupted` once the batches already embedded are stored.
        """
        from c2v_rag.rag.ingestion.ingest import ingest_documents

        settings, run = _ingest_settings(kwargs)
        client = self._sync_client("ingest")
        return ingest_documents(docs, self.name, self.target, self.model, settings, client=client, **run)

    def watch(
        self,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        interval: float = 10.0,
        stop: threading.Event | None = None,
        on_result: Callable[[IngestResult], None] | None = None,
        on_failure: Callable[[Exception], None] | None = None,
        **kwargs: Unpack[IngestKeywords],
    ) -> IngestResult:
        """:meth:`ingest` the files and folders ``paths``, then again each time a file under them is added, changed
        or deleted, until ``stop`` is set (from another thread) or Ctrl-C; the last run's result.

        Every ``interval`` seconds the paths are listed as ingest lists them and each file's size and modification
        time compared with the last look's. Each run is an ordinary ingest (``kwargs`` as :meth:`ingest` takes
        them; ``sync=True`` makes deleted files lose their points), so it embeds only what changed, with the model
        loaded once. ``on_result`` gets each run's result; a run after the first that fails goes to ``on_failure``
        (default: a logged warning) and the watch goes on; the first run's errors are raised. Run it in a thread
        to keep a collection current beside an application::

            stop = threading.Event()
            threading.Thread(target=papers.watch, args=("docs/",), kwargs={"sync": True, "stop": stop}).start()
        """
        from c2v_rag.rag.ingestion.ingest import ingest_documents
        from c2v_rag.rag.ingestion.watch import watch

        given = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        folders = [Path(p) for p in given]
        settings, run = _ingest_settings(kwargs)
        return watch(
            lambda: ingest_documents(
                folders, self.name, self.target, self.model, settings, client=self._sync_client("watch"), **run
            ),
            folders,
            settings.read_options(),
            interval=interval,
            stop=stop,
            on_result=on_result,
            on_failure=on_failure,
        )

    def reindex(self, model: str | Path | Causal2Vec | None = None, **kwargs: Unpack[ReindexKeywords]) -> ReindexResult:
        """Re-embed the chunks behind this alias with ``model`` (None: the handle's model, else the default
        preset) into ``{name}_v{n+1}``, then switch the alias to it in one request; readers keep searching the
        old one meanwhile, and writers should pause.

        The new collection keeps what the old one recorded: ``truncate_dim``, the quantization (unless the
        handle names one), the part weights (``encoder_share``), the documents' instruction, and with
        ``sparse="keep"`` its BM25 vectors (``"bm25"`` adds them, None drops them), and the decoder tokens its chunks
        were read with (``decoder_max_length``: another N, or 0 for whole chunks). ``drop_previous`` deletes
        the old collection after the switch. ``convert`` turns a plain collection into an alias: its points are
        kept as ``{name}_v1`` and the name becomes an alias of ``{name}_v2`` (searches on it fail for one
        request's time); without it a plain collection is refused.
        """
        from c2v_rag.rag.admin.reindex import reindex_collection

        (given,) = split_keywords("reindex", kwargs, REINDEX_KEYS)
        chosen = self.model if model is None else self.model.model_copy(update={"model": model})
        return reindex_collection(self.name, self.target, chosen, client=self._sync_client("reindex"), **given)

    def migrate(self, to: Collection, *, batch_size: int = 256, show_progress: bool = True) -> MigrateResult:
        """Copy this collection into ``to`` (another store, or another name), vectors unchanged: points keep
        their ids, payloads and vectors, the copy its recorded model and layout. An alias is recreated in the
        target, pointing at the copy; a stopped migration resumes when run again. ``show_progress``: a bar of
        the points copied, with an ETA."""
        from c2v_rag.rag.admin.migrate import migrate_collection

        name = to.name if to.name != self.name else None  # None: the copy keeps the concrete name, and the alias
        return migrate_collection(self.name, self.target, to.target, name, batch_size, show_progress)

    def load_embedded(self, folder: str | os.PathLike[str], **kwargs: Unpack[LoadKeywords]) -> LoadResult:
        """Store the chunks and vectors that ``embed`` wrote into ``folder`` in this collection, without embedding
        them again: the points an ingest of the same documents with the same model stores (ids, payloads, vectors),
        the collection recording that model (made from the files' record when new, refused when it holds another
        model's vectors; no model loads). Points already stored are skipped, so a stopped load resumes when run
        again and a folder that grew loads its new chunks.

        Args:
            folder: the folder ``c2v_rag.embed``/``c2v-rag embed --out`` wrote (on this machine, or copied here).
            sparse: ``"bm25"`` gives a new collection BM25 sparse vectors too (computed from the chunk texts); an
                existing collection keeps its own layout (a hybrid one gets them without it).
            payload_indexes: metadata key -> Qdrant index type, as for :meth:`ingest`.
            batch_size: rows read and upserted together. ``show_progress``: a bar of the chunks, with an ETA.
            versioned: the name is an alias: vectors of another model or settings than its collection's go into a
                new collection ``{name}_v{n+1}``, and the alias moves to it once every chunk is stored (the
                previous version is kept; a stopped load resumes its version): a new model's vectors, embedded
                elsewhere, switched in without downtime, as :meth:`reindex` does. Vectors of the collection's own
                model and settings go into it.

        The files do not hold the hash by which a re-run of an ingest skips a whole unchanged document: a later
        :meth:`ingest` of the same documents chunks them again, embeds nothing and records it.
        """
        from c2v_rag.rag.admin.load_embedded import load_embedded

        (given,) = split_keywords("load_embedded", kwargs, LOAD_KEYS)
        with self._opened(creates=True) as client:
            return load_embedded(folder, self.name, self.target, client=client, **given)

    def delete_documents(
        self,
        doc_ids: str | Sequence[str] | None = None,
        *,
        files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        filter: FilterLike | models.Filter | None = None,
        show_progress: bool = True,
    ) -> DeleteResult:
        """Take documents out of the collection, every chunk of each: those whose id is in ``doc_ids`` (a search
        hit's ``doc_id``: a record's or framework document's id, a string's content hash, a file's absolute path),
        those read from ``files`` (files or folders, which need not exist any more: a file's own document, a JSONL
        file's records, an archive's members, a message's attachments), and those ``filter`` matches (as
        :meth:`search` takes it: ``{"file_name": "old.md"}``); given ids or files and a filter, those of them it
        matches. An ingest only adds and updates, and a sync deletes only files gone from the folders it mirrors;
        this deletes anything else. Deleting the whole collection is :meth:`delete`. ``show_progress``: a bar of
        the chunks read while finding ``files``' documents, once that has taken a second.

        Returns:
            What was deleted, and the ids and files (as absolute paths) that matched nothing (``not_found``).

        Raises:
            ValueError: no ``doc_ids``, ``files`` or ``filter``, or an empty list (checked before the store opens).
            CollectionNotFoundError: no such collection.
        """
        from c2v_rag.rag.admin.delete import check_selection, delete_documents, document_ids, file_paths

        ids, paths = document_ids(doc_ids), file_paths(files)
        narrowing = check_selection(ids, paths, filter)
        with self._opened() as client:
            concrete, _ = self._concrete(client)
            return delete_documents(client, concrete, ids, paths, narrowing, show_progress)

    def delete(self) -> bool:
        """Delete the collection (an alias: the collection it points at) with its aliases; False when there was none.
        The earlier versions a reindex kept (``papers_v1``) stay: they are collections of their own."""
        from c2v_rag.rag.admin.delete_collection import delete_collections

        deleted = delete_collections(self._checked_target(), [self.name], client=self._sync_client("delete"))
        return deleted[self.name] is not None

    # ------------------------------------------------------------------ reads

    def exists(self) -> bool:
        """Whether the collection (or the alias) exists."""
        from c2v_rag.store.aliases import resolve_alias

        if self.client is None and self._checked_target().absent:
            return False  # no store there: asking does not make one
        with self._opened() as client:
            return bool(client.collection_exists(resolve_alias(client, self.name)))

    def count(self) -> int:
        """How many chunks the collection holds."""
        with self._opened() as client:
            concrete, _ = self._concrete(client)
            return int(client.count(concrete, exact=True).count)

    def recorded(self) -> dict[str, Any]:
        """What the collection recorded when it was made: the model's reference and weights' digest, the vector
        size, ``truncate_dim``, ``quantize``, ``encoder_share``, the documents' instruction and the layout of
        its vectors ({} for a collection c2v_rag did not make)."""
        with self._opened() as client:
            return fingerprint_of(self._concrete(client)[1]) or {}

    def _concrete(self, client: Any) -> tuple[str, Any]:
        """The collection this name is (an alias resolved) and its info; CollectionNotFoundError when none."""
        from c2v_rag.store.aliases import resolve_alias
        from c2v_rag.store.collection import require_collection

        concrete = resolve_alias(client, self.name)
        return concrete, require_collection(client, concrete, self.target)

    def _opened(self, *, creates: bool = False) -> Any:
        """The handle's client (left open), or the store opened for one call and closed after it
        (:meth:`~c2v_rag.QdrantConfig.opened`: a server's failures as this package's errors). Unless the call
        ``creates`` the collection, an embedded store whose directory does not exist is not made:
        :class:`~c2v_rag.CollectionNotFoundError`."""
        target, client = self._checked_target(), self._sync_client("this call")
        if not creates:
            target.check_present(self.name, client)
        return target.opened(client)

    def _sync_client(self, where: str) -> StoreClient | None:
        """The handle's client for a synchronous call; an ``AsyncQdrantClient`` serves :meth:`asearch` alone, and
        its coroutines would otherwise surface as a confusing error deep in the call."""
        if self.client is None:
            return None
        from qdrant_client import AsyncQdrantClient  # installed: the handle holds one of its clients

        if isinstance(self.client, AsyncQdrantClient):
            raise TypeError(
                f"Collection {self.name!r} holds an AsyncQdrantClient, which only asearch() uses; {where} needs a "
                "QdrantClient: pass client=QdrantClient(...) to open_collection, or none (each call then opens "
                "the store)"
            )
        return self.client

    def _checked_target(self) -> QdrantConfig:
        """The store, once the packages a store needs and the collection's name are checked."""
        from c2v_rag.rag.extras import require_rag

        require_rag("c2v_rag.Collection")
        check_collection_name(self.name)
        return self.target


def open_collection(name: str = DEFAULT_COLLECTION, **kwargs: Unpack[OpenKeywords]) -> Collection:
    """A :class:`Collection` handle: ``c2v_rag.open_collection("papers", path="store", model="my-variant")``.

    Opening reads nothing: the store and the variant are resolved on first use, once.
    """
    return Collection(name, **kwargs)


# ---------------------------------------------------------------------- the top-level functions


class _Search(OpenKeywords, SearchKeywords, total=False):
    collection: str


class _Ingest(OpenKeywordsWithoutUrl, IngestKeywords, total=False):
    pass


class _Reindex(OpenKeywords, ReindexKeywords, total=False):
    pass


def _ingest_settings(kwargs: Mapping[str, Any]) -> tuple[IngestConfig, dict[str, Any]]:
    """An ingest's keywords as its settings (the common fields laid over ``config``) and the run's own (the engine,
    ``ray``, ``versioned``); an unknown keyword is a TypeError."""
    from c2v_rag.rag.ingestion.config import IngestConfig

    (given,) = split_keywords("ingest", kwargs, INGEST_KEYS)
    run: dict[str, Any] = {key: given.pop(key) for key in ("engine", "ray", "versioned") if key in given}
    return IngestConfig.with_overrides(given.pop("config", None), **given), run


def _handle(
    where: str, kwargs: dict[str, Any], allowed: frozenset[str], collection: str | None = None
) -> tuple[Collection, dict[str, Any]]:
    """The handle a top-level call names, and the rest of its keywords (an unknown one is a TypeError)."""
    opened, rest = split_keywords(where, kwargs, OPEN_KEYS, allowed)
    if collection is None:
        options = rest.get("options")
        collection = rest.pop("collection", None) or getattr(options, "collection", None) or DEFAULT_COLLECTION
        if options is not None and hasattr(options, "collection"):  # the keyword wins over options', as any field
            rest["options"] = options.model_copy(update={"collection": collection})
    return Collection(collection, **opened), rest


def search(query: str, top_k: int = 5, **kwargs: Unpack[_Search]) -> list[SearchHit]:
    """:meth:`Collection.search` on ``collection`` (default ``"c2v_rag"``), opened for this call with the store
    and model keywords of :class:`Collection`."""
    handle, rest = _handle("search", dict(kwargs), SEARCH_KEYS | {"collection"})
    return handle.search(query, top_k, **rest)


def search_many(queries: Sequence[str], top_k: int = 5, **kwargs: Unpack[_Search]) -> list[list[SearchHit]]:
    """:meth:`Collection.search_many`, opened for this call (:func:`search`'s keywords)."""
    handle, rest = _handle("search_many", dict(kwargs), SEARCH_KEYS | {"collection"})
    return handle.search_many(queries, top_k, **rest)


async def asearch(query: str, top_k: int = 5, **kwargs: Unpack[_Search]) -> list[SearchHit]:
    """:meth:`Collection.asearch`, opened for this call (:func:`search`'s keywords)."""
    handle, rest = _handle("asearch", dict(kwargs), SEARCH_KEYS | {"collection"})
    return await handle.asearch(query, top_k, **rest)


def ingest(
    docs: Any, qdrant_url: str | None = None, collection: str = DEFAULT_COLLECTION, **kwargs: Unpack[_Ingest]
) -> IngestResult:
    """:meth:`Collection.ingest` into ``collection`` at ``qdrant_url`` (None: embedded Qdrant in ``path``),
    opened for this call with the store and model keywords of :class:`Collection`."""
    handle, rest = _handle("ingest", {**kwargs, "qdrant_url": qdrant_url}, INGEST_KEYS, collection)
    return handle.ingest(docs, **rest)


def reindex(collection: str = DEFAULT_COLLECTION, **kwargs: Unpack[_Reindex]) -> ReindexResult:
    """:meth:`Collection.reindex` of ``collection`` with ``model`` (the default preset when None), opened for
    this call with the store and model keywords of :class:`Collection`."""
    handle, rest = _handle("reindex", dict(kwargs), REINDEX_KEYS, collection)
    return handle.reindex(**rest)


def delete_documents(
    doc_ids: str | Sequence[str] | None = None,
    *,
    files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    filter: FilterLike | models.Filter | None = None,
    collection: str = DEFAULT_COLLECTION,
    show_progress: bool = True,
    **kwargs: Unpack[OpenKeywords],
) -> DeleteResult:
    """:meth:`Collection.delete_documents` of ``collection``, opened for this call with the store keywords of
    :class:`Collection` (no model loads)."""
    handle, _ = _handle("delete_documents", dict(kwargs), frozenset(), collection)
    return handle.delete_documents(doc_ids, files=files, filter=filter, show_progress=show_progress)


class _Load(OpenKeywords, LoadKeywords, total=False):
    pass


def load_embedded(
    folder: str | os.PathLike[str], collection: str = DEFAULT_COLLECTION, **kwargs: Unpack[_Load]
) -> LoadResult:
    """:meth:`Collection.load_embedded` into ``collection``, opened for this call with the store keywords of
    :class:`Collection` (no model loads): ``c2v_rag.load_embedded("vectors/", collection="papers",
    qdrant_url="http://qdrant:6333")``."""
    handle, rest = _handle("load_embedded", dict(kwargs), LOAD_KEYS, collection)
    return handle.load_embedded(folder, **rest)


def list_collections(
    *,
    qdrant_url: str | None = None,
    path: str | Path | None = None,
    api_key: str | None = None,
    prefer_grpc: bool | None = None,
    store: Literal["local", "edge"] | None = None,
    qdrant: QdrantConfig | None = None,
    client: Any = None,
) -> list[CollectionSummary]:
    """Every collection of a store, sorted by name: its aliases, points, vector size, and the model, quantization
    and chunking it recorded (:class:`~c2v_rag.rag.admin.listing.CollectionSummary`; ``model=None`` and
    ``made_by_c2v_rag=False`` for another tool's). The store is named as for :class:`Collection` (default: the
    embedded one ingest fills); ``client``, an open client, is used and left open."""
    from c2v_rag.rag.admin.listing import list_collections as list_store

    connection = ConnectionOptions.as_given(
        {"qdrant_url": qdrant_url, "path": path, "api_key": api_key, "prefer_grpc": prefer_grpc, "store": store}
        | {"qdrant": qdrant}
    )
    return list_store(connection.resolve(), client)


def migrate(
    collection: str = DEFAULT_COLLECTION,
    *,
    source_path: str | Path | None = None,
    source_url: str | None = None,
    source_store: Literal["local", "edge"] | None = None,
    target_path: str | Path | None = None,
    target_url: str | None = None,
    target_store: Literal["local", "edge"] | None = None,
    target_collection: str | None = None,
    api_key: str | None = None,
    batch_size: int = 256,
    source: QdrantConfig | None = None,
    target: QdrantConfig | None = None,
    show_progress: bool = True,
) -> MigrateResult:
    """Copy ``collection`` (or the collection an alias names) into another store, vectors unchanged
    (:meth:`Collection.migrate`). ``source_*`` and ``target_*`` are each end's ``path``, ``qdrant_url`` and
    ``store`` (``target_store="edge"`` with a new path makes a Qdrant Edge store; storage options of a new
    target collection come from ``target=``, a :class:`~c2v_rag.QdrantConfig`); ``target_collection`` names the
    copy (default: the source collection's own name); ``api_key`` serves a server at either end;
    ``show_progress``: a bar of the points copied, with an ETA.

    Raises:
        ValueError: source and target are the same store and collection.
        CollectionNotFoundError: nothing is called ``collection`` in the source.
        CollectionMismatchError: the target collection exists with other vectors or another model.
    """
    from c2v_rag.rag.admin.migrate import migrate_collection

    ends = [
        ConnectionOptions.as_given(
            {"path": path, "qdrant_url": url, "store": store, "qdrant": qdrant, "api_key": api_key}
        )
        for path, url, store, qdrant in (
            (source_path, source_url, source_store, source),
            (target_path, target_url, target_store, target),
        )
    ]
    return migrate_collection(
        collection, ends[0].resolve(), ends[1].resolve(), target_collection, batch_size, show_progress
    )
