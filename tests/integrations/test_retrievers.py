"""The LlamaIndex and LangChain retrievers over c2v_rag.search, on a real ingest, on both embedded engines.

References nobody here wrote: on local mode, each framework's own ``QdrantVectorStore`` retriever
over the same collection must return what ours return; on Qdrant Edge (which the frameworks
cannot open) ours must return what they return on the same ingest in local mode.
"""

from __future__ import annotations

import asyncio
from contextlib import closing

import numpy as np
import pytest

for _module in ("qdrant_client", "tenacity", "qdrant_edge", "llama_index.vector_stores.qdrant", "langchain_qdrant"):
    pytest.importorskip(_module)

from langchain_causal2vec import Causal2VecEmbeddings
from langchain_causal2vec import Causal2VecRetriever as LangChainRetriever
from llama_index.embeddings.causal2vec import Causal2VecEmbedding
from llama_index.embeddings.causal2vec import Causal2VecRetriever as LlamaRetriever
from qdrant_client import QdrantClient
from rag_helpers import make_text

import c2v_rag


@pytest.fixture(scope="module")
def stores(tmp_path_factory, tiny_variant):
    """Six documents with BM25 vectors in a local-mode store and in an Edge store (read-only in the tests)."""
    from c2v_rag.rag import IngestConfig

    corpus = [
        {"id": f"doc-{i}", "text": make_text(i), "metadata": {"topic": "odd" if i % 2 else "even", "n": i}}
        for i in range(6)
    ]
    config = IngestConfig(chunk_size=24, chunk_overlap=4, batch_size=4, show_progress=False)
    root = tmp_path_factory.mktemp("retrievers")
    for store in ("local", "edge"):
        c2v_rag.ingest(
            corpus, path=root / store, store=store, collection="kb", model=tiny_variant, config=config, sparse="bm25"
        )
    return {"local": root / "local", "edge": root / "edge"}


QUERY = "vitamin deficiency is linked to bone loss"


def test_both_retrievers_return_what_the_frameworks_own_qdrant_stores_return(stores, tiny_variant, monkeypatch):
    from langchain_qdrant import QdrantVectorStore as LangChainStore
    from llama_index.core import Settings, VectorStoreIndex
    from llama_index.core.vector_stores import ExactMatchFilter, MetadataFilters
    from llama_index.vector_stores.qdrant import QdrantVectorStore as LlamaStore

    # An index caches Settings.transformations on first use; keep that out of the other tests.
    monkeypatch.setattr(Settings, "_transformations", None)
    # The frameworks' own stores read local mode; remember their answers, then close the store.
    with closing(QdrantClient(path=str(stores["local"]))) as client:
        index = VectorStoreIndex.from_vector_store(
            LlamaStore(client=client, collection_name="kb", dense_vector_name="text-dense"),
            embed_model=Causal2VecEmbedding(model=str(tiny_variant)),
        )
        llama_ref = index.as_retriever(similarity_top_k=4).retrieve(QUERY)
        odd = MetadataFilters(filters=[ExactMatchFilter(key="topic", value="odd")])
        llama_odd = index.as_retriever(similarity_top_k=20, filters=odd).retrieve(QUERY)
        lc_ref = LangChainStore(
            client=client,
            collection_name="kb",
            vector_name="text-dense",
            embedding=Causal2VecEmbeddings(model=str(tiny_variant)),
        ).similarity_search_with_score(QUERY, k=4)
    assert len(llama_ref) == 4 and {r.node.ref_doc_id for r in llama_odd} == {"doc-1", "doc-3", "doc-5"}

    for store, where in stores.items():
        nodes = LlamaRetriever(path=where, collection="kb", similarity_top_k=4).retrieve(QUERY)
        assert [n.node.node_id for n in nodes] == [r.node.node_id for r in llama_ref], store
        np.testing.assert_allclose([n.score for n in nodes], [r.score for r in llama_ref], atol=1e-5)
        for mine, ref in zip(nodes, llama_ref):
            assert (mine.node.text, mine.node.ref_doc_id) == (ref.node.text, ref.node.ref_doc_id)
            # Where the chunk lies in its document, for a citation, as the framework's own node says.
            span = (mine.node.start_char_idx, mine.node.end_char_idx)
            assert span == (ref.node.start_char_idx, ref.node.end_char_idx) and None not in span
            assert mine.node.metadata["topic"] == ref.node.metadata["topic"]
            assert "doc_id" not in mine.node.get_content(metadata_mode="llm")
        # MetadataFilters are translated to the same Qdrant filter the framework's store sends.
        filtered = LlamaRetriever(path=where, collection="kb", similarity_top_k=20, filters=odd).retrieve(QUERY)
        assert [n.node.node_id for n in filtered] == [r.node.node_id for r in llama_odd], store

        docs = LangChainRetriever(path=where, collection="kb", k=4).invoke(QUERY)
        assert [d.metadata["_id"] for d in docs] == [d.metadata["_id"] for d, _ in lc_ref], store
        np.testing.assert_allclose([d.metadata["_score"] for d in docs], [s for _, s in lc_ref], atol=1e-5)
        for mine, (ref, _) in zip(docs, lc_ref):
            own = mine.page_content[mine.metadata.get("lead_chars", 0) :]
            start = mine.metadata["start_index"]  # as LangChain's splitters record it
            assert make_text(mine.metadata["n"])[start : start + len(own)] == own
            assert (mine.page_content, mine.metadata["n"], mine.id) == (
                ref.page_content,
                ref.metadata["n"],
                ref.metadata["_id"],
            )


