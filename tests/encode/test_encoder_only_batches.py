"""A prefix inside the encoder's part runs no decoder, so its batches are cut by the encoder's own lengths and
budget: the decoder inputs of such a prefix are a few tokens each, and a decoder budget would put hundreds of
full-length encoder inputs in one batch. The vectors stay those of the whole vector's prefix."""

from __future__ import annotations

import numpy as np
import pytest
from rag_helpers import make_text

from c2v_rag.encode.loop import embed_prepared, prepare_texts

ENCODER_PREFIX = 16  # inside the tiny encoder's 24 values


@pytest.fixture(scope="module")
def model(tiny_model_factory):
    return tiny_model_factory("llama", max_length=128, normalize_parts=True, encoder_share=0.5, matryoshka_dims=[16])


def _batches(model, texts, truncate_dim, **budget):
    prepared = prepare_texts(model, texts, None, truncate_dim=truncate_dim)
    out = np.zeros((len(texts), truncate_dim or model.embedding_dim), dtype=np.float32)
    seen: list[tuple[int, int]] = []
    embed_prepared(
        model,
        prepared,
        out,
        batch_size=256,
        on_batch=lambda n, padded: seen.append((n, padded)),
        truncate_dim=truncate_dim,
        **budget,
    )
    return prepared, out, seen


def test_encoder_only_batches_follow_the_encoder_budget_and_keep_the_vectors(model):
    texts = [make_text(i, sentences=1 + i % 5) for i in range(40)]
    assert model.needs_for(ENCODER_PREFIX) == "encoder"
    prepared, out, seen = _batches(model, texts, ENCODER_PREFIX, max_tokens=1024, encoder_max_tokens=96)
    longest = max(len(ids) for ids in prepared.encoder_ids)
    # Each batch holds at most 96 padded encoder tokens (a text longer than that alone), and every text once.
    assert sum(n for n, _ in seen) == len(texts)
    assert all(padded <= max(96, longest) for _, padded in seen)
    assert len(seen) > 1  # the decoder budget (1,024 tokens of ~3-token inputs) would have made one batch
    _, reference, one = _batches(model, texts, ENCODER_PREFIX, max_tokens=1024, encoder_max_tokens=10**6)
    assert len(one) == 1
    np.testing.assert_allclose(out, reference, atol=1e-6)
    whole = model.encode_documents(texts, normalize_embeddings=False)
    np.testing.assert_allclose(out, whole[:, :ENCODER_PREFIX], atol=1e-5)


def test_the_whole_vector_is_still_cut_by_the_decoder_budget(model):
    texts = [make_text(i, sentences=1 + i % 5) for i in range(12)]
    prepared, _, seen = _batches(model, texts, None, max_tokens=128, encoder_max_tokens=8)
    assert all(padded <= max(128, max(prepared.lengths)) for _, padded in seen)
    assert len(seen) < len(texts)  # an 8-token encoder budget would have put each text alone
