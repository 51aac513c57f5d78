"""Helpers shared by the RAG tests."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager

import numpy as np

# Words the tiny tokenizers were trained on (tests/conftest.py CORPUS).
_VOCAB = (
    "vitamin deficiency is linked to bone loss in older adults the stock market fell sharply after "
    "announcement retrieve semantically similar text given a scientific claim documents cats and dogs "
    "are popular pets many people keep both at home proteins fold into three dimensional structures "
    "that determine their function user assistant system question answer evidence support refute "
    "query passage of was for on with as by from"
)
WORDS = sorted(set(_VOCAB.split()))


def make_text(seed: int, sentences: int = 6) -> str:
    """Distinct pseudo-sentences from the tiny tokenizers' vocabulary (no two chunks alike)."""
    rng = random.Random(seed)
    return " ".join(
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 10))).capitalize() + "." for _ in range(sentences)
    )


def stored_points(client, collection: str) -> dict[str, dict]:
    """Every point of a collection: id -> payload."""
    points, offset = {}, None
    while True:
        batch, offset = client.scroll(collection, limit=256, offset=offset, with_payload=True)
        points.update({str(p.id): p.payload for p in batch})
        if offset is None:
            return points


def stored_vectors(client, collection: str) -> dict[str, tuple[dict, np.ndarray]]:
    """Every point of a collection: id -> (payload, vector)."""
    found, offset = {}, None
    while True:
        batch, offset = client.scroll(collection, limit=256, offset=offset, with_payload=True, with_vectors=True)
        found.update({str(p.id): (p.payload, np.asarray(p.vector, dtype=np.float32)) for p in batch})
        if offset is None:
            return found


def points(path, collection: str = "kb") -> dict[str, tuple[dict, np.ndarray]]:
    """Every stored point of the embedded Qdrant at ``path``: id -> (payload, vector)."""
    from qdrant_client import QdrantClient  # here: not every test that makes texts has qdrant-client

    with closing(QdrantClient(path=str(path))) as client:
        return stored_vectors(client, collection)


def compare(ray_points: dict, local_points: dict) -> float:
    """Assert the same ids and payloads (``points`` of two stores); the largest vector difference."""
    assert sorted(ray_points) == sorted(local_points)
    for pid, (payload, _) in local_points.items():
        assert ray_points[pid][0] == payload, pid
    return max(float(np.abs(ray_points[p][1] - local_points[p][1]).max()) for p in local_points)


def save_causal_lm(root, family: str, tied: bool):
    """A tiny decoder saved with its language-model head (the suite's tiny decoders are bare backbones)."""
    import torch
    from tiny_models import FAMILIES, build_decoder_tokenizer, decoder_config
    from transformers import AutoModelForCausalLM

    tokenizer = build_decoder_tokenizer(**FAMILIES[family])
    config = decoder_config(family, len(tokenizer), tokenizer)
    config.tie_word_embeddings = tied
    # Weights far from the usual 0.02 scale: a random model's log-probabilities then differ by whole nats between
    # texts, rather than by rounding noise, so that orders and ties do not hang on the batch a text is in.
    config.initializer_range = 0.5
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_config(config).eval()
    folder = root / f"{family}-lm-{'tied' if tied else 'untied'}"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_lm_variant(root, family: str, tied: bool, encoder, seed: int | None = None):
    """A tiny variant saved under ``root/variant`` whose base decoder (:func:`save_causal_lm`) keeps its language-model
    head, with ``encoder`` (a tiny BERT's folder) as its encoder: one a reranker scores with. ``seed`` fixes its random
    projector. Returns the variant's folder and its base decoder's."""
    import torch

    from c2v_rag import Causal2Vec

    base = save_causal_lm(root, family, tied)
    if seed is not None:
        torch.manual_seed(seed)
    model = Causal2Vec.from_components(str(base), str(encoder), device="cpu", dtype="float32", max_length=96)
    return model.save_pretrained(root / "variant"), base


# A query and documents to rerank: one on the query's topic, others off it, and a one-word document.
RERANK_DOCS = [
    "Vitamin deficiency is linked to bone loss in older adults.",
    "The stock market fell sharply after the announcement.",
    "Cats and dogs are popular pets; many people keep both at home.",
    "Proteins fold into three dimensional structures that determine their function.",
    "Bone",
]
RERANK_QUERY = "vitamin and bone loss"


def rerank_auto_in_int8_on_avx2(monkeypatch, cache) -> None:
    """What ``rerank="auto"`` decides on an AVX2 CPU with the ``int8`` extra: the suite's ``$C2V_RAG_RERANK`` and
    ``$C2V_RAG_QUANTIZE`` (none) taken away, int8 graphs built under ``cache``, no reranker loaded yet."""
    import c2v_rag.core.devices
    from c2v_rag.rag.retrieval import reranking

    for name in ("C2V_RAG_RERANK", "C2V_RAG_QUANTIZE"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("C2V_RAG_CACHE", str(cache))
    monkeypatch.setattr(c2v_rag.core.devices, "cpu_class", lambda: "avx2")
    monkeypatch.setattr(c2v_rag.core.devices, "int8_runtime_installed", lambda: True)
    monkeypatch.setattr(reranking, "_cache", {})


@contextmanager
def ray_console_on_stderr() -> Iterator[None]:
    """Ray's console handlers write to this moment's ``sys.stderr`` (a test's ``capsys``) in the block: each holds
    the ``sys.stderr`` of the moment Ray was imported, an earlier capture's, closed since."""
    from c2v_rag.rag.ingestion.ray_logs import ray_console_handlers

    handlers = ray_console_handlers()
    assert handlers, "Ray's loggers have no console handler"
    streams = [handler.stream for handler in handlers]
    for handler in handlers:
        handler.stream = sys.stderr  # not setStream, which flushes the old stream
    try:
        yield
    finally:
        for handler, stream in zip(handlers, streams):
            handler.stream = stream
