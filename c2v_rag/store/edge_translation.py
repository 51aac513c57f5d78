"""Translation between qdrant-client's models and Qdrant Edge's, in both directions.

:class:`~c2v_rag.store.edge_client.EdgeClient` takes and returns qdrant-client's own models (filters,
queries, points, collection settings) so that the rest of the package never sees Edge's types:
every conversion happens here, and nowhere else. ``edge`` is the ``qdrant_edge`` module; a
collection's ``spec`` is the settings recorded in its ``collection.json``; ``plain`` says the
collection has one unnamed dense vector and no sparse one (its points carry a bare list).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qdrant_client.http import models


def enum_value(value: Any) -> str:
    return str(getattr(value, "value", value)).lower()


def quantization_record(config: Any) -> dict[str, Any] | None:
    if config is None:
        return None
    scalar = getattr(config, "scalar", None)
    if scalar is not None:
        return {"kind": "int8", "quantile": scalar.quantile, "always_ram": scalar.always_ram}
    binary = getattr(config, "binary", None)
    if binary is not None:
        return {"kind": "binary", "always_ram": binary.always_ram}
    raise ValueError(f"Qdrant Edge backend: unsupported quantization {type(config).__name__}")


# Candidates fetched with the quantized codes per wanted hit, before rescoring with the originals: binary
# codes alone rank poorly (docs/performance.md: 4x candidates rescored recovers float32's nDCG), int8 well.
_OVERSAMPLING = {"binary": 4.0, "int8": 1.0}


def quantization_search(edge: Any, spec: dict[str, Any], params: Any) -> Any:
    """Search a quantized collection with its codes, then rescore the hits with the float32 originals.

    Edge does not rescore unless asked (measured: int8 scores came back as the codes' approximations),
    so a quantized collection asks for it here; a request's own quantization params win.
    """
    asked = getattr(params, "quantization", None) if params is not None else None
    if asked is not None:
        return edge.QuantizationSearchParams(
            ignore=bool(asked.ignore), rescore=asked.rescore, oversampling=asked.oversampling
        )
    kind = (spec.get("quantization") or {}).get("kind")
    if kind is None:
        return None
    return edge.QuantizationSearchParams(rescore=True, oversampling=_OVERSAMPLING[kind])


def edge_config(edge: Any, spec: dict[str, Any]) -> Any:
    distances = {
        "cosine": edge.Distance.Cosine,
        "dot": edge.Distance.Dot,
        "euclid": edge.Distance.Euclid,
        "manhattan": edge.Distance.Manhattan,
    }
    datatypes = {
        "float32": edge.VectorStorageDatatype.Float32,
        "float16": edge.VectorStorageDatatype.Float16,
        "uint8": edge.VectorStorageDatatype.Uint8,
    }
    vectors = {
        name: edge.EdgeVectorParams(
            size=p["size"],
            distance=distances[p["distance"]],
            on_disk=p.get("on_disk"),
            datatype=datatypes[p["datatype"]] if p.get("datatype") else None,
        )
        for name, p in spec["vectors"].items()
    }
    sparse = {
        name: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf if p["idf"] else None)
        for name, p in spec["sparse_vectors"].items()
    }
    quant = spec.get("quantization")
    quantization = None
    if quant and quant["kind"] == "int8":
        quantization = edge.ScalarQuantizationConfig(
            edge.ScalarType.Int8, quantile=quant.get("quantile"), always_ram=quant.get("always_ram")
        )
    elif quant and quant["kind"] == "binary":
        quantization = edge.BinaryQuantizationConfig(always_ram=quant.get("always_ram"))
    hnsw = spec["hnsw"]
    return edge.EdgeConfig(
        vectors=vectors or None,
        sparse_vectors=sparse or None,
        on_disk_payload=spec.get("on_disk_payload"),
        # full_scan_threshold (KB): below it a filtered search scans instead of walking the graph, Qdrant's default.
        hnsw_config=edge.HnswIndexConfig(m=hnsw["m"], ef_construct=hnsw["ef_construct"], full_scan_threshold=10_000),
        quantization_config=quantization,
    )


def edge_id(point_id: Any) -> Any:
    if isinstance(point_id, uuid.UUID):
        return str(point_id)
    return point_id


def client_id(point_id: Any) -> Any:
    """Ids as qdrant-client returns them: UUIDs as strings, integers as integers."""
    return str(point_id) if isinstance(point_id, uuid.UUID) else point_id


def edge_vector(edge: Any, vector: Any) -> Any:
    from qdrant_client.http import models

    if isinstance(vector, dict):
        return {
            name: (
                edge.SparseVector(list(v.indices), [float(x) for x in v.values])
                if isinstance(v, models.SparseVector)
                else [float(x) for x in v]
            )
            for name, v in vector.items()
        }
    return {"": [float(x) for x in vector]}


def client_vector(plain: bool, vector: Any) -> Any:
    from qdrant_client.http import models

    if vector is None:
        return None
    if not isinstance(vector, dict):
        return vector
    out = {
        name: (
            models.SparseVector(indices=list(v.indices), values=list(v.values)) if hasattr(v, "indices") else list(v)
        )
        for name, v in vector.items()
    }
    if plain and "" in out:
        return out[""]
    return out


def client_record(plain: bool, record: Any) -> models.Record:
    from qdrant_client.http import models

    return models.Record(id=client_id(record.id), payload=record.payload, vector=client_vector(plain, record.vector))


def client_scored(plain: bool, point: Any) -> models.ScoredPoint:
    from qdrant_client.http import models

    return models.ScoredPoint(
        id=client_id(point.id),
        version=point.version,
        score=point.score,
        payload=point.payload,
        vector=client_vector(plain, point.vector),
    )


def select_payload(point: models.ScoredPoint, selected: Any) -> models.ScoredPoint:
    if selected is True or point.payload is None:
        return point
    if selected is False:
        return point.model_copy(update={"payload": None})
    return point.model_copy(update={"payload": {k: v for k, v in point.payload.items() if k in selected}})


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def edge_query(edge: Any, query: Any, using: str | None) -> Any:
    """qdrant-client's query (a dense list, a SparseVector, NearestQuery, FusionQuery) as Edge's."""
    from qdrant_client.http import models

    if query is None:
        return None
    if isinstance(query, models.NearestQuery):
        query = query.nearest
    if isinstance(query, models.FusionQuery):
        if query.fusion == models.Fusion.RRF:
            # qdrant-client's local mode and the server rank with k=2 by default; so does this.
            return edge.Fusion.Rrf(k=2)
        return edge.Fusion.Dbsf()
    if isinstance(query, models.RrfQuery):
        return edge.Fusion.Rrf(k=query.rrf.k if query.rrf.k is not None else 2, weights=query.rrf.weights)
    if isinstance(query, models.SparseVector):
        return edge.Query.Nearest(edge.SparseVector(list(query.indices), [float(v) for v in query.values]), using=using)
    if isinstance(query, (list, tuple)) or hasattr(query, "tolist"):
        values = query.tolist() if hasattr(query, "tolist") else query
        return edge.Query.Nearest([float(v) for v in values], using=using or "")
    raise ValueError(
        f"the Qdrant Edge backend does not translate queries of type {type(query).__name__}; "
        "use a dense vector, a SparseVector or a fusion"
    )


def edge_prefetch(edge: Any, prefetch: models.Prefetch, search: Any) -> Any:
    return edge.Prefetch(
        limit=prefetch.limit or 10,
        query=edge_query(edge, prefetch.query, prefetch.using),
        prefetches=[edge_prefetch(edge, p, search) for p in as_list(prefetch.prefetch)] or None,
        params=search,
        filter=to_edge_filter(edge, prefetch.filter),
        score_threshold=prefetch.score_threshold,
    )


def to_edge_filter(edge: Any, flt: models.Filter | None) -> Any:
    """A qdrant-client ``Filter`` (what :func:`~c2v_rag.store.filters.to_qdrant_filter` makes, or a raw one)
    as Edge's: the same conditions, nested filters included."""
    if flt is None:
        return None
    return edge.Filter(
        must=_conditions(edge, flt.must),
        should=_conditions(edge, flt.should),
        must_not=_conditions(edge, flt.must_not),
        min_should=(
            edge.MinShould(_conditions(edge, flt.min_should.conditions) or [], flt.min_should.min_count)
            if flt.min_should
            else None
        ),
    )


def _conditions(edge: Any, conditions: Any) -> list[Any] | None:
    if conditions is None:
        return None
    return [_condition(edge, c) for c in as_list(conditions)]


def _condition(edge: Any, condition: Any) -> Any:
    from qdrant_client.http import models

    if isinstance(condition, models.Filter):
        return to_edge_filter(edge, condition)
    if isinstance(condition, models.HasIdCondition):
        return edge.HasIdCondition({edge_id(i) for i in condition.has_id})
    if isinstance(condition, models.IsEmptyCondition):
        return edge.IsEmptyCondition(condition.is_empty.key)
    if isinstance(condition, models.IsNullCondition):
        return edge.IsNullCondition(condition.is_null.key)
    if isinstance(condition, models.HasVectorCondition):
        return edge.HasVectorCondition(condition.has_vector)
    if isinstance(condition, models.NestedCondition):
        return edge.NestedCondition(condition.nested.key, to_edge_filter(edge, condition.nested.filter))
    if isinstance(condition, models.FieldCondition):
        kwargs: dict[str, Any] = {}
        if condition.match is not None:
            kwargs["match"] = _match(edge, condition.match)
        if condition.range is not None:
            kwargs["range"] = _range(edge, condition.range)
        if condition.values_count is not None:
            vc = condition.values_count
            kwargs["values_count"] = edge.ValuesCount(lt=vc.lt, gt=vc.gt, lte=vc.lte, gte=vc.gte)
        if condition.is_empty is not None:
            kwargs["is_empty"] = condition.is_empty
        if condition.is_null is not None:
            kwargs["is_null"] = condition.is_null
        if condition.geo_radius is not None:
            g = condition.geo_radius
            kwargs["geo_radius"] = edge.GeoRadius(edge.GeoPoint(lon=g.center.lon, lat=g.center.lat), g.radius)
        if condition.geo_bounding_box is not None:
            b = condition.geo_bounding_box
            kwargs["geo_bounding_box"] = edge.GeoBoundingBox(
                edge.GeoPoint(lon=b.top_left.lon, lat=b.top_left.lat),
                edge.GeoPoint(lon=b.bottom_right.lon, lat=b.bottom_right.lat),
            )
        if not kwargs:
            raise ValueError(f"the Qdrant Edge backend cannot translate the condition on {condition.key!r}")
        return edge.FieldCondition(key=condition.key, **kwargs)
    raise ValueError(f"the Qdrant Edge backend does not translate filter conditions of type {type(condition).__name__}")


def _match(edge: Any, match: Any) -> Any:
    from qdrant_client.http import models

    if isinstance(match, models.MatchValue):
        return edge.MatchValue(match.value)
    if isinstance(match, models.MatchAny):
        return edge.MatchAny(list(match.any))
    if isinstance(match, models.MatchExcept):
        return edge.MatchExcept(list(getattr(match, "except_", None) or getattr(match, "except")))
    if isinstance(match, models.MatchText):
        return edge.MatchText(match.text)
    if isinstance(match, models.MatchPhrase):
        return edge.MatchPhrase(match.phrase)
    raise ValueError(f"the Qdrant Edge backend does not translate {type(match).__name__}")


def _range(edge: Any, rng: Any) -> Any:
    from qdrant_client.http import models

    bounds = {op: getattr(rng, op) for op in ("gt", "gte", "lt", "lte")}
    if isinstance(rng, models.DatetimeRange):
        return edge.RangeDateTime(**{op: (v.isoformat() if hasattr(v, "isoformat") else v) for op, v in bounds.items()})
    return edge.RangeFloat(**bounds)
