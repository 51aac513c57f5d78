"""Sphinx's HTML builds met in a folder walk: what in them is no page of its own, and where a build's sources sit
in the same folder.

sphinx-build writes, beside the pages of an HTML build:

- ``_sources/``, a copy of each page's source (``index.rst.txt``), which the plain-text reader would read as a
  second copy of every page, markup and all;
- ``genindex.html``, ``search.html`` and ``py-modindex.html``: the generated index (a link to every term), the search
  page (a form, and "Please activate JavaScript") and the module index.

The walk leaves those out, in a folder and in an archive (a documentation site's HTML download). A build is told
by its ``.buildinfo``, or by its search index (``searchindex.js``, ``Search.setIndex(...)``) where the
``.buildinfo`` is gone: Debian's packages of Sphinx builds (``linux-doc``'s ``html/``, ``python3``'s) ship none.

A project's folder (``docs/``, its ``conf.py`` in it, compressed in a Debian package) often holds its build too
(``docs/_build/html``), or has it beside it (sphinx-quickstart's ``docs/source`` and ``docs/build/html``, Debian's
``Documentation/`` and ``html/``): then every page is read twice, from its source and from its built HTML, and the
walk says so, with the ``exclude`` that reads one of them. It does not choose one itself: autodoc's pages are stubs
in the sources (``.. automodule::``) and whole in the HTML, other pages are read best from their sources.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# sphinx-build's record of an HTML build, in the build's folder; its first line names Sphinx.
BUILD_INFO = ".buildinfo"
_BUILD_INFO_HEAD = b"# Sphinx build info"
SOURCE_COPIES = "_sources"
GENERATED_PAGES = frozenset({"genindex.html", "search.html", "py-modindex.html"})
# Every HTML build's search index, and how Sphinx writes it: a build without its .buildinfo is told by it.
_SEARCH_INDEX = "searchindex.js"
_SEARCH_INDEX_HEAD = b"Search.setIndex("
# A Sphinx project's configuration, in the folder of its sources.
PROJECT_CONFIG = "conf.py"
# A project's root page (its root_doc), by the names sphinx-quickstart and older Sphinx give it.
_ROOT_PAGES = ("index.rst", "index.md", "contents.rst")


def is_html_build(folder: Path, names: Collection[str]) -> bool:
    """Whether ``folder``, whose entries are ``names``, is a Sphinx HTML build: its ``.buildinfo`` says so, or,
    where there is none, its ``searchindex.js`` is Sphinx's."""
    if BUILD_INFO in names and _starts_with(folder / BUILD_INFO, _BUILD_INFO_HEAD):
        return True
    return _SEARCH_INDEX in names and _starts_with(folder / _SEARCH_INDEX, _SEARCH_INDEX_HEAD)


def _starts_with(file: Path, head: bytes) -> bool:
    try:
        with open(file, "rb") as opened:
            return opened.read(len(head)) == head
    except OSError:
        return False


def is_project(names: Collection[str], compressed_suffixes: Collection[str]) -> bool:
    """Whether a folder whose entries are ``names`` holds a Sphinx project's sources: its ``conf.py`` and a root
    page (``index.rst``, ``index.md``, or the ``contents.rst`` of older projects), each perhaps compressed (one
    of ``compressed_suffixes`` after it, as Debian ships them). A ``conf.py`` alone is many programs' settings."""

    def held(name: str) -> bool:
        return name in names or any(name + suffix in names for suffix in compressed_suffixes)

    return held(PROJECT_CONFIG) and any(held(page) for page in _ROOT_PAGES)


@dataclass(frozen=True)
class ReadTwice:
    """A Sphinx build whose project's sources the same walk reads: every page is read twice."""

    build: Path
    project: Path
    build_pattern: str
    """The ``exclude`` pattern that leaves the build out, the sources read alone."""
    sources_pattern: str | None
    """The one that leaves the sources out, the HTML read alone (whole where a source only names what autodoc or
    kernel-doc fills in from code); None where the build lies inside the project, which no one folder separates."""

    def warning(self) -> str:
        """What the walk says of it."""
        text = (
            f"{self.build} is Sphinx's HTML build of the project in {self.project}, whose sources are read too: each "
            f"page is read twice, from its source and from its HTML; to read the sources alone, pass "
            f"exclude=[{self.build_pattern!r}] (--exclude {shlex.quote(self.build_pattern)})"
        )
        if self.sources_pattern is not None:
            text += (
                f"; to read the HTML alone (whole where a source only names what autodoc or kernel-doc fills in), "
                f"exclude=[{self.sources_pattern!r}] (--exclude {shlex.quote(self.sources_pattern)})"
            )
        return text


def read_twice(builds: list[Path], projects: list[Path], root: Path) -> list[ReadTwice]:
    """Each build of ``builds`` that holds the pages of a project of ``projects`` (folders :func:`is_project`
    found) also read in the walk of ``root``, with the ``exclude`` patterns (paths from ``root``) that read one copy. A
    build inside a project folder is its build (``docs/_build/html``: ``_build``, the build's first folder under the
    project); else a build beside the project, under the project's parent folder inside ``root`` (``docs/source``
    and ``docs/build/html``: ``docs/build``, or ``docs/source`` for the HTML alone)."""
    found = []
    for build in builds:
        holding = [project for project in projects if build != project and build.is_relative_to(project)]
        beside = [
            project
            for project in projects
            if project.parent.is_relative_to(root) and build.is_relative_to(project.parent)
            if not project.is_relative_to(build)
        ]
        innermost = max(holding or beside, key=lambda folder: len(folder.parts), default=None)
        if innermost is not None:
            home = innermost if holding else innermost.parent
            top = home / build.relative_to(home).parts[0]
            sources = None if holding else innermost.relative_to(root).as_posix()
            found.append(ReadTwice(build, innermost, top.relative_to(root).as_posix(), sources))
    return found


def archived_builds(paths: Collection[PurePosixPath]) -> set[PurePosixPath]:
    """The folders inside an archive (its members' ``paths``) that hold a Sphinx HTML build: a ``searchindex.js``
    and a ``_sources`` folder together (told from the names alone, as members are not read ahead of their turn;
    a ``.buildinfo`` beside them is not needed, as in a folder)."""
    with_sources = {parent.parent for path in paths for parent in path.parents if parent.name == SOURCE_COPIES}
    return {path.parent for path in paths if path.name == _SEARCH_INDEX and path.parent in with_sources}


def generated(path: PurePosixPath, builds: Collection[PurePosixPath]) -> bool:
    """Whether ``path`` is what Sphinx generated in one of ``builds`` beside its pages (a source's copy, the index
    and search pages)."""
    return any(
        path.is_relative_to(build / SOURCE_COPIES) or (path.parent == build and path.name in GENERATED_PAGES)
        for build in builds
    )


def left_out(builds: Collection[Path | PurePosixPath]) -> str:
    """What the walk left out of ``builds``, in words for the log."""
    shown = ", ".join(sorted(map(str, builds)))
    return (
        f"Left out what Sphinx generated in its HTML build{'s' if len(builds) > 1 else ''} {shown}: the copies of "
        f"the sources ({SOURCE_COPIES}) and the index and search pages"
    )
