"""Build real documentation text as training data: Markdown pages for ``format: corpus`` (the default), or, with
``--pairs``, a broad, deduplicated set of (query, passage) pairs for ``format: jsonl`` from Debian's documentation
packages as well.

Pages (the default): Markdown to turn into pseudo-pairs (a heading against its section, a sentence against the
rest of its chunk) with ``format: corpus``.

Two kinds of text, both documentation and neither a benchmark's:
- every installed distribution's long description (its README on the package index), one page each;
- the standard library's docstrings: a module's, and each public class's and function's of at least
  ``--min-chars`` characters, one page per module (``# module``, then ``## module.name`` per member);
- with ``--package NAME`` (repeatable), the same for an installed package's public modules: its API reference,
  at most ``--max-modules`` modules a package (shallowest first) and ``--max-page-chars`` a page.

Pairs (``--pairs``): the same pages, plus the HTML, text and Texinfo manuals of the Debian packages named by
``--debian`` (default :data:`DEBIAN_DOCS`: the Python, Linux kernel, PostgreSQL, Django, SQLAlchemy, CMake, Sphinx,
Apache, Debian project manuals, ...) and every Info manual in ``/usr/share/info``, are cut into sections, and each
gives pairs of four kinds (``kind`` in ``sources.jsonl``):

- ``heading``: a section's heading (with the page's title when the heading alone is generic) -> the section's text;
- ``question``: the same where the heading is a question (FAQs, how-tos) -> its answer;
- ``term``: a defined term or API signature (``<dt>``, Texinfo's ``-- Function:``) -> its definition;
- ``title``: a page's title -> its opening text; ``summary``: a section's first sentence -> the rest of it.

Passages are cut at ``--max-passage-chars`` (at a sentence end); every query and every passage occurs once
(normalised), so a batch never holds the same text twice. A page goes wholly to ``train.jsonl`` or to
``heldout.jsonl`` (a hash of its path), ``sources.jsonl`` gives each line's provenance, and ``manifest.json`` the
counts, the packages' versions and licenses (from ``/usr/share/doc/PKG/copyright``), and the files' sha256.

Nothing is read from man pages or dictionaries (``bench/ood`` scores on the Linux man-pages project and the Jargon
File): ``/usr/share/man`` is never opened, those packages are refused, and files named like man pages are skipped.
The folder is never a test set. The same installed versions give the same bytes.

    python experiments/build_docs_corpus.py --out runs/docs-corpus
    python experiments/build_docs_corpus.py --out runs/docs-corpus-api --package numpy --package sqlalchemy
    apt-get install --no-install-recommends --no-remove $(python experiments/build_docs_corpus.py --list-debian)
    python experiments/build_docs_corpus.py --pairs --out runs/docs-pairs
"""

from __future__ import annotations

import argparse
import email.message
import gzip
import hashlib
import importlib
import importlib.util
import inspect
import json
import pkgutil
import re
import subprocess
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

# Modules that open windows, print, start servers or are aliases when imported (private ones are skipped anyway).
_SKIP = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "pydoc_data", "lib2to3"}


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-").lower() or "page"


def package_pages(min_chars: int) -> dict[str, str]:
    """One page per installed distribution with a long description of at least ``min_chars``."""
    pages: dict[str, str] = {}
    for dist in metadata.distributions():
        meta = dist.metadata
        if not isinstance(meta, email.message.Message):  # what importlib.metadata returns: an email message
            continue
        name = meta.get("Name")
        if not name:
            continue
        payload = meta.get_payload()
        body = ((payload if isinstance(payload, str) else "") or meta.get("Description") or "").strip()
        if len(body) < min_chars:
            continue
        summary = (meta.get("Summary") or "").strip()
        title = f"# {name}\n\n{summary}\n\n" if summary and not body.lstrip().startswith("#") else ""
        pages.setdefault(f"packages/{_slug(name)}.md", f"{title}{body}\n")
    return pages


def _members(module: ModuleType, min_chars: int) -> list[tuple[str, str]]:
    out = []
    for name, value in sorted(vars(module).items()):
        documented = inspect.isclass(value) or inspect.isfunction(value) or inspect.isbuiltin(value)
        if name.startswith("_") or not documented:
            continue
        if getattr(value, "__module__", None) != module.__name__:
            continue
        doc = inspect.getdoc(value) or ""
        if len(doc) >= min_chars:
            out.append((name, doc))
    return out


