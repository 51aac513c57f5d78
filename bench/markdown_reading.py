"""What reading Markdown as it renders saves: the bytes, chunks and decoder tokens of a folder's Markdown files read
as their source (front matter aside) and as the Markdown format reads them (comment blocks and link definitions
left out), and in how many of the source's chunks less than a quarter of the text (their lead aside) rendered.

    python bench/markdown_reading.py --folder /usr/share/doc/nodejs/api
    python bench/markdown_reading.py --folder DIR --json bench/results/markdown_reading_DIR.json

The chunks are an ingest's own (its chunker and defaults, with the default preset's tokenizer). Tokenizing only: no
model runs; two ingests of a folder, before and after, are in bench/results/notes/markdown-reading.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from common import recorded_command

from c2v_rag.core.config import read_config
from c2v_rag.documents.chunking import TokenChunker
from c2v_rag.documents.documents import iter_documents
from c2v_rag.documents.files import ReadLog, ReadOptions
from c2v_rag.documents.formats.base import led_by_title, read_text
from c2v_rag.documents.formats.markdown import MARKDOWN_SUFFIXES, front_matter, shown_markdown
from c2v_rag.hub.presets import resolve_variant_path
from c2v_rag.hub.sources import load_tokenizer, resolve_reference
from c2v_rag.rag.ingestion.config import IngestConfig


def source_text(file: Path) -> str | None:
    """``file`` as it was read before comments and definitions were left out: its source under its front matter's
    title."""
    text = read_text(file, ReadOptions(), ReadLog())
    if text is None:
        return None
    fields, body = front_matter(text, str(file))
    title = fields.get("title") if isinstance(fields.get("title"), str) else None
    return led_by_title(title, body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    settings = IngestConfig()
    chunker = TokenChunker.for_variant(None, settings.chunk_size, settings.chunk_overlap, context=settings.context)
    config = read_config(resolve_variant_path(None))
    tokenizer = load_tokenizer(resolve_reference(config.decoder, config.decoder_revision))
    files = sorted(f for f in args.folder.rglob("*") if f.is_file() and f.suffix.lower() in MARKDOWN_SUFFIXES)
    totals = {"files": 0, "source_bytes": 0, "read_bytes": 0, "source_chunks": 0, "read_chunks": 0}
    totals |= {"source_tokens": 0, "read_tokens": 0, "source_chunks_mostly_unseen": 0}
    for file in files:
        source = source_text(file)
        docs = list(iter_documents(file, log=ReadLog()))
        if source is None or len(docs) != 1:
            continue
        totals["files"] += 1
        for kind, text in (("source", source), ("read", docs[0].text)):
            chunks = list(chunker.chunk(text))
            totals[f"{kind}_bytes"] += len(text.encode())
            totals[f"{kind}_chunks"] += len(chunks)
            ids = tokenizer([c.text for c in chunks], add_special_tokens=False)["input_ids"] if chunks else []
            totals[f"{kind}_tokens"] += sum(len(i) for i in ids)
            if kind == "source":
                own = [c.text[c.lead_chars :] for c in chunks]
                totals["source_chunks_mostly_unseen"] += sum(len(shown_markdown(t).strip()) < len(t) / 4 for t in own)
    share = {
        k: round(1 - totals[f"read_{k}"] / max(1, totals[f"source_{k}"]), 4) for k in ("bytes", "chunks", "tokens")
    }
    print(
        f"{totals['files']} Markdown files: {totals['source_bytes']:,} -> {totals['read_bytes']:,} bytes, "
        f"{totals['source_chunks']:,} -> {totals['read_chunks']:,} chunks, {totals['source_tokens']:,} -> "
        f"{totals['read_tokens']:,} decoder tokens (saved {share['bytes']:.1%} / {share['chunks']:.1%} / "
        f"{share['tokens']:.1%}); in {totals['source_chunks_mostly_unseen']:,} of the source's chunks less than a "
        "quarter of the text rendered"
    )
    if args.json:
        report = {
            "command": recorded_command("bench/markdown_reading.py", sys.argv[1:]),
            "folder": args.folder.name,
            **totals,
            "saved": share,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
