"""In-context examples through the LlamaIndex and LangChain embedding classes (``query_examples``)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("langchain_core")

from langchain_causal2vec import Causal2VecEmbeddings
from llama_index.embeddings.causal2vec import Causal2VecEmbedding

EXAMPLES = [("cats purr when happy", "Purring signals a content cat.")]
QUERY = "vitamin and bone loss"
DOCS = ["Vitamin D deficiency is linked to bone loss.", "Cats and dogs are popular pets."]


def _query(emb, text):
    return np.array(emb.get_query_embedding(text) if isinstance(emb, Causal2VecEmbedding) else emb.embed_query(text))


def _docs(emb, texts):
    return np.array(
        emb.get_text_embedding_batch(texts) if isinstance(emb, Causal2VecEmbedding) else emb.embed_documents(texts)
    )


@pytest.mark.parametrize("cls", [Causal2VecEmbedding, Causal2VecEmbeddings])
def test_query_examples_reach_queries_only(cls, tiny_variant, tiny_model):
    emb = cls(model=str(tiny_variant), task="SciFact", query_examples=EXAMPLES)
    expected = tiny_model.encode_queries(QUERY, task="SciFact", examples=EXAMPLES, normalize_embeddings=True)
    np.testing.assert_allclose(_query(emb, QUERY), expected, atol=1e-5)
    plain = tiny_model.encode_queries(QUERY, task="SciFact", normalize_embeddings=True)
    assert not np.allclose(_query(emb, QUERY), plain, atol=1e-4)
    # Documents of a retrieval task get none.
    np.testing.assert_allclose(
        _docs(emb, DOCS), tiny_model.encode_documents(DOCS, normalize_embeddings=True), atol=1e-5
    )
    # The option is plain data: it survives the frameworks' own serialization.
    again = cls.from_dict(emb.to_dict())
    np.testing.assert_allclose(_query(again, QUERY), expected, atol=1e-5)
    with pytest.raises(ValueError, match="query_examples"):
        cls(model=str(tiny_variant), query_examples=[("a query", "")])