def module_page(mod_name: str, min_chars: int, max_chars: int | None = None) -> str | None:
    """A module's page: its docstring, then each documented public member's; None when it has none or fails to
    import. ``max_chars`` keeps the parts, in order, while they fit (the first always)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = importlib.import_module(mod_name)
    except Exception:  # noqa: BLE001 - platform-specific or optional-dependency modules are absent here
        return None
    parts = []
    doc = inspect.getdoc(module) or ""
    if len(doc) >= min_chars:
        parts.append(doc)
    for name, member_doc in _members(module, min_chars):
        parts.append(f"## {mod_name}.{name}\n\n{member_doc}")
    header = page = f"# {mod_name}\n\n"
    for part in parts:
        if max_chars is not None and page != header and len(page) + len(part) > max_chars:
            break
        page += part + "\n\n"
    return page.rstrip("\n") + "\n" if parts else None


def stdlib_pages(min_chars: int) -> dict[str, str]:
    """One page per standard-library module with a docstring or documented members."""
    pages: dict[str, str] = {}
    for mod_name in sorted(sys.stdlib_module_names):
        if mod_name in _SKIP or mod_name.startswith("_"):
            continue
        page = module_page(mod_name, min_chars)
        if page:
            pages[f"stdlib/{_slug(mod_name)}.md"] = page
    return pages


def _public_modules(package: str) -> list[str]:
    """The package and its public submodules (no ``_private`` or test modules), shallowest first."""
    names = [package]
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        for info in pkgutil.walk_packages(
            spec.submodule_search_locations, prefix=f"{package}.", onerror=lambda _: None
        ):
            parts = info.name.split(".")
            if any(p.startswith("_") or p in {"tests", "test", "testing", "conftest"} for p in parts):
                continue
            names.append(info.name)
    return sorted(names, key=lambda n: (n.count("."), n))


def package_api_pages(packages: list[str], min_chars: int, max_modules: int, max_chars: int) -> dict[str, str]:
    """One page per public module of each package (its API reference), ``max_modules`` modules a package at most."""
    pages: dict[str, str] = {}
    for package in packages:
        if importlib.util.find_spec(package) is None:
            raise SystemExit(f"--package {package}: not installed in this environment (pip install {package})")
        kept = 0
        for mod_name in _public_modules(package):
            if kept >= max_modules:
                break
            page = module_page(mod_name, min_chars, max_chars)
            if page:
                pages[f"api/{_slug(mod_name)}.md"] = page
                kept += 1
    return pages


# ------------------------------------------------------------------------------------------------ pairs (--pairs)

# Debian's documentation packages read by --pairs: manuals of several registers (tutorials, references, API docs,
# admin guides, policy), all in Debian main. Each one's files come from dpkg's own list of them.
DEBIAN_DOCS = (
    "python3.11-doc",
    "linux-doc-6.1",
    "postgresql-doc-15",
    "python-django-doc",
    "python-sqlalchemy-doc",
    "cmake-doc",
    "sphinx-doc",
    "apache2-doc",
    "debian-handbook",
    "debian-reference-en",
    "debian-policy",
    "developers-reference",
    "maint-guide",
    "r-doc-html",
    "bash-doc",
    "sqlite3-doc",
    "nodejs-doc",
    "octave-doc",
    "autoconf-doc",
    "gettext-doc",
    "python-requests-doc",
    "python-flask-doc",
    "python-jinja2-doc",
    "python-werkzeug-doc",
    "python-cryptography-doc",
    "python-pytest-doc",
    "python-setuptools-doc",
    "python-lxml-doc",
    "python-celery-doc",
    "python-tornado-doc",
    "python-scrapy-doc",
    "python-pygments-doc",
    "python-markdown-doc",
    "python-babel-doc",
    "python-attr-doc",
    "python-sklearn-doc",
    "libglib2.0-doc",
    "gnuplot-doc",
)
# bench/ood's benchmarks are built from these: never read, even when named.
FORBIDDEN_PACKAGES = {
    "manpages",
    "manpages-dev",
    "manpages-posix",
    "manpages-posix-dev",
    "dict-jargon",
    "glibc-doc",
    "postfix",
    "postfix-doc",
}
INFO_DIR = Path("/usr/share/info")
DPKG_INFO = Path("/var/lib/dpkg/info")
# A rendered man page (git-commit.1.html, cmake.1.html, man3/...) is a man page whatever its format.
_MAN_NAME = re.compile(r"(^|/)man[1-9n]?/|\.[1-9n][a-z]*\.html?(\.gz)?$|\.[1-9n](\.gz)?$")
_LANG_DIR = re.compile(r"^[a-z]{2}([-_][A-Za-z]{2,4})?$")
_SKIP_PARTS = {"_sources", "_static", "_downloads", "_images", "translations", "search", "genindex"}
_SKIP_FILES = {"genindex.html", "search.html", "py-modindex.html", "all.html", "index-all.html", "searchindex.js"}
_GENERIC = {
    "introduction",
    "overview",
    "description",
    "examples",
    "example",
    "notes",
    "note",
    "usage",
    "syntax",
    "parameters",
    "arguments",
    "options",
    "summary",
    "details",
    "synopsis",
    "return value",
    "returns",
    "see also",
    "background",
    "configuration",
    "installation",
    "requirements",
    "limitations",
    "caveats",
    "discussion",
    "motivation",
}
_QUESTION = re.compile(r"^(how|what|why|when|where|which|who|can|should|is|are|do|does|will|may)\b", re.IGNORECASE)
_ENGLISH = frozenset("the of and to a in is that for it as with be on by this are or an from can if not".split())
_NUMBERING = re.compile(r"^(\d+(\.\d+)*\.?|[A-Z]\.(\d+\.?)*)\s+")  # "3.2.1. Title", "A.1 Title"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'`])")


@dataclass
class Section:
    """A heading (or a defined term) and the text under it, up to the next heading or term."""

    title: str
    kind: str  # "heading" | "term"
    level: int
    paragraphs: list[str] = field(default_factory=list)


@dataclass
class Document:
    title: str
    path: str  # where it was read, the held-out split's key
    source: str  # "debian:PKG", "info:PKG", "python:packages", ...
    intro: list[str]  # paragraphs before the first section
    sections: list[Section]


def _clean(text: str) -> str:
    text = text.replace("\u00b6", " ").replace("\u00a0", " ").replace("\u200b", "")
    return re.sub(r"\s+", " ", text).strip()


def _prose(text: str) -> bool:
    """Running text rather than code, tables of symbols or navigation."""
    if len(text) < 20:
        return False
    letters = sum(c.isalpha() or c.isspace() for c in text)
    return letters / len(text) >= 0.8 and len(text.split()) >= 4


class _HtmlBlocks(HTMLParser):
    """("heading", level, text), ("term", 0, text) and ("para", 0, text) blocks of an HTML page, in order; code,
    scripts, navigation, sidebars and permalinks left out."""

    BLOCK = {"p", "div", "li", "dd", "td", "th", "blockquote", "section", "article", "table", "ul", "ol", "dl", "tr"}
    SKIP_TAGS = {"script", "style", "nav", "header", "footer", "pre", "code-block", "head", "form", "button", "svg"}
    # Matched against each class, id and role token alone: "withsidebar" (SQLAlchemy's main column) and
    # "wy-grid-for-nav" (the Read the Docs theme's page wrapper) hold the content.
    SKIP_TOKEN = re.compile(
        r"sphinxsidebar\w*|sidebar|docs-sidebar|fixed-sidebar|sidebar-search|related|footer|headerlink|"
        r"toctree-wrapper|breadcrumbs?|toc|searchbox|highlight(-.*)?|admonition-title|linenos|nav|navbar|"
        r"navigation|navheader|navfooter|wy-nav-side|wy-side-nav-search|wy-menu.*|rst-versions|"
        r"docs-top-navigation-container|narrow-index-nav|docs-header|docs-version-header|copyright"
    )
    VOID = {"br", "img", "hr", "meta", "link", "input", "col", "area", "base", "wbr", "source"}

    def __init__(self, main_only: bool = False) -> None:
        super().__init__(convert_charrefs=True)
        # Pages that mark their content (role="main", <main>) are read inside it only: themes' menus vary too much
        # to be named one by one.
        self.main_only = main_only
        self._outside = 1 if main_only else 0  # > 0: not inside the main element
        self.blocks: list[tuple[str, int, str]] = []
        self.title = ""
        self._stack: list[tuple[str, bool, bool]] = []  # open tags; whether each starts a skipped / the main region
        self._skip = 0
        self._buffer: list[str] = []
        self._capture: tuple[str, int] | None = None  # inside a heading or a term
        self._in_title = False

    def _flush(self) -> None:
        text = _clean("".join(self._buffer))
        self._buffer.clear()
        if text:
            self.blocks.append(("para", 0, text))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.VOID:
            if tag == "br":
                self._buffer.append(" ")
            return
        attr = dict(attrs)
        tokens = f"{attr.get('class') or ''} {attr.get('role') or ''} {attr.get('id') or ''}".split()
        skip = tag in self.SKIP_TAGS or any(self.SKIP_TOKEN.fullmatch(t) for t in tokens)
        main = self.main_only and self._outside > 0 and (tag == "main" or attr.get("role") == "main")
        self._stack.append((tag, skip, main))
        self._skip += skip
        self._outside -= main
        if tag == "title":
            self._in_title = True
        if self._skip or self._outside:
            return
        if re.fullmatch(r"h[1-6]", tag) or tag == "dt":
            self._flush()
            self._capture = ("heading", int(tag[1])) if tag != "dt" else ("term", 0)
        elif tag in self.BLOCK:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID or not any(t == tag for t, _, _ in self._stack):
            return
        while self._stack:  # close what the page left open inside this tag
            open_tag, skip, main = self._stack.pop()
            self._skip -= skip
            self._outside += main
            if open_tag == tag:
                break
        if tag == "title":
            self._in_title = False
        if self._skip or self._outside:
            return
        if self._capture and (re.fullmatch(r"h[1-6]", tag) or tag == "dt"):
            kind, level = self._capture
            text = _clean("".join(self._buffer))
            self._buffer.clear()
            self._capture = None
            if text:
                self.blocks.append((kind, level, text))
        elif tag in self.BLOCK:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not (self._skip or self._outside):
            self._buffer.append(data)


def html_document(html: str, path: str, source: str) -> Document:
    parser = _HtmlBlocks(main_only=bool(re.search(r"<main[\s>]|role=[\"']main[\"']", html)))
    parser.feed(html)
    parser.close()
    parser._flush()
    return _structure(parser.blocks, _clean(parser.title), path, source)


def _structure(blocks: list[tuple[str, int, str]], title: str, path: str, source: str) -> Document:
    """Blocks into an intro and sections. The page's title is its first level-1 heading, else ``title``."""
    intro: list[str] = []
    sections: list[Section] = []
    for kind, level, text in blocks:
        if kind == "para":
            (sections[-1].paragraphs if sections else intro).append(text)
        elif kind == "heading" and level == 1 and not sections and not intro:
            title = text
        else:
            sections.append(Section(text, kind, level))
    title = re.split(r"\s+[\u2014|\u2013-]\s+", title)[0] if title else title  # "Page - Site name" -> "Page"
    return Document(_clean(title), path, source, intro, sections)


