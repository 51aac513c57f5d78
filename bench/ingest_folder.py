"""A real folder ingested end to end, side by side: c2v-rag's ingest against MiniLM pipelines.

    taskset -c 1 env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python bench/ingest_folder.py \
        --build kernel-docs --files 3000 --folder /tmp/kernel-docs-3000 --json ingest.json

The folder (``--folder DIR``) is any folder of documents c2v_rag reads (.md, .txt). Two builders make one,
deterministically, and ``--build`` (re)writes it (its ``*.md`` files are deleted first):

- ``--build kernel-docs``: the Linux kernel's documentation as installed by Debian's ``linux-doc-6.1``
  (``/usr/share/doc/linux-doc-6.1/Documentation/**/*.rst.gz``, translations left out), cut at its
  reStructuredText headings into one Markdown file per section (``# <section title>``, then the section's own
  text, unchanged). Pages of 200 to 800 characters are kept, and ``--files`` of them are taken evenly spaced in
  path order: 3,000 pages make 3,336 chunks of 115 decoder tokens on average (at most 200), so one AVX2 core
  runs every pipeline in under an hour. Short real pages, as a documentation site has; none of it is in the
  out-of-domain benchmarks (man pages, Jargon File).
- ``--build scifact`` (or ``--data`` with no ``--folder`` made yet): ``--files`` small Markdown files from
  SciFact, each a ``# title`` heading, a ``## Abstract`` section with one abstract, and a short list of the
  claims that cite it when there are any.

Each pipeline runs in its own child process, one after the other, so its peak RSS is its own (children
inherit this process's CPU affinity and thread settings):

- ``st-minilm``: the chunks c2v_rag's chunker makes for a new collection (the same ``TokenChunker``, 200 decoder
  tokens, 20 overlap, chunks after a document's first led by its title), embedded by sentence-transformers'
  all-MiniLM-L6-v2 at its defaults (fp32, ``batch_size=32``) and
  written by c2v_rag's own ingest run (the same embedded Qdrant store, point ids and payloads, batches of 256
  chunks upserted on a background thread): what c2v_rag's pipeline costs around a MiniLM model. The base of
  the ratios;
- ``llamaindex-minilm``: ``SimpleDirectoryReader`` + ``IngestionPipeline([SentenceSplitter,
  HuggingFaceEmbedding(all-MiniLM-L6-v2)])`` into ``QdrantVectorStore``, the peer a LlamaIndex user has (its
  splitter is given 200/20 in its own tokenizer's tokens, so its chunks differ);
- ``c2v-384``: ``c2v_rag.ingest(folder, truncate_dim=384, quantize="none")``: the encoder part of the vector,
  no decoder;
- ``c2v-int8``: ``c2v_rag.ingest(folder, quantize="int8")`` (needs the ``int8`` extra; the first load
  builds the graph, before the clock): the default on the CPUs where ``quantize="auto"`` picks int8;
- ``c2v-float``: ``c2v_rag.ingest(folder, quantize="none")`` (float32 on AVX2; bf16 where the CPU has it): the
  default where ``auto`` keeps float (AMX).

all-MiniLM-L6-v2 is the packaged copy (``resolve_reference("all-minilm-l6-v2")``): no network. Models are
loaded and warmed before the clock starts. Reported per pipeline: chunks, wall seconds, CPU seconds of the
process (all threads), chunks/s, time to the first searchable point (the first write to return), peak RSS of
the child (model included), and the wall and CPU time per chunk as multiples of ``st-minilm``'s. The CPU
flags are printed; ``--json`` holds the command, the flags, the folder's digest and each row, rewritten
as each pipeline finishes.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# In the order they run: c2v-float last, so a run cut short still has the other rows.
PIPELINES = ("st-minilm", "llamaindex-minilm", "c2v-384", "c2v-int8", "c2v-float")
BASE = "st-minilm"
BUILDERS = ("kernel-docs", "scifact")
KERNEL_DOCS = Path("/usr/share/doc/linux-doc-6.1/Documentation")
# A kernel-docs page: its Markdown text (``# title``, blank line, the section) within these many characters.
PAGE_CHARS = (200, 800)
# An reStructuredText underline: one punctuation character repeated (at least 3 times), nothing else.
_UNDERLINE = re.compile(r"^([=\-~^*#\"'`+:._])\1{2,}\s*$")


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


def rst_sections(text: str) -> list[tuple[str, str]]:
    """(title, body) of each section of an reStructuredText page, cut at every heading (any level): a
    line followed by an underline at least as long (an overline above it is dropped from the section before)."""
    lines = text.splitlines()
    heads = [
        i - 1
        for i in range(1, len(lines))
        if _UNDERLINE.match(lines[i])
        and lines[i - 1].strip()
        and not lines[i - 1].startswith((" ", "\t"))
        and not _UNDERLINE.match(lines[i - 1])
        and len(lines[i].rstrip()) >= len(lines[i - 1].strip())
    ]
    out = []
    for k, head in enumerate(heads):
        body = lines[head + 2 : heads[k + 1] if k + 1 < len(heads) else len(lines)]
        if k + 1 < len(heads) and body and _UNDERLINE.match(body[-1]):
            body = body[:-1]
        out.append((lines[head].strip(), "\n".join(body).strip()))
    return out


def kernel_pages(source: Path = KERNEL_DOCS) -> list[tuple[str, str]]:
    """(file name, Markdown text) of every kernel-docs section page within :data:`PAGE_CHARS`, in path order."""
    pages = []
    for path in sorted(p for p in source.rglob("*.rst.gz") if "translations" not in p.relative_to(source).parts):
        text = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
        stem = str(path.relative_to(source))[: -len(".rst.gz")].replace("/", "__")
        for k, (title, body) in enumerate(rst_sections(text)):
            page = f"# {title}\n\n{body}\n"
            if body and PAGE_CHARS[0] <= len(page) <= PAGE_CHARS[1]:
                pages.append((f"{stem}--{k:03d}.md", page))
    return pages


def build_kernel_folder(folder: Path, files: int, source: Path = KERNEL_DOCS) -> int:
    """(Re)write ``folder`` as ``files`` kernel-docs pages, evenly spaced over :func:`kernel_pages`."""
    pages = kernel_pages(source)
    if len(pages) < files:
        raise SystemExit(f"{source} has only {len(pages)} pages of {PAGE_CHARS} characters; ask for fewer --files")
    _clear(folder)
    for i in range(files):
        name, page = pages[i * len(pages) // files]
        (folder / name).write_text(page, encoding="utf-8")
    return files


def _clear(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.md"):
        old.unlink()


def folder_digest(folder: Path) -> tuple[int, str]:
    """The number of .md/.txt files under ``folder`` and a sha256 over their names and bytes (in name order)."""
    digest = hashlib.sha256()
    paths = sorted(p for p in folder.rglob("*") if p.suffix in (".md", ".txt") and p.is_file())
    for path in paths:
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return len(paths), digest.hexdigest()


def package_version(name: str) -> str | None:
    """The installed Debian package's version (None off Debian or when it is missing)."""
    if shutil.which("dpkg-query") is None:
        return None
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True)
    return out.stdout.strip() or None if out.returncode == 0 else None


