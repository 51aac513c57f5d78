"""Hard-negative mining with BM25 (bm25s) or with the current model; known positives never qualify.

For every distinct query of a dataset, the passage pool is ranked, the top ``skip_top`` ranks are
skipped (unlabelled positives tend to sit there), and negatives are drawn from the next ``depth``
candidates whose key is not a known positive of the query.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from c2v_rag.core.instructions import Instruction
from c2v_rag.encode.loop import bar_label, encode_texts
from c2v_rag.training.bm25 import bm25_rankings
from c2v_rag.training.data import Example, with_negatives

if TYPE_CHECKING:
    from c2v_rag.model.causal2vec import Causal2Vec

logger = logging.getLogger(__name__)


def passage_pool(examples: Sequence[Example], corpus: dict[str, str] | None = None) -> dict[str, str]:
    """key -> text of every passage the dataset knows: the corpus if given, plus all positives and negatives."""
    pool = dict(corpus or {})
    for e in examples:
        pool.setdefault(e.positive_key, e.positive)
        for key, text in zip(e.negative_keys, e.negatives):
            pool.setdefault(key, text)
    return pool


def embed_for_mining(
    model: Causal2Vec,
    queries: Sequence[str],
    query_instruction: Instruction,
    pool_texts: Sequence[str],
    passage_instruction: Instruction,
    *,
    truncate_dim: int | None = None,
    batch_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit vectors of the queries [Q, d] and of the pool [P, d] by the model (the prefix of ``truncate_dim``
    values when given: the part of the vector the loss trains)."""
    # A prefix the variant serves is computed from what it needs (the encoder's part: no decoder); another one
    # (a variant not yet trained for it) is cut from the whole vector, the same values.
    served = truncate_dim is None or truncate_dim in model.config.vector_sizes
    prefix = truncate_dim if served else None

    def encoded(texts: Sequence[str], instruction: Instruction) -> torch.Tensor:
        vectors = encode_texts(
            model,
            list(texts),
            instruction,
            batch_size=batch_size,
            show_progress_bar=len(texts) > 256,
            normalize_embeddings=served,
            truncate_dim=prefix,
        )
        assert isinstance(vectors, np.ndarray)  # encode_texts' default output
        return torch.from_numpy(vectors)

    with bar_label("Mining: the queries"):
        q_vectors = encoded(queries, query_instruction)
    with bar_label("Mining: the passages"):
        p_vectors = encoded(pool_texts, passage_instruction)
    if not served:
        q_vectors = torch.nn.functional.normalize(q_vectors[:, :truncate_dim].float(), dim=-1)
        p_vectors = torch.nn.functional.normalize(p_vectors[:, :truncate_dim].float(), dim=-1)
    return q_vectors, p_vectors


def model_rankings(query_vectors: torch.Tensor, pool_vectors: torch.Tensor, depth: int) -> np.ndarray:
    """Indices [len(queries), depth] of the pool vectors nearest each query vector by cosine (unit vectors)."""
    depth = min(depth, len(pool_vectors))
    out = []
    for start in range(0, len(query_vectors), 1024):  # bounds the score matrix for large query sets
        out.append(torch.topk(query_vectors[start : start + 1024] @ pool_vectors.T, depth, dim=1).indices)
    return torch.cat(out).numpy()


