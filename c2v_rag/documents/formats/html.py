"""HTML pages as Markdown: headings, lists, tables and code kept, links and images as their text, the page's chrome
(scripts, styles, navigation, sidebars, footers) left out. One document per file."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from c2v_rag.core.extras import Requirement
from c2v_rag.documents.formats.base import FileFormat, parse_or_skip, titled_document, within_size
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.sniffing import HEAD_BYTES, binary_reason
from c2v_rag.documents.source_document import SourceDocument

# Elements that are never a page's content.
_DROPPED_TAGS = [
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "canvas",
    "iframe",
    "object",
    "embed",
    "nav",
    "aside",
    "footer",
    "form",
    "button",
    "select",
    "hr",
]
# ARIA roles and class names that documentation generators give their navigation (Sphinx, Texinfo, MkDocs, DocBook's
# "navheader"/"navfooter" and Valgrind's "nav" tables of previous/up/next links, Bootstrap's "nav" lists...).
_DROPPED_ROLES = {"navigation", "search", "contentinfo", "banner"}
_DROPPED_CLASSES = {
    "nav",
    "navheader",
    "navfooter",
    "nav-panel",
    "navigation",
    "navbar",
    "sidebar",
    "sphinxsidebar",
    "related",
    "breadcrumb",
    "breadcrumbs",
    "header",
    "footer",
    "skip-link",
    "headerlink",
    "toc",
    "md-sidebar",
    "md-header",
    "md-footer",
}
_BLANK_RUNS = re.compile(r"\n{3,}")
# How deep elements may nest before those below are read as their text alone: markdownify recurses a few frames per
# level, and Python's own parser closes no implied end tags, so a report of 400 unclosed <li> nests 400 deep and
# ran out of stack. Real pages nest a few dozen deep.
MAX_NESTING = 64
_PERMALINK_MARKS = {"#", "¶", "§", "🔗"}
# "Page | Site", "Page — Site": a <title>'s site name, which every page of a site repeats.
_SITE_SUFFIX = re.compile(r"\s+[|\u2014\u2013]\s+")


class Html(FileFormat):
    name = "HTML"
    suffixes = (".html", ".htm", ".xhtml")
    page_rank = 1
    requires = (Requirement("bs4", "beautifulsoup4", "html"), Requirement("markdownify", "markdownify", "html"))

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        if not within_size(file, options, log):
            return
        data = file.read_bytes()
        reason = binary_reason(data[:HEAD_BYTES])
        if reason is not None:
            log.skip_file(file, f"not an HTML file: {reason}")
            return
        parsed = parse_or_skip(file, log, "HTML", lambda: html_to_markdown(data))
        if parsed is not None:
            yield titled_document(file, root, *parsed)


def html_to_markdown(data: bytes | str) -> tuple[str | None, str]:
    """A page's title (its ``<h1>`` where it has one, else its ``<title>``, else its first ``<h1>``) and its content
    as Markdown."""
    from bs4 import Comment, Declaration, Doctype, ProcessingInstruction
    from markdownify import MarkdownConverter

    soup = parse_markup(data)
    head_title = _SITE_SUFFIX.split(soup.title.get_text(" ", strip=True))[0] if soup.title else None
    for element in soup(_DROPPED_TAGS):
        element.decompose()
    for element in soup.find_all(_is_chrome):
        element.decompose()
    for node in soup.find_all(string=lambda s: isinstance(s, (Comment, Declaration, Doctype, ProcessingInstruction))):
        node.extract()  # <?xml ...?> and comments are no text
    for link in soup.find_all("a", href=True):
        if str(link["href"]).startswith("#") and link.get_text(strip=True) in _PERMALINK_MARKS:
            link.decompose()  # a heading's permalink mark, "#" or "¶"
    for table in soup.find_all("table"):
        if _is_layout(table):
            _as_blocks(table)
    for pre in soup.find_all("pre"):
        # One example in several tabs (Node.js's ESM and CommonJS): each its own lines, not glued to the last.
        for code in pre.find_all("code", recursive=False)[:-1]:
            after = code.next_sibling
            if not code.get_text().endswith("\n") and not (isinstance(after, str) and after.startswith("\n")):
                code.insert_after("\n")
    if soup.head is not None:
        soup.head.decompose()
    mains = soup.find_all("main") or soup.find_all(role="main") or soup.find_all("article")
    content: Any = mains[0] if len(mains) == 1 else soup
    # One <h1> is the page's title. Several are its sections (a one-page manual's "Abstract", "Contents", ...), which
    # the <title> names better where there is one: Debian's Python policy was titled "Abstract", which then led
    # every later chunk.
    headings = content.find_all("h1", limit=2)
    first = headings[0].get_text(" ", strip=True) if headings else None
    title = first if len(headings) == 1 or not head_title else head_title
    _flatten_below(content, MAX_NESTING)
    # No escapes: the text is read by the models and BM25, not rendered, and BM25 split an escaped identifier
    # (include\_hidden) into other terms than the query's include_hidden, so sparse search missed it.
    converter = MarkdownConverter(
        heading_style="ATX",
        bullets="-",
        strip=["a", "img"],
        escape_misc=False,
        escape_underscores=False,
        escape_asterisks=False,
    )
    text = _BLANK_RUNS.sub("\n\n", converter.convert_soup(content)).strip()
    return (title or None), text


def _flatten_below(root: Any, limit: int) -> None:
    """Each element ``limit`` levels below ``root`` that holds elements of its own keeps its text alone, a string a
    line: what lies deeper is read, without its Markdown."""
    from bs4 import NavigableString, Tag

    depth = {id(root): 0}
    boundary = []
    for element in root.descendants:  # parents come before their children
        if isinstance(element, Tag):
            level = depth[id(element.parent)] + 1
            depth[id(element)] = level
            if level == limit and element.find(True) is not None:
                boundary.append(element)
    for element in boundary:
        text = "\n".join(element.stripped_strings)
        element.clear()
        element.append(NavigableString(text))


def parse_markup(data: bytes | str) -> Any:
    """``data`` (HTML, XHTML, or an EPUB's XML) as a BeautifulSoup tree, read by Python's own HTML parser: it needs no
    lxml, expands no entities a file defines, and reads XHTML as the HTML it is, so bs4's warning about XML read as
    HTML is silenced. The page's own <meta charset> or BOM decides the encoding (bs4's UnicodeDammit)."""
    from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        return BeautifulSoup(data, "html.parser")


def _is_layout(table: Any) -> bool:
    """Whether ``table`` lays a page out rather than holds data: it holds another table, says it is presentation,
    has one column, or most of its cells are empty (navigation bars of icons, spacer cells)."""
    if table.get("role") in ("presentation", "none") or table.find("table") is not None:
        return True
    rows = [r for r in table.find_all("tr") if r.find_parent("table") is table]
    cells = [c for r in rows for c in r.find_all(["td", "th"], recursive=False)]
    filled = sum(1 for c in cells if c.get_text(strip=True))
    return len(cells) <= len(rows) or filled * 2 <= len(cells)


def _as_blocks(table: Any) -> None:
    """A layout table's own rows and cells as plain blocks, so its text reads as paragraphs (nested data tables,
    judged on their own, are left as tables)."""
    parts = [
        e for e in table.find_all(["tbody", "thead", "tfoot", "tr", "td", "th"]) if e.find_parent("table") is table
    ]
    for element in [table, *parts]:
        element.name = "div"
        element.attrs = {}


def _is_chrome(element: Any) -> bool:
    attrs = getattr(element, "attrs", None)
    if not attrs:
        return False
    if attrs.get("role") in _DROPPED_ROLES:
        return True
    classes = attrs.get("class") or []
    return any(c in _DROPPED_CLASSES for c in classes)
