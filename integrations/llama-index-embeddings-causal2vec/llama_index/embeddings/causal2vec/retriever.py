"""A LlamaIndex retriever over a ``c2v_rag.Collection``: any backend (server, local mode, Qdrant Edge)."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQueryMode,
)

from c2v_rag import HIDDEN_FROM_LLM, RERANK_SCORE_KEY, Collection, RetrieverOptions, SearchHit, metadata_field

# VectorStoreQueryMode -> c2v_rag's search mode.
QUERY_MODES = {
    VectorStoreQueryMode.DEFAULT: "dense",
    VectorStoreQueryMode.SPARSE: "sparse",
    VectorStoreQueryMode.HYBRID: "hybrid",
}


class Causal2VecRetriever(BaseRetriever):
    """Retrieve chunks of a collection made by ``c2v_rag.ingest``, from any backend.

    Takes LlamaIndex's names: ``similarity_top_k``, ``filters`` (``MetadataFilters``, translated
    to a Qdrant filter on the chunk metadata; the dict form of ``c2v_rag.store.filters`` and a
    ``qdrant_client`` Filter work too) and ``vector_store_query_mode`` (``default``, ``sparse``,
    ``hybrid``). ``collection`` is a :class:`c2v_rag.Collection` handle, or a collection's name with the handle's
    options (``path``/``store``/``qdrant_url``, ``model``...); the other options are :class:`c2v_rag.SearchOptions`'
    (``group_by_document``, ``task``...). The query is embedded with the collection's own model. Each node's
    ``ref_doc_id`` is its document's id.

    Example:
        .. code-block:: python

            import c2v_rag
            from llama_index.embeddings.causal2vec import Causal2VecRetriever

            papers = c2v_rag.open_collection("papers", path="store", store="edge")
            retriever = Causal2VecRetriever(papers, similarity_top_k=5, vector_store_query_mode="hybrid")
            nodes = retriever.retrieve("What causes spring tides?")
    """

    def __init__(
        self,
        collection: Collection | str | None = None,
        *,
        similarity_top_k: int = 4,
        filters: Any = None,
        vector_store_query_mode: VectorStoreQueryMode | str = VectorStoreQueryMode.DEFAULT,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **options: Any,
    ) -> None:
        # An option this retriever does not take is a ValueError, as LlamaIndex's own classes (pydantic) refuse one.
        if "mode" in options:
            raise ValueError("pass vector_store_query_mode (LlamaIndex's name), not mode")
        unknown = sorted(set(options) - set(RetrieverOptions.model_fields) | ({"filter"} & set(options)))
        if unknown:
            raise ValueError(
                f"Causal2VecRetriever has no option {', '.join(unknown)}: it takes a Collection (or a "
                "collection's name and its store and model options), similarity_top_k, filters, "
                "vector_store_query_mode and the search options of c2v_rag.SearchOptions"
            )
        if not isinstance(similarity_top_k, int) or similarity_top_k < 1:
            raise ValueError(f"similarity_top_k must be a positive integer, got {similarity_top_k!r}")
        supported = ", ".join(m.value for m in QUERY_MODES)
        try:
            mode = VectorStoreQueryMode(vector_store_query_mode)
        except ValueError:
            raise ValueError(
                f"vector_store_query_mode={vector_store_query_mode!r} is not a LlamaIndex query mode; use one of "
                f"{supported} (dense search is {VectorStoreQueryMode.DEFAULT.value!r})"
            ) from None
        if mode not in QUERY_MODES:
            raise ValueError(f"vector_store_query_mode={mode.value!r} is not supported; use one of {supported}")
        self.similarity_top_k = similarity_top_k
        if collection is not None:
            options["collection"] = collection
        self.options = RetrieverOptions(**options, filter=to_filter(filters), mode=QUERY_MODES[mode])
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [to_node(hit) for hit in self.options.search_hits(query_bundle.query_str, self.similarity_top_k)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = await self.options.asearch_hits(query_bundle.query_str, self.similarity_top_k)
        return [to_node(hit) for hit in hits]


def to_node(hit: SearchHit) -> NodeWithScore:
    """A hit as LlamaIndex's scored node: the chunk's id, text and metadata, its document as the source."""
    # As the stored node says: the vector embeds the text alone, and bookkeeping stays out of prompts.
    metadata = dict(hit.metadata)
    if hit.rerank_score is not None:  # the search reranked: what ordered the nodes, for a reranker after this one
        metadata[RERANK_SCORE_KEY] = hit.rerank_score
    node = TextNode(
        id_=hit.id,
        text=hit.text,
        metadata=metadata,
        excluded_embed_metadata_keys=list(metadata),
        excluded_llm_metadata_keys=[k for k in [*HIDDEN_FROM_LLM, RERANK_SCORE_KEY] if k in metadata],
        start_char_idx=hit.start_char,
        end_char_idx=hit.end_char,
    )
    if hit.doc_id is not None:
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=hit.doc_id)
    return NodeWithScore(node=node, score=hit.score)


def to_filter(filters: Any) -> Any:
    """``MetadataFilters`` as a ``qdrant_client`` Filter on the chunk metadata; anything else as is."""
    if not isinstance(filters, MetadataFilters):
        return filters
    from qdrant_client.http import models

    conditions, negated = [], []
    for item in filters.filters:
        if isinstance(item, MetadataFilters):
            conditions.append(to_filter(item))
            continue
        condition, negate = _condition(item, models)
        (negated if negate else conditions).append(condition)
    if filters.condition == FilterCondition.OR:
        if negated:
            conditions.extend(models.Filter(must_not=[c]) for c in negated)
        return models.Filter(should=conditions)
    if filters.condition == FilterCondition.NOT:
        # NOT over the group: none of its conditions may hold (a negated one holding means its value is there).
        return models.Filter(must_not=conditions + [models.Filter(must_not=[c]) for c in negated])
    return models.Filter(must=conditions or None, must_not=negated or None)


def _condition(item: MetadataFilter, models: Any) -> tuple[Any, bool]:
    """One MetadataFilter as (a Qdrant condition, whether it is negated)."""
    key, value, op = metadata_field(item.key), item.value, item.operator
    ranges = {FilterOperator.GT: "gt", FilterOperator.GTE: "gte", FilterOperator.LT: "lt", FilterOperator.LTE: "lte"}
    if op in ranges:
        return models.FieldCondition(key=key, range=models.Range(**{ranges[op]: value})), False
    if op in (FilterOperator.EQ, FilterOperator.NE):
        match = (
            models.FieldCondition(key=key, range=models.Range(gte=value, lte=value))
            if isinstance(value, float)
            else models.FieldCondition(key=key, match=models.MatchValue(value=value))
        )
        return match, op == FilterOperator.NE
    if op in (FilterOperator.IN, FilterOperator.ANY):
        return models.FieldCondition(key=key, match=models.MatchAny(any=list(value))), False
    if op == FilterOperator.NIN:
        return models.FieldCondition(key=key, match=models.MatchAny(any=list(value))), True
    if op == FilterOperator.ALL:
        return models.Filter(
            must=[models.FieldCondition(key=key, match=models.MatchValue(value=v)) for v in value]
        ), False
    if op == FilterOperator.TEXT_MATCH:
        return models.FieldCondition(key=key, match=models.MatchText(text=str(value))), False
    if op == FilterOperator.IS_EMPTY:
        return models.IsEmptyCondition(is_empty=models.PayloadField(key=key)), False
    raise ValueError(
        f"MetadataFilter on {item.key!r}: the operator {op.value!r} has no Qdrant filter here; use "
        f"one of {', '.join(o.value for o in (*ranges, FilterOperator.EQ, FilterOperator.NE, FilterOperator.IN, FilterOperator.NIN, FilterOperator.ANY, FilterOperator.ALL, FilterOperator.TEXT_MATCH, FilterOperator.IS_EMPTY))}"  # noqa: E501
    )
