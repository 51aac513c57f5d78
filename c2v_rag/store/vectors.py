"""Which vectors a collection's points carry, under which names, and how the sparse ones were made.

A dense-only collection keeps one unnamed vector (what both frameworks open by default). A
hybrid collection names its vectors as LlamaIndex's ``QdrantVectorStore(enable_hybrid=True)``
does by default, ``text-dense`` and ``text-sparse-new``: LlamaIndex cannot be told to use an
unnamed dense vector next to a sparse one, while LangChain's ``QdrantVectorStore`` takes any
names (``vector_name="text-dense", sparse_vector_name="text-sparse-new"``). Both are settable
through :class:`~c2v_rag.rag.QdrantConfig` (``vector_name``, ``sparse_vector_name``).

These are recorded in the collection's metadata when it is created, so search reads the
names and the BM25 settings from the collection rather than from the caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from c2v_rag.store.errors import CollectionMismatchError
from c2v_rag.store.point_schema import DEFAULT_SPARSE_NAME, HYBRID_DENSE_NAME
from c2v_rag.store.sparse import BM25Config

__all__ = ["CollectionVectors", "VectorNames", "HYBRID_DENSE_NAME", "DEFAULT_SPARSE_NAME", "LAYOUT_KEY"]

LAYOUT_KEY = "layout"


class VectorNames(Protocol):
    """The vector names a connection asks for (a :class:`~c2v_rag.store.collection.QdrantConfig`)."""

    @property
    def vector_name(self) -> str: ...
    @property
    def sparse_vector_name(self) -> str: ...


@dataclass(frozen=True)
class CollectionVectors:
    """The dense vector's name (``""``: unnamed), and the sparse vector's name and settings."""

    dense: str = ""
    sparse: str | None = None
    bm25: BM25Config | None = None

    @property
    def hybrid(self) -> bool:
        return self.sparse is not None

    @classmethod
    def for_ingest(cls, config: VectorNames, bm25: BM25Config | None) -> CollectionVectors:
        """The layout a new collection gets from the connection settings and ``sparse=``."""
        if bm25 is None:
            return cls(dense=config.vector_name)
        return cls(dense=config.vector_name or HYBRID_DENSE_NAME, sparse=config.sparse_vector_name, bm25=bm25)

    @classmethod
    def for_writing(
        cls, config: VectorNames, bm25: BM25Config | None, recorded: Mapping[str, Any] | None, *, exists: bool
    ) -> CollectionVectors:
        """The layout of points written into a collection that ``exists`` with the fingerprint ``recorded``: its
        own where no sparse vectors are asked for (so a hybrid collection's new points get its BM25 vectors),
        else :meth:`for_ingest`, which :meth:`check_against` then compares with the collection's."""
        if exists and bm25 is None:
            return cls.from_fingerprint(recorded, config)
        return cls.for_ingest(config, bm25)

    def record(self) -> dict[str, Any]:
        """What the collection's metadata stores."""
        return {
            "dense_vector": self.dense,
            "sparse_vector": self.sparse,
            "sparse": self.bm25.to_record() if self.bm25 is not None else None,
        }

    @classmethod
    def from_fingerprint(cls, fingerprint: Mapping[str, Any] | None, config: VectorNames) -> CollectionVectors:
        """The recorded layout of a c2v_rag collection; for others, the connection settings'
        dense vector and no sparse one."""
        record = (fingerprint or {}).get(LAYOUT_KEY)
        if not isinstance(record, Mapping):
            return cls(dense=config.vector_name)
        dense = str(record.get("dense_vector") or "")
        if config.vector_name and config.vector_name != dense:
            dense = config.vector_name  # an explicit choice; checked against the collection later
        sparse = record.get("sparse_vector")
        bm25 = BM25Config.from_record(record["sparse"]) if isinstance(record.get("sparse"), Mapping) else None
        return cls(dense=dense, sparse=sparse if isinstance(sparse, str) and bm25 is not None else None, bm25=bm25)

    def check_against(self, stored: CollectionVectors, name: str, location: str) -> None:
        """Refuse to write this layout's points into a collection laid out as ``stored``."""
        if self.sparse is not None and stored.sparse is None:
            raise CollectionMismatchError(
                f"collection {name!r} at {location} has no sparse vectors; it was created without sparse=. "
                "Ingest into a new collection with sparse='bm25' (c2v_rag.reindex can rebuild one behind an alias)."
            )
        if self.sparse is None and stored.sparse is not None:
            raise CollectionMismatchError(
                f"collection {name!r} at {location} holds {stored.bm25.kind if stored.bm25 else 'sparse'} sparse "
                f"vectors too; pass sparse='bm25' to ingest so new chunks get them"
            )
        if self.sparse is not None and (self.sparse, self.bm25) != (stored.sparse, stored.bm25):
            raise CollectionMismatchError(
                f"collection {name!r} at {location} stores sparse vector {stored.sparse!r} with "
                f"{stored.bm25.to_record() if stored.bm25 else None}, not {self.sparse!r} with "
                f"{self.bm25.to_record() if self.bm25 else None}; use the collection's settings or another collection"
            )

    def point_vector(self, dense: Sequence[float], sparse: tuple[list[int], list[float]] | None = None) -> Any:
        """The ``vector`` of a ``PointStruct`` in this layout."""
        values = [float(x) for x in dense]
        if self.sparse is None:
            return {self.dense: values} if self.dense else values
        from c2v_rag.store.sparse import to_sparse_vector

        if sparse is None:
            raise ValueError(f"a point of a hybrid collection needs its sparse vector {self.sparse!r}")
        return {self.dense: values, self.sparse: to_sparse_vector(sparse)}

    def sparse_vectors_config(self) -> dict[str, Any] | None:
        """``sparse_vectors_config`` for ``create_collection``: Qdrant computes IDF (BM25)."""
        if self.sparse is None:
            return None
        from qdrant_client.http import models

        return {self.sparse: models.SparseVectorParams(modifier=models.Modifier.IDF)}
