"""Markdown read as it renders: HTML comment blocks and link reference definitions left out, code and everything
else kept line for line; checked against the words markdown-it's own rendering shows of real pages (this
repository's docs)."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from c2v_rag.documents.documents import iter_documents
from c2v_rag.documents.files import ReadLog, ReadOptions
from c2v_rag.documents.formats.markdown import shown_markdown

REPO = Path(__file__).resolve().parents[2]

# A page as Node.js's API docs and many READMEs write one: notes to the docs' tooling in comments, links by
# reference with their definitions gathered at the end.
PAGE = """<!-- markdownlint-disable MD013 -->
# File system

<!--introduced_in=v0.10.0-->

> Stability: 2 - Stable

<!-- YAML
added: v0.5.8
changes:
  - version: v10.0.0
    description: The `callback` parameter is no longer optional.
-->

Watch for changes on `filename` with [`fs.watch()`][], as [the guide][guide] says.
<!-- TODO: an example -->
A second paragraph, which the comment set apart.

```html
<!-- a comment inside code is code -->
[not]: a-definition-inside-code
```

    [indented]: code-too

> A quote.
> <!-- a note in a quote -->
> Its second paragraph.
>
> [quoted]: https://example.com/quoted

- item one
- [^1]: https://example.com/footnote

A paragraph
[lazy]: is-not-a-definition, as a definition cannot interrupt a paragraph

<!-- anchor --><a id="fs_watch"></a>

[`fs.watch()`]: #fswatchfilename-options-listener
[guide]: https://nodejs.org/en/learn
  "The guide"
"""

SHOWN = """# File system

> Stability: 2 - Stable

Watch for changes on `filename` with `fs.watch()`, as the guide says.

A second paragraph, which the comment set apart.

```html
<!-- a comment inside code is code -->
[not]: a-definition-inside-code
```

    [indented]: code-too

> A quote.
>
> Its second paragraph.
>

- item one
- [^1]: https://example.com/footnote

A paragraph
[lazy]: is-not-a-definition, as a definition cannot interrupt a paragraph

