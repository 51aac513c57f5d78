"""Sphinx's HTML builds met in a folder walk: what in them is no page of its own, and where a build's sources sit
in the same folder.

sphinx-build writes, beside the pages of an HTML build:

- ``_sources/``, a copy of each page's source (``index.rst.txt``), which the plain-text reader would read as a
  second copy of every page, markup and all;
- ``genindex.html``, ``search.html`` and ``py-modindex.html``: the generated index (a link to every term), the search
  page (a form, and "Please activate JavaScript") and the module index.

The walk leaves those out. A project's folder (``docs/``, its ``conf.py`` in it) often holds its build too
(``docs/_build/html``): then every page is read twice, from its source and from its built HTML, and the walk says
so, with the ``exclude`` that reads one of them.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

# sphinx-build's record of an HTML build, in the build's folder; its first line names Sphinx.
BUILD_INFO = ".buildinfo"
_BUILD_INFO_HEAD = b"# Sphinx build info"
SOURCE_COPIES = "_sources"
GENERATED_PAGES = frozenset({"genindex.html", "search.html", "py-modindex.html"})
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
