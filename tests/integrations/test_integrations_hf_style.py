"""The framework classes take their ecosystem's own argument names, refuse unknown ones, and pass
LangChain's standard embeddings tests."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("langchain_core")

from langchain_causal2vec import Causal2VecEmbeddings  # noqa: E402
from llama_index.embeddings.causal2vec import Causal2VecEmbedding  # noqa: E402
from rag_helpers import make_text  # noqa: E402

from c2v_rag.rag import DEFAULT_QUERY_TASK  # noqa: E402

TEXTS = [make_text(i, sentences=2) for i in range(4)]


def test_llama_index_model_name_loads_that_variant(tiny_variant, tiny_variant_qwen, tiny_model):
    emb = Causal2VecEmbedding(model_name=str(tiny_variant_qwen), device="cpu")
    assert emb.model == emb.model_name == str(tiny_variant_qwen)
    vectors = np.array(emb.get_text_embedding_batch(TEXTS))
    from c2v_rag.rag import load_model

    expected = load_model(tiny_variant_qwen, device="cpu").encode_documents(TEXTS, normalize_embeddings=True)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    # Not the other variant (both are 64-dim): the name really chose the weights.
    assert not np.allclose(vectors, tiny_model.encode_documents(TEXTS, normalize_embeddings=True), atol=1e-3)
    with pytest.raises(ValueError, match="differ: pass one"):
        Causal2VecEmbedding(model=str(tiny_variant), model_name=str(tiny_variant_qwen))


def test_llama_index_hugging_face_names(tiny_variant, tiny_model, capsys):
    emb = Causal2VecEmbedding(
        model_name=str(tiny_variant),
        show_progress_bar=True,
        embed_batch_size=5000,
        query_instruction="Find pets",
        text_instruction="Represent the text",
    )
    assert emb.show_progress and emb.embed_batch_size == 5000
    np.testing.assert_allclose(
        emb.get_query_embedding("cats"),
        tiny_model.encode_queries("cats", instruction="Find pets", normalize_embeddings=True),
        atol=1e-5,
    )
    emb.get_text_embedding_batch(TEXTS)
    assert "Encoding" in capsys.readouterr().err  # the progress bar was asked for, and shown
    with pytest.raises(ValueError, match="no_such_option"):
        Causal2VecEmbedding(model_name=str(tiny_variant), no_such_option=1)


def test_langchain_hugging_face_arguments(tiny_variant, tiny_model):
    emb = Causal2VecEmbeddings(
        model_name=str(tiny_variant),
        model_kwargs={"device": "cpu", "dtype": "float32"},
        encode_kwargs={"normalize_embeddings": False, "batch_size": 2},
        query_encode_kwargs={"prompt": "Find pets", "normalize_embeddings": False},
    )
    assert (emb.model, emb.device, emb.dtype) == (str(tiny_variant), "cpu", "float32")
    np.testing.assert_allclose(emb.embed_documents(TEXTS), tiny_model.encode_documents(TEXTS), atol=1e-5)
    np.testing.assert_allclose(
        emb.embed_query("cats"), tiny_model.encode_queries("cats", instruction="Find pets"), atol=1e-5
    )
    # As in HuggingFaceEmbeddings, queries fall back to encode_kwargs; prompt_name picks a side's instruction.
    sym = Causal2VecEmbeddings(model_name=str(tiny_variant), encode_kwargs={"prompt_name": "query"})
    query_instruction = tiny_model.encode_queries(TEXTS[:1], task=DEFAULT_QUERY_TASK, normalize_embeddings=True)
    np.testing.assert_allclose(sym.embed_documents(TEXTS[:1]), query_instruction, atol=1e-5)
    np.testing.assert_allclose([sym.embed_query(TEXTS[0])], query_instruction, atol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model_kwargs": {"trust_remote_code": True}}, "model_kwargs has \\['trust_remote_code'\\]"),
        ({"encode_kwargs": {"convert_to_numpy": True}}, "encode_kwargs has \\['convert_to_numpy'\\]"),
        ({"query_encode_kwargs": {"prompt_name": "SciFact"}}, "prompt_name'\\] must be one of"),
        ({"model_kwargs": {"dtype": "int4"}}, "dtype 'int4' is not one of"),
        ({"device": "cuda", "model_kwargs": {"device": "cpu"}}, "differ: pass one"),
        ({"no_such_option": 1}, "no_such_option"),
    ],
)
def test_langchain_refuses_what_it_would_not_use(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Causal2VecEmbeddings(**kwargs)


try:
    from langchain_tests.integration_tests import EmbeddingsIntegrationTests
    from langchain_tests.unit_tests import EmbeddingsUnitTests
except ImportError:  # langchain-tests is a test extra
    EmbeddingsUnitTests = EmbeddingsIntegrationTests = None

if EmbeddingsUnitTests is not None:

    class _Params:
        @pytest.fixture(autouse=True)
        def _variant(self, tiny_variant):
            type(self)._path = str(tiny_variant)

        @property
        def embeddings_class(self):
            return Causal2VecEmbeddings

        @property
        def embedding_model_params(self) -> dict:
            return {"model_name": self._path, "model_kwargs": {"device": "cpu"}}

    class TestLangChainStandardUnit(_Params, EmbeddingsUnitTests):
        """LangChain's partner-package unit tests (langchain_tests)."""

    # LangChain's packages run these with pytest-asyncio in auto mode; the mark does the same here.
    @pytest.mark.asyncio
    @pytest.mark.filterwarnings("ignore:The test .* is marked with '@pytest.mark.asyncio'")
    class TestLangChainStandardIntegration(_Params, EmbeddingsIntegrationTests):
        """LangChain's partner-package integration tests, on a local tiny variant (no network)."""
