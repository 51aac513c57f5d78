"""``delete_documents``: take documents out of a collection, every chunk of each, by id, by file or by a filter.

An ingest only adds and updates, and a sync deletes only the documents gone from the folders it mirrors
(:mod:`c2v_rag.rag.ingestion.sync`). Documents ingested from strings, dicts or framework objects, a record gone from
the database it came from, or a file no longer wanted in the answers, leave a collection here. The chunks are
selected by the ``doc_id`` every point carries (a search hit's ``doc_id``), so a document goes whole: no chunk of
it is left to be found. A file's documents are those whose ``source`` is the file or lies inside it: its own, a
JSONL file's records, an archive's members and a message's attachments, at any depth.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from tqdm.auto import tqdm

from c2v_rag.core.progress_bar import unsized_terminal
from c2v_rag.store.filters import to_qdrant_filter
from c2v_rag.store.point_schema import DOC_ID_KEY, PAYLOAD_METADATA_KEY, payload_metadata

if TYPE_CHECKING:
    from qdrant_client.http import models

    from c2v_rag.store.filters import FilterLike

# Documents named in one scroll and one delete request: a filter's MatchAny of this many ids stays a small request.
_DOCS_PER_CALL = 256
_SCROLL_PAGE = 1024
# A bar only where the scan is long enough to wonder about (hundreds of thousands of chunks).
BAR_DELAY_S = 1.0


class DeleteResult(BaseModel):
    """What :meth:`~c2v_rag.Collection.delete_documents` took out of ``collection``: ``documents_deleted``
    documents and their ``chunks_deleted`` chunks; ``not_found``: the ids asked for that the collection held no
    chunk of (a typo, a document deleted before), and the files (as absolute paths) no document came from, in the
    order given."""

    collection: str
    documents_deleted: int
    chunks_deleted: int
    not_found: list[str]


def document_ids(doc_ids: str | Sequence[str] | None) -> list[str] | None:
    """``doc_ids`` as a list (one id given alone is one id, not its characters), each checked to be a string."""
    if doc_ids is None:
        return None
    if isinstance(doc_ids, str):
        return [doc_ids]
    ids = list(doc_ids)
    for i, doc_id in enumerate(ids):
        if not isinstance(doc_id, str):
            raise TypeError(
                f"doc_ids[{i}] is a {type(doc_id).__name__}; document ids are strings, as a search hit's doc_id is "
                "(a file's is its absolute path: str(Path(...).resolve()))"
            )
    return list(dict.fromkeys(ids))


def file_paths(files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None) -> list[str] | None:
    """``files`` as the absolute paths their documents' ``source`` holds (a file need not exist any more)."""
    if files is None:
        return None
    given = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    for i, file in enumerate(given):
        if not isinstance(file, (str, os.PathLike)):
            raise TypeError(f"files[{i}] is a {type(file).__name__}; pass a path (str or pathlib.Path)")
    return list(dict.fromkeys(str(Path(file).expanduser().resolve()) for file in given))


def check_selection(
    doc_ids: list[str] | None, files: list[str] | None, filter: FilterLike | models.Filter | None
) -> models.Filter | None:
    """The filter as Qdrant's, once it is clear that the call names documents (before the store is opened).

    Raises:
        ValueError: no ids, files or filter, or an empty list of either: a call that would delete nothing or
            everything; deleting the whole collection is :meth:`~c2v_rag.Collection.delete`.
    """
    narrowing = to_qdrant_filter(filter)
    if doc_ids is None and files is None and narrowing is None:
        raise ValueError(
            "delete_documents needs the documents: doc_ids=[...] (a search hit's doc_id), files=[...] or "
            "filter={...} (as search takes it); to delete the whole collection, call Collection.delete()"
        )
    for name, given in (("doc_ids", doc_ids), ("files", files)):
        if given is not None and not given:
            raise ValueError(f"{name} is empty: name at least one document (or leave {name} out)")
    return narrowing


