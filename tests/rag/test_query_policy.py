"""One query-instruction policy (c2v_rag.core.instructions.query_prompt) behind every entry point: the same variant
gives the same query vector through encode_queries, sentence-transformers' "query" prompt, a collection's search,
the LlamaIndex and LangChain classes and /v1/embeddings with input_type "query", for a variant that names a default
task (as the preset does), one that names neither a task nor an instruction, and one that names both."""

from __future__ import annotations

import numpy as np
import pytest

for _module in ("qdrant_client", "llama_index.core", "langchain_core", "sentence_transformers", "fastapi", "httpx"):
    pytest.importorskip(_module)

import httpx

import c2v_rag
from c2v_rag.core.instructions import DEFAULT_QUERY_TASK, get_task, query_prompt

KINDS = {
    "default task (the preset's kind)": {"default_task": "SciFact"},
    "neither": {},
    "both": {"default_task": "SciFact", "query_instruction": "Find the passage that answers the question"},
}
# What the policy must give each kind, written out independently of query_prompt.
EXPECTED = {
    "default task (the preset's kind)": get_task("SciFact").instruction,
    "neither": get_task(DEFAULT_QUERY_TASK).instruction,
    "both": "Find the passage that answers the question",
}
QUERY = "What makes the spring tides stronger?"


@pytest.fixture(scope="module", params=list(KINDS))
def variant(request, tiny_model_factory, tmp_path_factory):
    path = tmp_path_factory.mktemp("variant-policy")
    tiny_model_factory("llama", max_length=128, **KINDS[request.param]).save_pretrained(path)
    return request.param, path


def test_the_policy_in_one_place():
    class Config:
        query_instruction: str | None = None
        default_task: str | None = None

    both = Config()
    both.query_instruction, both.default_task = "literal", "SciFact"
    assert query_prompt(both) == (None, "literal")  # the variant's literal instruction wins over its task
    assert query_prompt(Config()) == (DEFAULT_QUERY_TASK, None)
    assert query_prompt(both, task="NFCorpus") == ("NFCorpus", None)  # the caller's choice wins over both
    assert query_prompt(both, instruction="") == (None, "")
    with pytest.raises(ValueError, match="either task= or instruction="):
        query_prompt(both, task="NFCorpus", instruction="x")


def test_every_entry_point_gives_a_query_the_same_vector(variant, tmp_path, corpus, ingest_config):
    from langchain_causal2vec import Causal2VecEmbeddings
    from llama_index.embeddings.causal2vec import Causal2VecEmbedding
    from sentence_transformers import SentenceTransformer

    from c2v_rag.rag import load_model
    from c2v_rag.serving import ServerConfig, ServerThread, create_app

    kind, path = variant
    model = load_model(path, device="cpu")
    expected = model.encode_queries(QUERY, instruction=EXPECTED[kind], normalize_embeddings=True)
    vectors = {"encode_queries": model.encode_queries(QUERY, normalize_embeddings=True)}
    st = SentenceTransformer(str(path), device="cpu", trust_remote_code=True)  # our module class is "remote code"
    vectors["sentence-transformers prompt_name='query'"] = st.encode(
        [QUERY], prompt_name="query", normalize_embeddings=True
    )[0]
    vectors["sentence-transformers encode_query"] = st.encode_query([QUERY], normalize_embeddings=True)[0]
    vectors["LlamaIndex"] = np.array(Causal2VecEmbedding(model=str(path)).get_query_embedding(QUERY))
    vectors["LangChain"] = np.array(Causal2VecEmbeddings(model=str(path)).embed_query(QUERY))
    config = ServerConfig(model_name="policy")
    with ServerThread(create_app(model, config), config) as server:
        response = httpx.post(server.url + "/v1/embeddings", json={"input": [QUERY], "input_type": "query"})
    assert response.status_code == 200, response.text
    vectors["/v1/embeddings input_type=query"] = np.array(response.json()["data"][0]["embedding"])
    for name, vector in vectors.items():
        np.testing.assert_allclose(vector, expected, atol=2e-5, err_msg=f"{kind}: {name}")

    # A search ranks by the query vector against the stored ones: its scores are that vector's cosines.
    handle = c2v_rag.open_collection("kb", path=tmp_path, model=path)
    handle.ingest(corpus, config=ingest_config)
    hits = handle.search(QUERY, top_k=4, with_vectors=True)
    stored = np.array([hit.vector for hit in hits])
    np.testing.assert_allclose([hit.score for hit in hits], stored @ expected, atol=2e-5, err_msg=f"{kind}: search")
    many = handle.search_many([QUERY], top_k=4)[0]
    assert [h.id for h in many] == [h.id for h in hits]
