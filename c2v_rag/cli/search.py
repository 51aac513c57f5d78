"""``c2v-rag search``: the chunks of an ingested collection nearest to a query, as text or JSON."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from c2v_rag.cli.arguments import (
    add_filter,
    add_model_options,
    add_qdrant_options,
    add_query_options,
    collection_from,
    filter_from,
)
from c2v_rag.core.wording import one_line

if TYPE_CHECKING:
    from c2v_rag.cli.arguments import Subparsers


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "search",
        help="search an ingested collection",
        description="Print the chunks nearest to QUERY: score, source and a snippet. QUERY '-' reads queries from "
        "standard input, one a line, with the model loaded once: typed at a 'query>' prompt, or a file's lines "
        "(c2v-rag search - < questions.txt), each line's hits printed under it in order (JSON Lines with --json).",
    )
    parser.add_argument("query", help="the query, or '-' for queries from standard input, one a line")
    parser.add_argument("-k", "--top-k", type=int, default=5, help="number of results (default 5)")
    add_qdrant_options(parser)
    add_query_options(parser, task_help="registered task whose instruction the query gets")
    parser.add_argument(
        "--snippet-chars",
        type=snippet_chars,
        default=300,
        metavar="N",
        help="characters of each hit's text to show (default 300; 0: none)",
    )
    parser.add_argument("--json", action="store_true", help="print the hits as JSON")
    add_filter(parser, "metadata conditions the hits must meet")
    parser.add_argument(
        "--mode",
        choices=["dense", "sparse", "hybrid"],
        default="dense",
        help="dense vectors (default), BM25, or both fused (needs ingest --sparse bm25)",
    )
    parser.add_argument(
        "--fusion",
        choices=["rrf", "dbsf"],
        default="rrf",
        help="how --mode hybrid fuses the two lists: reciprocal rank (default) or distribution-based score fusion",
    )
    parser.add_argument(
        "--group-by-document",
        action="store_true",
        help="the top-k documents, each shown by its best chunk, rather than the top-k chunks",
    )
    parser.add_argument(
        "--rerank",
        type=rerank_depth,
        default="auto",
        metavar="N|auto|none",
        help="rerank the top N hits (N >= --top-k) by the decoder's likelihood of the query given each, fused with "
        "their scores; each hit then shows its fused score beside its first-stage one. auto (the default): the "
        "top 20 where the decoder is fast (int8 with the int8 extra, bf16 in the CPU's hardware, a GPU; 1-2 s a "
        "query on two cores), the top 10 in int8 on AVX2, none where it would compute in float32, or what "
        "$C2V_RAG_RERANK says (docs/ingest-and-search.md, 'Reranking')",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="intra-op CPU threads (default 1: measured fastest for one query on a busy machine)",
    )
    add_model_options(parser, "variant directory or preset (default: the one the collection was built with)")
    # run() closes the store it opened before returning, so the process may end without its teardown (app.py).
    parser.set_defaults(exit_fast=True)
    return parser


def run(args: argparse.Namespace) -> int:
    """Search and print the hits: ranked lines with a snippet each, or ``--json``."""
    import json

    from c2v_rag.core.devices import configure_cpu_threads
    from c2v_rag.rag.options import SearchOptions

    # One query is latency-bound: one thread unless told otherwise (docs/serving.md, "CPU threads").
    configure_cpu_threads(args.threads)
    # The SearchOptions /v1/search builds too, here from the flags (argparse has checked mode and fusion).
    options = SearchOptions(
        task=args.task,
        instruction=args.instruction,
        examples=args.example,
        filter=filter_from(args.filter),
        mode=args.mode,
        fusion=args.fusion,
        group_by_document=args.group_by_document,
        rerank=args.rerank,
    )
    if args.query == "-":
        return _search_lines(args, options)
    hits = collection_from(args).search(args.query, args.top_k, options=options)
    if args.json:
        print(json.dumps([h.model_dump() for h in hits], ensure_ascii=False, indent=2))
    else:
        _print_hits(hits, args.snippet_chars, _score_kind(args))
    return 0


# Queries from a file are searched this many at a time: one embedding batch and one Qdrant request each, and their
# hits printed before the next slice starts, so output flows and a Ctrl-C keeps what was printed.
_LINES_PER_CALL = 32


def _search_lines(args: argparse.Namespace, options: Any) -> int:
    """``QUERY -``: each line of standard input a query, the model loaded once. At a terminal, a prompt answered
    line by line until end of input (Ctrl-D); from a file or a pipe, every line's hits in order, with a bar of the
    queries done on stderr (the lines read first: none is an error before the store or the model opens)."""
    import sys

    from tqdm.auto import tqdm

    from c2v_rag.cli.errors import report
    from c2v_rag.core.progress_bar import unsized_terminal

    if sys.stdin.isatty():
        try:
            import readline  # noqa: F401  (the prompt then edits its line and recalls earlier queries)
        except ImportError:  # not on Windows
            pass
        collection = collection_from(args)
        # What the first query would fail on fails now, before one is typed (a wrong name, another model's
        # collection, a filter key no chunk has), and the model and reranker load now, not at the first query.
        chunks = collection.count()
        collection.prepare_search(args.top_k, options=options)
        print(
            f"{chunks} chunks in {collection.name!r}: a query a line; Ctrl-C drops the line or the search under way, "
            "Ctrl-D ends",
            file=sys.stderr,
        )
        while True:
            # As in Python's own prompt: Ctrl-C drops what is under way and asks again, an error is said and the
            # prompt goes on (a server that went away may come back), end of input ends.
            try:
                query = input("query> ").strip()
                if query:
                    _print_query_hits(query, collection.search(query, args.top_k, options=options), args)
            except KeyboardInterrupt:
                print()
            except EOFError:
                print()
                return 0
            except Exception as err:
                report(err, args.verbose)
    queries = [line.strip() for line in sys.stdin if line.strip()]
    if not queries:
        raise ValueError("QUERY '-' reads queries from standard input, one a line, and none came: pipe a file in")
    collection = collection_from(args)
    with tqdm(total=len(queries), desc="Searching", unit="query", **unsized_terminal(sys.stderr)) as bar:
        for start in range(0, len(queries), _LINES_PER_CALL):
            batch = queries[start : start + _LINES_PER_CALL]
            found = collection.search_many(batch, args.top_k, options=options)
            # The bar steps aside while the hits print: on one terminal they would share its line.
            with tqdm.external_write_mode(file=sys.stdout):
                for query, hits in zip(batch, found):
                    _print_query_hits(query, hits, args)
                sys.stdout.flush()
            bar.update(len(batch))
    return 0


def _print_query_hits(query: str, hits: list[Any], args: argparse.Namespace) -> None:
    """One query's hits: a JSON line ``{"query", "hits"}`` with ``--json``, else the query and its ranked lines."""
    import json

    if args.json:
        print(json.dumps({"query": query, "hits": [h.model_dump() for h in hits]}, ensure_ascii=False))
        return
    print(f"query: {query}")
    _print_hits(hits, args.snippet_chars, _score_kind(args))
    print()