class _FirstUpsert:
    seconds: float | None = None


def _client(store: Path):
    """A QdrantClient on ``store`` that notes when its first write returns (the first searchable point)."""
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

    return Client(path=str(store)), Client


class MiniLMDocuments:
    """The ingest run's embedder (``embed_documents``, ``dim``) with sentence-transformers' MiniLM at its defaults."""

    dim = 384

    def __init__(self, model) -> None:
        self.model = model

    def embed_documents(self, texts):
        return self.model.encode(list(texts), batch_size=32, show_progress_bar=False)


def minilm_location() -> str:
    from c2v_rag.hub.sources import resolve_reference

    return str(resolve_reference("all-minilm-l6-v2").location)


def st_minilm_ingest(folder: Path, client, collection: str, clock) -> int:
    """c2v_rag's local ingest run (chunker, batches, point layout, background writes) with MiniLM's vectors."""
    from sentence_transformers import SentenceTransformer

    from c2v_rag.documents.chunking import TokenChunker
    from c2v_rag.documents.documents import input_size, iter_documents
    from c2v_rag.documents.files import ReadLog
    from c2v_rag.rag.ingestion.config import IngestConfig
    from c2v_rag.rag.ingestion.local_engine import LocalIngestRun
    from c2v_rag.store.collection import QdrantConfig, ensure_collection
    from c2v_rag.store.vectors import CollectionVectors

    settings = IngestConfig(show_progress=False)
    embedder = MiniLMDocuments(SentenceTransformer(minilm_location(), device="cpu"))
    embedder.embed_documents(["warm up"])
    # The chunks a new collection of c2v_rag's gets: led by their document's title where it has one.
    chunker = TokenChunker.for_variant(None, settings.chunk_size, settings.chunk_overlap, context=settings.context)
    target = QdrantConfig()
    layout = CollectionVectors(dense=target.vector_name)
    clock()
    log = ReadLog()
    documents = iter_documents([folder], options=settings.read_options(), log=log)
    size = input_size([folder], log)
    fingerprint = {"model": "sentence-transformers/all-MiniLM-L6-v2", "embedding_dim": embedder.dim}
    created = ensure_collection(client, collection, target, fingerprint, layout, settings.payload_indexes)
    run = LocalIngestRun(client, collection, target, settings, embedder, chunker, created, size, log, [], layout=layout)
    return run.execute(documents).chunks


