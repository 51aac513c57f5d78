"""A folder that holds its pages in two formats, ingested with every copy and with one copy a page: what a search
finds, and what the ingest costs.

    taskset -c 0 env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python bench/page_formats.py \\
        --folder /usr/share/doc/nodejs/api --pages 24 --json page_formats.json

Node.js's API reference ships each page as Markdown and as HTML (Debian's ``nodejs-doc``). The ``--pages`` smallest
pages held in both ``.md`` and ``.html`` are copied to a temporary folder and ingested twice with ``c2v_rag.ingest``'s
defaults: with ``every_format=True`` (both copies of every page, as before) and without (the Markdown alone). The
questions are each page's own ``##``/``###`` headings (an API's name, "Class: dns.Resolver"; the first
``--per-page`` of each, inline code marks dropped), the answer the page they head, either copy. Each run searches
them with ``c2v_rag.search_many``'s defaults (top 10, reranked as ``rerank="auto"`` does on this CPU), and gives
MRR@10 by page, how many distinct pages the ten hits hold, and the ingest's chunks and seconds (one process, both
ingests in turn; speed is not what this measures).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from common import pages_found, recorded_command

_HEADING = re.compile(r"^#{2,3} +(.+?) *$", re.MULTILINE)


def pick_pages(folder: Path, pages: int) -> list[str]:
    """The stems of the ``pages`` smallest pages ``folder`` holds as both ``.md`` and ``.html`` (by the Markdown's
    size), each with at least one question."""
    both = [md for md in folder.glob("*.md") if md.with_suffix(".html").is_file() and questions_of(md, 1)]
    return [md.stem for md in sorted(both, key=lambda md: (md.stat().st_size, md.name))[:pages]]


def questions_of(markdown: Path, per_page: int) -> list[str]:
    """A page's first ``per_page`` second- and third-level headings, without inline code marks or link syntax."""
    found = []
    for heading in _HEADING.findall(markdown.read_text(encoding="utf-8")):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip()
        if len(text) >= 4 and text not in found:
            found.append(text)
    return found[:per_page]


def page_of_hit(doc_id: str | None) -> str:
    return Path(doc_id or "").stem


def run(folder: Path, store: Path, questions: list[tuple[str, str]], every_format: bool) -> dict:
    result, scores = pages_found(folder, store, questions, page_of_hit, every_format=every_format)
    return {"every_format": every_format, **scores, "copies_left_out": result.files_in_other_formats}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", type=Path, required=True, help="a folder of pages as .md beside .html")
    parser.add_argument("--pages", type=int, default=24)
    parser.add_argument("--per-page", type=int, default=4, help="questions (headings) taken from each page")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    stems = pick_pages(args.folder, args.pages)
    if len(stems) < 2:
        parser.error(f"{args.folder} holds fewer than two pages as both .md and .html")
    questions = [(q, stem) for stem in stems for q in questions_of(args.folder / f"{stem}.md", args.per_page)]
    with tempfile.TemporaryDirectory() as scratch:
        pages = Path(scratch) / "pages"
        pages.mkdir()
        for stem in stems:
            for suffix in (".md", ".html"):
                shutil.copy2(args.folder / f"{stem}{suffix}", pages / f"{stem}{suffix}")
        runs = [run(pages, Path(scratch) / f"store-{every}", questions, every) for every in (True, False)]
    every, once = runs
    paired = [b - a for a, b in zip(every.pop("reciprocal_ranks"), once.pop("reciprocal_ranks"), strict=True)]
    summary = {
        "pages": len(stems),
        "questions": len(questions),
        "mrr_at_10_once_minus_every": round(statistics.mean(paired), 4),
        "questions_better_worse": [sum(d > 0 for d in paired), sum(d < 0 for d in paired)],
        "runs": runs,
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        report = {"command": recorded_command("bench/page_formats.py", sys.argv[1:]), "pages": stems, **summary}
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