def mine_hard_negatives(
    examples: Sequence[Example],
    *,
    method: str = "bm25",
    num_negatives: int = 1,
    depth: int = 30,
    skip_top: int = 0,
    corpus: dict[str, str] | None = None,
    model: Causal2Vec | None = None,
    seed: int = 0,
    margin: float | None = None,
    truncate_dim: int | None = None,
) -> list[Example]:
    """Copies of ``examples`` with ``num_negatives`` mined hard negatives each (replacing theirs).

    ``corpus`` (key -> text) is the pool to mine from; by default the dataset's own passages.
    A query with too few non-positive candidates gets random non-positive passages from the pool
    to make up the count. ``margin`` drops the candidates the model scores within ``margin`` of the
    query's positive (or above it): likely positives nobody labelled.
    """
    if method not in ("bm25", "model"):
        raise ValueError(f"mining method {method!r} is not 'bm25' or 'model'")
    if (method == "model" or margin is not None) and model is None:
        raise ValueError("mining with method='model' or a margin needs the model")
    if not examples:
        return []
    pool = passage_pool(examples, corpus)
    keys = list(pool)
    texts = [pool[k] for k in keys]
    queries = sorted({e.query for e in examples})
    known: dict[str, set[str]] = {}
    for e in examples:
        known.setdefault(e.query, set()).update(e.known_positive_keys)
    if len(keys) - max(len(v) for v in known.values()) < num_negatives:
        raise ValueError(f"the passage pool ({len(keys)}) is too small to mine {num_negatives} negatives per query")
    want = skip_top + depth + max(len(v) for v in known.values())
    q_vectors = p_vectors = None
    if method == "model" or margin is not None:
        assert model is not None
        first = examples[0]
        q_vectors, p_vectors = embed_for_mining(
            model, queries, first.query_instruction, texts, first.passage_instruction, truncate_dim=truncate_dim
        )
    if method == "bm25":
        ranked = bm25_rankings(queries, texts, want)
    else:
        assert q_vectors is not None and p_vectors is not None
        ranked = model_rankings(q_vectors, p_vectors, want)
    index = {k: i for i, k in enumerate(keys)}
    rng = random.Random(seed)
    by_query: dict[str, list[tuple[str, str]]] = {}
    filled = dropped = 0
    short = {"margin": 0, "pool": 0}  # queries that got random negatives, by why
    for row_number, (query, row) in enumerate(zip(queries, ranked)):
        candidates = [keys[i] for i in row if keys[i] not in known[query]][skip_top : skip_top + depth]
        close: set[str] = set()
        if margin is not None and q_vectors is not None and p_vectors is not None:
            scores = p_vectors @ q_vectors[row_number]
            positive = max(float(scores[index[k]]) for k in known[query] if k in index)
            close = {k for k in candidates if float(scores[index[k]]) > positive - margin}
            dropped += len(close)
            candidates = [k for k in candidates if k not in close]
        picked = rng.sample(candidates, min(num_negatives, len(candidates)))
        if len(picked) < num_negatives:
            short["margin" if close else "pool"] += 1
        while len(picked) < num_negatives:
            key = keys[rng.randrange(len(keys))]
            if key not in known[query] and key not in picked:
                picked.append(key)
                filled += 1
        by_query[query] = [(k, pool[k]) for k in picked]
    _report_mining(filled, short, dropped, len(queries), depth, margin)
    return [with_negatives(e, by_query[e.query]) for e in examples]


def _report_mining(
    filled: int, short: dict[str, int], dropped: int, queries: int, depth: int, margin: float | None
) -> None:
    """What mining could not do as asked, and how much of the training it touches: some queries with random
    negatives are expected (near-duplicate chunks, a small folder) and said as information; most of them, a warning."""
    if dropped:
        logger.info(
            "mining: %d ranked candidates scored within the margin (%s) of their query's positive and were not used "
            "as negatives (likely answers nobody labelled)",
            dropped,
            margin,
        )
    if not filled:
        return
    why = []
    if short["margin"]:
        why.append(f"{short['margin']} had all their top {depth} candidates within the margin")
    if short["pool"]:
        why.append(f"{short['pool']} had too few other passages ranked")
    affected = short["margin"] + short["pool"]
    message = (
        f"mining: {affected} of {queries} queries train against {filled} random passages instead of hard "
        f"negatives ({'; '.join(why)}); a random passage is an easier negative, the other queries train as usual"
    )
    if affected * 2 <= queries:
        logger.info(message)
    else:
        logger.warning(
            message + ". Most queries are affected: a smaller margin (adapt's training.margin) keeps more "
            "candidates, and more documents give more"
        )
