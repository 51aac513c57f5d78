"""A folder holding Sphinx's HTML build, built here by Sphinx itself: its pages are read, what Sphinx generated
beside them (copies of the sources, the index and search pages) is not, and a project whose sources and build are
both in the folder is named with the exclude that reads one of them."""

from __future__ import annotations

import logging
import shutil
import zipfile
from pathlib import Path

import pytest

from c2v_rag.documents.documents import iter_documents
from c2v_rag.documents.files import ReadLog, ReadOptions, list_files

sphinx_application = pytest.importorskip("sphinx.application")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """``docs/``: a Sphinx project of two pages, with its HTML build in ``docs/_build/html``."""
    from sphinx.util.docutils import docutils_namespace

    docs = tmp_path_factory.mktemp("project") / "docs"
    docs.mkdir()
    (docs / "conf.py").write_text("project = 'Tides'\n", encoding="utf-8")
    (docs / "index.rst").write_text("Tides\n=====\n\n.. toctree::\n\n   spring\n\nTides rise twice a day.\n")
    (docs / "spring.rst").write_text("Spring tides\n============\n\nSpring tides come at new and full moon.\n")
    with docutils_namespace():  # as sphinx-build does: Sphinx's markup stays out of docutils' registries
        app = sphinx_application.Sphinx(
            str(docs), str(docs), str(docs / "_build" / "html"), str(docs / "_build" / "doctrees"), "html",
            status=None, warning=None, freshenv=True,
        )  # fmt: skip
        app.build()
    assert (docs / "_build" / "html" / "_sources" / "spring.rst.txt").exists()  # what the walk must leave out
    assert (docs / "_build" / "html" / "genindex.html").exists()
    return docs


def listed(root: Path, **options) -> list[str]:
    return [f.relative_to(root).as_posix() for f in list_files(root, ReadOptions(**options), ReadLog())]


def test_a_build_is_read_as_its_pages_alone(project, caplog):
    build = project / "_build" / "html"
    with caplog.at_level(logging.INFO):
        assert listed(build) == ["index.html", "spring.html"]
    assert "Left out what Sphinx generated in its HTML build" in caplog.text
    assert "read twice" not in caplog.text  # no sources in this folder
    docs = list(iter_documents(build, options=ReadOptions(), log=ReadLog()))
    assert [d.metadata["title"] for d in docs] == ["Tides", "Spring tides"]
    assert "Spring tides come at new and full moon." in docs[1].text


def test_a_project_with_its_build_is_named_with_the_exclude_that_reads_the_sources(project, caplog):
    with caplog.at_level(logging.WARNING):
        assert listed(project) == ["_build/html/index.html", "_build/html/spring.html", "index.rst", "spring.rst"]
    warning = caplog.records[-1].getMessage()
    assert f"{project / '_build' / 'html'} is Sphinx's HTML build of the project in {project}" in warning
    assert "each page is read twice" in warning and "--exclude _build" in warning
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert listed(project, exclude=("_build",)) == ["index.rst", "spring.rst"]
    assert not caplog.records


def test_a_buildinfo_file_that_is_not_sphinx_changes_nothing(tmp_path):
    (tmp_path / ".buildinfo").write_text("built by make\n", encoding="utf-8")
    (tmp_path / "_sources").mkdir()
    (tmp_path / "_sources" / "notes.txt").write_text("notes", encoding="utf-8")
    (tmp_path / "search.html").write_text("<h1>Search tips</h1><p>Use quotes.</p>", encoding="utf-8")
    assert listed(tmp_path) == ["_sources/notes.txt", "search.html"]


def test_an_archived_build_is_read_as_its_pages_alone(project, tmp_path, caplog):
    # A documentation site's HTML download: the build zipped under a folder of its own.
    archive = Path(shutil.make_archive(str(tmp_path / "tides-docs"), "zip", project / "_build", "html"))
    with zipfile.ZipFile(archive) as zipped:
        assert "html/_sources/spring.rst.txt" in zipped.namelist() and "html/genindex.html" in zipped.namelist()
    with caplog.at_level(logging.INFO):
        docs = list(iter_documents(archive, options=ReadOptions(), log=ReadLog()))
    assert [Path(d.doc_id).relative_to(archive).as_posix() for d in docs] == ["html/index.html", "html/spring.html"]
    assert "Left out what Sphinx generated in its HTML build" in caplog.text
