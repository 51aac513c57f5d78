"""``load_embedded``: store the chunks and vectors of an ``embed`` folder in a collection, without embedding again.

``embed`` writes Parquet files where no store is at hand (a Ray cluster, a GPU box, a lakehouse job); this puts
their rows into any store as the points an ingest of the same documents with the same model stores: the same ids,
payloads (with the source root a sync mirrors) and vectors, but for the hash by which a re-run skips a whole
unchanged document, which the files do not hold. A later ``ingest`` of those documents therefore chunks them once
more, embeds nothing (their chunks are stored) and records it. Files of runs before the source root was written
load without it; an ingest of the documents through a path then claims their points for it.

The collection records the model fingerprint the files recorded, so a search embeds its queries with that model,
and an ingest or load of another model's vectors into it is refused, as for a collection an ingest made. A new
collection is dense-only unless ``sparse="bm25"``; an existing hybrid one gets each chunk's BM25 vector, computed
from its text (no model is loaded).

Points already in the collection are skipped, not rewritten (a later ingest's bookkeeping on them stays), so a load
that stopped resumes when run again, and loading a folder that ``embed`` grew since loads only the new chunks.

``versioned=True`` publishes the folder behind an alias, as a reindex does. Vectors of another model or settings than
the alias' collection (or of a name not used yet) are loaded into a new collection ``{name}_v{n+1}`` (``{name}_v1``
for the first), and the alias ``name`` moves to it in one request once every chunk is stored: readers of the alias
never see it half loaded, and the previous version is kept. A versioned load that stopped before the switch left its
version unaliased: the same load run again resumes it. Vectors of the alias' own model and settings (a folder that
grew) go into its collection, as without ``versioned``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from tqdm.auto import tqdm

from c2v_rag.core.arguments import check_count
from c2v_rag.core.extras import require
from c2v_rag.core.progress_bar import unsized_terminal
from c2v_rag.core.wording import counted
from c2v_rag.rag.errors import RunInterrupted
from c2v_rag.rag.extras import require_rag
from c2v_rag.rag.ingestion.config import IngestConfig
from c2v_rag.rag.ingestion.parquet_folder import EmbedFolder, record_fingerprint
from c2v_rag.rag.ingestion.parquet_rows import OPTIONAL_COLUMNS, POINT_COLUMNS, table_points
from c2v_rag.rag.ingestion.points import PointWriter
from c2v_rag.rag.ingestion.preflight import drop_if_empty, open_client
from c2v_rag.rag.ingestion.sinks import Retry, retrying_call
from c2v_rag.store.aliases import alias_target, next_version, resolve_alias, switch_alias, version_names
from c2v_rag.store.collection import (
    QdrantConfig,
    check_payload_indexes,
    ensure_collection,
    fingerprint_differences,
    fingerprint_of,
)
from c2v_rag.store.errors import CollectionMismatchError
from c2v_rag.store.sparse import BM25Config, BM25Encoder, resolve_sparse
from c2v_rag.store.vectors import CollectionVectors

if TYPE_CHECKING:
    from c2v_rag.store.store_backend import StoreClient

logger = logging.getLogger(__name__)


class LoadResult(BaseModel):
    """What a load stored: ``chunks`` rows read from ``files``, of which ``written`` were new and ``unchanged``
    already in the collection."""

    collection: str
    location: str
    folder: str
    files: int
    chunks: int
    written: int
    unchanged: int
    seconds: float
    # versioned=True: the alias now pointing at ``collection``, and the collection it pointed at before (kept)
    alias: str | None = None
    previous: str | None = None

    def summary(self) -> str:
        text = (
            f"{counted(self.chunks, 'chunk')} ({self.written} written, {self.unchanged} already there) from "
            f"{counted(self.files, 'Parquet file')} in {self.folder} into {self.collection!r} at {self.location} in "
            f"{self.seconds:.1f} s"
        )
        if self.alias is not None:
            text += f"; alias {self.alias!r} now points at it" + (
                f" (it pointed at {self.previous!r}, which is kept)" if self.previous else ""
            )
        return text


def load_embedded(
    folder: str | os.PathLike[str],
    collection: str,
    target: QdrantConfig,
    *,
    client: StoreClient | None = None,
    sparse: str | BM25Config | None = None,
    payload_indexes: dict[str, str] | None = None,
    batch_size: int = 256,
    show_progress: bool = True,
    versioned: bool = False,
) -> LoadResult:
    """Store the rows of the ``embed`` folder ``folder`` in ``collection`` at ``target``:
    :meth:`c2v_rag.Collection.load_embedded`, which documents the arguments; ``client`` is an open client to use
    instead of connecting (left open)."""
    require_rag("c2v_rag.load_embedded")
    pq = require("pyarrow.parquet", "loading embed's Parquet files", "parquet", distribution="pyarrow")
    check_count("batch_size", batch_size)
    bm25 = resolve_sparse(sparse)
    check_payload_indexes(payload_indexes or {})
    started = time.perf_counter()
    with EmbedFolder.loading(folder) as held:
        assert held.recorded is not None  # loading() refuses a folder without embed's files
        fingerprint = record_fingerprint(held.recorded)
        # Each file's footer read once: checked, counted and its columns picked before any write, then reused.
        footers = [_checked_footer(pq, file, fingerprint["embedding_dim"]) for file in held.files]
        rows = sum(metadata.num_rows for metadata, _ in footers)
        retry = Retry.of(IngestConfig())
        opened = (
            open_client(target, attempts=retry.attempts, initial_wait=retry.initial_wait, max_wait=retry.max_wait)
            if client is None
            else client
        )
        name, created, written, unchanged = collection, False, 0, 0
        publish: tuple[str, str | None] | None = None  # versioned: the alias to switch, and its collection now
        try:
            with target.store_errors():
                if versioned:
                    name, publish = _version_to_load(opened, collection, fingerprint)
                else:
                    name = resolve_alias(opened, collection)  # an alias is loaded through to its collection
                info = opened.get_collection(name) if opened.collection_exists(name) else None
                _check_settings(fingerprint_of(info) if info is not None else None, fingerprint, name, target, held)
                layout = CollectionVectors.for_writing(
                    target, bm25, fingerprint_of(info) if info is not None else None, exists=info is not None
                )
                encoder = BM25Encoder(layout.bm25) if layout.bm25 is not None else None
                created = ensure_collection(opened, name, target, fingerprint, layout, payload_indexes or {})
            writer = PointWriter(opened, name, layout, retrying_call(retry), fresh=created)
            bar = tqdm(
                total=rows,
                desc=f"Loading into {name}",
                unit="chunk",
                disable=not show_progress,
                **unsized_terminal(sys.stderr),
            )
            with bar, target.store_errors():
                for file, (metadata, columns) in zip(held.files, footers):
                    parquet = pq.ParquetFile(file, metadata=metadata)  # one file open at a time
                    for batch in parquet.iter_batches(batch_size=batch_size, columns=columns):
                        chunks, vectors = table_points(_table(batch, file))
                        new = writer.not_stored(chunks)
                        if new:
                            keep = {c.point_id for c in new}
                            rows_new = [i for i, c in enumerate(chunks) if c.point_id in keep]
                            sparse_vectors = encoder.encode_documents([c.text for c in new]) if encoder else None
                            writer.write(writer.points(new, vectors[rows_new], sparse_vectors), {})
                        written += len(new)
                        unchanged += len(chunks) - len(new)
                        bar.update(len(chunks))
                if publish is not None:
                    switch_alias(opened, publish[0], name)  # every chunk stored: readers move in one request
        except KeyboardInterrupt:
            if created:
                drop_if_empty(opened, name, target)
            raise RunInterrupted(
                f"interrupted; {written} chunks were loaded into {name!r} at {target.location}, and perhaps the "
                "batch being written as it stopped. Run the same load again to resume (chunks already stored are "
                "skipped)"
            ) from None
        except BaseException:
            if created:
                drop_if_empty(opened, name, target)
            raise
        finally:
            if client is None:
                opened.close()
    result = LoadResult(
        collection=name,
        location=target.location,
        folder=str(held.path),
        files=len(held.files),
        chunks=written + unchanged,
        written=written,
        unchanged=unchanged,
        seconds=time.perf_counter() - started,
        alias=publish[0] if publish else None,
        previous=publish[1] if publish else None,
    )
    logger.info("Loaded %s", result.summary())
    return result


def _version_to_load(client: Any, alias: str, fingerprint: dict[str, Any]) -> tuple[str, tuple[str, str | None] | None]:
    """A versioned load's collection, and (the alias, the collection it points at now) to switch once it is loaded:
    the alias' collection where it holds vectors of the same model and settings (nothing to switch); else the version
    a stopped load of these vectors left unaliased; else the next version."""
    current = alias_target(client, alias)
    if current is None and client.collection_exists(alias):
        raise ValueError(
            f"collection {alias!r} is a plain collection, not an alias, so versioned=True cannot publish behind it "
            "(Qdrant names cannot be both): c2v_rag.reindex(..., convert=True) puts it behind an alias first, or "
            "load without versioned="
        )
    if current is not None and _same_vectors(client, current, fingerprint):
        return current, None  # more chunks of the same vectors: added where readers already read
    versions = version_names(client, alias)
    if versions and versions[-1] != current and _same_vectors(client, versions[-1], fingerprint):
        # newer than the alias' collection: a versioned load of these vectors that stopped before the switch
        logger.info("Resuming %r, which a stopped load of these vectors left unpublished", versions[-1])
        return versions[-1], (alias, current)
    return next_version(client, alias), (alias, current)


def _same_vectors(client: Any, collection: str, fingerprint: dict[str, Any]) -> bool:
    recorded = fingerprint_of(client.get_collection(collection))
    return recorded is not None and not fingerprint_differences(recorded, fingerprint)


def _check_settings(
    recorded: dict[str, Any] | None, fingerprint: dict[str, Any], name: str, target: QdrantConfig, held: EmbedFolder
) -> None:
    """Refuse a collection that records another model or settings than the folder's files, naming both (the
    store's own check, which ``ensure_collection`` makes too, words its fix for an ingest's flags)."""
    if not recorded:
        return  # a new collection, or another tool's (the store's check covers its vectors)
    differ = fingerprint_differences(recorded, fingerprint)
    if differ:
        both = "; ".join(f"{f}={recorded.get(f)!r} there, {fingerprint.get(f)!r} in the files" for f in differ)
        raise CollectionMismatchError(
            f"collection {name!r} at {target.location} holds vectors made with another model or settings than "
            f"{held.path}'s ({both}): they cannot be searched together. Load into another collection "
            "(collection=...), or embed the documents again with the collection's model"
        )


def _checked_footer(pq: Any, file: Path, dim: int) -> tuple[Any, list[str]]:
    """``file``'s footer (``FileMetaData``) and the columns to read of it, once its schema is checked to hold points
    of ``dim``-dimensional vectors (before any write: a file edited or written by hand fails here, naming what is
    wrong)."""
    import pyarrow as pa

    metadata = pq.read_metadata(file)
    schema = metadata.schema.to_arrow_schema()
    missing = [c for c in POINT_COLUMNS if c not in schema.names]
    if missing:
        raise ValueError(f"{file} lacks the column(s) {', '.join(missing)} that embed writes; re-run embed for it")
    vector = schema.field("vector").type
    fixed = pa.types.is_fixed_size_list(vector)
    if not fixed or vector.list_size != dim or not pa.types.is_floating(vector.value_type):
        raise ValueError(
            f"{file}'s vector column is {vector}, not the fixed_size_list<float>[{dim}] the files' record says; "
            "re-run embed for it"
        )
    return metadata, [c for c in (*POINT_COLUMNS, *OPTIONAL_COLUMNS) if c in schema.names]


def _table(batch: Any, file: Path) -> Any:
    """A record batch of ``file`` as a table, refusing rows without an id, document id, text, metadata or vector."""
    import pyarrow as pa

    table = pa.Table.from_batches([batch])
    for column in POINT_COLUMNS:
        if table.column(column).null_count:
            raise ValueError(f"{file} has a row without {column}; re-run embed for it")
    return table
