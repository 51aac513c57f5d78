"""PowerPoint decks (.pptx, and the macro-enabled .pptm, shows .ppsx/.ppsm and templates .potx/.potm, which hold
the same parts): one document per file, its slides in order, each chunk told the slide it starts on
(``page_label``: ``1``, ``2``...).

A slide reads as its title (a Markdown heading), its text boxes and placeholders top to bottom (list levels as
indented items), its tables as rows of cells, and its speaker notes, which often say what the slide only shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from c2v_rag.core.extras import Requirement
from c2v_rag.documents.formats.base import (
    FileFormat,
    file_document,
    join_pages,
    led_by_title,
    office_main_part,
    parse_file,
    shift_pages,
)
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

# Titles PowerPoint and its templates record for a deck nobody named: not the deck's title.
_UNNAMED = frozenset(
    {
        "powerpoint presentation", "presentation", "slide 1", "no slide title",
        # PowerPoint's German, French, Spanish, Italian and Japanese defaults
        "powerpoint-präsentation", "folie 1", "présentation powerpoint", "diapositive 1",
        "presentación de powerpoint", "diapositiva 1", "presentazione standard di powerpoint",
        "powerpoint プレゼンテーション", "スライド 1",
    }
)  # fmt: skip


class Slides(FileFormat):
    name = "PowerPoint"
    suffixes = (".pptx", ".pptm", ".ppsx", ".ppsm", ".potx", ".potm")
    requires = (Requirement("pptx", "python-pptx", "pptx"),)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        parsed = parse_file(file, options, log, file.suffix.lower(), lambda: _recorded_title_and_slides(file))
        if parsed is None:
            return
        yield from deck_documents(file, root, log, *parsed)


def deck_documents(
    file: Path, root: str, log: ReadLog, recorded: str, slides: list[tuple[str | None, str]]
) -> Iterator[SourceDocument]:
    """A deck's document from its recorded title and its slides' (title, text): the slides in order, each chunk's
    ``page_label`` the slide it starts on, led by the recorded title (an application's unnamed default aside), else
    the first slide title; nothing, and a skip, for a deck of pictures alone."""
    if not any(text for _, text in slides):
        log.skip_file(file, "its slides hold no text (pictures only?)")
        return
    title = recorded if recorded.casefold() not in _UNNAMED else None
    title = title or next((heading for heading, _ in slides if heading), None)
    joined, pages = join_pages([text for _, text in slides], [str(n) for n in range(1, len(slides) + 1)])
    text = led_by_title(title, joined)
    pages = shift_pages(pages, len(text) - len(joined))
    yield file_document(file, root, text, {"title": title} if title else None, pages, lead=title or "")


# The main part's content type in a macro-enabled show and template. python-pptx maps a deck's, a macro-enabled
# deck's, a show's and a template's to its presentation part, not these two (and pptx.Presentation refuses all but
# the first two); their XML is the same.
_POWERPOINT_VARIANTS = (
    "application/vnd.ms-powerpoint.slideshow.macroEnabled.main+xml",
    "application/vnd.ms-powerpoint.template.macroEnabled.main+xml",
)


def _recorded_title_and_slides(file: Path) -> tuple[str, list[tuple[str | None, str]]]:
    from pptx.opc.package import PartFactory
    from pptx.package import Package
    from pptx.parts.presentation import PresentationPart

    variants = _POWERPOINT_VARIANTS
    deck = office_main_part(file, Package, PartFactory, PresentationPart, variants, "PowerPoint deck").presentation
    return " ".join((deck.core_properties.title or "").split()), [_slide_text(slide) for slide in deck.slides]


def _slide_text(slide: Any) -> tuple[str | None, str]:
    """A slide's title and its text as Markdown (``""`` for a slide of pictures)."""
    title_shape = slide.shapes.title
    title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None else ""
    blocks = [f"## {title}"] if title else []
    for shape in _reading_order(slide.shapes):
        if title_shape is not None and shape.shape_id == title_shape.shape_id:
            continue
        if getattr(shape, "has_table", False) and shape.has_table:
            rows = (" | ".join(" ".join(cell.text.split()) for cell in row.cells) for row in shape.table.rows)
            blocks.append("\n".join(row for row in rows if row.strip(" |")))
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            blocks.append(_frame_text(shape.text_frame, listed=_is_body(shape)))
    if slide.has_notes_slide:
        notes = slide.notes_slide.notes_text_frame
        if notes is not None and notes.text.strip():
            blocks.append(f"Notes: {notes.text.strip()}")
    return title or None, "\n\n".join(block for block in blocks if block)


def _reading_order(shapes: Iterable[Any]) -> list[Any]:
    """A slide's shapes, those in groups too, top to bottom and left to right, as a reader takes them in."""
    flat: list[Any] = []
    for shape in shapes:
        if hasattr(shape, "shapes"):  # a group
            flat.extend(_reading_order(shape.shapes))
        else:
            flat.append(shape)
    return sorted(flat, key=lambda shape: (shape.top or 0, shape.left or 0))


def _is_body(shape: Any) -> bool:
    """Whether ``shape`` is a layout's body (its bulleted content), not a subtitle, a date or a text box."""
    from pptx.enum.shapes import PP_PLACEHOLDER

    return bool(shape.is_placeholder) and shape.placeholder_format.type in (PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT)


def _frame_text(frame: Any, listed: bool) -> str:
    """A text frame's paragraphs, one a line; in a slide's body each is a list item, indented by its level."""
    lines = []
    for paragraph in frame.paragraphs:
        text = " ".join(paragraph.text.split())
        if text:
            lines.append(f"{'  ' * paragraph.level}- {text}" if listed or paragraph.level else text)
    return "\n".join(lines)
