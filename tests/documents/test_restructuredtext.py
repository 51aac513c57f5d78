"""reStructuredText read as its rendered page shows it: docutils' markup against docutils' own HTML of the same
page, Sphinx's markup against what Sphinx shows (written out by hand), and nothing read from outside the file."""

from __future__ import annotations

import logging
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from c2v_rag.documents.chunking import document_lead
from c2v_rag.documents.documents import iter_documents
from c2v_rag.documents.files import ReadLog, ReadOptions
from c2v_rag.documents.formats import format_of
from c2v_rag.documents.formats.restructuredtext import ReStructuredText, rst_to_markdown
from c2v_rag.documents.outline import Outline
from c2v_rag.documents.source_document import SourceDocument

docutils_core = pytest.importorskip("docutils.core")

# A Sphinx page: its roles and directives are Sphinx's (and an extension's), which docutils alone does not know.
SPHINX_PAGE = """\
:orphan:

.. _building:

Building targets
================

.. only:: html

   .. contents::

Add an executable with :command:`add_executable`; see :ref:`the packaging guide <packaging>` and
:py:meth:`~tides.Model.predict`, whose :manual:`generators <cmake-generators(7)>` vary.

.. toctree::
   :maxdepth: 2

   intro
   usage

.. versionadded:: 3.1
   Sources may use generator expressions.

.. deprecated:: 2.0 Use :func:`new_api` instead.

.. py:function:: predict(place, when)
   :no-index:

   Predict the tide at *place*.

.. only:: latex

   Printed manuals only.

.. program:: tides

.. tab:: Windows

   Run *tides.exe*.

.. seealso:: The moon page.

.. cmake-module:: ../Modules/FindTides.cmake

Options
-------

.. code-block:: cmake

   add_executable(tool tool.c)

.. index:: single: tides; spring

Spring tides come at new and full moon.
"""

SPHINX_PAGE_READ = """\
# Building targets

Add an executable with `add_executable`; see the packaging guide and
`predict`, whose generators vary.

Added in version 3.1: Sources may use generator expressions.

Deprecated since version 2.0: Use `new_api` instead.

```
predict(place, when)
```

Predict the tide at *place*.

Printed manuals only.

Windows

Run *tides.exe*.

See also:

The moon page.

## Options

```cmake
add_executable(tool tool.c)
```

Spring tides come at new and full moon."""

# docutils' own markup, of every kind of body element: its HTML is the reference for the words shown.
DOCUTILS_PAGE = """\
=============
Tide handbook
=============

:Author: Ada Lovelace
:Version: 1.2

Tides rise *twice* a day; **spring** tides are ``higher``. See the notes [#]_ and |moon|.

.. |moon| replace:: the Moon's phases

Heights
-------

- Brest, seven metres

  - at springs
- Dover, six metres

3. third item
4. fourth item

spring tide
    The larger range.
neap tide : classifier
    The smaller range.

-v, --verbose   Print more.
--depth=N       How deep to go.

.. note:: Heights are *above chart datum*.

.. warning::
   Never trust one gauge.

    An indented quote.

    -- A harbour master

| A line block,
| on two lines.

::

    tide --at Brest

>>> predict("Brest")
7.1

=====  ======
Place  Height
=====  ======
Brest  7.1 m
Dover  6.5 m
=====  ======

.. list-table:: Gauges
   :header-rows: 1

   * - Gauge
     - Since
   * - Newlyn
     - 1915

Moon and Sun
~~~~~~~~~~~~

.. topic:: Why

   The Sun adds its pull.

.. sidebar:: Aside

   Lunar days last 24 h 50 min.

.. rubric:: Footnotes

.. [#] Kept with the tables.
"""


def read(path: Path) -> tuple[list[SourceDocument], ReadLog]:
    log = ReadLog()
    return list(iter_documents(path, options=ReadOptions(), log=log)), log


def letters(text: str) -> str:
    return re.sub(r"\W", "", text)


