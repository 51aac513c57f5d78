"""PowerPoint 97-2003 decks (``.ppt``), read as ``.pptx`` decks are: one document per file, its slides in order,
each a title (``##``), its body text as list items, its other text boxes, and its speaker notes; each chunk told the
slide it starts on (``page_label``).

olefile opens the compound file. What is ours is the PowerPoint binary format ([MS-PPT]): the record tree of the
"PowerPoint Document" stream, the user edits and persist directories that say where the current version of each
slide is (a deck saved in place keeps its old versions too), the slide list that gives their order, and the text
atoms in each slide's shapes, typed by their text headers (title, body, notes). A deck whose edit chain cannot be
followed, or leads to no text, is read from the slides as they lie in the stream.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from c2v_rag.core.extras import Requirement
from c2v_rag.documents.formats.base import FileFormat, SkipFile, parse_file, titled_document
from c2v_rag.documents.formats.ole import OLE_MAGIC, compound_file, single_byte_codec, summary_title
from c2v_rag.documents.formats.slides import deck_documents
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

# Record types ([MS-PPT] 2.13.24).
_DOCUMENT, _SLIDE, _SLIDE_ATOM, _NOTES = 0x03E8, 0x03EE, 0x03EF, 0x03F0
_SLIDE_PERSIST_ATOM, _SLIDE_LIST_WITH_TEXT = 0x03F3, 0x0FF0
_OUTLINE_TEXT_REF, _TEXT_HEADER, _TEXT_CHARS, _TEXT_BYTES = 0x0F9E, 0x0F9F, 0x0FA0, 0x0FA8
_USER_EDIT, _PERSIST_DIRECTORY = 0x0FF5, 0x1772
# The slide list's instances: the slides (0) and the notes pages (2).
_SLIDES, _NOTES_PAGES = 0, 2
# Text types of a text header: title and centred title; body, centred, half and quarter body; notes.
_TITLES, _BODIES, _NOTES_TEXT = (0, 6), (1, 5, 7, 8), 2
_ENCRYPTED_TOKEN = 0xF3D1C4DF
_MAX_DEPTH = 32  # records nest a few levels deep; a damaged file may claim more


class LegacyPowerPoint(FileFormat):
    name = "PowerPoint 97-2003"
    suffixes = (".ppt", ".pps", ".pot")  # a show and a template are the same format
    requires = (Requirement("olefile", "olefile", "ppt"),)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        parsed = parse_file(file, options, log, ".ppt", lambda: ppt_slides(file.read_bytes(), file.suffix.lower()))
        if parsed is None:
            return
        title, slides = parsed
        if isinstance(slides, str):  # PowerPoint 95: the deck's text without its slides
            if slides:
                yield titled_document(file, root, title or None, slides)
            else:
                log.skip_file(file, "its slides hold no text (pictures only?)")
            return
        yield from deck_documents(file, root, log, title, slides)


def ppt_slides(data: bytes, suffix: str = ".ppt") -> tuple[str, list[tuple[str | None, str]] | str]:
    """A PowerPoint 97-2003 file's recorded title ("" without one) and its slides' (title, text as Markdown); for a
    PowerPoint 95 file, the text it keeps apart from its slides, as one string."""
    if not data.startswith(OLE_MAGIC):
        if data.startswith(b"PK\x03\x04"):
            raise SkipFile(f"a zip file under a {suffix} name: a {suffix}x saved as {suffix}? Rename it to {suffix}x")
        raise SkipFile("not a PowerPoint 97-2003 file (not an OLE compound file)")
    with compound_file(data, ".ppt") as ole:
        if ole.exists("EncryptedSummary"):
            raise SkipFile("it is encrypted (password-protected): save it without a password to read it")
        title, codepage = summary_title(ole)
        # A deck saved for PowerPoint 95 and 97 at once keeps the 97 version in a storage of its own.
        where = "PP97_DUALSTORAGE/" if ole.exists("PP97_DUALSTORAGE/PowerPoint Document") else ""
        if ole.exists("Header") and not where:  # PowerPoint 95
            if not ole.exists("Text_Content"):
                raise SkipFile("a PowerPoint 95 deck without its text stream: save it as .pptx to read it")
            # In the writer's code page, which the summary information records, as Word 6.0/95's text is.
            text = ole.openstream("Text_Content").read().decode(single_byte_codec(codepage), "replace")
            return title or "", _paragraphs(text)
        if ole.exists("PP40"):
            raise SkipFile("a PowerPoint 4.0 deck: open it in PowerPoint or LibreOffice and save it as .pptx")
        if not ole.exists(where + "PowerPoint Document"):
            raise SkipFile("an OLE file without a PowerPoint Document stream: not a PowerPoint 97-2003 deck")
        stream = ole.openstream(where + "PowerPoint Document").read()
        current = ole.openstream(where + "Current User").read() if ole.exists(where + "Current User") else b""
    if len(current) >= 20 and struct.unpack_from("<I", current, 12)[0] == _ENCRYPTED_TOKEN:
        raise SkipFile("it is encrypted (password-protected): save it without a password to read it")
    deck = _Deck(stream)
    slides = deck.slides_by_edits(current)
    if not any(slide.texts or slide.notes for slide in slides):
        slides = deck.slides_in_stream()  # a damaged edit chain can point at nothing: the slides as they lie
    return title or "", [_markdown(slide) for slide in slides]


def _paragraphs(text: str) -> str:
    """Text whose paragraphs end with a carriage return, as Markdown paragraphs."""
    return "\n\n".join(_lines(text))


def _lines(text: str) -> list[str]:
    """The paragraphs and line breaks (``\\x0b``) of a PowerPoint text, each a line, spaces collapsed, blanks out."""
    lines = (" ".join(line.split()) for line in text.replace("\x0b", "\r").split("\r"))
    return [line for line in lines if line]


@dataclass
class _SlideText:
    """What a slide holds: its texts with their types, and its notes'."""

    texts: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Record:
    kind: int
    instance: int
    start: int  # of its body
    end: int
    container: bool


