"""Collection names that are aliases: resolving one, and pointing one at a new collection atomically.

Search resolves an alias once per call and then reads the model fingerprint, the layout and the
points of that one concrete collection. A switch between those reads therefore cannot pair a
query vector of one model with the stored vectors of another.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient

    from c2v_rag.store.store_backend import StoreClient

# What a versioned collection's name ends with: ``_v`` and its version.
_VERSION_SUFFIX = re.compile(r"_v(\d+)$")


def _lookup(aliases, name: str) -> str:
    for alias in aliases.aliases:
        if alias.alias_name == name:
            return alias.collection_name
    return name


def resolve_alias(client: StoreClient, name: str) -> str:
    """The collection ``name`` points to when it is an alias, else ``name`` itself."""
    return _lookup(client.get_aliases(), name)


async def aresolve_alias(client: AsyncQdrantClient, name: str) -> str:
    """:func:`resolve_alias` for an ``AsyncQdrantClient``."""
    return _lookup(await client.get_aliases(), name)


def alias_target(client: StoreClient, name: str) -> str | None:
    """The collection alias ``name`` points to, or None when ``name`` is no alias."""
    target = resolve_alias(client, name)
    return None if target == name else target


def aliases_of(client: StoreClient, collection: str) -> list[str]:
    """The aliases that point at ``collection``, by name."""
    return sorted(a.alias_name for a in client.get_aliases().aliases if a.collection_name == collection)


def switch_alias(client: StoreClient, alias: str, collection: str) -> None:
    """Point ``alias`` at ``collection`` in one request: Qdrant applies the delete and the create
    together, so a reader sees the old collection or the new one, never neither."""
    from qdrant_client.http import models

    operations: list = []
    if alias_target(client, alias) is not None:
        operations.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias)))
    operations.append(
        models.CreateAliasOperation(create_alias=models.CreateAlias(collection_name=collection, alias_name=alias))
    )
    client.update_collection_aliases(change_aliases_operations=operations)


def _numbered_versions(client: StoreClient, alias: str) -> list[tuple[int, str]]:
    pattern = re.compile(rf"^{re.escape(alias)}_v(\d+)$")
    return sorted(
        (int(m.group(1)), c.name) for c in client.get_collections().collections if (m := pattern.match(c.name))
    )


def version_names(client: StoreClient, alias: str) -> list[str]:
    """The collections named ``{alias}_v{n}`` (a versioned ingest's and reindex's), by ``n``."""
    return [name for _, name in _numbered_versions(client, alias)]


def versioned_base(collection: str) -> str:
    """The name ``collection`` is a version of (``papers`` for ``papers_v2``), or ``collection`` itself."""
    return _VERSION_SUFFIX.sub("", collection)


def _versions(client: StoreClient, alias: str) -> list[int]:
    return [number for number, _ in _numbered_versions(client, alias)]


def next_version(client: StoreClient, alias: str) -> str:
    """``{alias}_v{n}``, one past the highest version that exists (``_v1`` for the first)."""
    return f"{alias}_v{max(_versions(client, alias), default=0) + 1}"


def versioned_target(client: StoreClient, name: str) -> tuple[str, str | None]:
    """Where a ``versioned=True`` ingest writes: the alias' collection when ``name`` is an alias
    (and no alias to create), else ``{name}_v1`` and the alias to point at it once written. A
    versioned ingest that stopped before publishing left ``{name}_vN`` unaliased: a re-run resumes it."""
    target = alias_target(client, name)
    if target is not None:
        return target, None
    if client.collection_exists(name):
        raise ValueError(
            f"collection {name!r} is a plain collection, not an alias, so versioned=True cannot put it behind "
            f"one (Qdrant names cannot be both). Ingest under a new name with versioned=True, or without versioned="
        )
    return f"{name}_v{max(_versions(client, name), default=1)}", name
