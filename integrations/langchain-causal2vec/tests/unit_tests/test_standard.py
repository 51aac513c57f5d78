"""LangChain's standard unit tests for an Embeddings partner package (langchain-tests).

Construction only (the model loads on first use); the standard integration tests run on a tiny
local variant in the c2v_rag repository (tests/integrations/test_integrations_hf_style.py).
"""

from langchain_causal2vec import Causal2VecEmbeddings
from langchain_tests.unit_tests import EmbeddingsUnitTests


class TestCausal2VecEmbeddingsStandard(EmbeddingsUnitTests):
    @property
    def embeddings_class(self):
        return Causal2VecEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"model_name": "c2v-smollm2-135m-minilm", "model_kwargs": {"device": "cpu"}}