# What the score column is, by mode (and fusion): a hybrid search's fused scores (1.0000, 0.6667, 0.5000 with
# rrf) read as cosines otherwise. Dense scores are cosines, the number users expect, so they go unlabelled.
_SCORE_KINDS = {
    "dense": None,
    "sparse": "scores: BM25 (higher is better; not cosines)",
    "rrf": "scores: fused ranks (reciprocal rank fusion of the dense and BM25 rankings: 1.0 is first in "
    "both, 0.67 second in both), not cosines",
    "dbsf": "scores: fused scores (the dense and BM25 scores normalised and summed), not cosines",
}


def _score_kind(args: argparse.Namespace) -> str | None:
    """The line above the hits that says what their scores are, for the search's mode and fusion."""
    return _SCORE_KINDS[args.fusion if args.mode == "hybrid" else args.mode]


# The most characters of a hit's section that its line shows: the innermost headings, where they run longer.
SECTION_CHARS = 60


def _print_hits(hits: list[Any], snippet_chars: int, score_kind: str | None = None) -> None:
    """Each hit as a line (rank, score, source, where in it, chunk) and an indented one-line snippet of its text,
    under a line saying what the scores are when they are not cosines."""
    from c2v_rag.documents.payload_keys import LEAD_CHARS_KEY, NODE_KEY, PAGE_LABEL_KEY, ROW_KEY, SECTION_KEY, SHEET_KEY

    where_in_file = (
        (PAGE_LABEL_KEY, "p. {}"),
        (SHEET_KEY, "sheet {}"),
        (ROW_KEY, "row {}"),
        (NODE_KEY, "node {}"),
        (SECTION_KEY, "§ {}"),
    )

    if not hits:
        print("no results")
    elif score_kind:
        print(score_kind)
    for rank, hit in enumerate(hits, 1):
        # One hit a line: a control character in a file's name (a newline) is shown escaped, as ls -b shows it.
        where = one_line(str(hit.source or hit.doc_id or hit.id))
        # Where in its file the hit is: a PDF's page (a deck's slide), a workbook's sheet, a table's row, a manual's
        # node, the section of a page with headings.
        for key, shown in where_in_file:
            value = hit.metadata.get(key)
            if key == SECTION_KEY and isinstance(value, str):
                value = shown_section(one_line(value), SECTION_CHARS)
            where += f"  {shown.format(value)}" if value not in (None, "") else ""
        chunk = f"  (chunk {hit.chunk_index})" if hit.chunk_index is not None else ""
        fused = f"  (reranked {hit.rerank_score:+.3f})" if hit.rerank_score is not None else ""
        print(f"{rank:2d}. {hit.score:.4f}  {where}{chunk}{fused}")
        # The chunk's own text: a lead (its document's title, ingest's chunk_context="lead") is not what was found.
        if snippet_chars:
            print("    " + snippet(hit.text[int(hit.metadata.get(LEAD_CHARS_KEY) or 0) :], snippet_chars))