def delete_documents(
    client: Any,
    collection: str,
    doc_ids: list[str] | None,
    files: list[str] | None,
    narrowing: models.Filter | None,
    show_progress: bool = False,
) -> DeleteResult:
    """Delete every chunk of the documents ``doc_ids`` names or ``files`` hold that ``narrowing`` also matches (any
    may be None, not all: :func:`check_selection`) from ``collection`` (a concrete collection, aliases resolved)."""
    from qdrant_client.http import models

    held = documents_of_files(client, collection, files, narrowing, show_progress) if files is not None else {}
    chosen_ids = (
        None if doc_ids is None and files is None else [*(doc_ids or ()), *(i for ids in held.values() for i in ids)]
    )
    batches: list[list[str] | None] = [None]
    if chosen_ids is not None:
        chosen_ids = list(dict.fromkeys(chosen_ids))
        batches = [chosen_ids[i : i + _DOCS_PER_CALL] for i in range(0, len(chosen_ids), _DOCS_PER_CALL)]
    found: Counter[str] = Counter()
    for batch in batches:
        chosen = _selection(batch, narrowing)
        chunks = _chunks_per_document(client, collection, chosen)
        if chunks:
            client.delete(collection, models.FilterSelector(filter=chosen), wait=True)
            found.update(chunks)
    return DeleteResult(
        collection=collection,
        documents_deleted=len(found),
        chunks_deleted=sum(found.values()),
        not_found=[doc_id for doc_id in doc_ids or () if doc_id not in found]
        + [f for f, ids in held.items() if not ids],
    )


def documents_of_files(
    client: Any, collection: str, files: list[str], narrowing: models.Filter | None, show_progress: bool = False
) -> dict[str, list[str]]:
    """The ids of the documents each of ``files`` holds (among those ``narrowing`` matches): those whose ``source``
    is the file or a path inside it (``/docs/export.zip/guide/intro.md`` inside ``/docs/export.zip``). Every chunk's
    source is read once: a prefix is no condition a Qdrant filter can state; ``show_progress``: a bar of the chunks
    read, shown once the scan has taken a second."""
    held: dict[str, dict[str, None]] = {file: {} for file in files}
    total = client.count(collection, count_filter=narrowing, exact=False).count if show_progress else None
    progress = tqdm(
        total=total,
        desc=f"Reading the sources in {collection}",
        unit="chunk",
        delay=BAR_DELAY_S,
        disable=not show_progress,
        **unsized_terminal(sys.stderr),
    )
    with progress:
        for payload in _payloads(client, collection, narrowing, [DOC_ID_KEY, PAYLOAD_METADATA_KEY]):
            progress.update()
            source, doc_id = payload_metadata(payload).get("source"), payload.get(DOC_ID_KEY)
            if isinstance(source, str) and doc_id is not None:
                for file in _file_and_folders(source):
                    if file in held:
                        held[file][str(doc_id)] = None
    return {file: list(ids) for file, ids in held.items()}


def _file_and_folders(source: str) -> list[str]:
    """``source`` and every path above it: ``/a/b.zip/c.md`` -> ``/a/b.zip/c.md``, ``/a/b.zip``, ``/a``."""
    parts = source.split("/")
    return [source] + ["/".join(parts[:i]) for i in range(len(parts) - 1, 1, -1)]


def _selection(batch: list[str] | None, narrowing: models.Filter | None) -> models.Filter:
    from qdrant_client.http import models

    must: list[Any] = []
    if batch is not None:
        must.append(models.FieldCondition(key=DOC_ID_KEY, match=models.MatchAny(any=batch)))
    if narrowing is not None:
        must.append(narrowing)
    return models.Filter(must=must)


def _chunks_per_document(client: Any, collection: str, chosen: models.Filter) -> Counter[str]:
    """How many of the selected chunks each document has."""
    return Counter(str(payload.get(DOC_ID_KEY)) for payload in _payloads(client, collection, chosen, [DOC_ID_KEY]))


def _payloads(client: Any, collection: str, chosen: models.Filter | None, keys: list[str]) -> Iterator[dict[str, Any]]:
    """The ``keys`` of the payload of every point ``chosen`` matches, page by page."""
    offset = None
    while True:
        points, offset = client.scroll(
            collection, scroll_filter=chosen, limit=_SCROLL_PAGE, offset=offset, with_payload=keys, with_vectors=False
        )
        yield from (point.payload or {} for point in points)
        if offset is None:
            return
