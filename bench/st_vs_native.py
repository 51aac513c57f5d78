"""The preset through sentence-transformers against Causal2Vec's own encode: same vectors, and the time each takes.

    python bench/st_vs_native.py --data ../shared/data --n 50

Takes n mixed SciFact texts (half claims, half abstracts), encodes them as queries and as documents
both ways in float32 and prints the largest absolute difference (raw and unit-normalized), and the
seconds per document pass (best of ``--repeats``; 0 skips timing). ``--alone`` adds the same
difference for our own encoder with each text alone against the batched pass.
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
    mixed = [t for pair in zip(claims, docs) for t in pair] + claims[len(docs) :]
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
    parser.add_argument("--alone", action="store_true", help="also compare native batched with one text at a time")
    args = parser.parse_args(argv)

    import torch
    from sentence_transformers import SentenceTransformer

    from c2v_rag import Causal2Vec
    from c2v_rag.hub.presets import resolve_variant_path

    torch.set_grad_enabled(False)
    path = str(resolve_variant_path(args.variant))
    texts = scifact_texts(args.data, args.n)
    native = Causal2Vec.from_pretrained(path, device="cpu", dtype="float32")
    st = SentenceTransformer(path, device="cpu", trust_remote_code=True, model_kwargs={"dtype": torch.float32})

    print(f"{len(texts)} SciFact texts ({args.n - args.n // 2} claims, {args.n // 2} abstracts), float32, {path}")
    for side, ours, theirs in (
        ("query", native.encode_queries, st.encode_query),
        ("document", native.encode_documents, st.encode_document),
    ):
        a, b = ours(texts), theirs(texts)
        unit = np.abs(a / np.linalg.norm(a, axis=1, keepdims=True) - b / np.linalg.norm(b, axis=1, keepdims=True))
        print(
            f"  as {side}: max |ST - native| {np.abs(a - b).max():.2e} (largest |component| {np.abs(a).max():.1f}); "
            f"unit-normalized {unit.max():.2e}"
        )
    if args.alone:
        # The floor for any batching: our own vectors with each text encoded alone against the batched ones.
        batched = native.encode_documents(texts)
        alone = np.stack([native.encode_documents([t])[0] for t in texts])
        print(f"  native, each text alone vs batched: max |diff| {np.abs(alone - batched).max():.2e}")
    if not args.repeats:
        return 0
    t_native = best_time(lambda: native.encode_documents(texts), args.repeats)
    t_st = best_time(lambda: st.encode_document(texts), args.repeats)
    print(
        f"  encode_documents: native {t_native:.2f} s, sentence-transformers {t_st:.2f} s "
        f"(ST / native = {t_st / t_native:.2f}; threads: {torch.get_num_threads()})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
