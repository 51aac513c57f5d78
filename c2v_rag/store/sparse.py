"""BM25 sparse vectors, computed offline, for Qdrant's sparse vectors with the IDF modifier.

A chunk's sparse vector holds, for each distinct term, BM25's term-frequency part
``tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg_length))``; a query's holds 1.0 per
distinct term. Qdrant multiplies in each term's IDF at query time (``Modifier.IDF``), from the
collection as it is then, so the weights never go stale as documents come and go.

Why not fastembed's ``Bm25``: it downloads its stopwords and settings from the Hugging Face hub
on first use, and this package must work offline. Tokenizing is bm25s's (its regex and English
stopword list) with PyStemmer's Snowball stemmer, both maintained packages with no data to fetch.
Terms become indices through a fixed hash (BLAKE2b, 32 bits), so no vocabulary is stored and
documents and queries agree without sharing state.

The settings a collection was built with are recorded in it (:meth:`BM25Config.to_record`), so
queries are always tokenized like the documents they search.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from c2v_rag.core.extras import require

if TYPE_CHECKING:
    from qdrant_client.http import models

SPARSE_KINDS = ("bm25",)
_FEATURE = "BM25 sparse vectors"
SparseKind = Literal["bm25"]


class BM25Config(BaseModel):
    """How chunks and queries become BM25 sparse vectors.

    ``avg_length`` stands in for the corpus' mean chunk length in terms: Qdrant computes IDF
    itself, but BM25's length normalisation needs a fixed value so that vectors already stored
    stay valid as the collection grows. Measured on 400 SciFact abstracts, 200 SmolLM2 tokens (the
    default chunk) hold 97 terms after stopwords are dropped; 90 is the default, and
    ``bench/hybrid_retrieval.py`` compares it with a corpus' own mean.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["bm25"] = "bm25"
    k1: float = Field(default=1.2, ge=0)
    b: float = Field(default=0.75, ge=0, le=1)
    avg_length: float = Field(default=90.0, gt=0, description="typical terms per chunk after stopwords")
    stemmer: Literal["english", "none"] = Field(default="english", description="Snowball stemmer (PyStemmer)")
    stopwords: Literal["english", "none"] = "english"

    def to_record(self) -> dict[str, Any]:
        """What a collection stores about its sparse vectors."""
        return self.model_dump()

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> BM25Config:
        return cls.model_validate(dict(record))


def resolve_sparse(sparse: str | BM25Config | None) -> BM25Config | None:
    """``sparse=`` of :func:`~c2v_rag.ingest` as a config: None, ``"bm25"`` or a :class:`BM25Config`."""
    if sparse is None or isinstance(sparse, BM25Config):
        return sparse
    if sparse == "bm25":
        return BM25Config()
    raise ValueError(
        f"sparse={sparse!r} is not supported; use one of {list(SPARSE_KINDS)} or None (or a c2v_rag.rag.BM25Config)"
    )


def term_index(term: str) -> int:
    """The sparse index of a term: a fixed 32-bit hash (Qdrant's sparse indices are u32)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "little")


class BM25Encoder:
    """Turns texts into BM25 sparse vectors (``indices``, ``values``) with one config."""

    def __init__(self, config: BM25Config | None = None) -> None:
        self.config = config or BM25Config()
        self._bm25s = require("bm25s", _FEATURE, "hybrid", needs="need")
        self._stemmer = None
        if self.config.stemmer != "none":
            stemmer_module = require("Stemmer", _FEATURE, "hybrid", distribution="PyStemmer", needs="need")
            self._stemmer = stemmer_module.Stemmer(self.config.stemmer)

    def terms(self, texts: Sequence[str]) -> list[list[str]]:
        """The terms of each text, lower-cased, stopwords removed, stemmed."""
        if not texts:
            return []
        stopwords = None if self.config.stopwords == "none" else "en"
        tokens = self._bm25s.tokenize(
            list(texts), lower=True, stopwords=stopwords, stemmer=self._stemmer, return_ids=False, show_progress=False
        )
        return [list(t) for t in tokens]

    def encode_documents(self, texts: Sequence[str]) -> list[tuple[list[int], list[float]]]:
        """One ``(indices, values)`` pair per text, with BM25 term-frequency weights."""
        k1, b, avg = self.config.k1, self.config.b, self.config.avg_length
        out = []
        for terms in self.terms(texts):
            counts = _index_counts(terms)
            norm = k1 * (1 - b + b * len(terms) / avg)
            out.append((list(counts), [tf * (k1 + 1) / (tf + norm) for tf in counts.values()]))
        return out

    def encode_queries(self, texts: Sequence[str]) -> list[tuple[list[int], list[float]]]:
        """One ``(indices, values)`` pair per query: each distinct term once (IDF comes from Qdrant)."""
        out = []
        for terms in self.terms(texts):
            indices = list(_index_counts(terms))
            out.append((indices, [1.0] * len(indices)))
        return out

    # LlamaIndex's QdrantVectorStore(sparse_doc_fn=..., sparse_query_fn=...) take this shape.
    def llama_index_doc_fn(self, texts: list[str]) -> tuple[list[list[int]], list[list[float]]]:
        pairs = self.encode_documents(texts)
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def llama_index_query_fn(self, texts: list[str]) -> tuple[list[list[int]], list[list[float]]]:
        pairs = self.encode_queries(texts)
        return [p[0] for p in pairs], [p[1] for p in pairs]


def langchain_sparse_embeddings(config: BM25Config | None = None) -> Any:
    """A ``langchain_qdrant.SparseEmbeddings`` giving this package's BM25 vectors, for
    ``QdrantVectorStore(retrieval_mode=RetrievalMode.HYBRID, sparse_embedding=...)`` over a
    collection ingested with ``sparse="bm25"`` (pass ``vector_name="text-dense",
    sparse_vector_name="text-sparse-new"``). Needs langchain-qdrant."""
    from langchain_qdrant import SparseEmbeddings, SparseVector

    encoder = BM25Encoder(config)

    class C2VBM25SparseEmbeddings(SparseEmbeddings):
        """BM25 term weights of c2v_rag (documents) and distinct terms (queries); Qdrant adds IDF."""

        def embed_documents(self, texts: list[str]) -> list[SparseVector]:
            return [SparseVector(indices=i, values=v) for i, v in encoder.encode_documents(texts)]

        def embed_query(self, text: str) -> SparseVector:
            indices, values = encoder.encode_queries([text])[0]
            return SparseVector(indices=indices, values=values)

    return C2VBM25SparseEmbeddings()


def to_sparse_vector(pair: tuple[list[int], list[float]]) -> models.SparseVector:
    from qdrant_client.http import models

    return models.SparseVector(indices=pair[0], values=pair[1])


def _index_counts(terms: list[str]) -> dict[int, int]:
    counts: Counter[int] = Counter(term_index(t) for t in terms)
    return dict(counts)
