"""Causal2VecReranker: a variant's decoder scores how likely a query is, given each document.

The relevance of a document is the mean log-probability per token of the query written after it, under an
instruction that asks for a search query the document answers (:mod:`c2v_rag.rerank.templates`). It reads the
whole pair, so it is slower than a cosine and sees what a vector misses; it is meant for a first stage's top
hits (``search(..., rerank=N)``), fused with that stage's scores (:mod:`c2v_rag.rerank.fusion`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from pydantic import BaseModel

from c2v_rag.core.arguments import check_count
from c2v_rag.encode.loop import check_texts, default_max_tokens
from c2v_rag.rerank.fusion import DEFAULT_WEIGHT, fuse
from c2v_rag.rerank.loading import DecoderChoice, QuantizeChoice, load_scoring_model
from c2v_rag.rerank.templates import DEFAULT_TEMPLATE, PairBuilder, RerankTemplate, get_template

if TYPE_CHECKING:
    from c2v_rag.model.causal2vec import Causal2Vec

logger = logging.getLogger("c2v_rag")


class RerankResult(BaseModel):
    """One reranked document, in the shape of TEI's, Cohere's and Jina's ``/rerank``: its ``index`` in the
    documents given, its ``relevance_score`` (higher is more relevant) and, when asked for, its text."""

    index: int
    relevance_score: float
    document: str | None = None


class Causal2VecReranker:
    """Scores documents for a query by the query's log-likelihood under the variant's decoder.

    Args:
        model: a preset name, a variant directory, None (the default preset) or a loaded
            :class:`~c2v_rag.Causal2Vec` (its tokenizer and device are used, and a float model's dtype where the
            decoder scores in float; with ``decoder="variant"`` its decoder).
        decoder: ``"base"`` (the variant's base decoder without adapters, measured the better ranker for the
            preset) or ``"variant"`` (its own decoder, adapters merged in).
        template: a name in :data:`~c2v_rag.rerank.templates.TEMPLATES` or a
            :class:`~c2v_rag.rerank.templates.RerankTemplate`.
        device, dtype: where and in what the decoder runs (None: cuda when present; the variant's dtype).
        quantize: ``"auto"`` runs the base decoder's linear layers in int8 on a CPU where new vectors would be int8
            (:mod:`c2v_rag.rerank.int8`; the ``int8`` extra on a CPU where int8 was measured as good;
            ``$C2V_RAG_QUANTIZE``; built once and cached), unless ``dtype`` is given; ``"int8"`` asks for it; None
            or ``"none"``: the float decoder.
        max_length: decoder tokens per (instruction, document, query); longer documents keep their head
            (None: the variant's ``max_length``). :attr:`truncated` counts the documents cut.
        batch_tokens: padded tokens per forward pass (None: encode's default for the device).
    """

    def __init__(
        self,
        model: str | Path | Causal2Vec | None = None,
        *,
        decoder: DecoderChoice = "base",
        template: str | RerankTemplate = DEFAULT_TEMPLATE,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        quantize: QuantizeChoice | None = "auto",
        max_length: int | None = None,
        batch_tokens: int | None = None,
    ) -> None:
        for name, value in (("max_length", max_length), ("batch_tokens", batch_tokens)):
            check_count(name, value, optional=True)
        chosen = get_template(template)
        self.scoring = load_scoring_model(model, decoder, device, dtype, quantize, chosen)
        self.decoder = decoder
        self.template = chosen
        self.max_length = max_length or self.scoring.config.max_length
        self.batch_tokens = batch_tokens or default_max_tokens(
            self.scoring.likelihood.device, "int8" if self.precision == "int8" else "none"
        )
        self.pairs = PairBuilder(self.scoring.tokenizer, self.scoring.prompt_format, chosen, self.max_length)
        self.truncated = 0
        """Documents cut to fit ``max_length`` so far, over every call."""
        self._warned = False
        self._lock = threading.Lock()  # one forward at a time: a server's threads share the reranker

    @property
    def precision(self) -> str:
        """What the decoder computes in: ``"int8"``, or its float dtype's name."""
        return self.scoring.likelihood.precision

    def __repr__(self) -> str:
        return (
            f"Causal2VecReranker({self.scoring.config.decoder!r}, decoder={self.decoder!r}, "
            f"template={self.template.name!r}, precision={self.precision!r}, max_length={self.max_length})"
        )

    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        """One relevance per document, in their order: the mean log-probability (nats) of the query's tokens
        written after the document. Higher is more relevant; comparable across queries of different lengths."""
        return self.score_with_truncation(query, documents)[0]

    def score_with_truncation(self, query: str, documents: Sequence[str]) -> tuple[np.ndarray, int]:
        """:meth:`score`, and how many of these documents were cut to fit ``max_length``."""
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"query must be a non-empty string, got {query!r}")
        texts, single = check_texts(documents)
        if single:
            raise TypeError("documents must be a list of strings; wrap a single document in a list")
        if not texts:
            return np.zeros(0), 0
        query_ids = self.pairs.query_ids(query)
        pairs = self.pairs.pairs(query_ids, texts)
        cut = sum(p.truncated for p in pairs)
        self._report_truncation(cut, len(pairs))
        with self._lock:
            sums = self.scoring.likelihood.log_probs(pairs, self.batch_tokens)
        return sums / len(query_ids), cut

    def rerank(
        self,
        query: str,
        documents: Sequence[str],
        top_n: int | None = None,
        *,
        first_stage: Sequence[float] | None = None,
        weight: float = DEFAULT_WEIGHT,
        return_documents: bool = False,
    ) -> list[RerankResult]:
        """The documents best first, as :class:`RerankResult`; ``top_n`` keeps the best that many (None: all).

        With ``first_stage`` (the documents' retrieval scores) each ``relevance_score`` is the fused score
        (:meth:`fused_scores`); without, the relevance of :meth:`score`."""
        if top_n is not None and (not isinstance(top_n, int) or isinstance(top_n, bool) or top_n < 1):
            raise ValueError(f"top_n must be a positive integer or None, got {top_n!r}")
        if first_stage is None:
            scores = self.score(query, documents)
        else:
            scores = self.fused_scores(query, documents, first_stage, weight)
        order = np.argsort(-scores, kind="stable")[:top_n]
        return [
            RerankResult(
                index=int(i), relevance_score=float(scores[i]), document=documents[i] if return_documents else None
            )
            for i in order
        ]

    def fused_scores(
        self, query: str, documents: Sequence[str], first_stage: Sequence[float], weight: float = DEFAULT_WEIGHT
    ) -> np.ndarray:
        """The documents' first-stage scores (cosines, BM25) fused with their relevance
        (:func:`~c2v_rag.rerank.fusion.fuse`: z-scored over these documents, the likelihood at ``weight``)."""
        if len(first_stage) != len(documents):
            raise ValueError(f"{len(first_stage)} first-stage scores for {len(documents)} documents")
        return fuse(first_stage, self.score(query, documents), weight)

    def _report_truncation(self, cut: int, of: int) -> None:
        if not cut:
            return
        self.truncated += cut
        # At WARNING once per reranker, then at DEBUG: a search per request would flood a server's log.
        level = logging.DEBUG if self._warned else logging.WARNING
        self._warned = True
        logger.log(
            level,
            "%d of %d documents exceeded the reranker's max_length=%d tokens with the query and were truncated "
            "(their head is kept)",
            cut,
            of,
            self.max_length,
        )
