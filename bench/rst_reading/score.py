"""Score how reStructuredText is read: the files read as rendered (docutils, the ``.rst`` format) against the same
files read as plain text (their source, markup and all, as every ``.rst`` was read before), on CMake's manuals.

The corpus is CMake's own documentation, Sphinx sources (``/usr/share/cmake-3.25/Help`` of Debian's ``cmake-data``):
its ``manual/`` and ``command/`` pages. Each reading is ingested as a user ingests the folder (``c2v_rag.ingest``,
every setting the default): the ``.rst`` files as they are, and copies renamed ``.txt``, which the plain-text
format reads. Every question is searched with ``c2v_rag.search_many(top_k=10)``: the first stage alone
(``rerank=None``) and, with ``--rerank N``, reranked over the top N too. all-MiniLM-L6-v2 ranks each reading's
stored chunks too, so a difference that is the reader's and not the model's shows in both.

A hit is relevant where its own text (its lead aside) holds the first or the last half of an answer quote, both
compared as their letters and digits alone: the quotes are prose of the source without markup, so the two readings
are judged alike whatever markup surrounds them.

    apt-get install cmake-data
    python bench/rst_reading/score.py --json bench/results/rst_reading/RUN.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any, get_args

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # bench/common.py and bench/long_pages

from common import chunker_key
from long_pages.score import compared, minilm_rankings, stored_chunks, write_run

HELP = Path("/usr/share/cmake-3.25/Help")
SETS = ("manual", "command")
TOP_K = 10
COLLECTION = "long_pages"  # the name long_pages.score.stored_chunks scrolls
READINGS = {"rst": ".rst", "text": ".txt"}
DEFAULT_CONTEXT = "lead"  # ingest's chunk_context for a new collection


def load_questions() -> list[dict[str, Any]]:
    questions = []
    for name in SETS:
        path = HERE / f"questions_{name}.jsonl"
        questions += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return questions


def letters(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", text.lower())


def build_folders(help_dir: Path, out: Path) -> str:
    """The corpus under ``out/rst`` as it is and under ``out/text`` renamed ``.txt``; the sources' digest."""
    digest = hashlib.sha256()
    for reading, suffix in READINGS.items():
        for name in SETS:
            target = out / reading / name
            target.mkdir(parents=True, exist_ok=True)
            for source in sorted((help_dir / name).glob("*.rst")):
                data = source.read_bytes()
                if reading == "rst":
                    digest.update(f"{name}/{source.name}\0".encode() + data)
                copy = target / (source.stem + suffix)
                if not copy.exists() or copy.read_bytes() != data:
                    shutil.copyfile(source, copy)
    return digest.hexdigest()


def check_quotes(questions: list[dict[str, Any]], help_dir: Path) -> None:
    for question in questions:
        text = (help_dir / question["file"]).read_text(encoding="utf-8")
        for quote in question["answers"]:
            if text.count(quote) != 1:
                raise SystemExit(f"{question['id']}: its quote is in {question['file']} {text.count(quote)} times")


def relevant(chunk_text: str, file_stem: str, question: dict[str, Any]) -> bool:
    if Path(question["file"]).stem != file_stem:
        return False
    own = letters(chunk_text)
    for quote in question["answers"]:
        wanted = letters(quote)
        half = (len(wanted) + 1) // 2
        if wanted[:half] in own or wanted[len(wanted) - half :] in own:
            return True
    return False


def metrics(ranking: list[dict[str, Any]], question: dict[str, Any]) -> dict[str, float]:
    first = next(
        (rank for rank, hit in enumerate(ranking[:TOP_K], 1) if relevant(hit["own"], hit["stem"], question)), None
    )
    return {
        "mrr@10": 0.0 if first is None else 1.0 / first,
        "hit@1": float(first == 1),
        "hit@3": float(first is not None and first <= 3),
        "hit@10": float(first is not None),
    }


def own_text(text: str, lead_chars: int) -> str:
    return text[lead_chars:]


def ensure_ingested(cache: Path, digest: str, reading: str, context: str = DEFAULT_CONTEXT) -> Path:
    """The folder of ``reading``'s collection cut with ``chunk_context=context``, ingested as a user does unless a
    complete one is cached."""
    import c2v_rag
    from c2v_rag.documents.formats import restructuredtext

    # The rst reading's collection is made again when its reader changes.
    reader = hashlib.sha256(Path(restructuredtext.__file__).read_bytes()).hexdigest() if reading == "rst" else None
    fields = {"corpus": digest, "reading": reading, "reader": reader, "c2v_rag": c2v_rag.__version__}
    if context != DEFAULT_CONTEXT:
        fields["chunk_context"] = context
    fields |= chunker_key(context)
    key = json.dumps(fields, sort_keys=True)
    folder = cache / "collections" / hashlib.sha256(key.encode()).hexdigest()[:20]
    done = folder / "complete.json"
    if not done.exists():
        started = time.perf_counter()
        result = c2v_rag.ingest(
            cache / "corpus" / reading, collection=COLLECTION, path=folder / "qdrant", chunk_context=context
        )
        seconds = time.perf_counter() - started
        done.write_text(json.dumps({"seconds": seconds, "result": str(result)}) + "\n", encoding="utf-8")
    return folder


