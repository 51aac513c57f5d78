"""Build the out-of-domain retrieval benchmarks' document folders from installed Debian packages.

The documents are not in the repository (they keep their own licenses); this script recreates them,
the same bytes on every machine with the same package versions, from:

- ``manpages``: the Linux man-pages project (Debian packages ``manpages`` and ``manpages-dev``):
  technical reference documentation. One document per man page (``.so`` aliases skipped), rendered
  to plain text by groff, keeping the sections that say what the page is for (NAME, SYNOPSIS,
  DESCRIPTION).
- ``jargon``: the Jargon File 4.4.7 (Debian package ``dict-jargon``): informal, humorous lexicon
  prose about hacker slang and culture. One document per entry of at least 12 words.
- ``postfix``: Postfix's guides (Debian package ``postfix-doc``, the ``*_README.html`` howtos and the
  overview): an administrator's task documentation, configuration examples among the prose. One document
  per section (``<h2>`` or ``<h3>``) of at least 12 words, led by its heading and its guide's title.

Every document ends at the first paragraph break past :data:`MAX_CHARS` characters, so a corpus is
about two of ingest's 200-token chunks a document: what one shared CPU core embeds in tens of minutes.

Usage::

    python bench/ood/build.py [--out DIR] [--only manpages|jargon|postfix]

Each benchmark lands in ``DIR/<name>/docs/<doc id>.md`` with ``DIR/<name>/manifest.json`` (package
versions, document count and a digest of every id and text). ``bench/ood/<name>/corpus.json`` in the
repository records the digest the committed questions were judged against; ``score.py`` warns when
a rebuilt folder differs from it.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
BENCHMARKS = ("manpages", "jargon", "postfix")
# Documents (every benchmark) end at the first paragraph break past this many characters (~2 chunks).
MAX_CHARS = 1500


class MissingPackage(RuntimeError):
    """A Debian package a benchmark is built from is not installed."""


@dataclass(frozen=True)
class Document:
    """One benchmark document: a stable id (its relative path without ``.md``) and its text."""

    id: str
    text: str


def default_out() -> Path:
    """Where the folders go unless told: the user cache directory, next to the library's own."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("c2v_rag")) / "ood"


# ------------------------------------------------------------------------------------ packages


def package_version(package: str) -> str:
    """The installed version of a Debian package; :class:`MissingPackage` (with the command) if absent."""
    try:
        result = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Status}\t${Version}", package], capture_output=True, text=True, check=False
        )
    except FileNotFoundError as error:
        raise MissingPackage(
            "dpkg-query not found: these benchmarks are built from Debian packages (a Debian or Ubuntu system)"
        ) from error
    status, _, version = result.stdout.partition("\t")
    if result.returncode != 0 or not status.endswith("installed"):
        raise MissingPackage(
            f"the Debian package {package!r} is not installed: sudo apt-get update && sudo apt-get install -y {package}"
        )
    return version


def require_packages(packages: tuple[str, ...]) -> dict[str, str]:
    """Every package's version, or one error naming all missing ones in a single apt-get command."""
    versions: dict[str, str] = {}
    missing: list[str] = []
    for package in packages:
        try:
            versions[package] = package_version(package)
        except MissingPackage:
            missing.append(package)
    if missing:
        raise MissingPackage(
            f"missing Debian package(s) {', '.join(missing)}: "
            f"sudo apt-get update && sudo apt-get install -y {' '.join(packages)}"
        )
    return versions


def package_files(package: str) -> list[Path]:
    """The files a package installed (``dpkg -L``), sorted so that the build order is fixed."""
    out = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True, check=True).stdout
    return sorted(Path(line) for line in out.splitlines() if line.strip())


# ------------------------------------------------------------------------------------ man pages