def llamaindex_ingest(folder: Path, client, collection: str, clock, batch_size: int) -> int:
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    embed = HuggingFaceEmbedding(model_name=minilm_location(), device="cpu", embed_batch_size=batch_size)
    embed.get_text_embedding("warm up")
    clock()
    documents = SimpleDirectoryReader(str(folder), required_exts=[".md", ".txt"], recursive=True).load_data()
    pipeline = IngestionPipeline(
        transformations=[SentenceSplitter(chunk_size=200, chunk_overlap=20), embed],
        vector_store=QdrantVectorStore(client=client, collection_name=collection),
    )
    return len(pipeline.run(documents=documents))


def c2v_ingest(
    name: str, folder: Path, client, collection: str, clock, model: str | None = None, max_seq_length: int | None = None
) -> int:
    """``name`` is a c2v pipeline, with ``@N`` for a budget of N padded tokens per forward pass (``--max-tokens``);
    ``model`` the variant it ingests with (None: the default preset); ``max_seq_length`` the decoder tokens each
    chunk is read with (ingest's ``decoder_max_length``: 0 whole chunks, None ingest's default)."""
    import c2v_rag
    from c2v_rag.rag import IngestConfig, load_model

    pipeline, _, budget = name.partition("@")
    options = {
        "c2v-float": {"quantize": "none"},
        "c2v-int8": {"quantize": "int8"},
        "c2v-384": {"truncate_dim": 384, "quantize": "none"},
    }[pipeline]
    config = IngestConfig(max_tokens_per_batch=int(budget) if budget else None, decoder_max_length=max_seq_length)
    shared = load_model(model, device="cpu", quantize=options.get("quantize"))  # the object ingest then uses
    shared.encode(["warm up"])
    clock()
    result = c2v_rag.ingest(
        [folder],
        client=client,
        collection=collection,
        model=model,
        device="cpu",
        show_progress=False,
        config=config,
        **options,
    )
    return result.chunks


def child(
    name: str, folder: Path, store: Path, batch_size: int, model: str | None = None, max_seq_length: int | None = None
) -> dict:
    client, Client = _client(store)
    started: dict[str, float] = {}

    def clock() -> None:  # the models are loaded and warm: the clock starts
        Client.start = started["wall"] = time.perf_counter()
        started["cpu"] = time.process_time()

    if name == "st-minilm":
        chunks = st_minilm_ingest(folder, client, "bench", clock)
    elif name == "llamaindex-minilm":
        chunks = llamaindex_ingest(folder, client, "bench", clock, batch_size)
    else:
        chunks = c2v_ingest(name, folder, client, "bench", clock, model, max_seq_length)
    seconds, cpu_seconds = time.perf_counter() - started["wall"], time.process_time() - started["cpu"]
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
        "first_point_s": None if _FirstUpsert.seconds is None else round(_FirstUpsert.seconds, 2),
        "peak_rss_mib": round(peak / 1024),
    }


def add_ratios(rows: list[dict]) -> None:
    """Each row's wall and CPU time per chunk as multiples of the base pipeline's (:data:`BASE`, else LlamaIndex)."""
    base = next((r for r in rows if r["pipeline"] == BASE), None) or next(
        (r for r in rows if r["pipeline"] == "llamaindex-minilm"), None
    )
    if base is None:
        return
    for row in rows:
        row["ratio_base"] = base["pipeline"]
        for key, out in (("seconds", "wall_per_chunk_ratio"), ("cpu_seconds", "cpu_per_chunk_ratio")):
            row[out] = round(row[key] / row["chunks"] / (base[key] / base["chunks"]), 2)


