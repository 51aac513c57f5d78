"""Sphinx's HTML builds met in a folder walk: what in them is no page of its own, and where a build's sources sit
in the same folder.

sphinx-build writes, beside the pages of an HTML build:

- ``_sources/``, a copy of each page's source (``index.rst.txt``), which the plain-text reader would read as a
  second copy of every page, markup and all;
- ``genindex.html``, ``search.html`` and ``py-modindex.html``: the generated index (a link to every term), the search
  page (a form, and "Please activate JavaScript") and the module index.

The walk leaves those out, in a folder and in an archive (a documentation site's HTML download). A project's
folder (``docs/``, its ``conf.py`` in it) often holds its build too (``docs/_build/html``): then every page is read
twice, from its source and from its built HTML, and the walk says so, with the ``exclude`` that reads one of them.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path, PurePosixPath

# sphinx-build's record of an HTML build, in the build's folder; its first line names Sphinx.
BUILD_INFO = ".buildinfo"
_BUILD_INFO_HEAD = b"# Sphinx build info"
SOURCE_COPIES = "_sources"
GENERATED_PAGES = frozenset({"genindex.html", "search.html", "py-modindex.html"})
# Beside an archived build's .buildinfo: what tells it is Sphinx's without reading the archive's members.
_SEARCH_INDEX = "searchindex.js"
# A Sphinx project's configuration, in the folder of its sources.
PROJECT_CONFIG = "conf.py"


def is_html_build(folder: Path, names: Collection[str]) -> bool:
    """Whether ``folder``, whose entries are ``names``, is a Sphinx HTML build (its ``.buildinfo`` says so)."""
    if BUILD_INFO not in names:
        return False
    try:
        with open(folder / BUILD_INFO, "rb") as info:
            return info.read(len(_BUILD_INFO_HEAD)) == _BUILD_INFO_HEAD
    except OSError:
        return False


def read_twice(builds: list[Path], projects: list[Path]) -> list[tuple[Path, Path, str]]:
    """Each build of ``builds`` that lies in a project folder of ``projects`` (a folder with a ``conf.py``): the
    build, the project, and the ``exclude`` pattern that leaves the build out (its first folder under the project,
    ``_build``)."""
    found = []
    for build in builds:
        holding = [project for project in projects if build != project and build.is_relative_to(project)]
        project = max(holding, key=lambda folder: len(folder.parts), default=None)  # the innermost
        if project is not None:
            found.append((build, project, build.relative_to(project).parts[0]))
    return found


def archived_builds(paths: Collection[PurePosixPath]) -> set[PurePosixPath]:
    """The folders inside an archive (its members' ``paths``) that hold a Sphinx HTML build: a ``.buildinfo``, a
    ``searchindex.js`` and a ``_sources`` folder together (told from the names alone, as members are not read ahead
    of their turn)."""
    names = set(paths)
    with_sources = {parent.parent for path in paths for parent in path.parents if parent.name == SOURCE_COPIES}
    return {
        path.parent
        for path in paths
        if path.name == BUILD_INFO and path.parent in with_sources and path.parent / _SEARCH_INDEX in names
    }


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