class _Deck:
    def __init__(self, stream: bytes) -> None:
        self.stream = stream

    def records(self, start: int, end: int) -> Iterator[_Record]:
        """The records from ``start`` to ``end`` (one level); stops at one that runs past ``end``."""
        at = start
        while at + 8 <= end:
            info, kind, size = struct.unpack_from("<HHI", self.stream, at)
            body = at + 8
            if body + size > end:
                return
            yield _Record(kind, info >> 4, body, body + size, info & 0x0F == 0x0F)
            at = body + size

    def record_at(self, offset: int) -> _Record | None:
        if not 0 <= offset <= len(self.stream) - 8:
            return None
        return next(self.records(offset, len(self.stream)), None)

    def slides_by_edits(self, current: bytes) -> list[_SlideText]:
        """The slides in the order the current edit's slide list gives, each at the offset its persist id has
        now; [] when the edit chain cannot be followed."""
        if len(current) < 20:
            return []
        persist, document_ref = self._persist_directory(struct.unpack_from("<I", current, 16)[0])
        document = self.record_at(persist.get(document_ref, -1))
        if document is None or document.kind != _DOCUMENT:
            return []
        lists = {r.instance: r for r in self.records(document.start, document.end) if r.kind == _SLIDE_LIST_WITH_TEXT}
        notes_at = {slide_id: persist.get(ref, -1) for ref, slide_id, _ in self._slide_list(lists.get(_NOTES_PAGES))}
        slides = []
        for ref, _slide_id, outline in self._slide_list(lists.get(_SLIDES)):
            slide = self.record_at(persist.get(ref, -1))
            if slide is None or slide.kind != _SLIDE:
                continue
            slides.append(self._slide(slide, outline, notes_at))
        return slides

    def slides_in_stream(self) -> list[_SlideText]:
        """The slides as they lie in the stream, for a deck whose edit chain is damaged: paired in order with the
        last document's slide list (the texts their shapes point at) when the two count as many, else whichever of
        them holds text; no notes."""
        top = list(self.records(0, len(self.stream)))
        lying = [r for r in top if r.kind == _SLIDE]
        documents = [r for r in top if r.kind == _DOCUMENT]
        listed: list[list[tuple[int, str]]] = []
        if documents:
            slide_lists = self.records(documents[-1].start, documents[-1].end)
            slide_list = next(
                (r for r in slide_lists if r.kind == _SLIDE_LIST_WITH_TEXT and r.instance == _SLIDES), None
            )
            listed = [texts for _ref, _id, texts in self._slide_list(slide_list)]
        if len(listed) == len(lying):
            return [self._slide(slide, outline, {}) for slide, outline in zip(lying, listed)]
        from_stream = [self._slide(slide, [], {}) for slide in lying]
        if any(slide.texts for slide in from_stream) or not any(listed):
            return from_stream
        return [_SlideText(texts=list(texts)) for texts in listed]

    def _persist_directory(self, offset: int) -> tuple[dict[int, int], int]:
        """persist id -> stream offset, the newest edit's entries over older ones', and the document's persist id."""
        edits: list[_Record] = []
        seen: set[int] = set()
        while offset and offset not in seen and len(edits) < 10_000:
            seen.add(offset)
            edit = self.record_at(offset)
            if edit is None or edit.kind != _USER_EDIT or edit.end - edit.start < 20:
                break
            edits.append(edit)
            offset = struct.unpack_from("<I", self.stream, edit.start + 8)[0]  # offsetLastEdit
        persist: dict[int, int] = {}
        for edit in reversed(edits):  # oldest first: a newer edit's entries replace an older one's
            directory = self.record_at(struct.unpack_from("<I", self.stream, edit.start + 12)[0])
            if directory is None or directory.kind != _PERSIST_DIRECTORY:
                continue
            at = directory.start
            while at + 4 <= directory.end:
                (entry,) = struct.unpack_from("<I", self.stream, at)
                first, count = entry & 0xFFFFF, entry >> 20
                at += 4
                for n in range(min(count, (directory.end - at) // 4)):
                    persist[first + n] = struct.unpack_from("<I", self.stream, at + 4 * n)[0]
                at += 4 * count
        document_ref = struct.unpack_from("<I", self.stream, edits[0].start + 16)[0] if edits else -1
        return persist, document_ref

    def _slide_list(self, slide_list: _Record | None) -> Iterator[tuple[int, int, list[tuple[int, str]]]]:
        """(persist id, slide id, texts) of each slide a SlideListWithText names, in order: the texts that older
        PowerPoint keeps there, which a slide's shapes point at (OutlineTextRefAtom) rather than repeat."""
        if slide_list is None:
            return
        current: tuple[int, int] | None = None
        texts: list[tuple[int, str]] = []
        kind = -1
        for record in self.records(slide_list.start, slide_list.end):
            if record.kind == _SLIDE_PERSIST_ATOM and record.end - record.start >= 16:
                if current is not None:
                    yield *current, texts
                ref, _flags, _count, slide_id = struct.unpack_from("<IIiI", self.stream, record.start)
                current, texts = (ref, slide_id), []
            elif record.kind == _TEXT_HEADER and record.end - record.start >= 4:
                (kind,) = struct.unpack_from("<I", self.stream, record.start)
            elif record.kind in (_TEXT_CHARS, _TEXT_BYTES):
                texts.append((kind, self._text(record)))
        if current is not None:
            yield *current, texts

    def _slide(self, slide: _Record, outline: list[tuple[int, str]], notes_at: dict[int, int]) -> _SlideText:
        read = _SlideText()
        notes_id = None
        for record in self._walk(slide):
            if record.kind == _SLIDE_ATOM and record.end - record.start >= 20:
                notes_id = struct.unpack_from("<I", self.stream, record.start + 16)[0]
        read.texts = list(self._texts(slide, outline))
        if not read.texts:  # shapes that hold no text of their own and no reference: the slide list's texts
            read.texts = list(outline)
        notes = self.record_at(notes_at.get(notes_id, -1)) if notes_id else None
        if notes is not None and notes.kind == _NOTES:
            read.notes = [text for kind, text in self._texts(notes, []) if kind == _NOTES_TEXT]
        return read

    def _texts(self, container: _Record, outline: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
        """(text type, text) of each text atom under ``container``, in record order; a reference to the slide
        list's text ``n`` gives that text."""
        kind = -1
        for record in self._walk(container):
            if record.kind == _TEXT_HEADER and record.end - record.start >= 4:
                (kind,) = struct.unpack_from("<I", self.stream, record.start)
            elif record.kind in (_TEXT_CHARS, _TEXT_BYTES):
                yield kind, self._text(record)
            elif record.kind == _OUTLINE_TEXT_REF and record.end - record.start >= 4:
                (index,) = struct.unpack_from("<i", self.stream, record.start)
                if 0 <= index < len(outline):
                    yield outline[index]

    def _walk(self, container: _Record, depth: int = 0) -> Iterator[_Record]:
        """Every record under ``container``, depth first, in stream order."""
        for record in self.records(container.start, container.end):
            yield record
            if record.container and depth < _MAX_DEPTH:
                yield from self._walk(record, depth + 1)

    def _text(self, record: _Record) -> str:
        raw = self.stream[record.start : record.end]
        return raw.decode("utf-16-le", "replace") if record.kind == _TEXT_CHARS else raw.decode("latin-1")


def _markdown(slide: _SlideText) -> tuple[str | None, str]:
    """A slide's title and text: the title as a heading, body paragraphs as list items, other text boxes as they
    are, then the notes; the same shape ``.pptx`` slides read as."""
    title = None
    blocks: list[str] = []
    for kind, text in slide.texts:
        lines = _lines(text)
        if not lines:
            continue
        if kind in _TITLES and title is None:
            title = " ".join(lines)
            blocks.insert(0, f"## {title}")
        elif kind in _BODIES:
            blocks.append("\n".join(f"- {line}" for line in lines))
        else:
            blocks.append("\n".join(lines))
    notes = " ".join(" ".join(n.replace("\x0b", " ").replace("\r", " ").split()) for n in slide.notes).strip()
    if notes:
        blocks.append(f"Notes: {notes}")
    return title, "\n\n".join(blocks)
