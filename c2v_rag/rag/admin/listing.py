"""``list_collections``: the collections of a store, each with its size and what it records of how it was filled.

What a user asks of a store before searching it: which collections it holds (and which names are aliases of
them), how many chunks each has, and the model, vector size, quantization and chunking each was ingested with
(the collection's record: :func:`~c2v_rag.store.collection.config_fingerprint`). A collection another tool made
records nothing; it is listed with its size and ``model=None``. Read-only: nothing is opened for writing.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from c2v_rag.core.wording import counted
from c2v_rag.rag.extras import require_rag
from c2v_rag.store.collection import QdrantConfig, fingerprint_of, stored_vector_params
from c2v_rag.store.errors import CollectionMismatchError
from c2v_rag.store.vectors import CollectionVectors


class CollectionSummary(BaseModel):
    """One collection of a store, as :func:`list_collections` reads it."""

    name: str
    aliases: list[str]
    """The aliases that point at it (``ingest(..., versioned=True)`` searches a collection through one)."""
    points: int
    """Its chunks (points)."""
    vector_size: int | None
    """The size of its dense vectors; None where it has no dense vector c2v_rag can name."""
    made_by_c2v_rag: bool
    """Whether it records what filled it (ingest, reindex and migrate write the record); another tool's does not."""
    model: str | None = None
    """The model that filled it: a preset name or a variant directory (None: a model object, or another tool)."""
    quantize: str | None = None
    truncate_dim: int | None = None
    sparse: bool = False
    """Whether it holds BM25 vectors (``sparse="bm25"``), which ``mode="sparse"`` and ``"hybrid"`` search."""
    chunk_context: str | None = None
    decoder_max_length: int | None = None

    def line(self) -> str:
        """One line for a terminal: name, aliases, size and the recorded model."""
        aliases = f" (alias: {', '.join(self.aliases)})" if self.aliases else ""
        if not self.made_by_c2v_rag:
            return f"{self.name}{aliases}: {counted(self.points, 'point')}, not made by c2v_rag"
        how = [f"{self.vector_size}-dim" if self.vector_size is not None else "", self.quantize or ""]
        if self.truncate_dim:
            how.append(f"truncate_dim={self.truncate_dim}")
        if self.sparse:
            how.append("+ BM25")
        details = ", ".join(h for h in how if h and h != "none")
        model = self.model or "a model object"
        line = f"{self.name}{aliases}: {counted(self.points, 'point')}, model {model}"
        return line + (f" ({details})" if details else "")


def list_collections(target: QdrantConfig, client: Any = None) -> list[CollectionSummary]:
    """Every collection of the store ``target`` (an open ``client`` of it is used where given, and left open),
    sorted by name; none for an embedded store whose directory does not exist (it is not created).
    :func:`c2v_rag.list_collections` takes the store as keywords."""
    require_rag("c2v_rag.list_collections")
    if client is None and target.absent:
        return []  # no store there yet: listing it does not create one
    with target.opened(client) as opened:
        aliases: dict[str, list[str]] = {}
        for alias in opened.get_aliases().aliases:
            aliases.setdefault(alias.collection_name, []).append(alias.alias_name)
        names = sorted(c.name for c in opened.get_collections().collections)
        return [_summary(opened, target, name, sorted(aliases.get(name, []))) for name in names]


def _summary(client: Any, target: QdrantConfig, name: str, aliases: list[str]) -> CollectionSummary:
    info = client.get_collection(name)
    recorded = fingerprint_of(info) or {}
    layout = CollectionVectors.from_fingerprint(recorded or None, target.model_copy(update={"vector_name": ""}))
    dense = target.model_copy(update={"vector_name": layout.dense})
    try:
        size: int | None = stored_vector_params(info, name, dense).size
    except CollectionMismatchError:  # named vectors, none of them the layout's: another tool's collection
        size = None
    return CollectionSummary(
        name=name,
        aliases=aliases,
        points=client.count(name, exact=True).count,
        vector_size=size,
        made_by_c2v_rag=bool(recorded),
        model=recorded.get("model"),
        quantize=recorded.get("quantize"),
        truncate_dim=recorded.get("truncate_dim"),
        sparse=layout.hybrid,
        chunk_context=recorded.get("chunk_context"),
        decoder_max_length=recorded.get("decoder_max_length"),
    )