def _flush_paragraph(blocks: list[tuple[str, int, str]], paragraph: list[str]) -> None:
    if paragraph:
        blocks.append(("para", 0, _clean(" ".join(paragraph))))
        paragraph.clear()


_RST_UNDERLINE = re.compile(r"^([=\-~^*+#\"'`:.])\1{2,}\s*$")


def text_document(text: str, path: str, source: str) -> Document:
    """A Markdown, reStructuredText or plain-text page: ``#`` headings and underlined ones; paragraphs split at
    blank lines; indented blocks and fenced code left out."""
    blocks: list[tuple[str, int, str]] = []
    lines = text.splitlines()
    paragraph: list[str] = []
    levels: dict[str, int] = {}
    in_fence = False

    for i, raw in enumerate(lines):
        line = raw.rstrip()
        nxt = lines[i + 1].rstrip() if i + 1 < len(lines) else ""
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            _flush_paragraph(blocks, paragraph)
            continue
        if in_fence:
            continue
        if _RST_UNDERLINE.match(line):
            _flush_paragraph(blocks, paragraph)
            continue
        if line.strip() and _RST_UNDERLINE.match(nxt) and len(nxt.strip()) >= len(line.strip()) > 1:
            _flush_paragraph(blocks, paragraph)
            level = levels.setdefault(nxt.strip()[0], len(levels) + 1)
            blocks.append(("heading", level, _clean(line)))
            continue
        heading = re.match(r"^(#{1,6})\s+(.+?)\s*#*$", line)
        if heading:
            _flush_paragraph(blocks, paragraph)
            blocks.append(("heading", len(heading.group(1)), _clean(heading.group(2))))
        elif not line.strip() or line.startswith(("    ", "\t", "|", ">>>", "$ ", "..", "![")):
            _flush_paragraph(blocks, paragraph)
        else:
            paragraph.append(line.strip())
    _flush_paragraph(blocks, paragraph)
    return _structure(blocks, "", path, source)


