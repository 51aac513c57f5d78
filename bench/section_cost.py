"""What naming each chunk's section costs ingest's chunking: the same documents chunked as ingest chunks them (each
Markdown text's outline found, each chunk told its section) and with no outline (as every text was chunked before
chunks carried ``section``, and as plain text still is), alternately in one process, CPU seconds of the best of
``--repeats``.

Only the chunker runs (the decoder's tokenizer counting, the splitter, the outline), no model: the ratio is of
chunking alone, which an ingest spends a small part of its time on (the embedding is the rest).

    python bench/section_cost.py FOLDER...                      # the default preset's tokenizers
    python bench/section_cost.py docs --json bench/results/section_cost_docs.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import recorded_command, speed_flags_note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="folders or files to read, as ingest reads them")
    parser.add_argument("--context", default="lead", help="chunk_context (default: lead, ingest's default)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args()

    from c2v_rag.documents.chunking import TokenChunker
    from c2v_rag.documents.documents import iter_documents

    docs = [doc for folder in args.folders for doc in iter_documents(folder)]
    chunker = TokenChunker.for_variant(None, 200, 20, context=args.context)
    list(chunker.iter_chunks("Warm.\n\nUp."))  # the splitter's import, outside the timings

    def chunk(outlined: bool) -> list:
        return [
            chunk
            for doc in docs
            for chunk in chunker.iter_chunks(doc.text, doc.lead, plain_text=doc.plain_text or not outlined)
        ]

    seconds: dict[str, list[float]] = {"with sections": [], "without": []}
    for _ in range(args.repeats):
        for name, outlined in (("with sections", True), ("without", False)):
            start = time.process_time()
            chunks = chunk(outlined)
            seconds[name].append(time.process_time() - start)
    with_sections = chunk(True)
    if args.context in ("none", "lead"):  # there the outline changes no chunk, only its metadata
        assert [c.text for c in with_sections] == [c.text for c in chunks]
    best = {name: min(times) for name, times in seconds.items()}
    result = {
        "command": recorded_command(
            "bench/section_cost.py",
            [*map(str, args.folders), "--context", args.context, "--repeats", str(args.repeats)],
        ),
        "cpu": speed_flags_note(),
        "documents": len(docs),
        "characters": sum(len(doc.text) for doc in docs),
        "chunks": len(chunks),
        "chunks_with_a_section": sum(bool(c.section) for c in with_sections),
        "cpu_seconds_best": best,
        "cpu_seconds_all": seconds,
        "ratio_with_to_without": best["with sections"] / best["without"],
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
