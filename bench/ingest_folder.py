"""A real folder ingested end to end: c2v-rag default vs int8 vs LlamaIndex + HuggingFaceEmbedding (MiniLM).

    python bench/ingest_folder.py --data ../shared/data --files 3000 --folder /tmp/md-3000

Generates (once) a folder of ``--files`` small Markdown files from SciFact: each a ``# title`` heading, a
``## Abstract`` section with one abstract, and a short list of the claims that cite it when there are any.
Then each pipeline runs in its own child process, one after the other (``--order`` rotates them), so its
peak RSS is its own:

- ``c2v-float``: ``c2v_rag.ingest(folder)`` with the default preset, ``quantize="none"`` (float32 here);
- ``c2v-int8``: the same with ``quantize="int8"`` (needs the ``int8`` extra; the first load builds the graph,
  before the clock);
- ``llamaindex-minilm``: ``SimpleDirectoryReader`` + ``IngestionPipeline([SentenceSplitter,
  HuggingFaceEmbedding(all-MiniLM-L6-v2)])`` into ``QdrantVectorStore``, the peer a LlamaIndex user has.

Reported per pipeline: chunks, seconds (model loaded and warmed before the clock starts), chunks/s, time
to the first searchable point (the first ``upsert`` to return), peak RSS of the child (model included),
and each pipeline's CPU time per chunk as a multiple of MiniLM's (CPU seconds of the process: the
wall clock on a shared machine counts other processes' time; the splitters cut differently), and its wall
time per chunk so (what a user waits for, with several threads on an otherwise idle machine). Chunks: 200 model tokens, 20 overlap for c2v; the
LlamaIndex splitter is given the same numbers in its own tokenizer's tokens.
"""  # noqa: E501

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PIPELINES = ("c2v-float", "c2v-int8", "llamaindex-minilm")


def make_folder(data: Path, folder: Path, files: int) -> int:
    if folder.is_dir() and len(list(folder.glob("*.md"))) >= files:
        return files
    folder.mkdir(parents=True, exist_ok=True)
    corpus = [json.loads(line) for line in open(data / "scifact" / "corpus.jsonl", encoding="utf-8")]
    claims: dict[str, list[str]] = {}
    queries = {q["_id"]: q["text"] for q in map(json.loads, open(data / "scifact" / "queries.jsonl", encoding="utf-8"))}
    for line in open(data / "scifact" / "qrels" / "train.tsv", encoding="utf-8").readlines()[1:]:
        qid, did, _ = line.split("\t")
        claims.setdefault(did, []).append(queries.get(qid, ""))
    for i, doc in enumerate(corpus[:files]):
        cited = "".join(f"- {c}\n" for c in claims.get(doc["_id"], []) if c)
        body = f"# {doc['title'].strip()}\n\n## Abstract\n\n{doc['text']}\n"
        if cited:
            body += f"\n## Claims citing it\n\n{cited}"
        (folder / f"doc-{i:05d}.md").write_text(body, encoding="utf-8")
    return min(files, len(corpus))


class _FirstUpsert:
    seconds: float | None = None


def child(name: str, folder: Path, store: Path, batch_size: int) -> dict:
    from qdrant_client import QdrantClient

    class Client(QdrantClient):
        start = 0.0

        def _first(self):
            if _FirstUpsert.seconds is None:
                _FirstUpsert.seconds = time.perf_counter() - Client.start

        # c2v_rag writes with upsert; LlamaIndex's QdrantVectorStore with upload_points/batch calls.
        def upsert(self, *a, **k):
            result = super().upsert(*a, **k)
            self._first()
            return result

        def upload_points(self, *a, **k):
            result = super().upload_points(*a, **k)
            self._first()
            return result

        def batch_update_points(self, *a, **k):
            result = super().batch_update_points(*a, **k)
            self._first()
            return result

    client = Client(path=str(store))
    if name.startswith("c2v"):
        import c2v_rag
        from c2v_rag.rag import load_model

        quantize = "int8" if name == "c2v-int8" else "none"
        load_model(None, device="cpu", quantize=quantize).encode(["warm up"])
        Client.start = start = time.perf_counter()
        cpu = time.process_time()
        result = c2v_rag.ingest(
            [folder],
            client=client,
            collection="bench",
            device="cpu",
            quantize=quantize,
            chunk_size=200,
            chunk_overlap=20,
            batch_size=batch_size,
            show_progress=False,
        )
        seconds, chunks = time.perf_counter() - start, result.chunks
    else:
        from llama_index.core import SimpleDirectoryReader
        from llama_index.core.ingestion import IngestionPipeline
        from llama_index.core.node_parser import SentenceSplitter
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding
        from llama_index.vector_stores.qdrant import QdrantVectorStore

        from c2v_rag.hub.sources import resolve_reference

        embed = HuggingFaceEmbedding(
            model_name=resolve_reference("all-minilm-l6-v2").location, device="cpu", embed_batch_size=batch_size
        )
        embed.get_text_embedding("warm up")
        Client.start = start = time.perf_counter()
        cpu = time.process_time()
        documents = SimpleDirectoryReader(str(folder), required_exts=[".md"]).load_data()
        pipeline = IngestionPipeline(
            transformations=[SentenceSplitter(chunk_size=200, chunk_overlap=20), embed],
            vector_store=QdrantVectorStore(client=client, collection_name="bench"),
        )
        nodes = pipeline.run(documents=documents)
        seconds, chunks = time.perf_counter() - start, len(nodes)
    cpu_seconds = time.process_time() - cpu
    stored = client.count("bench").count
    client.close()
    peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
    return {
        "pipeline": name,
        "chunks": chunks,
        "stored": stored,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(chunks / seconds, 2),
        "cpu_seconds": round(cpu_seconds, 2),
        "chunks_per_cpu_s": round(chunks / cpu_seconds, 2),
        "first_point_s": _FirstUpsert.seconds,
        "peak_rss_mib": round(peak / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--folder", type=Path, default=None, help="where the Markdown files go (kept for reuse)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=PIPELINES)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.gettempdir()) / f"c2v-md-{args.files}"
    if args.child:
        print(json.dumps(child(args.child, folder, args.store, args.batch_size)))
        return
    make_folder(args.data, folder, args.files)
    rows = []
    for name in args.pipelines:
        with tempfile.TemporaryDirectory(prefix="c2v-ingest-") as store:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--data",
                    str(args.data),
                    "--files",
                    str(args.files),
                    "--folder",
                    str(folder),
                    "--batch-size",
                    str(args.batch_size),
                    "--child",
                    name,
                    "--store",
                    store,
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    base = next((r for r in rows if r["pipeline"] == "llamaindex-minilm"), None)
    for row in rows:
        if base is not None:
            row["time_per_chunk_vs_minilm"] = round(
                row["cpu_seconds"] / base["cpu_seconds"] * base["chunks"] / row["chunks"], 2
            )
            row["wall_time_per_chunk_vs_minilm"] = round(
                row["seconds"] / base["seconds"] * base["chunks"] / row["chunks"], 2
            )
    print(json.dumps(rows, indent=2))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
