"""BM25 rankings (bm25s): mining's candidates, the pseudo-query round trip and the gate's distractors."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np


def bm25_rankings(queries: Sequence[str], pool_texts: Sequence[str], depth: int) -> np.ndarray:
    """Indices [len(queries), depth] of the best-scoring pool texts for each query, by BM25 (bm25s)."""
    from c2v_rag.core.extras import require

    bm25s = require("bm25s", "BM25 mining", "train")
    # bm25s sets its own logger to DEBUG when imported, so its debug lines pass whatever level the program
    # chose; NOTSET hands the choice back to the program's logging (the CLI: warnings, or info with -v).
    logging.getLogger("bm25s").setLevel(logging.NOTSET)
    depth = min(depth, len(pool_texts))
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(list(pool_texts), stopwords="en", show_progress=False), show_progress=False)
    tokens = bm25s.tokenize(list(queries), stopwords="en", show_progress=False)
    indices, _ = retriever.retrieve(tokens, k=depth, show_progress=False, n_threads=1)
    return np.asarray(indices)