class _BodyText(HTMLParser):
    """The text of an HTML5 page's ``<main>``, as a browser shows it (docutils' writer puts the page there)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.depth += tag == "main" or bool(self.depth)

    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.parts.append(data)


def test_rst_files_have_their_own_format_and_txt_files_stay_plain_text():
    assert isinstance(format_of(Path("guide.rst")), ReStructuredText)
    assert isinstance(format_of(Path("guide.REST")), ReStructuredText)
    assert not isinstance(format_of(Path("notes.txt")), ReStructuredText)


def test_a_sphinx_page_reads_as_sphinx_shows_it(tmp_path):
    (tmp_path / "building.rst").write_text(SPHINX_PAGE, encoding="utf-8")
    (doc,), log = read(tmp_path / "building.rst")
    assert log.files_skipped == 0
    assert doc.metadata["title"] == "Building targets"
    assert doc.text == SPHINX_PAGE_READ
    # what only the source held: roles, directive lines, the label, the toctree's file names, the index entry
    for markup in (":command:", "..", "toctree", "maxdepth", "intro", "_building", "spring tides;", ":no-index:"):
        assert markup not in doc.text
    opening = "Add an executable with `add_executable`; see the packaging guide and\n`predict`, whose generators vary."
    assert document_lead(doc.text) == f"Building targets\n{opening}"


def test_docutils_markup_shows_the_words_of_docutils_own_html():
    title, text = rst_to_markdown(DOCUTILS_PAGE)
    from docutils.writers.html5_polyglot import Writer

    html = docutils_core.publish_string(
        DOCUTILS_PAGE, writer=Writer(), settings_overrides={"report_level": 5, "_disable_config": True}
    ).decode()
    body = _BodyText()
    body.feed(html)
    # The words, compared letter by letter (the HTML sets a term's classifier off by markup, not a space); an
    # ordered list's numbers are the HTML's <ol start> attribute, no text of it.
    ours = re.sub(r"(?m)^[ \t]*[0-9]+\. ", "", f"{title}\n{text}")
    assert title == "Tide handbook"
    assert letters(ours) == letters("".join(body.parts))
    assert "| Brest | 7.1 m |" in text and "| Gauge | Since |" in text
    assert "```\ntide --at Brest\n```" in text


def test_sections_are_headings_by_depth_for_chunk_context_headings():
    _, text = rst_to_markdown(DOCUTILS_PAGE)
    outline = Outline("# Tide handbook\n\n" + text)
    where = ("# Tide handbook\n\n" + text).index("The Sun adds its pull.")
    assert outline.path(where) == ("Heights", "Moon and Sun")
    assert "## Heights" in text and "### Moon and Sun" in text


def test_nothing_outside_the_file_is_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("PRIVATE-KEY-7731", encoding="utf-8")
    page = (
        "Page\n====\n\nVisible text.\n\n"
        f".. include:: {secret}\n\n"
        f".. literalinclude:: {secret}\n\n"
        f".. csv-table:: Data\n   :file: {secret}\n\n"
        ".. raw:: html\n\n   <b>RAW-HTML-5521</b>\n\n"
        f".. raw:: html\n   :file: {secret}\n"
    )
    (tmp_path / "page.rst").write_text(page, encoding="utf-8")
    (doc,), _ = read(tmp_path / "page.rst")
    assert "Visible text." in doc.text
    assert "PRIVATE-KEY-7731" not in doc.text and "RAW-HTML-5521" not in doc.text and str(secret) not in doc.text


def test_docutils_registries_are_left_as_they_were():
    from docutils import nodes, utils
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Directive, Parser, directives, languages, roles

    class Tide(Directive):
        def run(self):
            return [nodes.paragraph("", "a user's own directive")]

    directives.register_directive("tide", Tide)
    try:
        _, text = rst_to_markdown(".. tide::\n\n.. versionadded:: 1.0\n\nSee :command:`predict`.")
        assert text == "a user's own directive\n\nAdded in version 1.0.\n\nSee `predict`."
        document = utils.new_document("", get_default_settings(Parser))
        english = languages.get_language("en")
        assert directives.directive("tide", english, document)[0] is Tide
        assert directives.directive("versionadded", english, document)[0] is None
        assert roles.role("command", english, 0, document.reporter)[0] is None
    finally:
        directives._directives.pop("tide", None)


def test_a_page_docutils_cannot_parse_is_read_as_plain_text(tmp_path, caplog):
    # Each line indented one more than the last nests a block quote in the one before: docutils' parser recurses
    # past Python's limit.
    text = "".join(" " * depth + "x\n\n" for depth in range(3000))
    (tmp_path / "deep.rst").write_text(text, encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        (doc,), log = read(tmp_path / "deep.rst")
    assert doc.text == text and log.files_skipped == 0
    assert "deep.rst: docutils could not parse it (RecursionError" in caplog.text
    assert "read as plain text" in caplog.text


def test_directive_and_role_names_match_in_any_case_and_a_bare_version_note_reads():
    title, text = rst_to_markdown(
        "Tides\n=====\n\n.. VersionChanged:: 2.0\n   Now faster.\n\n.. versionadded::\n\n"
        "Use :Command:`predict` and :PY:Func:`~tides.rise`.\n"
    )
    assert title == "Tides"
    assert text == "Changed in version 2.0: Now faster.\n\nAdded in version.\n\nUse `predict` and `rise`."


def test_a_page_of_nothing_shown_is_an_empty_document_as_an_empty_text_file_is(tmp_path):
    (tmp_path / "index.rst").write_text(".. toctree::\n   :maxdepth: 2\n\n   intro\n   usage\n", encoding="utf-8")
    (doc,), log = read(tmp_path / "index.rst")
    assert doc.text == "" and log.files_skipped == 0


# Sphinx's own markup that its text builder shows: the reference for what the fallbacks read.
SPHINX_MARKUP_PAGE = """\
.. _building:

Building targets
================

Add an executable with :func:`tides.add_executable`; see :ref:`the options <options>`,
:py:meth:`~tides.Model.predict` and :term:`spring tide`.

.. toctree::

.. versionadded:: 3.1
   Sources may use generator expressions.

.. versionchanged:: 3.2 Faster.

.. deprecated:: 2.0 Use :func:`new_api` instead.

.. py:function:: predict(place, when)

   Predict the tide at *place*.

.. seealso:: The moon page.

.. glossary::

   spring tide
      The largest range of a lunar month.

.. index:: single: tides; spring

.. _options:

Options
-------

.. code-block:: python

   predict("Brest", "noon")

.. note:: Heights are above chart datum.

.. only:: text

   Shown in text builds.
"""


def test_sphinx_markup_shows_the_words_of_sphinx_own_text_build(tmp_path):
    sphinx_application = pytest.importorskip("sphinx.application")
    from sphinx.util.docutils import docutils_namespace

    source = tmp_path / "src"
    source.mkdir()
    (source / "index.rst").write_text(SPHINX_MARKUP_PAGE, encoding="utf-8")
    # No "()" after a function's name: the reader does not add them (the name is what a user searches for).
    (source / "conf.py").write_text("add_function_parentheses = False\n", encoding="utf-8")
    with docutils_namespace():  # Sphinx's directives and roles stay out of docutils' registries, as sphinx-build does
        app = sphinx_application.Sphinx(
            str(source), str(source), str(tmp_path / "out"), str(tmp_path / "doctrees"), "text",
            status=None, warning=None, freshenv=True,
        )  # fmt: skip
        app.build()
    built = (tmp_path / "out" / "index.txt").read_text(encoding="utf-8")
    (tmp_path / "index.rst").write_text(SPHINX_MARKUP_PAGE, encoding="utf-8")
    (doc,), _ = read(tmp_path / "index.rst")
    # The words, letter by letter; a code block's language is no text of the built page.
    assert letters(re.sub(r"(?m)^(`{3,})\w+$", r"\1", doc.text)) == letters(built)
    assert doc.text.startswith("# Building targets\n\nAdd an executable with `tides.add_executable`; see the options,")
