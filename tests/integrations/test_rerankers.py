"""The LlamaIndex node postprocessor and the LangChain document compressor over Causal2VecReranker, run inside
each framework's own pipeline: each must return what ``c2v_rag.search(..., rerank=N)`` returns."""

from __future__ import annotations

import asyncio
import warnings

import pytest

for _module in ("qdrant_client", "tenacity", "llama_index.core", "langchain_core"):
    pytest.importorskip(_module)

from langchain_causal2vec import Causal2VecRerank as LangChainRerank
from langchain_causal2vec import Causal2VecRetriever as LangChainRetriever
from llama_index.embeddings.causal2vec import Causal2VecRerank as LlamaRerank
from llama_index.embeddings.causal2vec import Causal2VecRetriever as LlamaRetriever

import c2v_rag
from c2v_rag.rerank import Causal2VecReranker

QUERY = "vitamin deficiency is linked to bone loss"


@pytest.fixture(scope="module")
def store(tmp_path_factory, tiny_lm_variant):
    from rag_helpers import make_text

    path = tmp_path_factory.mktemp("rerankers")
    docs = [{"id": f"doc-{i}", "text": make_text(i)} for i in range(6)]
    c2v_rag.ingest(docs, path=path, collection="kb", model=tiny_lm_variant, chunk_size=24, show_progress=False)
    return path


def test_the_llama_index_postprocessor_reranks_inside_a_query_engine(store, tiny_lm_variant, monkeypatch):
    from llama_index.core import Settings
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    want = c2v_rag.search(QUERY, top_k=2, rerank=6, path=store, collection="kb")
    monkeypatch.setattr(Settings, "_llm", MockLLM())  # no LLM is installed; the retrieval is what is tested
    engine = RetrieverQueryEngine.from_args(
        LlamaRetriever(path=store, collection="kb", similarity_top_k=6, rerank=None),
        node_postprocessors=[LlamaRerank(top_n=2, model=tiny_lm_variant, device="cpu")],
        llm=MockLLM(),
        response_mode="no_text",
    )
    for response in (engine.query(QUERY), asyncio.run(engine.aquery(QUERY))):
        assert [n.node.node_id for n in response.source_nodes] == [h.id for h in want]
        assert [n.score for n in response.source_nodes] == pytest.approx([h.rerank_score for h in want], abs=1e-6)


def test_the_llama_index_postprocessor_ranks_unscored_nodes_by_likelihood(tiny_lm_variant):
    from llama_index.core.schema import NodeWithScore, TextNode

    texts = ["bone loss in older adults", "the stock market fell", "cats and dogs"]
    nodes = [NodeWithScore(node=TextNode(text=t)) for t in texts]
    got = LlamaRerank(top_n=2, model=tiny_lm_variant, device="cpu").postprocess_nodes(nodes, query_str=QUERY)
    want = Causal2VecReranker(tiny_lm_variant, device="cpu").rerank(QUERY, texts, 2)
    assert [n.node.get_content() for n in got] == [texts[r.index] for r in want]
    assert [n.score for n in got] == pytest.approx([r.relevance_score for r in want])


def test_the_langchain_compressor_reranks_a_retrievers_documents_in_a_chain(store, tiny_lm_variant):
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda

    want = c2v_rag.search(QUERY, top_k=2, rerank=6, path=store, collection="kb")
    compressor = LangChainRerank(top_n=2, model=tiny_lm_variant, device="cpu")
    retriever = LangChainRetriever(path=store, collection="kb", k=6, rerank=None)
    chain = retriever | RunnableLambda(lambda docs: compressor.compress_documents(docs, QUERY))
    for docs in (chain.invoke(QUERY), asyncio.run(compressor.acompress_documents(retriever.invoke(QUERY), QUERY))):
        assert [d.id for d in docs] == [h.id for h in want]
        assert [d.metadata["relevance_score"] for d in docs] == pytest.approx([h.rerank_score for h in want], abs=1e-6)
        assert [d.metadata["_score"] for d in docs] == pytest.approx([h.score for h in want])  # the first stage's
    # Documents from elsewhere, without retrieval scores: ordered by the likelihood alone.
    plain = [Document(page_content=t) for t in ("cats and dogs", "bone loss in older adults")]
    ranked = compressor.compress_documents(plain, QUERY)
    want_plain = Causal2VecReranker(tiny_lm_variant, device="cpu").rerank(QUERY, [d.page_content for d in plain])
    assert [d.page_content for d in ranked] == [plain[r.index].page_content for r in want_plain]
    with pytest.raises(ValueError, match="top_n"):
        LangChainRerank(top_n=0)


def test_a_reranker_after_a_retriever_that_reranked_says_so_and_what_to_do(store, tiny_lm_variant):
    want = c2v_rag.search(QUERY, top_k=3, rerank=6, path=store, collection="kb")
    nodes = LlamaRetriever(path=store, collection="kb", similarity_top_k=3, rerank=6).retrieve(QUERY)
    docs = LangChainRetriever(path=store, collection="kb", k=3, rerank=6).invoke(QUERY)
    # Each item carries the score that ordered it, kept out of the LLM's view; its score stays the first stage's.
    for items in ([(n.node.metadata, n.score) for n in nodes], [(d.metadata, d.metadata["_score"]) for d in docs]):
        assert [m[c2v_rag.RERANK_SCORE_KEY] for m, _ in items] == pytest.approx([h.rerank_score for h in want])
        assert [score for _, score in items] == pytest.approx([h.score for h in want])
    assert c2v_rag.RERANK_SCORE_KEY in nodes[0].node.excluded_llm_metadata_keys
    from llama_index.core.schema import MetadataMode

    assert c2v_rag.RERANK_SCORE_KEY in nodes[0].node.get_content(metadata_mode=MetadataMode.ALL)
    assert c2v_rag.RERANK_SCORE_KEY not in nodes[0].node.get_content(metadata_mode=MetadataMode.LLM)
    llama = LlamaRerank(top_n=2, model=tiny_lm_variant, device="cpu")
    langchain = LangChainRerank(top_n=2, model=tiny_lm_variant, device="cpu")
    for rerank in (
        lambda: llama.postprocess_nodes(nodes, query_str=QUERY),
        lambda: langchain.compress_documents(docs, QUERY),
    ):
        with pytest.warns(UserWarning, match="already reranked.*rerank=None"):
            rerank()
    # Retrieved without reranking, or from elsewhere: no warning.
    plain = LangChainRetriever(path=store, collection="kb", k=3, rerank=None).invoke(QUERY)
    assert all(c2v_rag.RERANK_SCORE_KEY not in d.metadata for d in plain)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        langchain.compress_documents(plain, QUERY)


def test_a_misspelt_reranker_option_is_refused_in_both_frameworks():
    for build in (LlamaRerank, LangChainRerank):
        with pytest.raises(ValueError, match="top_k"):
            build(top_k=3)  # top_n is the frameworks' name
