"""Helpers shared by the RAG tests."""

from __future__ import annotations

import random

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
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 10))).capitalize() + "."
        for _ in range(sentences)
    )


def stored_points(client, collection: str) -> dict[str, dict]:
    """Every point of a collection: id -> payload."""
    points, offset = {}, None
    while True:
        batch, offset = client.scroll(collection, limit=256, offset=offset, with_payload=True)
        points.update({str(p.id): p.payload for p in batch})
        if offset is None:
            return points
