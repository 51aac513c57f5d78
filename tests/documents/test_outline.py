"""A text's outline (its headings) and the lead of chunk_context="headings": a chunk from deep inside a long page
says which sections it lies in."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rag_helpers import make_text

from c2v_rag.documents.chunking import TokenChunker, document_lead, section_lead
from c2v_rag.documents.outline import Heading, Outline, headings
from c2v_rag.documents.payload_keys import SECTION_SEPARATOR

_MANUAL = """# Git User Manual

Git is a fast distributed revision control system.

# Repositories and branches

## How to get a repository

```sh
# clone it
git clone git://git.kernel.org/pub/scm/git/git.git
```

    # an indented comment, code too

## Understanding history

### Commits

A commit holds a tree.

Merging
-------

Two lines of work become one.

# Exploring history
"""


def test_headings_are_commonmarks_with_their_shown_text_and_line_offsets():
    """ATX and setext headings, levels as written; a ``#`` line in fenced or indented code is no heading; a heading
    reads as it renders (code spans, emphasis, links and images as their text)."""
    found = headings(_MANUAL)
    assert [(h.level, h.text) for h in found] == [
        (1, "Git User Manual"),
        (1, "Repositories and branches"),
        (2, "How to get a repository"),
        (2, "Understanding history"),
        (3, "Commits"),
        (2, "Merging"),
        (1, "Exploring history"),
    ]
    for heading in found:
        line = _MANUAL[heading.offset :].split("\n", 1)[0]
        assert heading.offset == 0 or _MANUAL[heading.offset - 1] == "\n"
        assert heading.text in line.lstrip("#").strip()
    crlf = "## `fs.watch(filename)` *and* **[the guide](https://x.org)** ![logo](l.png)\r\n\r\nText\r\n# B"
    shown = Heading(0, 2, "fs.watch(filename) and the guide logo", crlf.index("\r\n") + 2)
    assert headings(crlf) == [shown, Heading(crlf.index("# B"), 1, "B", len(crlf))]
    assert headings("") == [] and headings("#\n\nNo heading with text.") == []


# The headings of _MANUAL under its title, with their levels, as written.
_WRITTEN = {"Repositories and branches": 1, "How to get a repository": 2, "Understanding history": 2, "Commits": 3,
            "Merging": 2, "Exploring history": 1}  # fmt: skip


def _paths_by_hand(text: str) -> dict[int, tuple[str, ...]]:
    """Every line start's path, from the headings listed by hand in the order they stand (independent of the
    parser): each closes those of its level and deeper, from its own line on."""
    written = _WRITTEN
    stack: list[tuple[int, str]] = []
    paths = {}
    for match in re.finditer(r"^.*$", text, re.MULTILINE):
        title = match.group().lstrip("#").strip()
        underlined = text[match.end() + 1 :].startswith("-------")
        heading = title in written and (match.group().startswith("#") or underlined)
        if heading:
            stack = [entry for entry in stack if entry[0] < written[title]]
        paths[match.start()] = tuple(title for _, title in stack)
        if heading:
            stack.append((written[title], title))
    return paths


def test_the_path_at_a_point_is_the_headings_still_open_above_it_the_title_aside():
    outline = Outline(_MANUAL)
    for offset, path in _paths_by_hand(_MANUAL).items():
        assert outline.path(offset) == path, offset
    commit = _MANUAL.index("A commit holds")
    assert outline.path(commit) == ("Repositories and branches", "Understanding history", "Commits")
    # A chunk that opens with its heading shows that heading; it lies under the ones above.
    assert outline.path(_MANUAL.index("### Commits")) == ("Repositories and branches", "Understanding history")
    assert outline.path(_MANUAL.index("Two lines")) == ("Repositories and branches", "Merging")
    # A heading closes its level and deeper at its own line: a chunk opening with it is not in the section before.
    assert outline.path(_MANUAL.index("Merging\n")) == ("Repositories and branches",)
    assert outline.path(_MANUAL.index("# Exploring history")) == ()
    assert outline.path(0) == () and outline.path(_MANUAL.index("Git is")) == ()
    # A text that opens with prose has no title: its first heading is a section like the others.
    assert Outline("Some prose.\n\n# Usage\n\nRun it.").path(20) == ("Usage",)


# Blocks that a window's edge can cut: a fenced block with blank lines and a ``#`` comment, a setext heading whose
# rule is a line after its title, a list with a heading-like item, a quote, CRLF line breaks, a code block longer
# than a window.
_CUTTABLE = "\n\n".join(
    [
        "# Handbook",
        "Opening prose.",
        "## Build",
        "```sh\necho 1\n\n# a comment, not a heading\n\necho 2\n```",
        "Setext section\n--------------",
        "- one\n\n  # inside an item\n- two",
        "> quoted\n>\n> # a quoted heading",
        "### Deeper\r\n\r\nText after CRLF.",
        "    # indented code\n\n    more code",
        "```\n" + "\n\n".join(f"line {i}" for i in range(60)) + "\n```",
        "# Last part",
        "Closing prose.",
    ]
)


def test_an_outline_parsed_a_window_at_a_time_is_the_whole_texts():
    """Windows cut blocks anywhere; the outline still holds the whole text's headings (the parse of the text at
    once, title aside) with the same paths, on a text built to be cut and on this repository's docs, at window sizes
    from a few lines to many."""
    # Headings that a text's quick look for candidates must not miss: in a quote, in a list item, with lone CRs.
    nested = [
        "Prose.\n\n> # Quoted heading\n\nMore.",
        "Prose.\n\n- Item title\n  ===\n\nMore.",
        "Prose.\r\rTitle\r---\rText",
    ]
    texts = [
        _CUTTABLE,
        *nested,
        *(page.read_text() for page in sorted(Path(__file__).parents[2].glob("docs/*.md"))[:8]),
    ]
    for text in texts:
        whole = Outline(text, window=len(text) + 1)
        line_starts = [0, *(m.end() for m in re.finditer(r"\r\n?|\n", text))]
        expected = [whole.path(offset) for offset in line_starts]
        opening = len(text) - len(text.lstrip())
        headings_below_title = [h.offset for h in headings(text) if h.offset > opening]
        assert whole.starts(-1, len(text) + 1) == headings_below_title
        for window in (16, 200, 4096):
            windowed = Outline(text, window=window)
            assert [windowed.path(offset) for offset in line_starts] == expected, window
            assert Outline(text, window=window).starts(-1, len(text) + 1) == headings_below_title, window
    assert [h.text for h in headings(_CUTTABLE)] == ["Handbook", "Build", "Setext section", "inside an item",
                                                     "a quoted heading", "Deeper", "Last part"]  # fmt: skip
    assert Outline(_CUTTABLE, window=16).path(_CUTTABLE.index("line 59")) == ("a quoted heading", "Deeper")
    assert [len(headings(text)) for text in nested] == [1, 1, 1]


def test_an_outline_parses_only_as_far_as_it_is_asked():
    """A long text's first paths come from its first window's parse, not the whole text's."""
    text = "# Title\n\n" + "\n\n".join(f"## Part {i}\n\nText {i}." for i in range(5000))
    outline = Outline(text, window=1000)
    assert outline.path(text.index("Text 3.")) == ("Part 3",)
    assert outline._settled < 2000 < len(text)  # noqa: SLF001 (how far the parse went)
    assert outline.path(text.index("Text 4999.")) == ("Part 4999",) and outline._settled == len(text)  # noqa: SLF001
    # A text with no line that could be a heading is not parsed at all.
    prose_text = "Prose - with a dash; C#, #hashtags.\n\nMore prose, a-b-c."
    prose = Outline(prose_text)
    assert prose._settled == len(prose_text) and prose.path(10) == ()  # noqa: SLF001