MAN_PACKAGES = ("manpages", "manpages-dev")
# English pages only: /usr/share/man/manN/, not the translations under /usr/share/man/<lang>/.
_MAN_PATH = re.compile(r"^/usr/share/man/(man\d)/([^/]+)\.gz$")
# The sections that say what a page is for. ERRORS, EXAMPLES, VERSIONS, STANDARDS, NOTES, BUGS and the
# COLOPHON are left out, and the page is cut at MAX_CHARS: whole pages run to tens of thousands of
# characters (fcntl(2), proc(5)), hours of embedding on one shared CPU core, while the opening of a page
# states what the function or file is for, which is what a user's task question asks.
_MAN_SECTIONS = ("NAME", "SYNOPSIS", "DESCRIPTION")
_GROFF = ["groff", "-t", "-man", "-Tutf8", "-P-cbou", "-rLL=2000n", "-rHY=0", "-dAD=l"]


def render_man(source: str) -> str:
    """A man page's roff source as plain text: groff with one very long line per paragraph (no
    wrapping, hyphenation or justification, so that the text does not depend on a terminal width)."""
    try:
        result = subprocess.run(["preconv"], input=source.encode(), capture_output=True, check=True)
        rendered = subprocess.run(_GROFF, input=result.stdout, capture_output=True, check=True)
    except FileNotFoundError as error:
        raise MissingPackage("groff is not installed: sudo apt-get install -y groff-base") from error
    return rendered.stdout.decode("utf-8", errors="replace")


