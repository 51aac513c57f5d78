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


def bm25_rankings(queries: Sequence[str], pool_texts: Sequence[str], depth: int) -> np.ndarray:
    """Indices [len(queries), depth] of the best-scoring pool texts for each query, by BM25 (bm25s)."""
    from c2v_rag.core.extras import require

    bm25s = require("bm25s", "BM25 mining", "train")
    depth = min(depth, len(pool_texts))
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(list(pool_texts), stopwords="en", show_progress=False), show_progress=False)
    tokens = bm25s.tokenize(list(queries), stopwords="en", show_progress=False)
    indices, _ = retriever.retrieve(tokens, k=depth, show_progress=False, n_threads=1)
    return np.asarray(indices)


def model_rankings(
    model: Causal2Vec,
    queries: Sequence[str],
    query_instruction: str | None,
    pool_texts: Sequence[str],
    passage_instruction: str | None,
    depth: int,
    *,
    batch_size: int = 64,
) -> np.ndarray:
    """Indices [len(queries), depth] of the pool texts nearest each query by the model's cosine."""
    depth = min(depth, len(pool_texts))
    q = model.encode(
        list(queries),
        instruction=query_instruction or "",
        batch_size=batch_size,
        normalize_embeddings=True,
        show_progress_bar=len(queries) > 256,
    )
    p = model.encode(
        list(pool_texts),
        instruction=passage_instruction or "",
        batch_size=batch_size,
        normalize_embeddings=True,
        show_progress_bar=len(pool_texts) > 256,
    )
    qt, pt = torch.from_numpy(q), torch.from_numpy(p)
    out = []
    for start in range(0, len(qt), 1024):  # bounds the score matrix for large query sets
        out.append(torch.topk(qt[start : start + 1024] @ pt.T, depth, dim=1).indices)
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
) -> list[Example]:
    """Copies of ``examples`` with ``num_negatives`` mined hard negatives each (replacing theirs).

    ``corpus`` (key -> text) is the pool to mine from; by default the dataset's own passages.
    A query with too few non-positive candidates gets random non-positive passages from the pool
    to make up the count.
    """
    if method not in ("bm25", "model"):
        raise ValueError(f"mining method {method!r} is not 'bm25' or 'model'")
    if method == "model" and model is None:
        raise ValueError("mining with method='model' needs the model")
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
    if method == "bm25":
        ranked = bm25_rankings(queries, texts, want)
    else:
        first = examples[0]
        ranked = model_rankings(model, queries, first.query_instruction, texts, first.passage_instruction, want)
    rng = random.Random(seed)
    by_query: dict[str, list[tuple[str, str]]] = {}
    filled = 0
    for query, row in zip(queries, ranked):
        candidates = [keys[i] for i in row if keys[i] not in known[query]][skip_top : skip_top + depth]
        picked = rng.sample(candidates, min(num_negatives, len(candidates)))
        while len(picked) < num_negatives:
            key = keys[rng.randrange(len(keys))]
            if key not in known[query] and key not in picked:
                picked.append(key)
                filled += 1
        by_query[query] = [(k, pool[k]) for k in picked]
    if filled:
        logger.warning("mining: %d negatives were random passages (too few ranked candidates)", filled)
    return [with_negatives(e, by_query[e.query]) for e in examples]
