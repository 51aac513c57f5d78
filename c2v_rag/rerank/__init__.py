"""Reranking with the decoder: the likelihood of a query given each document (:class:`Causal2VecReranker`)."""

from c2v_rag.rerank.fusion import DEFAULT_WEIGHT, fuse, zscore
from c2v_rag.rerank.reranker import Causal2VecReranker, RerankResult
from c2v_rag.rerank.templates import DEFAULT_TEMPLATE, TEMPLATES, RerankTemplate

__all__ = [
    "Causal2VecReranker",
    "RerankResult",
    "RerankTemplate",
    "TEMPLATES",
    "DEFAULT_TEMPLATE",
    "DEFAULT_WEIGHT",
    "fuse",
    "zscore",
]
