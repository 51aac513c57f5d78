"""The vector check of the encoder running ahead: the same 575 chunks embedded by two trees.

Run once per tree and quantize setting, the tree chosen by PYTHONPATH, then compare:

    PYTHONPATH=<old tree> python vectors_old_new.py embed old int8 <folder>
    PYTHONPATH=<new tree> python vectors_old_new.py embed new int8 <folder>
    python vectors_old_new.py compare int8 none
"""

import sys
from pathlib import Path

import numpy as np


def embed(tag: str, quantize: str, folder: Path) -> None:
    from c2v_rag import Causal2Vec
    from c2v_rag.documents.chunking import TokenChunker
    from c2v_rag.documents.documents import iter_documents

    model = Causal2Vec.from_pretrained(quantize=quantize).eval()
    chunker = TokenChunker.for_variant(None, 200, 20)
    texts = [c.text for doc in iter_documents(folder) for c in chunker.chunk(doc.text)]
    # groups of 256 and max_length=96, as an ingest embeds them
    parts = [
        model.encode_documents(texts[s : s + 256], max_length=96, show_progress_bar=False)
        for s in range(0, len(texts), 256)
    ]
    np.save(f"v_{tag}_{quantize}.npy", np.concatenate(parts))
    print(tag, quantize, len(texts))


def compare(quantize: str) -> None:
    a, b = np.load(f"v_old_{quantize}.npy"), np.load(f"v_new_{quantize}.npy")
    identical = int((a == b).all(axis=1).sum())
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    cos = (a * b).sum(axis=1)
    print(
        f"{quantize}: {len(a)} rows, {identical} identical, max |diff| {np.abs(a - b).max():.3g}, "
        f"worst cos {cos.min():.8f}, below 0.999: {(cos < 0.999).sum()}"
    )


if __name__ == "__main__":
    if sys.argv[1] == "embed":
        embed(sys.argv[2], sys.argv[3], Path(sys.argv[4]))
    else:
        for q in sys.argv[2:]:
            compare(q)