def info_documents(text: str, path: str, source: str) -> list[Document]:
    """One document per node of a Texinfo manual; ``-- Function: NAME ARGS`` lines are terms. Menus and code
    (lines indented 5 or more) are left out."""
    documents = []
    for node in text.split("\x1f\n")[1:]:
        header, _, body = node.partition("\n")
        match = re.search(r"Node:\s*([^,]+)", header)
        if not match or match.group(1).strip() == "Top" or "Tag Table" in header or "Indirect:" in header:
            continue
        blocks: list[tuple[str, int, str]] = []
        lines = body.splitlines()
        paragraph: list[str] = []

        in_menu = in_definition = False
        for i, line in enumerate(lines):
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if line.startswith("* Menu:"):
                _flush_paragraph(blocks, paragraph)
                in_menu = True
                continue
            if in_menu and (line.startswith("* ") or not line.strip() or line.startswith(" ")):
                continue
            in_menu = False
            if re.match(r"^[=\-*.]{3,}$", line):
                continue
            if line.strip() and re.match(r"^[=\-*.]{3,}$", nxt) and len(nxt) >= len(line.strip()):
                _flush_paragraph(blocks, paragraph)
                blocks.append(("heading", {"*": 1, "=": 2, "-": 3, ".": 4}[nxt[0]], re.sub(r"^[\d.]+\s+", "", line)))
                continue
            term = re.match(r"^ -- [\w ]+: (.+)$", line)
            indent = len(line) - len(line.lstrip(" "))
            if term:
                _flush_paragraph(blocks, paragraph)
                blocks.append(("term", 0, _clean(term.group(1))))
                in_definition = True
            elif not line.strip():
                _flush_paragraph(blocks, paragraph)
            elif indent >= (10 if in_definition else 5):  # code: a definition's body is itself indented by 5
                _flush_paragraph(blocks, paragraph)
            else:
                in_definition = in_definition and indent >= 5
                paragraph.append(line.strip())
        _flush_paragraph(blocks, paragraph)
        document = _structure(blocks, match.group(1).strip(), f"{path}#{match.group(1).strip()}", source)
        documents.append(document)
    return documents