def c2v_rankings(folder: Path, queries: list[str], rerank: int | None) -> tuple[list[list[dict[str, Any]]], float]:
    """Each query's hits in ``folder``'s collection (reranked over the top ``rerank``, or not), as the relevance
    rule reads them, and the seconds the searches took."""
    import c2v_rag

    started = time.perf_counter()
    found = c2v_rag.search_many(queries, top_k=TOP_K, collection=COLLECTION, path=folder / "qdrant", rerank=rerank)
    took = time.perf_counter() - started
    rankings = [
        [
            {
                "stem": Path(hit.metadata["file_name"]).stem,
                "chunk_index": hit.chunk_index,
                "own": own_text(hit.text, int(hit.metadata.get("lead_chars", 0))),
            }
            for hit in hits
        ]
        for hits in found
    ]
    return rankings, took


def main(argv: list[str] | None = None) -> int:
    from c2v_rag.documents.chunking import ChunkContext

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--help-dir", type=Path, default=HELP, help="CMake's Help folder")
    parser.add_argument("--cache", type=Path, default=None, help="corpus and collections (default: the user cache)")
    parser.add_argument("--no-minilm", action="store_true")
    parser.add_argument("--reading", action="append", choices=list(READINGS), help="default: both")
    parser.add_argument(
        "--chunk-context",
        action="append",
        choices=get_args(ChunkContext),
        help=f"ingest's chunk_context, each an arm of every reading (default: {DEFAULT_CONTEXT})",
    )
    parser.add_argument("--rerank", type=int, default=None, help="also score search reranking its top N chunks")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    readings = args.reading or list(READINGS)
    contexts = args.chunk_context or [DEFAULT_CONTEXT]

    from c2v_rag.core.cache import cache_dir

    cache = args.cache or cache_dir() / "rst-reading"
    digest = build_folders(args.help_dir, cache / "corpus")
    # Both readings ingested first (each cached once complete), the questions read after: a question file still
    # being written costs no ingest.
    folders = {
        (reading, context): ensure_ingested(cache, digest, reading, context)
        for reading in readings
        for context in contexts
    }
    questions = load_questions()
    check_quotes(questions, args.help_dir)
    queries = [q["query"] for q in questions]
    rows: dict[str, dict[str, Any]] = {}

    def add(name: str, rankings: list[list[dict[str, Any]]], **extra: Any) -> None:
        per_question = [metrics(r, q) for r, q in zip(rankings, questions, strict=True)]
        means = {m: float(np.mean([p[m] for p in per_question])) for m in per_question[0]}
        shown = [[f"{hit['stem']}#{hit['chunk_index']}" for hit in ranking] for ranking in rankings]
        rows[name] = {"scores": means, "per_question": per_question, "rankings": shown, **extra}
        print(f"{name:<22} " + "  ".join(f"{m} {v:.4f}" for m, v in means.items()), flush=True)

    for (reading, context), folder in folders.items():
        arm = reading if context == DEFAULT_CONTEXT else f"{reading} {context}"
        seconds = json.loads((folder / "complete.json").read_text())["seconds"]
        chunks = stored_chunks(folder)
        for chunk in chunks:
            chunk["stem"] = Path(chunk["page"]).stem
            chunk["own"] = own_text(chunk["text"], chunk["lead_chars"])
        rankings, took = c2v_rankings(folder, queries, None)
        add(
            f"c2v {arm}",
            rankings,
            ingest_seconds=seconds,
            search_seconds=took,
            chunks=len(chunks),
            characters=sum(len(c["own"]) for c in chunks),
        )
        if args.rerank:
            rankings, took = c2v_rankings(folder, queries, args.rerank)
            add(f"c2v {arm} rerank{args.rerank}", rankings, search_seconds=took)
        if not args.no_minilm:
            add(f"all-minilm-l6-v2 {arm}", minilm_rankings(chunks, queries))

    # (base, name) pairs: rst against text in each context; each context against the default, and chunks cut at
    # headings against chunks led by them, in each reading.
    pairs = []
    for context in contexts:
        suffix = "" if context == DEFAULT_CONTEXT else f" {context}"
        pairs.append((f"c2v text{suffix}", f"c2v rst{suffix}"))
    for reading in readings:
        pairs += [(f"c2v {reading}", f"c2v {reading} {context}") for context in contexts if context != DEFAULT_CONTEXT]
        pairs.append((f"c2v {reading} headings", f"c2v {reading} sections"))
    if not args.no_minilm:
        pairs += [
            (base.replace("c2v", "all-minilm-l6-v2"), name.replace("c2v", "all-minilm-l6-v2")) for base, name in pairs
        ]
    pairs = [(base, name) for base, name in pairs if base in rows and name in rows]
    comparisons = {f"{name} - {base}": compared(rows, base, name) for base, name in pairs}
    if args.json:
        write_run(
            args.json,
            "bench/rst_reading/score.py",
            sys.argv[1:] if argv is None else argv,
            corpus_digest=digest,
            questions=len(questions),
            rows=rows,
            comparisons=comparisons,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
