"""What ``Collection.delete_documents`` costs: by id, by file (which reads every chunk's source once), by filter.

    python bench/delete_documents.py --chunks 20000 --backends local edge --out bench/results/delete_documents.json

A store of ``--chunks`` points laid out as ingest writes them (``doc_id``, indexed as ingest indexes it, the metadata
with ``source``, a 600-character text, 384-d vectors; 5 chunks a document, 50 documents a folder, every 20th
document a file of an archive) is built once per (backend, size). Then, each on a fresh copy of it so that no call
finds its documents gone: ten documents by id, ten files by path (their documents found by a scan of the sources),
one folder (its 50 documents), and a metadata filter matching ten documents. Each is timed (best of three copies),
and the output gives each as a ratio to the delete by id, side by side in one run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

CHUNKS_PER_DOC = 5
DOCS_PER_FOLDER = 50
TEXT = ("Spring tides happen when the Sun and the Moon align, and their pull adds up. " * 8)[:600]


def _source(doc: int) -> str:
    folder = f"/corpus/team-{doc // DOCS_PER_FOLDER:05d}"
    return f"{folder}/pack.zip/page-{doc}.md" if doc % 20 == 0 else f"{folder}/page-{doc}.md"


def build(backend: str, store: Path, chunks: int) -> None:
    from qdrant_client.http import models

    from c2v_rag.rag import QdrantConfig

    config = QdrantConfig.resolve(path=store, store=backend)
    client = config.connect()
    client.create_collection("kb", **config.create_collection_kwargs(384))
    with warnings.catch_warnings():  # the doc_id index ingest makes (local mode has none)
        warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")
        client.create_payload_index("kb", "doc_id", field_schema=models.PayloadSchemaType.KEYWORD, wait=True)
    rng = np.random.default_rng(0)
    for start in range(0, chunks, 1024):
        points = []
        for pid in range(start, min(start + 1024, chunks)):
            doc = pid // CHUNKS_PER_DOC
            source = _source(doc)
            metadata = {"source": source, "doc_id": source, "chunk_index": pid % CHUNKS_PER_DOC, "team": doc // 10}
            vector = rng.standard_normal(384).astype(np.float32)
            points.append(
                models.PointStruct(
                    id=pid,
                    vector=(vector / np.linalg.norm(vector)).tolist(),
                    payload={"doc_id": source, "metadata": metadata, "page_content": TEXT},
                )
            )
        client.upsert("kb", points, wait=True)
    client.close()


def timed(backend: str, built: Path, call: str, docs: int) -> dict:
    from c2v_rag import Collection

    wanted = list(range(7, docs, docs // 10))[:10]
    best, result = float("inf"), None
    for _ in range(3):
        with tempfile.TemporaryDirectory(dir=built.parent) as scratch:
            store = Path(scratch) / "store"
            shutil.copytree(built, store)
            kb = Collection("kb", path=store, store=backend)
            kb.count()  # open the store before the clock starts: its load is not the delete's
            started = time.perf_counter()
            if call == "ids":
                result = kb.delete_documents([_source(d) for d in wanted])
            elif call == "files":
                result = kb.delete_documents(files=[_source(d) for d in wanted])
            elif call == "folder":
                result = kb.delete_documents(files=_source(docs // 2 + 1).rsplit("/", 1)[0])
            else:
                result = kb.delete_documents(filter={"team": docs // 20})
            best = min(best, time.perf_counter() - started)
    assert result is not None
    return {"seconds": best, "documents_deleted": result.documents_deleted, "chunks_deleted": result.chunks_deleted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, nargs="+", default=[20_000])
    parser.add_argument("--backends", nargs="+", default=["local", "edge"], choices=["local", "edge"])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends:
            for chunks in args.chunks:
                built = Path(tmp) / f"{backend}-{chunks}" / "store"
                build(backend, built, chunks)
                docs = chunks // CHUNKS_PER_DOC
                calls = {call: timed(backend, built, call, docs) for call in ("ids", "files", "folder", "filter")}
                base = calls["ids"]["seconds"]
                for call, row in calls.items():
                    rows.append(
                        {"backend": backend, "chunks": chunks, "call": call, **row, "vs_ids": row["seconds"] / base}
                    )
                    seconds, deleted = (
                        row["seconds"],
                        f"{row['documents_deleted']} documents, {row['chunks_deleted']} chunks",
                    )
                    line = f"{backend:5s} {chunks:>8,d} chunks  {call:6s} {seconds:7.3f} s  {seconds / base:6.1f}x"
                    print(f"{line}  ({deleted})", flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
