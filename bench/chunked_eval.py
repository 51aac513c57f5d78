"""Score a variant on one dev set as ``c2v-rag eval`` does, with the documents encoded in chunks cached on disk.

A full-corpus retrieval set (scifact-dev: 5,183 abstracts) takes a quarter of an hour or more on one CPU core;
a process stopped half-way loses nothing here: each chunk's vectors are saved as they come, and a rerun with the
same arguments encodes only the missing chunks. Scoring is c2v_rag.evaluation's own ``evaluate`` on the same
model and data as ``c2v-rag eval MODEL --sets SET --max-length N`` (the CLI encodes the corpus in one call; the
chunks here only change which documents share a padded batch).

    python bench/chunked_eval.py runs/start-noscifact --set scifact-dev --max-length 256 \
        --cache runs/eval-cache/start --json runs/eval-start-scifact-dev.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np


class ChunkCachedDocuments:
    """Wraps a model: ``encode_documents`` runs ``chunk`` documents at a time, each chunk's vectors cached
    under ``cache``."""

    def __init__(self, model: Any, cache: Path, chunk: int) -> None:
        self.model, self.cache, self.chunk = model, cache, chunk
        self.seconds = 0.0  # encoding time of the chunks encoded by this process
        cache.mkdir(parents=True, exist_ok=True)

    def encode_documents(self, texts: list[str], **kwargs: Any) -> np.ndarray:
        key = hashlib.sha256(repr((texts, sorted(kwargs.items()))).encode()).hexdigest()[:12]
        parts = []
        for start in range(0, len(texts), self.chunk):
            path = self.cache / f"docs-{key}-{start:06d}.npy"
            if not path.exists():
                began = time.perf_counter()
                vectors = np.asarray(self.model.encode_documents(texts[start : start + self.chunk], **kwargs))
                spent = time.perf_counter() - began
                self.seconds += spent
                np.save(path.with_suffix(".tmp.npy"), vectors)
                path.with_suffix(".tmp.npy").rename(path)
                with open(self.cache / "chunks.log", "a") as log:
                    log.write(f"{path.name} {len(vectors)} {spent:.1f}\n")
                print(f"chunk {start} +{len(vectors)} in {spent:.1f} s", flush=True)
            parts.append(np.load(path))
        return np.concatenate(parts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("variant", help="a variant directory, or 'default'")
    parser.add_argument("--set", required=True, help="a dev set of c2v_rag.evaluation (stsb-dev, scifact-dev...)")
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--cache", required=True, help="folder for the document chunks' vectors")
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--json", help="write the scores here")
    args = parser.parse_args()

    from c2v_rag.evaluation import load_suite, run_suite
    from c2v_rag.model.causal2vec import Causal2Vec

    model = Causal2Vec.from_pretrained(None if args.variant == "default" else args.variant)
    if args.max_length is not None:
        model.max_seq_length = args.max_length
    wrapped = ChunkCachedDocuments(model, Path(args.cache), args.chunk)
    scores = run_suite(wrapped, load_suite([args.set], args.data))[args.set]
    logged = [float(line.split()[2]) for line in (Path(args.cache) / "chunks.log").read_text().splitlines()]
    scores["document_seconds_all_chunks"] = sum(logged)
    print(json.dumps({args.variant: scores}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps({args.variant: {args.set: scores}}, indent=2))


if __name__ == "__main__":
    main()