def _cut(text: str, max_chars: int) -> str:
    """At most ``max_chars``, ending at a sentence's end where one falls in the second half, else at a word."""
    if len(text) <= max_chars:
        return text
    head = text[:max_chars]
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s)", head)]
    if ends and ends[-1] >= max_chars // 2:
        return head[: ends[-1]]
    return head.rsplit(" ", 1)[0]


def _english_text(text: str, minimum: float = 0.12) -> bool:
    words = re.findall(r"[a-z]+", text.lower())
    return len(words) >= 10 and sum(w in _ENGLISH for w in words) / len(words) >= minimum


def _is_english(document: Document) -> bool:
    words = re.findall(
        r"[a-z]+", " ".join(document.intro + [p for s in document.sections for p in s.paragraphs])[:20_000].lower()
    )
    return len(words) >= 30 and sum(w in _ENGLISH for w in words) / len(words) >= 0.12


def document_pairs(document: Document, max_chars: int, min_words: int = 25) -> list[tuple[str, str, str]]:
    """(kind, query, passage) pairs of one document; see the module's docstring for the kinds."""
    pairs: list[tuple[str, str, str]] = []

    def passage(paragraphs: list[str]) -> str | None:
        text = _cut(" ".join(p for p in paragraphs if _prose(p)), max_chars)
        return text if len(text.split()) >= min_words else None

    def query_ok(query: str) -> bool:
        return 1 <= len(query.split()) <= 64 and len(query) <= 300 and any(c.isalpha() for c in query)

    title = _NUMBERING.sub("", document.title).strip()
    intro = passage(document.intro)
    if title and intro and query_ok(title):
        pairs.append(("title", title, intro))
    for section in document.sections:
        body = passage(section.paragraphs)
        if body is None:
            continue
        heading = _NUMBERING.sub("", section.title).strip(" :#")
        if section.kind == "term":
            kind = "term"
        else:
            kind = "question" if heading.endswith("?") or _QUESTION.match(heading) else "heading"
        if kind != "term" and title and (heading.lower() in _GENERIC or len(heading.split()) <= 1) and heading != title:
            heading = f"{heading} ({title})"
        if query_ok(heading):
            pairs.append((kind, heading, body))
        sentences = _SENTENCE_END.split(" ".join(p for p in section.paragraphs if _prose(p)), maxsplit=1)
        if len(sentences) == 2 and 8 <= len(sentences[0].split()) <= 40:
            rest = passage([sentences[1]])
            if rest is not None:
                pairs.append(("summary", sentences[0], rest))
    return pairs


