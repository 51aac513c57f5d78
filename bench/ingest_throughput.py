"""Ingest throughput: c2v_rag.ingest vs LlamaIndex IngestionPipeline + QdrantVectorStore.

Both pipelines take the same first N SciFact documents, the same loaded model (shared through
the model cache), the same chunking (SentenceSplitter in the model's own tokens) and the same
texts per encode call, and write to embedded Qdrant in fresh temporary directories. Model
loading and a warm-up encode happen before either clock starts.

    python bench/ingest_throughput.py --data ../shared/data            # 1,000 documents
    python bench/ingest_throughput.py --data ../shared/data --n 200 --json result.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path


def load_scifact(data: Path, n: int) -> list[dict]:
    corpus = data / "scifact" / "corpus.jsonl"
    if not corpus.is_file():
        sys.exit(f"error: {corpus} not found; pass --data the folder that holds scifact/corpus.jsonl")
    records = []
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            if len(records) == n:
                break
            row = json.loads(line)
            title, text = row.get("title", "").strip(), row["text"]
            records.append({"id": str(row["_id"]), "text": f"{title}\n\n{text}" if title else text})
    return records


def run_c2v(records, args, store: Path) -> dict:
    import c2v_rag

    start = time.perf_counter()
    result = c2v_rag.ingest(
        records,
        path=store,
        collection="bench",
        model=args.model,
        device=args.device,
        dtype=args.dtype,
        chunk_size=args.chunk_size,
        chunk_overlap=args.chunk_overlap,
        batch_size=args.batch_size,
        show_progress=True,
    )
    seconds = time.perf_counter() - start
    return {"chunks": result.chunks, "seconds": seconds}


def run_llama_index(records, args, store: Path) -> dict:
    from llama_index.core import Document
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.embeddings.causal2vec import Causal2VecEmbedding
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    embed_model = Causal2VecEmbedding(
        model=args.model, device=args.device, dtype=args.dtype, embed_batch_size=args.batch_size
    )
    client = QdrantClient(path=str(store))
    pipeline = IngestionPipeline(
        transformations=[embed_model.text_splitter(args.chunk_size, args.chunk_overlap), embed_model],
        vector_store=QdrantVectorStore(client=client, collection_name="bench"),
    )
    documents = [Document(text=r["text"], id_=r["id"]) for r in records]
    start = time.perf_counter()
    nodes = pipeline.run(documents=documents, show_progress=True)
    seconds = time.perf_counter() - start
    stored = client.count("bench").count
    client.close()
    if stored != len(nodes):
        raise RuntimeError(f"LlamaIndex stored {stored} points for {len(nodes)} nodes")
    return {"chunks": len(nodes), "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder holding scifact/corpus.jsonl")
    parser.add_argument("--n", type=int, default=1000, help="first N documents (default 1000)")
    parser.add_argument("--model", default=None, help="variant or preset (default: the default preset)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--dtype", default=None, choices=["auto", "float32", "bfloat16", "float16"])
    parser.add_argument("--chunk-size", type=int, default=200)
    parser.add_argument("--chunk-overlap", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256, help="chunks per encode call, both pipelines")
    parser.add_argument(
        "--order", choices=["c2v-first", "llama-index-first"], default="c2v-first", help="which pipeline runs first"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)

    from c2v_rag.rag import load_model

    records = load_scifact(args.data, args.n)
    model = load_model(args.model, device=args.device, dtype=args.dtype)
    model.encode_documents([r["text"] for r in records[:4]])  # warm-up, outside both clocks
    print(
        f"{len(records)} SciFact documents; model {args.model or 'default preset'} on {model.device} "
        f"({model.dtype}); chunk_size={args.chunk_size} overlap={args.chunk_overlap} batch={args.batch_size}",
        flush=True,
    )

    # On a shared machine the load drifts: run the pipelines in both orders to see how much.
    runners = [("c2v_rag.ingest", run_c2v), ("LlamaIndex IngestionPipeline", run_llama_index)]
    if args.order == "llama-index-first":
        runners.reverse()
    results = {}
    with tempfile.TemporaryDirectory(prefix="c2v-bench-") as tmp:
        for i, (name, run) in enumerate(runners):
            results[name] = run(records, args, Path(tmp) / str(i))
    results = {name: results[name] for name in ("c2v_rag.ingest", "LlamaIndex IngestionPipeline")}

    chunk_counts = {r["chunks"] for r in results.values()}
    print(f"\n{'pipeline':32s} {'docs':>6s} {'chunks':>7s} {'seconds':>9s} {'chunks/s':>9s}")
    for name, r in results.items():
        r["chunks_per_s"] = r["chunks"] / r["seconds"]
        print(f"{name:32s} {len(records):6d} {r['chunks']:7d} {r['seconds']:9.1f} {r['chunks_per_s']:9.2f}")
    ratio = results["c2v_rag.ingest"]["chunks_per_s"] / results["LlamaIndex IngestionPipeline"]["chunks_per_s"]
    print(f"ratio c2v_rag / LlamaIndex: {ratio:.2f}x")
    if len(chunk_counts) != 1:
        print(f"warning: the pipelines made different chunk counts {sorted(chunk_counts)}", file=sys.stderr)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "documents": len(records),
                    "model": args.model,
                    "device": str(model.device),
                    "dtype": str(model.dtype),
                    "chunk_size": args.chunk_size,
                    "chunk_overlap": args.chunk_overlap,
                    "batch_size": args.batch_size,
                    "order": args.order,
                    "machine": platform.platform(),
                    "results": results,
                    "ratio": ratio,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
