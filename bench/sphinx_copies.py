"""A Sphinx HTML build whose ``.buildinfo`` is gone (as in Debian's packages), ingested as the walk reads it now (the
pages alone) and as it read it before (every page again from ``_sources/``): what a search finds, and what the
ingest costs.

    taskset -c 0 env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python bench/sphinx_copies.py \\
        --build /usr/share/doc/linux-doc-6.1/html --pages 24 --json sphinx_copies.json

The ``--pages`` smallest pages of the build (by their HTML's size) whose source copy
(``_sources/<page>.rst.txt``) has a section heading under its title are copied, with both copies and the build's
``searchindex.js``, to a temporary folder, and ingested twice with ``c2v_rag.ingest``'s defaults: as they are (the
walk tells the build by its search index and leaves ``_sources`` out) and with the search index removed (the walk
then reads the source copies as plain text, as it did before it knew that sign). The questions are each page's
section headings (the first ``--per-page``), the answer the page they head, either copy. Each run searches them
with ``c2v_rag.search_many``'s defaults (top 10, reranked as ``rerank="auto"`` does on this CPU) and gives MRR@10 by
page, how many distinct pages the ten hits hold, and the ingest's chunks and seconds (one process, the ingests in
turn; speed is not what this measures). With ``--sources`` (the project's own folder: linux-doc's
``Documentation/``) the same pages' sources are ingested alone too, read as reStructuredText, and paired with the
HTML alone: which copy the warning's two excludes leave.
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

SOURCES = "_sources"
SEARCH_INDEX = "searchindex.js"
# The source copies themselves, and translations (questions in Italian or Chinese for an English model);
# index pages are left out too, being lists of links.
SKIPPED = (SOURCES + "/", "translations/")
# A reStructuredText section title: a line of text over a line of one punctuation character, at least as long.
_SECTION = re.compile(r"^(?P<title>[^\s].*?)\s*\n(?P<rule>([=\-~^\"'`#*+<>:._])\3{2,})\s*$", re.MULTILINE)


def headings_of(source: Path, per_page: int) -> list[str]:
    """A page's section titles after its first (the page's title), without inline markup, at most ``per_page``."""
    titles = []
    for match in _SECTION.finditer(source.read_text(encoding="utf-8", errors="replace")):
        if len(match["rule"]) < len(match["title"]):
            continue
        text = re.sub(r"`+|\*+|:\w+:", "", match["title"]).strip()
        if len(text) >= 4 and text not in titles:
            titles.append(text)
    return titles[1 : per_page + 1]


def pick_pages(build: Path, pages: int, sources: Path | None = None) -> list[str]:
    """The ``pages`` smallest pages of ``build`` (paths without ``.html``) whose source copy has a question (and,
    given the project's ``sources``, a source there), leaving out translations and index pages."""
    found = []
    for html in build.rglob("*.html"):
        page = html.relative_to(build).with_suffix("").as_posix()
        source = build / SOURCES / f"{page}.rst.txt"
        if page.startswith(SKIPPED) or page.endswith("/index") or page == "index":
            continue
        if sources is not None and source_of(sources, page) is None:
            continue
        if source.is_file() and headings_of(source, 1):
            found.append((html.stat().st_size, page))
    return [page for _, page in sorted(found)[:pages]]


def page_of_hit(doc_id: str | None, build: Path) -> str:
    """The page a hit's document is a copy of: ``a/b`` for ``a/b.html`` and ``_sources/a/b.rst.txt``."""
    relative = Path(doc_id or "").relative_to(build).as_posix()
    relative = relative.removeprefix(SOURCES + "/")
    return relative.removesuffix(".html").removesuffix(".rst.txt")


def run(build: Path, store: Path, questions: list[tuple[str, str]], label: str) -> dict:
    _, scores = pages_found(build, store, questions, lambda doc_id: page_of_hit(doc_id, build))
    return {"read": label, **scores}


def source_of(sources: Path, page: str) -> Path | None:
    """A page's source in the project's folder ``sources``: ``<page>.rst``, or compressed as Debian ships it."""
    return next((f for f in (sources / f"{page}.rst", sources / f"{page}.rst.gz") if f.is_file()), None)


def page_of_source(doc_id: str | None, sources: Path) -> str:
    """The page a hit on a source names: ``a/b`` for ``a/b.rst`` and ``a/b.rst.gz``."""
    return Path(doc_id or "").relative_to(sources).as_posix().removesuffix(".gz").removesuffix(".rst")


def paired(before: list[float], after: list[float]) -> dict:
    """The mean of ``after - before`` over the same questions, and how many rose and fell."""
    gains = [b - a for a, b in zip(before, after, strict=True)]
    return {
        "mean": round(statistics.mean(gains), 4),
        "better": sum(d > 0 for d in gains),
        "worse": sum(d < 0 for d in gains),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, required=True, help="a Sphinx HTML build with its _sources folder")
    parser.add_argument("--pages", type=int, default=24)
    parser.add_argument("--per-page", type=int, default=4, help="questions (section headings) taken from each page")
    parser.add_argument(
        "--sources",
        type=Path,
        default=None,
        help="the project's sources (linux-doc's Documentation/): also ingest the pages' sources alone, read as "
        "reStructuredText, against the HTML alone; only pages with a source there are picked",
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if not (args.build / SEARCH_INDEX).is_file():
        parser.error(f"{args.build} holds no {SEARCH_INDEX}: not a Sphinx HTML build")
    pages = pick_pages(args.build, args.pages, args.sources)
    if len(pages) < 2:
        parser.error(f"{args.build} holds fewer than two pages with a source copy in {SOURCES}/")
    questions = [
        (q, page) for page in pages for q in headings_of(args.build / SOURCES / f"{page}.rst.txt", args.per_page)
    ]
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        build = Path(scratch) / "html"
        for page in pages:
            for name in (f"{page}.html", f"{SOURCES}/{page}.rst.txt"):
                (build / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(args.build / name, build / name)
        shutil.copy2(args.build / SEARCH_INDEX, build / SEARCH_INDEX)
        runs.append(run(build, Path(scratch) / "store-pages", questions, "the pages alone (now)"))
        (build / SEARCH_INDEX).unlink()
        runs.append(run(build, Path(scratch) / "store-both", questions, "pages and source copies (before)"))
        if args.sources is not None:
            sources = Path(scratch) / "sources"
            for page in pages:
                found = source_of(args.sources, page)
                assert found is not None  # pick_pages kept only such pages
                (sources / page).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(found, sources / f"{page}{''.join(found.suffixes)}")
            _, scores = pages_found(
                sources, Path(scratch) / "store-sources", questions, lambda d: page_of_source(d, sources)
            )
            runs.append({"read": "the sources alone", **scores})
    ranks = [run.pop("reciprocal_ranks") for run in runs]
    summary = {
        "pages": len(pages),
        "questions": len(questions),
        "mrr_at_10_now_minus_before": paired(ranks[1], ranks[0]),
        "runs": runs,
    }
    if args.sources is not None:
        summary["mrr_at_10_sources_minus_html"] = paired(ranks[0], ranks[2])
    print(json.dumps(summary, indent=1))
    if args.json:
        report = {"command": recorded_command("bench/sphinx_copies.py", sys.argv[1:]), "page_list": pages, **summary}
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