def test_both_retrievers_name_each_chunks_section_for_the_llm_and_filter_on_it(tmp_path, tiny_variant):
    """A chunk of a page with headings carries its section in both frameworks' metadata; LlamaIndex puts it in what
    the LLM reads (it says where a cited passage is), and a MetadataFilters on it keeps that section's chunks."""
    from llama_index.core.schema import MetadataMode
    from llama_index.core.vector_stores import ExactMatchFilter, MetadataFilters

    page = f"# Tides\n\nThe sea's rise and fall.\n\n## Causes\n\n{make_text(2)}\n\n## Effects\n\n{make_text(3)}"
    c2v_rag.ingest([{"id": "tides", "text": page}], path=tmp_path, collection="kb", model=tiny_variant,
                   chunk_size=24, chunk_overlap=4, show_progress=False)  # fmt: skip
    nodes = LlamaRetriever(path=tmp_path, collection="kb", similarity_top_k=50, rerank=None).retrieve(QUERY)
    expected = {n.node.node_id: _section_at(page, n.node.start_char_idx) for n in nodes}
    assert {n.node.node_id: n.node.metadata.get("section") for n in nodes} == expected
    assert set(expected.values()) == {None, "Causes", "Effects"}
    effects = next(n.node for n in nodes if expected[n.node.node_id] == "Effects")
    assert "section: Effects" in effects.get_content(metadata_mode=MetadataMode.LLM)
    only = MetadataFilters(filters=[ExactMatchFilter(key="section", value="Effects")])
    kept = LlamaRetriever(path=tmp_path, collection="kb", similarity_top_k=50, filters=only, rerank=None)
    assert {n.node.node_id for n in kept.retrieve(QUERY)} == {k for k, v in expected.items() if v == "Effects"}
    docs = LangChainRetriever(path=tmp_path, collection="kb", k=50, rerank=None).invoke(QUERY)
    assert {d.metadata["_id"]: d.metadata.get("section") for d in docs} == expected


def _section_at(page: str, start: int) -> str | None:
    """The section a chunk starting at ``start`` of the test's page is in, by its two headings' places."""
    if start >= page.index("## Effects"):
        return "Effects"
    return "Causes" if start >= page.index("## Causes") else None