def test_each_chunk_knows_the_section_it_starts_in_and_plain_text_has_none(tiny_model):
    """A chunk's ``section`` is the headings of the section its first character is in (a chunk that opens with a
    heading is in that heading's section), by a scan of the page by hand; the same in every context. Plain text has
    no sections: its ``#`` lines are comments and root prompts, and they lead no chunk either."""
    by_hand = _paths_by_hand(_MANUAL)

    def section_by_hand(offset: int) -> tuple[str, ...]:
        line = max(start for start in by_hand if start <= offset)
        first, *after = _MANUAL[line:].split("\n", 2)
        shown = first.lstrip("#").strip()
        heading = shown in _WRITTEN and (first.startswith("#") or after[:1] == ["-------"])
        return by_hand[line] + ((shown,) if heading else ())

    for context in ("none", "lead", "headings", "sections"):
        chunks = TokenChunker(tiny_model, chunk_size=16, chunk_overlap=2, context=context).chunk(_MANUAL)
        assert len(chunks) > 8
        for chunk in chunks:
            assert chunk.start_char is not None
            assert chunk.section == section_by_hand(chunk.start_char), (context, chunk.start_char, chunk.text)
        assert {c.section for c in chunks} >= {("Repositories and branches", "Merging"), ("Exploring history",)}
    shell = "Install notes\n\n" + "\n\n".join(f"# apt install tide-{i}\n\nThen run it {i} times." for i in range(9))
    for context in ("headings", "sections"):
        plain = TokenChunker(tiny_model, chunk_size=16, chunk_overlap=2, context=context).chunk(shell, plain_text=True)
        assert len(plain) > 4 and all(c.section == () for c in plain)
        assert all(c.text[: c.lead_chars] in ("", "Install notes\n\n") for c in plain), context
        as_markdown = TokenChunker(tiny_model, chunk_size=16, chunk_overlap=2, context=context).chunk(shell)
        assert any(SECTION_SEPARATOR in c.text[: c.lead_chars] for c in as_markdown)


