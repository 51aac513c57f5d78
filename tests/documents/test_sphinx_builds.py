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
    assert "HTML alone" not in warning  # the build is inside the project: no one folder holds the sources alone
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


def build_html(source: Path, out: Path) -> None:
    """sphinx-build -b html ``source`` ``out``."""
    from sphinx.util.docutils import docutils_namespace

    with docutils_namespace():
        app = sphinx_application.Sphinx(
            str(source), str(source), str(out), str(out.parent / "doctrees"), "html",
            status=None, warning=None, freshenv=True,
        )  # fmt: skip
        app.build()


@pytest.fixture(scope="module")
def debian_package(project, tmp_path_factory) -> Path:
    """A folder laid out as Debian's documentation packages are (``linux-doc``): the sources compressed in
    ``Documentation/``, the HTML build beside them in ``html/``, its ``.buildinfo`` gone."""
    import gzip

    doc = tmp_path_factory.mktemp("usr-share-doc")
    package = doc / "tides-doc"
    (package / "Documentation").mkdir(parents=True)
    for name in ("conf.py", "index.rst", "spring.rst"):
        (package / "Documentation" / f"{name}.gz").write_bytes(gzip.compress((project / name).read_bytes()))
    shutil.copytree(project / "_build" / "html", package / "html")
    (package / "html" / ".buildinfo").unlink()
    return doc


def test_a_build_without_its_buildinfo_is_told_by_its_search_index(debian_package, caplog):
    build = debian_package / "tides-doc" / "html"
    assert (build / "_sources" / "spring.rst.txt").exists() and not (build / ".buildinfo").exists()
    with caplog.at_level(logging.INFO):
        assert listed(build) == ["index.html", "spring.html"]
    assert f"Left out what Sphinx generated in its HTML build {build}" in caplog.text


def test_sources_beside_their_build_are_named_with_the_exclude_of_the_build(debian_package, caplog):
    # Debian's layout: Documentation/ (conf.py.gz, index.rst.gz) beside html/, both under the package's folder.
    with caplog.at_level(logging.WARNING):
        assert listed(debian_package) == [
            "tides-doc/Documentation/index.rst.gz",
            "tides-doc/Documentation/spring.rst.gz",
            "tides-doc/html/index.html",
            "tides-doc/html/spring.html",
        ]
    warning = caplog.records[-1].getMessage()
    package = debian_package / "tides-doc"
    assert f"{package / 'html'} is Sphinx's HTML build of the project in {package / 'Documentation'}" in warning
    assert "to read the sources alone, pass exclude=['tides-doc/html'] (--exclude tides-doc/html)" in warning
    assert "to read the HTML alone" in warning and "exclude=['tides-doc/Documentation']" in warning
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert listed(debian_package, exclude=("tides-doc/html",)) == [
            "tides-doc/Documentation/index.rst.gz",
            "tides-doc/Documentation/spring.rst.gz",
        ]
    assert not caplog.records


def test_sphinx_quickstarts_separate_source_and_build_folders_are_named(project, tmp_path, caplog):
    # sphinx-quickstart's "separate source and build directories": docs/source and docs/build/html.
    source = tmp_path / "repo" / "docs" / "source"
    source.mkdir(parents=True)
    for name in ("conf.py", "index.rst", "spring.rst"):
        shutil.copy2(project / name, source / name)
    build_html(source, tmp_path / "repo" / "docs" / "build" / "html")
    repo = tmp_path / "repo"
    with caplog.at_level(logging.WARNING):
        assert listed(repo) == [
            "docs/build/html/index.html",
            "docs/build/html/spring.html",
            "docs/source/index.rst",
            "docs/source/spring.rst",
        ]
    warning = caplog.records[-1].getMessage()
    assert "exclude=['docs/build'] (--exclude docs/build)" in warning and "(--exclude docs/source)" in warning
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert listed(repo, exclude=("docs/source",)) == ["docs/build/html/index.html", "docs/build/html/spring.html"]
    assert not caplog.records


def test_a_conf_py_without_a_root_page_is_no_project_and_a_search_index_not_sphinxs_no_build(project, tmp_path, caplog):
    # A program's settings file beside a Sphinx build is not the build's project.
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "conf.py").write_text("DEBUG = False\n", encoding="utf-8")
    (tmp_path / "app" / "notes.md").write_text("# Notes\n\nNothing here.\n", encoding="utf-8")
    shutil.copytree(project / "_build" / "html", tmp_path / "html")
    with caplog.at_level(logging.WARNING):
        assert listed(tmp_path) == ["app/notes.md", "html/index.html", "html/spring.html"]
    assert "read twice" not in caplog.text
    # Another site generator's search index, with a folder of that name: nothing is left out.
    site = tmp_path / "site"
    (site / "_sources").mkdir(parents=True)
    (site / "_sources" / "notes.txt").write_text("notes", encoding="utf-8")
    (site / "searchindex.js").write_text("var index = {};\n", encoding="utf-8")
    (site / "search.html").write_text("<h1>Search tips</h1><p>Use quotes.</p>", encoding="utf-8")
    assert listed(site) == ["_sources/notes.txt", "search.html"]


def test_an_archived_build_without_its_buildinfo_is_read_as_its_pages_alone(debian_package, tmp_path):
    archive = Path(shutil.make_archive(str(tmp_path / "tides-docs"), "zip", debian_package / "tides-doc", "html"))
    with zipfile.ZipFile(archive) as zipped:
        assert "html/_sources/spring.rst.txt" in zipped.namelist() and "html/.buildinfo" not in zipped.namelist()
    docs = list(iter_documents(archive, options=ReadOptions(), log=ReadLog()))
    assert [Path(d.doc_id).relative_to(archive).as_posix() for d in docs] == ["html/index.html", "html/spring.html"]


def test_the_copies_benchs_questions_and_pages_on_a_real_build(project, tmp_path, monkeypatch):
    """bench/sphinx_copies.py: its questions are a page's section headings after its title, its pages those with
    a question (index pages left out), and a hit on either copy of a page (its HTML, its source copy) names the
    same page."""
    from script_loading import load_script

    bench_folder = Path(__file__).resolve().parents[2] / "bench"
    monkeypatch.syspath_prepend(str(bench_folder))  # the script imports the benchmarks' shared module, common
    bench = load_script(bench_folder / "sphinx_copies.py", "sphinx_copies_bench")
    build = tmp_path / "html"
    shutil.copytree(project / "_build" / "html", build)
    assert bench.pick_pages(build, 5) == []  # spring has no heading under its title; index pages are left out
    copy = build / "_sources" / "spring.rst.txt"
    copy.write_text(copy.read_text() + "\nAt the ``neap``\n---------------\n\nNeap tides are weaker.\n\nx\n--\n")
    assert bench.headings_of(copy, 4) == ["At the neap"]  # "Spring tides" is the page's title; "x" is too short
    assert bench.pick_pages(build, 5) == ["spring"]
    assert bench.page_of_hit(str(build / "a" / "b.html"), build) == "a/b"
    assert bench.page_of_hit(str(build / "_sources" / "a" / "b.rst.txt"), build) == "a/b"
