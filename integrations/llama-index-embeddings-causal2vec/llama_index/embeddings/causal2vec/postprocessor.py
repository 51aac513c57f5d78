"""A LlamaIndex node postprocessor that reranks retrieved nodes with ``c2v_rag.Causal2VecReranker``."""

from __future__ import annotations

from typing import Any

from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from c2v_rag import Causal2VecReranker, warn_if_reranked


class Causal2VecRerank(BaseNodePostprocessor):
    """Reorder nodes by the likelihood a Causal2Vec variant's decoder gives the query after each node's text,
    fused with the nodes' retrieval scores when every node has one (else the likelihood alone), and keep the
    best ``top_n``. Each node's ``score`` becomes the reranked score.

    ``model`` is a preset name, a variant directory or a loaded ``c2v_rag.Causal2Vec`` (None: the default
    preset); ``device`` where the decoder runs. The reranker loads on first use.

    Example:
        .. code-block:: python

            from llama_index.embeddings.causal2vec import Causal2VecRerank, Causal2VecRetriever

            # rerank=None: the retriever would otherwise rerank its top 20 itself
            retriever = Causal2VecRetriever("papers", path="store", similarity_top_k=20, rerank=None)
            engine = RetrieverQueryEngine.from_args(retriever, node_postprocessors=[Causal2VecRerank(top_n=5)])
    """

    model_config = ConfigDict(extra="forbid")  # a misspelt option (top_k) is an error, as in the other classes

    top_n: int = Field(default=5, ge=1, description="nodes to keep")
    model: Any = Field(default=None, description="a preset name, a variant directory or a loaded Causal2Vec")
    device: str | None = Field(default=None, description="cpu, cuda...; None: cuda when present")
    _reranker: Causal2VecReranker | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "Causal2VecRerank"

    @property
    def reranker(self) -> Causal2VecReranker:
        if self._reranker is None:
            self._reranker = Causal2VecReranker(self.model, device=self.device)
        return self._reranker

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("Causal2VecRerank needs the query: pass query_str or query_bundle")
        if not nodes:
            return []
        warn_if_reranked((node.node.metadata for node in nodes), "Causal2VecRerank")
        scores = [node.score for node in nodes]
        ranked = self.reranker.rerank(
            query_bundle.query_str,
            [node.node.get_content(metadata_mode=MetadataMode.NONE) for node in nodes],
            self.top_n,
            first_stage=None if any(s is None for s in scores) else scores,
        )
        return [NodeWithScore(node=nodes[r.index].node, score=r.relevance_score) for r in ranked]
