"""LlamaIndex's package-test conventions: the class is a BaseEmbedding and takes HF-style names.

The behaviour on real vectors is tested in the c2v_rag repository (tests/rag/test_integrations*.py).
"""

import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.embeddings.causal2vec import Causal2VecEmbedding


def test_class():
    names_of_base_classes = [b.__name__ for b in Causal2VecEmbedding.__mro__]
    assert BaseEmbedding.__name__ in names_of_base_classes


def test_hugging_face_style_arguments_without_loading():
    emb = Causal2VecEmbedding(
        model_name="some/variant",
        show_progress_bar=True,
        embed_batch_size=4096,
        device="cpu",
        query_instruction="Find",
        text_instruction="Doc",
    )
    assert (emb.model, emb.show_progress, emb.embed_batch_size) == ("some/variant", True, 4096)
    with pytest.raises(ValueError, match="unknown_field"):
        Causal2VecEmbedding(unknown_field=1)
