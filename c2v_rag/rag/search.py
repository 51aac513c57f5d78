"""``search``: embed a query with its instruction and read the nearest chunks from Qdrant."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from .collection import (
    DEFAULT_COLLECTION,
    QdrantConfig,
    collection_fingerprint,
    require_collection,
    stored_vector_params,
)
from .deps import require_rag
from .embedder import Embedder, load_model
from .errors import CollectionMismatchError
from .payload import DOC_ID_KEY, METADATA_KEY, payload_metadata, payload_text

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

    from ..modeling import Causal2Vec


class SearchHit(BaseModel):
    """One retrieved chunk: its similarity score, text, document and metadata."""

    id: str
    score: float
    text: str
    doc_id: str | None = None
    source: str | None = None
    chunk_index: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_point(cls, point: Any) -> "SearchHit":
        payload = point.payload or {}
        metadata = payload_metadata(payload)
        doc_id = payload.get(DOC_ID_KEY, metadata.get(DOC_ID_KEY))
        chunk_index = metadata.get("chunk_index")
        return cls(
            id=str(point.id), score=float(point.score), text=payload_text(payload),
            doc_id=None if doc_id in (None, "None") else str(doc_id),
            source=next((str(metadata[k]) for k in ("source", "file_path", "url") if metadata.get(k)), None),
            chunk_index=chunk_index if isinstance(chunk_index, int) else None,
            metadata=metadata,
        )


def search(
    query: str,
    top_k: int = 5,
    *,
    collection: str = DEFAULT_COLLECTION,
    qdrant_url: str | None = None,
    path: str | Path | None = None,
    api_key: str | None = None,
    prefer_grpc: bool | None = None,
    model: "str | Path | Causal2Vec | None" = None,
    device: str | None = None,
    dtype: str | None = None,
    task: str | None = None,
    instruction: str | None = None,
    filter: Mapping[str, Any] | None = None,
    score_threshold: float | None = None,
    qdrant: QdrantConfig | None = None,
    client: "QdrantClient | None" = None,
) -> list[SearchHit]:
    """The ``top_k`` chunks nearest to ``query`` in a collection made by :func:`ingest`.

    The query gets the retrieval instruction (``task`` or ``instruction``; otherwise the
    variant's default, else MS MARCO's); documents were stored without one. ``model`` defaults
    to the one the collection was built with. ``filter`` keeps chunks whose metadata equals
    each given value (a list matches any of its values). Connection arguments are those of
    :func:`ingest`; collections written by LlamaIndex or LangChain can be searched too.
    """
    require_rag("c2v_rag.search")
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"query must be a non-empty string, got {query!r}")
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
    target = QdrantConfig.resolve(qdrant, qdrant_url, path, api_key, prefer_grpc)
    own_client = client is None
    qdrant_client = target.connect() if own_client else client
    try:
        info = require_collection(qdrant_client, collection, target)
        params = stored_vector_params(info, collection, target)
        c2v = _model_for(qdrant_client, collection, model, device, dtype)
        embedder = Embedder(c2v, task=task, query_instruction=instruction, normalize=True)
        if embedder.dim != params.size:
            raise CollectionMismatchError(
                f"collection {collection!r} at {target.location} stores {params.size}-dimensional vectors, "
                f"but the model makes {embedder.dim}-dimensional ones: search with the model that built it"
            )
        vector = embedder.embed_query(query)
        return nearest_chunks(qdrant_client, collection, target, vector, top_k,
                              filter=filter, score_threshold=score_threshold)
    finally:
        if own_client:
            qdrant_client.close()


def nearest_chunks(
    client: "QdrantClient",
    collection: str,
    target: QdrantConfig,
    vector: Sequence[float],
    top_k: int,
    *,
    filter: Mapping[str, Any] | None = None,
    score_threshold: float | None = None,
) -> list[SearchHit]:
    """The ``top_k`` chunks nearest to an already-embedded query ``vector``, with their payloads."""
    response = client.query_points(
        collection, query=[float(x) for x in vector], using=target.vector_name or None, limit=top_k,
        with_payload=True, query_filter=_metadata_filter(filter), score_threshold=score_threshold,
    )
    return [SearchHit.from_point(p) for p in response.points]


def _model_for(client, collection: str, model, device, dtype) -> "Causal2Vec":
    from ..modeling import Causal2Vec

    if isinstance(model, Causal2Vec):
        return model
    if model is None:
        # The model that filled the collection: its query vectors are the only comparable ones.
        recorded = (collection_fingerprint(client, collection) or {}).get("model")
        if isinstance(recorded, str):
            model = recorded
    return load_model(model, device=device, dtype=dtype)


def _metadata_filter(conditions: Mapping[str, Any] | None):
    if not conditions:
        return None
    from qdrant_client.http import models

    must = []
    for key, value in conditions.items():
        if isinstance(value, (list, tuple, set)):
            match = models.MatchAny(any=list(value))
        elif isinstance(value, (str, int, bool)):
            match = models.MatchValue(value=value)
        else:
            raise TypeError(f"filter[{key!r}] must be a str, int, bool or a list of them, got {type(value).__name__}")
        must.append(models.FieldCondition(key=f"{METADATA_KEY}.{key}", match=match))
    return models.Filter(must=must)
