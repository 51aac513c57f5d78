"""Condition 4 of RULE_budget.md: 300 SciFact abstracts and 300 claims, bf16, at 2,048 against 1,024 padded tokens.

python bench/results/malloc/budget_vectors.py      # from the repository root, ../shared/data beside it
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, "bench")
from common import load_scifact_docs, load_scifact_queries  # noqa: E402

from c2v_rag import Causal2Vec  # noqa: E402

data = Path("../shared/data")
docs, claims = load_scifact_docs(data, 300), load_scifact_queries(data, 300)
model = Causal2Vec.from_pretrained()
print(model.dtype)
vectors = {
    budget: np.concatenate(
        [
            model.encode_documents(docs, max_tokens_per_batch=budget),
            model.encode_queries(claims, max_tokens_per_batch=budget),
        ]
    )
    for budget in (1024, 2048)
}
a, b = vectors[1024], vectors[2048]
cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
print(
    f"texts {len(cos)}; worst cosine {cos.min():.6f}; mean {cos.mean():.7f}; under 0.9995: {(cos < 0.9995).sum()}; "
    f"bitwise equal rows {(a == b).all(1).sum()}"
)