def shown_section(section: str, chars: int) -> str:
    """A section's path (``A › B › C``) cut to about ``chars`` characters from its start, whole headings at a
    time, the innermost always kept: ``… › B › C``."""
    from c2v_rag.documents.outline import innermost
    from c2v_rag.documents.payload_keys import SECTION_SEPARATOR

    if len(section) <= chars:
        return section
    headings = section.split(SECTION_SEPARATOR)
    ellipsis = "…" + SECTION_SEPARATOR
    kept = innermost(headings, chars - len(ellipsis))
    return ellipsis + SECTION_SEPARATOR.join(kept) if len(kept) < len(headings) else SECTION_SEPARATOR.join(kept)


def snippet(text: str, chars: int) -> str:
    """``text`` on one line, cut to about ``chars`` characters: at a word's end where one falls in the last
    third, else mid-word (a first word longer than ``chars`` must still show), then " ..."."""
    line = " ".join(text.split())
    if len(line) <= chars:
        return line
    cut = line.rfind(" ", 0, chars + 1)
    return (line[:cut] if cut > chars * 2 // 3 else line[:chars]).rstrip() + " ..."


def snippet_chars(value: str) -> int:
    """``--snippet-chars``'s value: 0 or more."""
    try:
        chars = int(value)
    except ValueError:
        chars = -1
    if chars < 0:
        raise argparse.ArgumentTypeError(f"{value!r}: pass the characters to show, 0 or more (0: no snippet)")
    return chars


def rerank_depth(value: str) -> int | str | None:
    """``--rerank``'s value: a number of hits, ``auto`` or ``none``."""
    from c2v_rag.rag.retrieval.reranking import rerank_from_text

    try:
        return rerank_from_text(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