def _dpkg_files(package: str) -> list[Path]:
    listing = DPKG_INFO / f"{package}.list"
    if not listing.is_file():
        matches = sorted(DPKG_INFO.glob(f"{package}:*.list"))
        if not matches:
            raise SystemExit(f"--debian {package}: not installed (apt-get install --no-install-recommends {package})")
        listing = matches[0]
    return [Path(line) for line in listing.read_text(encoding="utf-8").splitlines() if line.strip()]


def _read(path: Path) -> str:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8", errors="replace")


def _doc_file(path: Path) -> str | None:
    """ "html", "text" or None: which reader a packaged file gets; man pages and non-English copies get none."""
    text = str(path)
    if text.startswith("/usr/share/man/") or _MAN_NAME.search(text) or not path.is_file():
        return None
    parts = path.parts
    if set(parts) & _SKIP_PARTS or path.name in _SKIP_FILES:
        return None
    if any(_LANG_DIR.match(p) and p.lower() not in {"en", "en-us", "en_us", "en-gb"} for p in parts[4:-1]):
        return None
    name = path.name.lower().removesuffix(".gz")
    lang = re.search(r"\.html\.([a-z]{2}(-[a-z]{2})?)$", name)  # Apache's content negotiation: x.html.fr
    if lang:
        return "html" if lang.group(1) == "en" else None
    if name.endswith((".html", ".htm", ".xhtml")):
        return "html"
    if name.endswith((".txt", ".rst", ".md")) and "changelog" not in name and "news" not in name:
        return "text"
    return None


def debian_documents(package: str) -> list[Document]:
    """Every HTML page of a package; its text files only where it has no HTML (the same manual twice otherwise)."""
    if package in FORBIDDEN_PACKAGES:
        raise SystemExit(f"--debian {package}: bench/ood is built from it; it must never be training text")
    files = [(kind, p) for p in sorted(set(_dpkg_files(package))) if (kind := _doc_file(p))]
    if any(kind == "html" for kind, _ in files):
        files = [(kind, p) for kind, p in files if kind == "html"]
    documents = []
    for kind, path in files:
        reader = html_document if kind == "html" else text_document
        documents.append(reader(_read(path), str(path), f"debian:{package}"))
    return documents


def _info_owners() -> dict[str, str]:
    """/usr/share/info files -> the package that installed them, from dpkg's lists."""
    owners = {}
    for listing in sorted(DPKG_INFO.glob("*.list")):
        package = listing.name.removesuffix(".list").split(":")[0]
        for line in listing.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(str(INFO_DIR) + "/"):
                owners[line] = package
    return owners


def info_manual_documents() -> list[Document]:
    owners = _info_owners()
    documents = []
    for path in sorted(INFO_DIR.glob("*.info*")):
        package = owners.get(str(path), "unknown")
        if package in FORBIDDEN_PACKAGES or not path.name.endswith((".info", ".gz")):
            continue
        documents.extend(info_documents(_read(path), str(path), f"info:{package}"))
    return documents


