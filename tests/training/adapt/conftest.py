"""Fixtures of the adapt tests."""

from __future__ import annotations

import pytest
from rag_helpers import make_text


@pytest.fixture
def general(tmp_path):
    """General data in the documented layout: STS-B style train and dev, one NLI triplet file."""
    root = tmp_path / "general"
    (root / "stsb").mkdir(parents=True)
    (root / "nli").mkdir()
    rows = [(f"{(i * 7) % 6 / 1.2:.2f}", make_text(500 + i, 1), make_text(600 + i, 1)) for i in range(40)]
    for name in ("stsb.train.tsv", "stsb.dev.tsv"):
        (root / "stsb" / name).write_text(
            "genre\tsubset\tscore\tsentence1\tsentence2\n" + "".join(f"g\ts\t{s}\t{a}\t{b}\n" for s, a, b in rows)
        )
    (root / "nli" / "snli_dev_triplets.tsv").write_text(
        "anchor\tpositive\tnegative\n"
        + "".join(f"{make_text(700 + i, 1)}\t{make_text(800 + i, 1)}\t{make_text(900 + i, 1)}\n" for i in range(20))
    )
    return root