def test_a_section_lead_names_the_title_then_the_headings_then_the_opening():
    opening = "Git User Manual\nGit is a fast distributed revision control system."
    path = ("Repositories and branches", "Understanding history", "Commits")
    assert section_lead(opening, path) == (
        "Git User Manual › Repositories and branches › Understanding history › Commits\n"
        "Git is a fast distributed revision control system."
    )
    assert section_lead(opening, ()) == opening
    assert section_lead("", path) == SECTION_SEPARATOR.join(path)
    # Headings that run past the limit keep the innermost.
    long = tuple(f"Section {i} " + "x" * 40 for i in range(8))
    kept = section_lead("Title", long).split(SECTION_SEPARATOR)
    assert kept[0] == "Title" and kept[-1] == long[-1] and 1 < len(kept) - 1 < len(long)
    assert len(SECTION_SEPARATOR.join(kept[1:])) <= 200 < len(SECTION_SEPARATOR.join(long[-len(kept) :]))


def test_headings_lead_each_chunk_with_its_sections_on_the_same_chunks(tiny_model):
    """chunk_context="headings" cuts the chunks "lead" cuts; each after the first starts with the title and the
    sections it lies in, then the line under the title, and ``lead_chars`` still counts what is not the page's."""
    sections = [f"{'#' * (1 + i % 3)} Part {i}\n\n{make_text(i, sentences=6)}" for i in range(1, 7)]
    text = "# Tides\n\nTides - the rise and fall of the sea.\n\n" + "\n\n".join(sections)
    led = TokenChunker(tiny_model, chunk_size=48, chunk_overlap=6, context="lead").chunk(text)
    placed = TokenChunker(tiny_model, chunk_size=48, chunk_overlap=6, context="headings").chunk(text)
    assert [(c.start_char, c.end_char) for c in placed] == [(c.start_char, c.end_char) for c in led]
    paths = _open_headings(text)
    with_path = 0
    for chunk in placed[1:]:
        assert chunk.text[chunk.lead_chars :] == text[chunk.start_char : chunk.end_char]
        expected = section_lead(document_lead(text), paths(chunk.start_char))
        assert chunk.text[: chunk.lead_chars] == f"{expected}\n\n"
        with_path += SECTION_SEPARATOR in expected
    assert with_path > len(placed) // 2, "too few chunks under a heading for the test to see a path"
    assert placed[0] == led[0]


def _open_headings(text: str):
    """The open headings at a point by a line scan (the test's text has no code), the title aside."""

    def at(offset: int) -> tuple[str, ...]:
        stack: list[tuple[int, str]] = []
        for match in re.finditer(r"^(#+) (.*)$", text[:offset], re.MULTILINE):
            if match.start() == 0 or match.start() == offset:
                continue
            level = len(match.group(1))
            stack = [entry for entry in stack if entry[0] < level] + [(level, match.group(2))]
        opening = re.match(r"(#+) ", text[offset:])
        if opening and offset > 0:  # a chunk opening with a heading: that heading closes its level and deeper
            stack = [entry for entry in stack if entry[0] < len(opening.group(1))]
        return tuple(title for _, title in stack)

    return at


def test_lead_and_none_keep_the_signatures_their_collections_were_hashed_with(tiny_model):
    """A document's hash includes its chunker's signature: "lead" and "none" keep the form they had before
    "headings" existed, so a re-run into an older collection finds its documents unchanged."""
    signatures = {
        context: json.loads(TokenChunker(tiny_model, 48, 6, context=context).signature)[6]
        for context in ("none", "lead", "headings", "sections")
    }
    assert signatures == {"none": False, "lead": True, "headings": "headings", "sections": "sections"}