def copyright_licenses(package: str) -> dict[str, Any]:
    """The license names a package's Debian copyright file declares (``License:`` lines of the machine-readable
    format), or its first lines that mention a license; with the file's path and sha256."""
    path = Path("/usr/share/doc") / package / "copyright"
    if not path.is_file():
        return {"package": package, "copyright": None, "licenses": []}
    text = path.read_text(encoding="utf-8", errors="replace")
    names = sorted({m.strip() for m in re.findall(r"^License:[ \t]*(\S[^\n]{0,80})$", text, re.MULTILINE)})
    if not names:
        names = [_clean(line)[:120] for line in text.splitlines() if re.search(r"licen[sc]e", line, re.I)][:3]
    return {
        "package": package,
        "copyright": str(path),
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "licenses": names,
    }


def _package_version(package: str) -> str | None:
    result = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True, check=False)
    return result.stdout.strip() or None


def _normalised(text: str) -> str:
    return hashlib.sha1(re.sub(r"[^a-z0-9]+", " ", text.lower()).strip().encode("utf-8")).hexdigest()


def _held_out(path: str, percent: float) -> bool:
    return int(hashlib.sha1(path.encode("utf-8")).hexdigest()[:8], 16) % 10_000 < percent * 100


def build_pairs(
    documents: list[Document], *, max_chars: int, heldout_percent: float, max_share: float
) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Deduplicated pair records (query, positive, kind, source, path, split) of ``documents``, in their order, with
    the counts. No source keeps more than ``max_share`` of the pairs (those with the lowest hash of their text)."""
    seen_queries: set[str] = set()
    seen_passages: set[str] = set()
    records: list[dict[str, str]] = []
    dropped = {"not_english_documents": 0, "not_english_pairs": 0, "duplicate": 0, "capped": 0}
    for document in documents:
        if not _is_english(document):
            dropped["not_english_documents"] += 1
            continue
        split = "heldout" if _held_out(document.path, heldout_percent) else "train"
        for kind, query, positive in document_pairs(document, max_chars):
            if not _english_text(positive):  # a foreign-language paragraph on an English page
                dropped["not_english_pairs"] += 1
                continue
            keys = _normalised(query), _normalised(positive)
            if keys[0] in seen_queries or keys[1] in seen_passages:
                dropped["duplicate"] += 1
                continue
            seen_queries.add(keys[0])
            seen_passages.add(keys[1])
            records.append(
                {
                    "query": query,
                    "positive": positive,
                    "kind": kind,
                    "source": document.source,
                    "path": document.path,
                    "split": split,
                    "key": keys[1],
                }
            )
    cap = int(max_share * len(records))
    by_source = Counter(r["source"] for r in records)
    over = {s for s, n in by_source.items() if n > cap}
    if over:
        keep: set[int] = set()
        for source in over:
            rows = sorted((r["key"], i) for i, r in enumerate(records) if r["source"] == source)
            keep.update(i for _, i in rows[:cap])
        before = len(records)
        records = [r for i, r in enumerate(records) if r["source"] not in over or i in keep]
        dropped["capped"] = before - len(records)
    for r in records:
        del r["key"]
    counts = {
        "documents": len(documents),
        "pairs": len(records),
        "train": sum(r["split"] == "train" for r in records),
        "heldout": sum(r["split"] == "heldout" for r in records),
        "by_kind": dict(sorted(Counter(r["kind"] for r in records).items())),
        "by_source": dict(sorted(Counter(r["source"] for r in records).items())),
        "dropped": dropped,
    }
    return records, counts


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_pairs(args: argparse.Namespace) -> dict[str, Any]:
    """--pairs: read every source, make the pairs, write train/heldout/sources/manifest into ``args.out``."""
    forbidden = FORBIDDEN_PACKAGES & set(args.debian)
    if forbidden:
        raise SystemExit(f"--debian {sorted(forbidden)}: bench/ood is built from these; never training text")
    pages = {**package_pages(args.min_chars * 2), **stdlib_pages(args.min_chars)}
    pages |= package_api_pages(args.package, args.min_chars, args.max_modules, args.max_page_chars)
    documents = [
        text_document(text, f"python/{rel}", f"python:{rel.split('/')[0]}") for rel, text in sorted(pages.items())
    ]
    for package in args.debian:
        documents.extend(debian_documents(package))
    if not args.no_info:
        documents.extend(info_manual_documents())
    records, counts = build_pairs(
        documents, max_chars=args.max_passage_chars, heldout_percent=args.heldout_percent, max_share=args.max_share
    )
    args.out.mkdir(parents=True, exist_ok=True)
    paths = {name: args.out / f"{name}.jsonl" for name in ("train", "heldout", "sources")}
    with (
        paths["train"].open("w", encoding="utf-8") as train,
        paths["heldout"].open("w", encoding="utf-8") as heldout,
        paths["sources"].open("w", encoding="utf-8") as sources,
    ):
        for r in records:
            pair = json.dumps({"query": r["query"], "positive": r["positive"]}, ensure_ascii=False) + "\n"
            (train if r["split"] == "train" else heldout).write(pair)
            meta = {k: r[k] for k in ("split", "kind", "source", "path")}
            sources.write(json.dumps(meta, ensure_ascii=False) + "\n")
    debian = sorted({s.split(":", 1)[1] for s in counts["by_source"] if s.startswith(("debian:", "info:"))})
    manifest = {
        "built_by": "experiments/build_docs_corpus.py --pairs",
        "settings": {
            "debian": list(args.debian),
            "info": not args.no_info,
            "package": list(args.package),
            "min_chars": args.min_chars,
            "max_passage_chars": args.max_passage_chars,
            "heldout_percent": args.heldout_percent,
            "max_share": args.max_share,
        },
        "counts": counts,
        "never_read": {
            "paths": ["/usr/share/man"],
            "packages": sorted(FORBIDDEN_PACKAGES),
            "why": "bench/ood scores on the Linux man-pages project and the Jargon File",
        },
        "licenses": {
            **{p: {"version": _package_version(p), **copyright_licenses(p)} for p in debian if p != "unknown"},
            "python:stdlib": {"licenses": ["PSF-2.0"], "python": sys.version.split()[0]},
            "python:packages": {"licenses": ["each distribution's own (its metadata's License / classifiers)"]},
        },
        "files": {name: {"lines": _count_lines(p), "sha256": _sha256(p)} for name, p in paths.items()},
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="folder to write (made if missing); required but with --list-debian")
    parser.add_argument("--min-chars", type=int, default=300, help="shortest description or docstring kept")
    parser.add_argument("--package", action="append", default=[], help="also an installed package's API docstrings")
    parser.add_argument("--max-modules", type=int, default=40, help="modules of each --package at most")
    parser.add_argument("--max-page-chars", type=int, default=20_000, help="characters of a --package page at most")
    pairs = parser.add_argument_group("pairs (--pairs)")
    pairs.add_argument("--pairs", action="store_true", help="write pairs (train/heldout.jsonl) instead of pages")
    pairs.add_argument("--debian", action="append", help=f"a Debian doc package (default: {len(DEBIAN_DOCS)} of them)")
    pairs.add_argument("--no-info", action="store_true", help="leave out the Info manuals in /usr/share/info")
    pairs.add_argument("--max-passage-chars", type=int, default=1000, help="a passage's characters at most")
    pairs.add_argument("--heldout-percent", type=float, default=2.0, help="share of pages held out, by path")
    pairs.add_argument("--max-share", type=float, default=0.3, help="share of the pairs one source may keep at most")
    pairs.add_argument("--list-debian", action="store_true", help="print the default Debian packages, then exit")
    args = parser.parse_args()
    if args.list_debian:
        print(" ".join(DEBIAN_DOCS))
        return
    if args.out is None:
        parser.error("--out is required: the folder to write the pages or pairs into")
    if args.pairs:
        args.debian = args.debian or list(DEBIAN_DOCS)
        counts = write_pairs(args)["counts"]
        print(
            f"{counts['pairs']} pairs ({counts['train']} train, {counts['heldout']} held out) from "
            f"{counts['documents']} documents; kinds {counts['by_kind']} -> {args.out}"
        )
        return
    pages = {**package_pages(args.min_chars * 2), **stdlib_pages(args.min_chars)}
    pages |= package_api_pages(args.package, args.min_chars, args.max_modules, args.max_page_chars)
    for rel, text in sorted(pages.items()):
        path = args.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    chars = sum(len(t) for t in pages.values())
    kinds = {k: sum(1 for r in pages if r.startswith(k)) for k in ("packages/", "stdlib/", "api/")}
    print(f"{len(pages)} pages ({kinds}), {chars / 1e6:.1f} M characters -> {args.out}")


if __name__ == "__main__":
    main()
