"""Sync: a collection that mirrors the files and folders it was ingested from.

Every chunk read from a path records the *source root* it came through: the file or folder
the caller passed, resolved (``source_root`` in the payload). ``ingest(paths, sync=True)`` then,
after everything was read and stored, deletes the points recorded under each of those roots
whose document was not seen in this run: a deleted file, the old name of a renamed one, the old
place of a moved subfolder, a record removed from a JSONL file.

What a sync never deletes, by construction:

- points without a source root (strings, dicts, framework documents) or under another root
  (another folder sharing the collection): the deletion filter names the root;
- anything, when a source path is missing: that is an error before any work starts, so a typo
  cannot empty a collection (and a folder with no supported file left is an error too);
- points of files or folders that could not be read completely this run (unreadable, not text,
  over the size limit, with bad records): their documents are missing from the run for a reason
  other than being gone;
- anything, when a batch failed or the run was interrupted: the cleanup runs only after a
  complete run.

A file reachable from two roots (a folder and its subfolder, both ingested) belongs to the root
that last ingested it; moving a whole root elsewhere leaves the old root's points, since a sync
only looks at the roots it is given. A file outside the root, read through a link under it, is not
deleted when the link goes while the file is still there: another root synced into the collection
may hold it.
"""

from __future__ import annotations

import functools
import logging
import os
import warnings
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from c2v_rag.documents.documents import names_existing_path
from c2v_rag.documents.files import ReadLog
from c2v_rag.store.point_schema import DOC_ID_KEY, SOURCE_ROOT_KEY

if TYPE_CHECKING:
    from c2v_rag.store.store_backend import StoreClient

logger = logging.getLogger(__name__)

_SCROLL_PAGE = 1024
_DELETE_DOCS_PER_CALL = 256


@dataclass
class SyncReport:
    """What a sync deleted, and the documents it kept because their files were not fully read."""

    documents_deleted: int = 0
    chunks_deleted: int = 0
    documents_kept_unread: int = 0


def sync_roots(docs: Any) -> list[str]:
    """The resolved source roots of an ingest input, or ValueError when it is not made of paths.

    A sync mirrors files and folders; strings, dicts and framework documents have no source to
    compare with, so mixing them in is refused rather than guessed at.
    """
    items = list(docs) if isinstance(docs, (list, tuple)) else [docs]
    roots = []
    for i, item in enumerate(items):
        top_level_path = isinstance(item, str) and item is docs and names_existing_path(item)
        if not (isinstance(item, os.PathLike) or top_level_path):
            where = "docs" if item is docs else f"docs[{i}]"
            shown = repr(item) if isinstance(item, str) and len(item) < 200 else type(item).__name__
            raise ValueError(
                f"sync=True mirrors files and folders, but {where} ({shown}) is not an existing path; "
                "pass pathlib.Path objects for files or folders, or ingest other inputs without sync"
            )
        roots.append(str(Path(item).expanduser().resolve()))
    return roots


def ensure_root_index(client: StoreClient, collection: str) -> None:
    """A keyword index on the source root, so a server filters on it without a full scan."""
    from qdrant_client.http import models

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")
        client.create_payload_index(
            collection, SOURCE_ROOT_KEY, field_schema=models.PayloadSchemaType.KEYWORD, wait=True
        )


def roots_to_claim(records: Iterable[Any], roots_by_id: dict[str, str | None]) -> dict[str, list[str]]:
    """Stored points whose recorded root differs from the one this run read them through.

    Unchanged chunks are not rewritten, so their payload keeps whatever root an earlier run (or
    a version before roots were recorded) wrote; this lists them per new root for set_payload.
    """
    claims: dict[str, list[str]] = {}
    for record in records:
        root = roots_by_id.get(str(record.id))
        if root is not None and (record.payload or {}).get(SOURCE_ROOT_KEY) != root:
            claims.setdefault(root, []).append(str(record.id))
    return claims


def _elsewhere(source: Any, root: str) -> bool:
    """Whether ``source`` is a file outside ``root`` that still exists: read through a link under the root (a
    document belongs to the root that last read it), so its link going is not its file going, and another
    folder synced into the collection may hold it (Debian's /usr/share/doc/cpp/README.Bugs links into gcc-12's)."""
    if not isinstance(source, str) or not source:
        return False
    path = Path(source)
    inside = path == Path(root) or Path(root) in path.parents
    return not inside and path.is_file()


def delete_gone_documents(
    client: StoreClient,
    collection: str,
    roots: Iterable[str],
    seen: Container[str],
    log: ReadLog,
    call: Callable[[Callable[[], Any], str], Any],
) -> SyncReport:
    """Delete the points under ``roots`` whose document is not in ``seen`` (see the module docstring).

    ``call(fn, what)`` runs each Qdrant request (with retries, under the client lock).
    """
    from qdrant_client.http import models

    report = SyncReport()
    ensure_root_index(client, collection)
    for root in roots:
        in_root = models.FieldCondition(key=SOURCE_ROOT_KEY, match=models.MatchValue(value=root))
        gone: dict[str, int] = {}
        kept: set[str] = set()
        linked: set[str] = set()
        offset = None
        while True:
            points, offset = call(
                functools.partial(
                    client.scroll,
                    collection,
                    scroll_filter=models.Filter(must=[in_root]),
                    limit=_SCROLL_PAGE,
                    offset=offset,
                    with_payload=[DOC_ID_KEY, "source"],
                    with_vectors=False,
                ),
                f"listing the points under {root}",
            )
            for point in points:
                payload = point.payload or {}
                doc_id = payload.get(DOC_ID_KEY)
                if not isinstance(doc_id, str) or doc_id in seen:
                    continue
                if log.covers(payload.get("source")):
                    kept.add(doc_id)
                elif _elsewhere(payload.get("source"), root):
                    linked.add(doc_id)
                else:
                    gone[doc_id] = gone.get(doc_id, 0) + 1
            if offset is None:
                break
        doc_ids = sorted(gone)
        for start in range(0, len(doc_ids), _DELETE_DOCS_PER_CALL):
            batch = doc_ids[start : start + _DELETE_DOCS_PER_CALL]
            selector = models.FilterSelector(
                filter=models.Filter(
                    must=[in_root, models.FieldCondition(key=DOC_ID_KEY, match=models.MatchAny(any=batch))]
                )
            )
            call(
                functools.partial(client.delete, collection, selector, wait=True),
                f"deleting {len(batch)} documents gone from {root}",
            )
        if doc_ids:
            logger.info("Sync deleted %d documents (%d chunks) gone from %s", len(doc_ids), sum(gone.values()), root)
        if kept:
            logger.warning(
                "Sync kept %d documents under %s whose files could not be read completely this run", len(kept), root
            )
        if linked:
            logger.info(
                "Sync kept %d documents last read through a link under %s whose files are elsewhere and still there; "
                "a sync of their own folder mirrors them",
                len(linked),
                root,
            )
        report.documents_deleted += len(doc_ids)
        report.chunks_deleted += sum(gone.values())
        report.documents_kept_unread += len(kept)
    return report
