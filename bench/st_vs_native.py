"""The preset through sentence-transformers against Causal2Vec's own encode: same vectors, and the time each takes.

    python bench/st_vs_native.py --data ../shared/data --n 50

Takes n mixed SciFact texts (half claims, half abstracts), encodes them as queries and as documents
both ways in float32 and prints the largest absolute difference and the seconds per pass (best of
``--repeats``, the two paths alternating so that both see the same machine load).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def scifact_texts(data: Path, n: int) -> list[str]:
    claims = [json.loads(line)["text"] for line in (data / "scifact/queries.jsonl").open()][: n - n // 2]
    docs = []
    for line in (data / "scifact/corpus.jsonl").open():
        row = json.loads(line)
        docs.append(f"{row['title']} {row['text']}")
        if len(docs) == n // 2:
            break
    mixed = [t for pair in zip(claims, docs) for t in pair] + claims[len(docs):]
    return mixed[:n]


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--variant", default=None, help="variant directory; the default preset when omitted")
    args = parser.parse_args(argv)

    import torch
    from sentence_transformers import SentenceTransformer

    from c2v_rag import Causal2Vec
    from c2v_rag.presets import resolve_variant_path

    torch.set_grad_enabled(False)
    path = str(resolve_variant_path(args.variant))
    texts = scifact_texts(args.data, args.n)
    native = Causal2Vec.from_pretrained(path, device="cpu", dtype="float32")
    st = SentenceTransformer(path, device="cpu", trust_remote_code=True, model_kwargs={"dtype": torch.float32})

    diffs = {
        "query": np.abs(st.encode_query(texts) - native.encode_queries(texts)).max(),
        "document": np.abs(st.encode_document(texts) - native.encode_documents(texts)).max(),
    }
    print(f"{len(texts)} SciFact texts ({args.n - args.n // 2} claims, {args.n // 2} abstracts), float32, {path}")
    for side, diff in diffs.items():
        print(f"  max |ST - native| as {side}: {diff:.2e}")
    t_native = best_time(lambda: native.encode_documents(texts), args.repeats)
    t_st = best_time(lambda: st.encode_document(texts), args.repeats)
    print(f"  encode_documents: native {t_native:.2f} s, sentence-transformers {t_st:.2f} s "
          f"(ST / native = {t_st / t_native:.2f}; threads: {torch.get_num_threads()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
