"""``delete_collections``: remove whole collections, and say first what goes with it.

A name may be an alias (``ingest(..., versioned=True)``, ``reindex``): deleting it removes the collection it points
at, and every alias of that collection goes with it, on a server as in both embedded engines. The earlier versions a
reindex kept for rollback (``papers_v1`` beside ``papers -> papers_v2``) are other collections: they stay, and the
plan names them, so that nobody believes them gone. A concrete collection named directly goes with its aliases too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from c2v_rag.store.aliases import resolve_alias, version_names, versioned_base
from c2v_rag.store.collection import QdrantConfig


class CollectionDeletion(BaseModel):
    """What deleting ``name`` removes: ``collection``, its ``points``, and the ``aliases`` that point at it;
    ``kept_versions`` are the other versions of the same name, which stay. ``deleted``: whether it went (False: the
    confirmation declined it)."""

    name: str
    collection: str
    points: int
    aliases: list[str]
    kept_versions: list[str]
    deleted: bool = False

    def line(self) -> str:
        """What goes, in words: the collection, its size, its aliases."""
        what = f"collection {self.collection!r} ({self.points:,} chunk{'' if self.points == 1 else 's'})"
        if self.aliases:
            what += f" and its alias{'es' if len(self.aliases) > 1 else ''} {', '.join(map(repr, self.aliases))}"
        return what

    def kept_line(self) -> str | None:
        """A line naming the versions that stay, or None when there are none."""
        if not self.kept_versions:
            return None
        names = ", ".join(repr(v) for v in self.kept_versions)
        return f"kept: {names}, other versions of {self.name!r}, each a collection of its own"


def planned_deletion(client: Any, name: str) -> CollectionDeletion | None:
    """What deleting ``name`` (a collection or an alias) from the open store ``client`` removes; None when the store
    has no collection or alias of that name. Reads only."""
    collection = resolve_alias(client, name)
    if not client.collection_exists(collection):
        return None
    aliases = sorted(a.alias_name for a in client.get_aliases().aliases if a.collection_name == collection)
    # The name the versions share: the alias asked for, else the collection's alias or its name less its version.
    base = name if collection != name else (aliases[0] if aliases else versioned_base(collection))
    kept = [v for v in version_names(client, base) if v != collection]
    points = int(client.count(collection, exact=True).count)
    return CollectionDeletion(name=name, collection=collection, points=points, aliases=aliases, kept_versions=kept)


def delete_collections(
    target: QdrantConfig,
    names: Sequence[str],
    *,
    client: Any = None,
    confirm: Callable[[CollectionDeletion], bool] | None = None,
) -> dict[str, CollectionDeletion | None]:
    """Delete each collection of ``names`` from the store ``target`` (an alias: the collection it points at) with its
    aliases, in turn, the store opened once, each once ``confirm``, shown its plan first, agrees (None: without
    asking). By name: the plan, ``deleted`` saying whether it went; None when there is no such collection or alias
    (an embedded store whose directory does not exist is not created). ``client``, an open client of the store, is
    used and left open."""
    if client is None and target.absent:
        return dict.fromkeys(names)
    with target.opened(client) as opened:
        return {name: _delete(opened, name, confirm) for name in names}


def _delete(client: Any, name: str, confirm: Callable[[CollectionDeletion], bool] | None) -> CollectionDeletion | None:
    plan = planned_deletion(client, name)
    if plan is None or (confirm is not None and not confirm(plan)):
        return plan
    client.delete_collection(plan.collection)  # its aliases go with it, on every backend
    return plan.model_copy(update={"deleted": True})