def table(rows: list[dict]) -> str:
    head = f"{'pipeline':18s} {'chunks':>7s} {'wall s':>8s} {'CPU s':>8s} {'chunks/s':>9s} {'first pt s':>10s} "
    head += f"{'peak MiB':>9s} {'wall/chunk':>10s} {'CPU/chunk':>10s}"
    lines = [head]
    for r in rows:
        first = "-" if r["first_point_s"] is None else f"{r['first_point_s']:.1f}"
        wall, cpu = r.get("wall_per_chunk_ratio", 0), r.get("cpu_per_chunk_ratio", 0)
        lines.append(
            f"{r['pipeline']:18s} {r['chunks']:7d} {r['seconds']:8.1f} {r['cpu_seconds']:8.1f} "
            f"{r['chunks_per_s']:9.2f} {first:>10s} {r['peak_rss_mib']:9d} {wall:9.2f}x {cpu:9.2f}x"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", type=Path, default=None, help="the folder to ingest (built there by --build)")
    parser.add_argument("--build", choices=BUILDERS, default=None, help="(re)write --folder from this source first")
    parser.add_argument("--data", type=Path, default=None, help="the shared data (SciFact) for --build scifact")
    parser.add_argument("--files", type=int, default=3000, help="documents a builder writes")
    parser.add_argument("--batch-size", type=int, default=64, help="LlamaIndex's embed_batch_size")
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=PIPELINES)
    parser.add_argument(
        "--max-tokens",
        type=int,
        nargs="+",
        default=None,
        help="run each c2v pipeline once per budget of padded tokens per forward pass (rows NAME@N) instead of at "
        "its default",
    )
    parser.add_argument(
        "--model",
        default=None,
        help="the variant the c2v pipelines ingest with (a preset or a directory; default: the default preset)",
    )
    parser.add_argument(
        "--decoder-max-length",
        "--max-seq-length",
        dest="max_seq_length",
        type=int,
        default=None,
        help="decoder tokens the c2v pipelines read of each chunk (ingest's decoder_max_length; 0: whole chunks; "
        "default: ingest's)",
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.gettempdir()) / f"c2v-md-{args.files}"
    if args.child:
        print(json.dumps(child(args.child, folder, args.store, args.batch_size, args.model, args.max_seq_length)))
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import recorded_command, shown_path, single_thread_note, speed_flags_note

    from c2v_rag.core.devices import cpu_flags

    build = args.build or ("scifact" if args.data is not None and not folder.is_dir() else None)
    if build == "kernel-docs":
        build_kernel_folder(folder, args.files)
    elif build == "scifact":
        if args.data is None:
            raise SystemExit("--build scifact needs --data")
        if args.build:
            _clear(folder)
        make_folder(args.data, folder, args.files)
    if not folder.is_dir():
        raise SystemExit(f"no folder {folder}: pass --folder DIR, or --build to make one")
    files, digest = folder_digest(folder)
    print(f"CPU flags: {speed_flags_note()}; {single_thread_note()}", flush=True)
    print(f"folder {folder}: {files} files, sha256 {digest[:16]}", flush=True)
    report = {
        "command": recorded_command("bench/ingest_folder.py", sys.argv[1:]),
        "cpu_flags": " ".join(sorted(cpu_flags())),
        "speed_flags": speed_flags_note(),
        "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")},
        "cpu_affinity": sorted(os.sched_getaffinity(0)),
        "folder": {"path": shown_path(folder), "build": build, "files": files, "sha256": digest},
        "model": args.model or "default preset",
        "max_seq_length": args.max_seq_length,
        "rows": [],
    }
    if build == "kernel-docs":
        report["folder"]["source"] = f"linux-doc-6.1 {package_version('linux-doc-6.1')}"
    rows: list[dict] = report["rows"]
    names = [
        f"{name}@{budget}" if name.startswith("c2v-") else name
        for name in args.pipelines
        for budget in (args.max_tokens if name.startswith("c2v-") and args.max_tokens else [None])
    ]
    for name in (n.removesuffix("@None") for n in names):
        with tempfile.TemporaryDirectory(prefix="c2v-ingest-") as store:
            command = [sys.executable, __file__, "--folder", str(folder), "--batch-size", str(args.batch_size)]
            command += ["--model", args.model] if args.model else []
            command += ["--decoder-max-length", str(args.max_seq_length)] if args.max_seq_length is not None else []
            out = subprocess.run(
                [*command, "--child", name, "--store", store], check=True, capture_output=True, text=True
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            add_ratios(rows)
            print(json.dumps(rows[-1]), flush=True)
            if args.json:
                args.json.write_text(json.dumps(report, indent=2) + "\n")
    print("\n" + table(rows))


if __name__ == "__main__":
    main()