<a id="fs_watch"></a>
"""


def test_comments_and_link_definitions_are_left_out_and_code_keeps_them(tmp_path: Path):
    (tmp_path / "fs.md").write_text(PAGE, encoding="utf-8")
    (tmp_path / "fs.txt").write_text(PAGE, encoding="utf-8")
    # The same page as Markdown and as text: every_format reads both, each by its own reader.
    read = iter_documents(tmp_path, options=ReadOptions(every_format=True), log=ReadLog())
    docs = {Path(d.doc_id).name: d.text for d in read}
    assert docs["fs.md"] == SHOWN
    assert docs["fs.txt"] == PAGE  # plain text is read as it is
    # Under front matter too, whose title leads.
    (tmp_path / "fs.md").write_text("---\ntitle: fs\n---\n<!-- c -->\nBody.\n\n[a]: b\n", encoding="utf-8")
    (doc,) = [d for d in iter_documents(tmp_path / "fs.md", log=ReadLog())]
    assert doc.text == "# fs\n\nBody.\n" and doc.metadata["title"] == "fs"


def test_links_and_images_read_as_their_text_badges_not_at_all_and_code_and_other_brackets_as_written():
    page = (
        "# Tides [![CI](https://ci.example/badge.svg)](https://ci.example/runs)\n\n"
        "[![Build status](https://ci.example/b.svg)](https://ci.example/b)\n[![codecov][cov-img]][cov]\n\n"
        'See [the guide](https://example.com/guide "Guide") and [`fs.watch()`][] or [tables][t], [a list], '
        "[not defined][nope] and [x](<a b.html>).\n"
        "Code `[a](b)` and \\[escaped](x) stay. Done![ok](ok.png) ![Moon phases](moon.png)\n\n"
        "```md\n[in code](https://kept)\n```\n\n"
        "[`fs.watch()`]: #fswatch\n[t]: https://example.com/tables\n[a list]: https://example.com/list\n"
        "[cov-img]: https://codecov.example/badge.svg\n[cov]: https://codecov.example\n"
    )
    assert shown_markdown(page) == (
        "# Tides CI\n\n"
        "See the guide and `fs.watch()` or tables, a list, [not defined][nope] and x.\n"
        "Code `[a](b)` and \\[escaped](x) stay. Doneok Moon phases\n\n"
        "```md\n[in code](https://kept)\n```\n"
    )


# Markdown lines a page is made of, for the property below. Not among them: an indented code line, which a comment
# block removed just above it can turn into a list item's paragraph (its text then reads as prose; known, left).
PIECES = [
    "# Head [a](u)", "text [a](u) more", "<!-- c -->", "[a]: u", "[b]: <x y> 'T'", "> quote [a][]", ">",
    "- item [b]", "-", "```", "", "", "[![badge](i)](l)", "Para", "1. item", "<!-- multi", "line -->",
    "`[a](b)` code", "![img](s) x", "[a][] and [A] and [b][a]", "  - nested [a](u)", "> <!-- q -->", "> more",
    "Setext", "===", "***", "<div>", "</div>", "<a id='x'></a>", "[^1]: note", "\\[esc](x)", "Wow![k](u)",
]  # fmt: skip


def test_any_page_of_such_lines_renders_as_it_did():
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st

    @hypothesis.settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @hypothesis.given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=14))
    def renders_as_it_did(lines: list[str]) -> None:
        text = "\n".join(lines) + "\n"
        md = MarkdownIt("commonmark")
        env: dict = {}
        md.parse(text, env)
        assert _visible(md.render(shown_markdown(text), env)) == _visible(md.render(text))

    renders_as_it_did()
    # A heading of a linked image alone is a heading, not a row of badges (its underline was left as text).
    assert shown_markdown("[![Tides](logo.png)](https://tides.example)\n===\n") == "Tides\n===\n"


def _visible(html: str) -> str:
    """The characters a browser shows of ``html``, an image as its alt text, whitespace aside; a paragraph of linked
    images alone (badges) shows none."""
    html = re.sub(r"<!--.*?-->", "", html, flags=re.DOTALL)
    html = re.sub(r"<p>(?:\s*<a [^>]*><img [^>]*></a>)+\s*</p>", "", html)
    html = re.sub(r'<img [^>]*?alt="([^"]*)"[^>]*>', r" \1 ", html)
    return "".join(unescape(re.sub(r"<[^>]*>", " ", html)).split())


def _pages() -> list[tuple[str, str]]:
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    files += sorted((REPO / "bench" / "results" / "notes").glob("*.md"))
    badges = "[![Build status](https://ci.example/b.svg)](https://ci.example/b)\n[![codecov][i]][c]\n\n[i]: x\n[c]: y\n"
    pages = [(str(f.relative_to(REPO)), f.read_text(encoding="utf-8")) for f in files]
    return [("PAGE", PAGE), ("badges", badges + PAGE), *pages]


@pytest.mark.parametrize(("name", "text"), _pages(), ids=[name for name, _ in _pages()])
def test_what_is_left_renders_as_the_page_did_less_its_comments(name: str, text: str):
    md = MarkdownIt("commonmark")
    env: dict = {}
    md.parse(text, env)  # the page's link definitions, which its links still resolve by when rendered
    shown = shown_markdown(text)
    assert _visible(md.render(shown, env)) == _visible(md.render(text))
    # and what renders as nothing is gone: no comment block, no link definition (but a footnote's)
    left: dict = {}
    assert not [t for t in md.parse(shown, left) if t.type == "html_block" and t.content.startswith("<!--")]
    assert [label for label in left.get("references", {}) if not label.startswith("^")] == []


def test_a_notebooks_markdown_cells_are_read_as_markdown_and_its_raw_cells_as_they_are(tmp_path: Path):
    cells = [
        {
            "cell_type": "markdown",
            "metadata": {},
            "source": ["# Tides\n", "<!-- hidden note -->\n", "See [the docs][d].\n", "\n", "[d]: https://example.com"],
        },
        {"cell_type": "raw", "metadata": {}, "source": "<!-- raw stays -->"},
    ]
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}
    (tmp_path / "tides.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    (doc,) = list(iter_documents(tmp_path, log=ReadLog()))
    assert doc.text == "# Tides\n\nSee the docs.\n\n<!-- raw stays -->"
