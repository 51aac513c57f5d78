"""Deterministic point ids: the same chunk of the same document always lands on the same point."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from typing import Any

# Fixed forever: changing it would give every stored chunk a new id, so a re-run would
# duplicate whole collections.
POINT_NAMESPACE = uuid.UUID("6c0c2a52-7d7e-5a3c-9a61-3f1d8e0b2c7a")


def content_hash(text: str, metadata: Mapping[str, Any]) -> str:
    """A hash of what a point stores: its text and its metadata.

    Metadata is part of it so that editing a document's metadata alone also rewrites its points.
    """
    blob = json.dumps(dict(metadata), sort_keys=True, ensure_ascii=False, default=str)
    digest = hashlib.sha256()
    digest.update(text.encode("utf-8"))
    digest.update(b"\x00")
    digest.update(blob.encode("utf-8"))
    return digest.hexdigest()


def point_id(doc_id: str, chunk_index: int, chunk_hash: str) -> str:
    """A UUID (Qdrant's id type) from the document id, the chunk index and the content hash."""
    return str(uuid.uuid5(POINT_NAMESPACE, f"{doc_id}\x1f{chunk_index}\x1f{chunk_hash}"))