@pytest.mark.parametrize("store", ["local", "edge"])
def test_hybrid_filters_and_grouping_are_c2v_rag_search(stores, store):
    from llama_index.core.vector_stores import FilterOperator, MetadataFilter, MetadataFilters

    where = stores[store]
    for mode in ("dense", "sparse", "hybrid"):
        for group in (False, True):
            want = c2v_rag.search(
                QUERY,
                top_k=3,
                path=where,
                collection="kb",
                mode=mode,
                group_by_document=group,
                filter={"n": {"gte": 1}, "must_not": {"topic": "odd"}},
            )
            llama = LlamaRetriever(
                path=where,
                collection="kb",
                similarity_top_k=3,
                vector_store_query_mode=mode if mode != "dense" else "default",
                group_by_document=group,
                filters=MetadataFilters(
                    filters=[
                        MetadataFilter(key="n", operator=FilterOperator.GTE, value=1),
                        MetadataFilter(key="topic", operator=FilterOperator.NE, value="odd"),
                    ]
                ),
            ).retrieve(QUERY)
            chain = LangChainRetriever(
                path=where,
                collection="kb",
                k=3,
                retrieval_mode=mode,
                group_by_document=group,
                filter={"n": {"gte": 1}, "must_not": {"topic": "odd"}},
            ).invoke(QUERY)
            assert want and {h.doc_id for h in want} <= {"doc-2", "doc-4"}
            assert [n.node.node_id for n in llama] == [h.id for h in want] == [d.id for d in chain], (mode, group)
            assert [n.score for n in llama] == [h.score for h in want] == [d.metadata["_score"] for d in chain]


def test_the_retrievers_run_inside_each_frameworks_pipelines(stores, monkeypatch):
    from langchain_core.runnables import RunnableLambda
    from llama_index.core import Settings
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    where = stores["edge"]
    want = c2v_rag.search(QUERY, top_k=2, path=where, collection="kb", mode="hybrid")
    monkeypatch.setattr(Settings, "_llm", MockLLM())  # no LLM is installed; the retrieval is what is tested
    engine = RetrieverQueryEngine.from_args(
        LlamaRetriever(path=where, collection="kb", similarity_top_k=2, vector_store_query_mode="hybrid"),
        llm=MockLLM(),
        response_mode="no_text",
    )
    assert [n.node.node_id for n in engine.query(QUERY).source_nodes] == [h.id for h in want]
    assert [n.node.node_id for n in asyncio.run(engine.aquery(QUERY)).source_nodes] == [h.id for h in want]

    retriever = LangChainRetriever(path=where, collection="kb", k=2, retrieval_mode="hybrid")
    chain = retriever | RunnableLambda(lambda docs: "\n\n".join(d.page_content for d in docs))
    assert chain.invoke(QUERY) == "\n\n".join(h.text for h in want)
    assert [d.id for d in asyncio.run(retriever.ainvoke(QUERY))] == [h.id for h in want]
    assert [[d.id for d in docs] for docs in retriever.batch([QUERY, QUERY])] == [[h.id for h in want]] * 2
    assert len(retriever.invoke(QUERY, k=1)) == 1  # per-call k, as search_kwargs would


def test_bad_retriever_options_are_refused_by_name(stores):
    with pytest.raises(ValueError, match="retrieval_mode='mmr'"):
        LangChainRetriever(path=stores["edge"], retrieval_mode="mmr")
    with pytest.raises(ValueError, match="vector_store_query_mode='mmr' is not supported"):
        LlamaRetriever(path=stores["edge"], vector_store_query_mode="mmr")
    with pytest.raises(ValueError, match="similarity_top_k"):
        LlamaRetriever(path=stores["edge"], similarity_top_k=0)
    with pytest.raises(ValueError):
        LlamaRetriever(path=stores["edge"], no_such_option=1)
    with pytest.raises(ValueError, match="'dense' is not a LlamaIndex query mode; use one of default, sparse, hybrid"):
        LlamaRetriever(path=stores["edge"], vector_store_query_mode="dense")
    with pytest.raises(ValueError, match="no search_kwargs: pass k= and filter= as fields"):
        LangChainRetriever(path=stores["edge"], search_kwargs={"k": 3})
    with pytest.raises(ValueError, match="no top_k: pass k="):
        LangChainRetriever(path=stores["edge"], top_k=3)
    # an unknown task fails when the retriever is built, not at its first query, and names the custom way it takes
    for build in (LangChainRetriever, LlamaRetriever):
        with pytest.raises(ValueError, match=r"unknown task 'NoSuchTask'.*pass instruction='\.\.\.'"):
            build(path=stores["edge"], task="NoSuchTask")
    # k=0 per call is a mistake, as the field's k=0 is, not "the default k"
    retriever = LangChainRetriever(path=stores["edge"], store="edge", collection="kb", rerank=None)
    with pytest.raises(ValueError, match="k must be a positive integer, got 0"):
        retriever.invoke(QUERY, k=0)
