"""Which heading pseudo-pairs adapt makes from a folder: every chunk that gives one, its query and positive.

adapt pairs a section's heading (or a document's title) with the text under it. This lists those pairs for a
folder, as adapt reads and chunks it (the default preset's tokenizer, 200-token chunks, overlap 20), and with
``--compare`` sets them against pairs recorded before (by an earlier version of the code): which chunks gained or
lost a pair, and how many queries changed. No model runs; it reads and chunks alone.

    python bench/adapt/heading_pairs.py DIR --pairs before.json              # at the earlier commit
    python bench/adapt/heading_pairs.py DIR --compare before.json --json result.json

``--pairs`` holds the documents' text (the positives' starts): keep it out of the repository. ``--json`` holds the
counts, and the queries of the chunks that gained or lost a pair.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import common  # noqa: E402

from c2v_rag.documents.chunking import TokenChunker  # noqa: E402
from c2v_rag.training.pseudo.chunks import iter_chunks  # noqa: E402
from c2v_rag.training.pseudo.config import PseudoPairsConfig  # noqa: E402
from c2v_rag.training.pseudo.headings import heading_pair  # noqa: E402
from c2v_rag.training.pseudo.make import read_documents  # noqa: E402

Pairs = dict[str, dict[str, str]]


def pairs_of(folder: Path) -> tuple[int, Pairs]:
    """(chunks read, chunk id -> its heading pair's query and the positive's start)."""
    config = PseudoPairsConfig()
    chunker = TokenChunker.for_variant(None, config.chunk_size, config.chunk_overlap)
    pairs: Pairs = {}
    chunks = 0
    root = str(folder.resolve()) + "/"
    for chunk in iter_chunks(read_documents(folder, desc="reading", show_progress=False), chunker):
        chunks += 1
        pair = heading_pair(chunk, first_of_document=chunk.id.endswith("#0"))
        if pair is not None:
            # A chunk's id starts with its file's path: kept relative to the folder, so that runs compare anywhere.
            pairs[chunk.id.removeprefix(root)] = {"query": pair.query, "positive": pair.positive[:200]}
    return chunks, pairs


def compare(now: Pairs, before: Pairs) -> dict[str, object]:
    both = sorted(set(now) & set(before))
    lost = {k: before[k]["query"] for k in sorted(set(before) - set(now))}
    gained = {k: now[k]["query"] for k in sorted(set(now) - set(before))}
    changed = [[before[k]["query"], now[k]["query"]] for k in both if now[k]["query"] != before[k]["query"]]
    positives = sum(now[k]["positive"] != before[k]["positive"] for k in both)
    print(
        f"before {len(before)}, now {len(now)}: {len(lost)} lost, {len(gained)} gained, "
        f"{len(changed)} queries changed, {positives} positives changed"
    )
    for kind, found in (("lost", lost), ("gained", gained)):
        for key, query in list(found.items())[:12]:
            print(f"  {kind}: {key} | {query[:70]}")
    return {
        "pairs_before": len(before),
        "pairs_now": len(now),
        "lost": lost,
        "gained": gained,
        "queries_changed": len(changed),
        "queries_changed_first": changed[:10],
        "positive_changed": positives,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--pairs", type=Path, help="write every pair here, for a later --compare")
    parser.add_argument("--compare", type=Path, help="a --pairs file written before, to set these pairs against")
    parser.add_argument("--json", type=Path, help="write the counts and the comparison here")
    args = parser.parse_args()
    chunks, pairs = pairs_of(args.folder)
    print(f"{chunks} chunks, {len(pairs)} heading pairs")
    if args.pairs:
        args.pairs.write_text(json.dumps(pairs, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    result: dict[str, object] = {
        "command": common.recorded_command("bench/adapt/heading_pairs.py", sys.argv[1:]),
        "chunks": chunks,
        "heading_pairs": len(pairs),
    }
    if args.compare:
        result["comparison"] = compare(pairs, json.loads(args.compare.read_text(encoding="utf-8")))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