def test_sections_cut_chunks_at_headings_packing_whole_sections_and_splitting_long_ones(tiny_model):
    """chunk_context="sections": no chunk crosses a heading unless it holds whole sections; short sections share a
    chunk, a section over the budget is cut inside itself alone; the leads are "headings"'."""
    short = [f"## Note {i}\n\nSee part {i}." for i in range(4)]
    long = f"## Details\n\n{make_text(3, sentences=30)}"
    nested = f"### Deeper\n\n{make_text(4, sentences=2)}"
    # Sections a little over the budget: the other contexts' chunks run from one into the next.
    steps = [f"## Part {i}\n\n" + " ".join(f"Step {j} of {i}." for j in range(5)) for i in range(4)]
    text = "# Tides\n\nTides - the rise and fall of the sea.\n\n" + "\n\n".join([*short, long, nested, *steps])
    chunks = TokenChunker(tiny_model, chunk_size=48, chunk_overlap=6, context="sections").chunk(text)
    # Where a section starts and ends, by hand: heading lines (the text has no code), and the text's end.
    starts = [m.start() for m in re.finditer(r"^#+ ", text, re.MULTILINE)]
    bounds = set(starts) | {len(text)}
    unit_of = lambda offset: max(b for b in starts if b <= offset)  # noqa: E731

    def ends_section(end: int) -> bool:
        return any(text[end:b].strip() == "" for b in bounds if b >= end)

    paths = _open_headings(text)
    spans = []
    for chunk in chunks:
        start, end = chunk.start_char, chunk.end_char
        assert start is not None and end is not None
        assert chunk.text[chunk.lead_chars :] == text[start:end]
        if chunk.index:
            assert chunk.text[: chunk.lead_chars] == f"{section_lead(document_lead(text), paths(start))}\n\n"
        inside = [h for h in starts if start < h < end]
        if inside:  # whole sections only
            assert start in bounds or start == 0, (start, inside)
            assert ends_section(end), (end, inside)
        spans.append((start, end))
    # Every word of the text is in a chunk, and the chunks are in order.
    covered = [False] * len(text)
    for start, end in spans:
        covered[start:end] = [True] * (end - start)
    assert all(covered[i] for i, c in enumerate(text) if not c.isspace())
    assert spans == sorted(spans)
    # The four short notes go into fewer chunks than four, and the long section into several, each inside it.
    notes = [s for s in spans if unit_of(s[0]) in starts[1:5]]
    assert 1 <= len(notes) < 4
    details = text.index("## Details")
    in_details = [s for s in spans if unit_of(s[0]) == details]
    assert len(in_details) >= 3 and all(end <= text.index("### Deeper") for _, end in in_details)
    # The lead-only contexts cut across the headings instead.
    led = TokenChunker(tiny_model, chunk_size=48, chunk_overlap=6, context="headings").chunk(text)
    assert any(
        c.start_char < h < c.end_char and not (c.start_char in bounds and ends_section(c.end_char))
        for c in led
        for h in starts
    )


def test_sections_cuts_at_the_whole_texts_headings_in_a_text_streamed_in_parts(tiny_model):
    """A long text is chunked a part at a time; a part may start inside a fenced code block, where a ``#`` line is
    a comment, not a heading: "sections" cuts at the whole text's headings, so no chunk starts at that comment."""
    code = "\n\n".join(f"echo {i}" for i in range(30))
    text = (
        f"# Build\n\nHow to build it.\n\n```sh\n{code}\necho last\n# not a heading\necho more\n```\n\n## Real\n\nText."
    )
    comment = text.index("# not a heading")
    chunker = TokenChunker(tiny_model, chunk_size=48, chunk_overlap=6, section_chars=comment - 40, context="sections")
    chunks = chunker.chunk(text)
    assert any(c.start_char < comment for c in chunks[1:])
    assert comment not in {c.start_char for c in chunks}
    assert text.index("## Real") in {c.start_char for c in chunks}
    assert [h.text for h in headings(text)] == ["Build", "Real"]


def test_heading_around_is_the_heading_whose_source_holds_a_character():
    text = "# Title\n\nIntro.\n\nSetext two\nlines\n---\n\nBody.\n\n```sh\n# a comment\n```\n\n## Last\n"
    outline = Outline(text)
    setext = text.index("Setext")
    found = outline.heading_around(setext)
    assert found == Heading(setext, 2, "Setext two lines", text.index("---\n") + 4)  # the underline is its source
    assert outline.heading_around(text.index("---")) == found and outline.heading_around(found.end) is None
    last = text.index("## Last")
    assert outline.heading_around(last + 3) == Heading(last, 2, "Last", len(text))
    assert outline.heading_around(0) is None  # the title is the document's, not a section's
    assert outline.title() == Heading(0, 1, "Title", text.index("\n") + 1)
    assert Outline("\n\nIntro first.\n\n# Later\n").title() is None and Outline("No heading.").title() is None
    assert (
        outline.heading_around(text.index("# a comment")) is None
        and outline.heading_around(text.index("Intro")) is None
    )
