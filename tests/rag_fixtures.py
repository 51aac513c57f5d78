"""Fixtures for the RAG layer, its CLI, server and integrations: tiny saved variants, a small corpus and ingest
settings (a plugin of tests/conftest.py)."""

from __future__ import annotations

import pytest
from rag_helpers import make_text


@pytest.fixture(scope="session")
def tiny_variant(tiny_model_factory, tmp_path_factory):
    """A saved tiny llama variant (64-dim embeddings), loadable by path like any variant."""
    path = tmp_path_factory.mktemp("variant-llama")
    tiny_model_factory("llama", max_length=128).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_variant_qwen(tiny_model_factory, tmp_path_factory):
    """Another tiny variant with the same embedding size but another decoder."""
    path = tmp_path_factory.mktemp("variant-qwen")
    tiny_model_factory("qwen2", max_length=128).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_lm_variant(tiny_dirs, tmp_path_factory):
    """A saved tiny variant (qwen2, ChatML) whose base decoder keeps its language-model head: one a reranker
    scores with."""
    from rag_helpers import save_lm_variant

    # The projector starts random: seeded, so the variant is the same whichever tests ran before (the reranking
    # tests' "the order changed" held or not by the draw).
    variant, _ = save_lm_variant(tmp_path_factory.mktemp("lm-variant"), "qwen2", True, tiny_dirs["bert"], seed=3)
    return variant


@pytest.fixture(scope="session")
def tiny_model(tiny_variant):
    from c2v_rag.rag import load_model

    return load_model(tiny_variant, device="cpu")


@pytest.fixture
def corpus():
    """Six documents with ids and metadata, each a few chunks long at chunk_size=24."""
    return [
        {"id": f"doc-{i}", "text": make_text(i), "metadata": {"topic": "odd" if i % 2 else "even", "n": i}}
        for i in range(6)
    ]


@pytest.fixture
def ingest_config():
    from c2v_rag.rag import IngestConfig

    return IngestConfig(
        chunk_size=24, chunk_overlap=4, batch_size=4, show_progress=False, retry_initial_wait=0.0, retry_max_wait=0.0
    )