def man_sections(text: str) -> dict[str, str]:
    """The rendered page's top-level sections by heading (headings are flush-left capitals)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if re.fullmatch(r"[A-Z][A-Z ]*[A-Z]", line.rstrip()):
            current = sections.setdefault(line.strip(), [])
        elif current is not None:
            current.append(re.sub(r"\s+", " ", line).strip())
    return {name: re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() for name, lines in sections.items()}


def cut_at_paragraph(text: str, limit: int) -> str:
    """``text`` up to the first paragraph break past ``limit`` characters (whole paragraphs only)."""
    if len(text) <= limit:
        return text
    cut = text.find("\n\n", limit)
    return text if cut < 0 else text[:cut]


def man_document(path: Path, section_dir: str, stem: str) -> Document | None:
    """One man page as Markdown, or None for an alias page (``.so other``) or one without a NAME."""
    source = gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace")
    if re.match(r"\s*\.so\s", source):
        return None
    sections = man_sections(render_man(source))
    if "NAME" not in sections:
        return None
    name, dot, number = stem.rpartition(".")
    title = f"{name}({number})" if dot else stem
    parts = [f"# {title}", "", sections["NAME"]]
    for heading in _MAN_SECTIONS[1:]:
        if sections.get(heading):
            body = sections[heading]
            if heading == "SYNOPSIS":
                # The feature-test-macro table after the prototypes is boilerplate that would take
                # most of the cut document's length from DESCRIPTION.
                body = body.split("Feature Test Macro Requirements")[0].strip()
            parts += ["", f"## {heading}", "", body]
    return Document(f"{section_dir}/{stem}", cut_at_paragraph("\n".join(parts).strip(), MAX_CHARS) + "\n")


def man_documents() -> Iterator[Document]:
    """Every English man page of the man-pages packages, in path order."""
    for package in MAN_PACKAGES:
        for path in package_files(package):
            match = _MAN_PATH.match(str(path))
            if match and path.is_file() and not path.is_symlink():
                document = man_document(path, match.group(1), match.group(2))
                if document is not None:
                    yield document


# ------------------------------------------------------------------------------------ jargon

JARGON_PACKAGES = ("dict-jargon",)
_JARGON_INDEX = Path("/usr/share/dictd/jargon.index")
_JARGON_DICT = Path("/usr/share/dictd/jargon.dict.dz")
# dictd's index writes offsets and lengths in base 64 with this alphabet (dictfmt's b64_encode).
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
# Jargon entries whose body is shorter than this are cross-references ("See {foo}.") or one-line glosses, and
# Postfix sections this short are a line pointing elsewhere: nothing to retrieve by meaning, so they are left out.
_MIN_WORDS = 12


def dictd_number(text: str) -> int:
    """A dictd index number (base 64, most significant digit first)."""
    value = 0
    for char in text:
        value = value * 64 + _B64.index(char)
    return value


def slug(headword: str) -> str:
    """A file-name-safe id for a headword: lower case, runs of other characters as one '-'."""
    return re.sub(r"[^a-z0-9]+", "-", headword.lower()).strip("-") or "x"


def jargon_documents() -> Iterator[Document]:
    """Every Jargon File entry with a body of at least ``_MIN_WORDS`` words, in index order."""
    data = gzip.decompress(_JARGON_DICT.read_bytes())  # dictzip is gzip with an index in a header field
    seen: dict[str, int] = {}
    for line in _JARGON_INDEX.read_text(encoding="utf-8").splitlines():
        headword, offset, length = line.split("\t")
        if headword.startswith("00-database"):
            continue
        raw = data[dictd_number(offset) : dictd_number(offset) + dictd_number(length)].decode("utf-8")
        document = jargon_document(raw)
        if document is None:
            continue
        base = slug(document[0])
        seen[base] = seen.get(base, 0) + 1
        doc_id = base if seen[base] == 1 else f"{base}-{seen[base]}"  # later duplicates, in index order
        yield Document(f"jargon/{doc_id}", document[1])


def jargon_document(raw: str) -> tuple[str, str] | None:
    """(headword, Markdown) of one dictd entry: the headword line, the pronunciation/part-of-speech
    line, then the indented body. None for entries too short to retrieve by meaning."""
    lines = raw.rstrip().splitlines()
    headword = lines[0].strip()
    rest = lines[1:]
    gloss = rest[0].strip() if rest and rest[0].startswith(" ") and not rest[0].startswith("    ") else ""
    body_lines = rest[1:] if gloss or (rest and not rest[0].strip()) else rest
    paragraphs = [re.sub(r"\s+", " ", p).strip() for p in "\n".join(body_lines).split("\n\n")]
    # {term} marks a cross-reference in the File's source: kept as the plain term, as the HTML edition
    # shows it. Braces around code (with ; ( ) or =) are the code's own and stay.
    body = re.sub(r"\{\s*([^{};()=]*?)\s*\}", r"\1", "\n\n".join(p for p in paragraphs if p))
    if len(body.split()) < _MIN_WORDS:
        return None
    head = f"# {headword}\n\n" + (f"{gloss}\n\n" if gloss and gloss != "//" else "")
    return headword, cut_at_paragraph(head + body, MAX_CHARS) + "\n"


# ------------------------------------------------------------------------------------ postfix

POSTFIX_PACKAGES = ("postfix-doc",)
# The guides: every howto and the architecture overview. Not the HTML copies of Postfix's own man pages
# (``postconf.5.html`` and the like: reference of another kind, and their pages run to hundreds of sections),
# nor the index pages that only link to the others, nor the two guides kept for old versions beside their current
# ones (POSTSCREEN_3_5, TLS_LEGACY: most of their sections are the current guide's again, so that a question would
# have two answers that differ in a version number).
_POSTFIX_GUIDE = re.compile(r"^/usr/share/doc/postfix/html/([A-Z0-9_]+_README|OVERVIEW)\.html$")
_POSTFIX_OLD_GUIDES = frozenset({"POSTSCREEN_3_5_README", "TLS_LEGACY_README"})
_BLOCKS = frozenset({"p", "pre", "li", "dt", "dd", "blockquote", "table", "tr", "ul", "ol", "dl", "hr", "br", "div"})


class _GuideSections(HTMLParser):
    """A Postfix guide's title (``<title>``) and its sections (``<h2>`` or ``<h3>``) as (heading, text): text keeps a
    paragraph break between blocks, ``<pre>`` lines as they are, and each list item led by '- '."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.sections: list[tuple[str, list[str]]] = []
        self._where: str | None = None  # "title", "h2" or "h3" while inside one, else None
        self._heading: list[str] = []
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("title", "h2", "h3"):
            self._where, self._heading = tag, []
        elif tag in ("h1", "h4"):
            self._text("\n\n")
        elif tag in _BLOCKS:
            self._pre += tag == "pre"
            self._text("\n\n- " if tag == "li" else "\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == self._where:
            heading = re.sub(r"\s+", " ", "".join(self._heading)).strip()
            if tag == "title":
                self.title = heading
            else:
                self.sections.append((heading, []))
            self._where = None
        elif tag in ("h1", "h4"):
            self._text("\n\n")
        elif tag in _BLOCKS:
            self._pre -= tag == "pre"
            self._text("\n\n")

    def handle_data(self, data: str) -> None:
        if self._where is not None:
            self._heading.append(data)
        else:
            self._text(data if self._pre else re.sub(r"\s+", " ", data))

    def _text(self, text: str) -> None:
        if self.sections and self._where is None:
            self.sections[-1][1].append(text)


def postfix_documents() -> Iterator[Document]:
    """Every section (``<h2>`` or ``<h3>``) of at least 12 words of Postfix's guides, in file order: ``# heading``,
    the guide's title, then the section's text up to the next heading of either level."""
    for path in package_files("postfix-doc"):
        match = _POSTFIX_GUIDE.match(str(path))
        if not (match and path.is_file()) or match.group(1) in _POSTFIX_OLD_GUIDES:
            continue
        parser = _GuideSections()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        seen: dict[str, int] = {}
        for heading, parts in parser.sections:
            paragraphs = [p.strip(" ") for p in re.split(r"\n\s*\n", "".join(parts))]  # charrefs: the parser's
            body = "\n\n".join(p for p in paragraphs if p.strip() and p.strip() != "-")
            if len(body.split()) < _MIN_WORDS or not heading:
                continue
            base = slug(heading)
            seen[base] = seen.get(base, 0) + 1
            doc_id = base if seen[base] == 1 else f"{base}-{seen[base]}"
            text = f"# {heading}\n\n{parser.title}\n\n{body}"
            yield Document(f"{match.group(1).lower()}/{doc_id}", cut_at_paragraph(text, MAX_CHARS) + "\n")


# ------------------------------------------------------------------------------------ writing


@dataclass(frozen=True)
class Source:
    """How one benchmark's documents are made: its packages and its document generator."""

    packages: tuple[str, ...]
    documents: Callable[[], Iterator[Document]]
    license: str


SOURCES: dict[str, Source] = {
    "manpages": Source(
        MAN_PACKAGES,
        man_documents,
        "various free licenses per page (Linux man-pages project; see /usr/share/doc/manpages/copyright)",
    ),
    "jargon": Source(JARGON_PACKAGES, jargon_documents, "public domain (Jargon File 4.4.7)"),
    "postfix": Source(
        POSTFIX_PACKAGES,
        postfix_documents,
        "IBM Public License 1.0 or Eclipse Public License 2.0 (Postfix; see /usr/share/doc/postfix-doc/copyright)",
    ),
}


def corpus_digest(documents: list[Document]) -> str:
    """A digest of every id and text, in id order: equal digests mean identical folders."""
    digest = hashlib.sha256()
    for document in sorted(documents, key=lambda d: d.id):
        digest.update(document.id.encode() + b"\x00" + document.text.encode() + b"\x00")
    return digest.hexdigest()


def build(name: str, out: Path) -> dict[str, object]:
    """Write benchmark ``name``'s documents under ``out/name`` (replacing it); return its manifest."""
    source = SOURCES[name]
    versions = require_packages(source.packages)
    documents = list(source.documents())
    ids = [d.id for d in documents]
    if len(set(ids)) != len(ids):
        raise RuntimeError(f"{name}: duplicate document ids")
    target = out / name
    if target.exists():
        shutil.rmtree(target)
    for document in documents:
        path = target / "docs" / f"{document.id}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(document.text, encoding="utf-8")
    manifest = {
        "benchmark": name,
        "packages": versions,
        "documents": len(documents),
        "digest": corpus_digest(documents),
        "license": source.license,
    }
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: the user cache, c2v_rag/ood)")
    parser.add_argument("--only", choices=BENCHMARKS, action="append", help="build only this benchmark (repeatable)")
    args = parser.parse_args(argv)
    out = (args.out or default_out()).expanduser()
    for name in args.only or BENCHMARKS:
        try:
            manifest = build(name, out)
        except MissingPackage as error:
            print(f"error: {name}: {error}", file=sys.stderr)
            return 2
        expected = BENCH_DIR / name / "corpus.json"
        note = ""
        if expected.exists() and json.loads(expected.read_text())["digest"] != manifest["digest"]:
            note = " (differs from the corpus the questions were judged on: see bench/ood/README.md)"
        print(f"{name}: {manifest['documents']} documents in {out / name}{note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
