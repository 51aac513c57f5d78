"""Word 97-2003 documents (``.doc``) as Markdown, one document per file: headings by their paragraph style, tables
as rows of cells, a field's result without its instructions; the main text, then footnotes, endnotes and text
boxes; headers, footers and comments left out, as for ``.docx``. The title is the one the file's summary
information records, else a first heading.

olefile opens the compound file. What is ours is the Word binary format itself ([MS-DOC]), which no maintained
library under a permissive license reads: the File Information Block, the piece table that says where each run of
the text lies and in which encoding, the paragraph properties (style, table cell and row ends) and the style sheet.

Word 6.0/95 files give their text alone (paragraphs; no headings or tables: their properties are another layout). A
``.doc`` that is not a Word binary file is read as what it is: RTF (Word saves RTF under ``.doc``) and plain text
(older documentation is ``.doc`` text); a ``.docx`` under a ``.doc`` name and an encrypted document are skipped with
the reason.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from c2v_rag.core.extras import Requirement
from c2v_rag.documents.formats.base import FileFormat, SkipFile, parse_file, titled_or_skipped
from c2v_rag.documents.formats.ole import OLE_MAGIC, compound_file, single_byte_codec, summary_title
from c2v_rag.documents.formats.rtf import Rtf
from c2v_rag.documents.formats.text import PlainText
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

_WORD_IDENT = 0xA5EC
# Word 97 writes nFib 0xC1 (later versions keep it in the base FIB); Word 6.0 and 95 wrote 0x65-0x68 under other
# idents, in another layout, of which their text is read.
_FIRST_WORD97_NFIB = 0xC0
_WORD6_IDENTS = (0xA5DC, 0xA699)
_F_COMPLEX = 0x0004
_F_ENCRYPTED = 0x0100
_F_WHICH_TABLE_STREAM = 0x0200
# Where the FIB's character counts sit in FibRgLw97, and its (fc, lcb) pairs in FibRgFcLcb97 ([MS-DOC] 2.5).
_CCP_TEXT, _CCP_TXBX = 3, 9  # ccpText, then footnotes, headers, macros, comments, endnotes, text boxes
_STSHF, _PLCF_BTE_PAPX, _CLX = 1, 13, 33
# Word 6.0/95's FIB: its character counts from ccpText on, and (fc, lcb) of a fast-saved file's pieces.
_WORD6_CCP_TEXT, _WORD6_CLX = 0x34, 0x160
# A piece stored as cp1252 bytes: its fc is twice its byte offset, with this bit set.
_EIGHT_BIT = 0x40000000
_FKP_SIZE = 512
# Paragraph property modifiers (sprms) that say a paragraph is in a table and which one ends its row.
_SPRM_IN_TABLE, _SPRM_TTP, _SPRM_ITAP, _SPRM_INNER_TTP = 0x2416, 0x2417, 0x6649, 0x244C
_SPRM_TDEF_TABLE, _SPRM_CHG_TABS = 0xD608, 0xC615
# Built-in style identifiers (sti): heading 1-9 are 1-9; the Title style is 62.
_STI_TITLE = 62
# The text's special characters ([MS-DOC] 2.8.25): paragraph and cell ends, breaks, fields, objects.
_PARAGRAPH_END, _CELL_END = "\r", "\x07"
_FIELD_BEGIN, _FIELD_SEPARATOR, _FIELD_END = "\x13", "\x14", "\x15"
_CHARACTERS = str.maketrans(
    {
        **{chr(c): None for c in range(0x20) if chr(c) not in "\n\t"},  # pictures, footnote marks, optional hyphens
        "\x0b": "\n",  # a line break within a paragraph
        "\x0c": "\n",  # a page or section break
        "\x0e": "\n",  # a column break
        "\x1e": "-",  # a non-breaking hyphen
        "\xa0": " ",
    }
)


class LegacyWord(FileFormat):
    name = "Word 97-2003"
    suffixes = (".doc", ".dot")  # a template is the same format
    # A .dot that is text is a Graphviz graph, no document: left out as a file of another type.
    shared_suffixes = (".dot",)
    page_rank = 3
    requires = (Requirement("olefile", "olefile", "doc"),)

    def accepts(self, file: Path, text_suffixes: Collection[str]) -> bool:
        if file.suffix.lower() not in self.shared_suffixes:
            return True
        try:
            with file.open("rb") as handle:
                head = handle.read(8)
        except OSError:  # an archive's member, named before it is copied out: read by what it holds
            return True
        return head == OLE_MAGIC or _is_rtf(head)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        with file.open("rb") as handle:
            head = handle.read(8)
        if _is_rtf(head):
            yield from _read_as(Rtf(), file, root, options, log)
            return
        if head != OLE_MAGIC:
            if head.startswith(b"PK\x03\x04"):
                suffix = file.suffix.lower()
                reason = f"a zip file under a {suffix} name: a {suffix}x saved as {suffix}? Rename it to {suffix}x"
                log.skip_file(file, reason)
                return
            yield from PlainText().read(file, root, options, log)  # a text file named .doc; binary junk is refused
            return
        parsed = parse_file(file, options, log, ".doc", lambda: word_text(file.read_bytes()))
        yield from titled_or_skipped(file, root, log, parsed)


def _is_rtf(head: bytes) -> bool:
    """Whether a file's first bytes open an RTF document (Word saves RTF under a .doc name)."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{\\rtf")


def _read_as(fmt: FileFormat, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
    missing = fmt.missing()
    if missing is not None:
        log.skip_file(file, f"it is a {fmt.name} file under a {file.suffix.lower()} name; {missing}")
        return
    yield from fmt.read(file, root, options, log)


def word_text(data: bytes) -> tuple[str | None, str]:
    """A Word 97-2003 (or 6.0/95) file's recorded title (None without one) and its text as Markdown."""
    with compound_file(data, ".doc") as ole:
        if not ole.exists("WordDocument"):
            raise SkipFile("an OLE file without a WordDocument stream: not a Word document (Excel? PowerPoint?)")
        word = ole.openstream("WordDocument").read()
        fib = _Fib.parse(word)
        table = b""
        if not fib.word6:
            table_name = "1Table" if fib.flags & _F_WHICH_TABLE_STREAM else "0Table"
            if not ole.exists(table_name):
                raise SkipFile(f"its {table_name} stream is missing: a damaged Word file")
            table = ole.openstream(table_name).read()
        title, codepage = summary_title(ole)
    if fib.word6:
        # Word 6.0/95 keeps its text 8-bit, in one run or (a fast-saved file) in pieces listed in the main stream, in
        # the writer's code page, which the summary information records (Word 97 on writes cp1252 or UTF-16).
        pieces = _Pieces.of_word6(word, fib, single_byte_codec(codepage))
        paragraphs = _ParagraphProperties(word, b"", {})  # its paragraph properties are another layout: none read
    else:
        pieces = _Pieces.of_clx(word, fib.blob(table, _CLX))
        stis = _style_identifiers(fib.blob(table, _STSHF))
        paragraphs = _ParagraphProperties(word, fib.blob(table, _PLCF_BTE_PAPX), stis)
    # The text's parts follow one another: main text, footnotes, headers, comments, endnotes, text boxes.
    starts = [0]
    for count in fib.counts:
        starts.append(starts[-1] + count)
    main, footnotes, _headers, _comments, endnotes, text_boxes = zip(starts, starts[1:])
    parts = [_Markdown(pieces, paragraphs).render(*span) for span in (main, footnotes, endnotes, text_boxes)]
    text = "\n\n".join(p for p in parts if p)
    if title is None and text.startswith("# "):
        title = text[2:].split("\n", 1)[0].strip() or None
    return title, text


@dataclass(frozen=True)
class _Fib:
    """What is read of the File Information Block at the start of the WordDocument stream."""

    flags: int
    counts: tuple[int, ...]  # characters of the main text, footnotes, headers, comments, endnotes, text boxes
    pairs: tuple[tuple[int, int], ...] = ()  # (offset, size) of structures in the table stream (Word 97 on)
    word6: bool = False
    text_start: int = 0  # Word 6.0/95: where an unfragmented text starts (fcMin)

    @classmethod
    def parse(cls, word: bytes) -> _Fib:
        if len(word) < 0x200:
            raise SkipFile("its WordDocument stream is too short: a damaged Word file")
        ident, nfib = struct.unpack_from("<HH", word, 0)
        flags = struct.unpack_from("<H", word, 0x0A)[0]
        if ident not in (_WORD_IDENT, *_WORD6_IDENTS):
            raise SkipFile("not a Word document (its WordDocument stream does not open as Word's)")
        if flags & _F_ENCRYPTED:
            raise SkipFile("it is encrypted (password-protected): save it without a password to read it")
        if nfib < _FIRST_WORD97_NFIB:
            counts = struct.unpack_from("<8i", word, _WORD6_CCP_TEXT)
            return cls(flags, _counts(counts), word6=True, text_start=struct.unpack_from("<I", word, 0x18)[0])
        at = 32  # after FibBase
        (csw,) = struct.unpack_from("<H", word, at)
        at += 2 + 2 * csw
        (cslw,) = struct.unpack_from("<H", word, at)
        longs = struct.unpack_from(f"<{cslw}i", word, at + 2)
        at += 2 + 4 * cslw
        (pair_count,) = struct.unpack_from("<H", word, at)
        if cslw <= _CCP_TXBX or pair_count <= _CLX or len(word) < at + 2 + 8 * pair_count:
            raise SkipFile("its File Information Block is cut short: a damaged Word file")
        raw = struct.unpack_from(f"<{2 * pair_count}I", word, at + 2)
        return cls(flags, _counts(longs[_CCP_TEXT:]), tuple(zip(raw[::2], raw[1::2])))

    def blob(self, table: bytes, index: int) -> bytes:
        offset, size = self.pairs[index]
        return table[offset : offset + size] if size and offset + size <= len(table) else b""


def _counts(ccps: tuple[int, ...]) -> tuple[int, ...]:
    """The FIB's character counts from ccpText on (text, footnotes, headers, macros, comments, endnotes, text
    boxes) as the six parts read: main text, footnotes, headers, comments, endnotes, text boxes."""
    text, footnotes, headers, _macros, comments, endnotes, text_boxes = (max(c, 0) for c in ccps[:7])
    return text, footnotes, headers, comments, endnotes, text_boxes


class _Pieces:
    """The piece table: where each run of character positions (CPs) is stored in the WordDocument stream, as
    cp1252 bytes ("compressed") or UTF-16."""

    def __init__(self, word: bytes, cps: tuple[int, ...], fcs: list[int], encoding: str = "cp1252") -> None:
        self.word = word
        self.encoding = encoding  # of the 8-bit pieces
        self.cps = cps  # where each piece starts, and the end of the last
        self.fcs = fcs  # each piece's place in the stream: a byte offset, or twice it with 0x40000000 for cp1252

    @classmethod
    def of_clx(cls, word: bytes, clx: bytes, word6_encoding: str | None = None) -> _Pieces:
        """The pieces a Clx lists (Word 6.0/95's are all 8-bit, at plain byte offsets)."""
        at = 0
        while at < len(clx) and clx[at] == 0x01:  # property modifiers of pieces (Prc): not needed for the text
            at += 3 + struct.unpack_from("<H", clx, at + 1)[0]
        if at + 5 > len(clx) or clx[at] != 0x02:
            raise SkipFile("its piece table is missing or damaged: a damaged Word file")
        (size,) = struct.unpack_from("<I", clx, at + 1)
        plc = clx[at + 5 : at + 5 + size]
        n = (len(plc) - 4) // 12
        if n <= 0:
            raise SkipFile("its piece table is empty: a damaged Word file")
        fcs = [struct.unpack_from("<I", plc, 4 * (n + 1) + 8 * k + 2)[0] for k in range(n)]
        cps = struct.unpack_from(f"<{n + 1}I", plc, 0)
        if word6_encoding is None:
            return cls(word, cps, fcs)
        return cls(word, cps, [_EIGHT_BIT | 2 * fc for fc in fcs], word6_encoding)

    @classmethod
    def of_word6(cls, word: bytes, fib: _Fib, encoding: str) -> _Pieces:
        if fib.flags & _F_COMPLEX:  # fast-saved: its pieces are listed in the main stream
            offset, size = struct.unpack_from("<II", word, _WORD6_CLX)
            return cls.of_clx(word, word[offset : offset + size], encoding)
        return cls(word, (0, sum(fib.counts) + 1), [_EIGHT_BIT | 2 * fib.text_start], encoding)

    def runs(self, start: int, end: int) -> Iterator[tuple[str, int, int]]:
        """The text of CPs ``start`` to ``end``, piece by piece: (text, its first FC, bytes a character)."""
        k = max(bisect.bisect_right(self.cps, start) - 1, 0)
        while k < len(self.fcs) and self.cps[k] < end:
            lo, hi = max(start, self.cps[k]), min(end, self.cps[k + 1])
            if hi > lo:
                fc = self.fcs[k]
                if fc & _EIGHT_BIT:
                    first = (fc & ~_EIGHT_BIT) // 2 + (lo - self.cps[k])
                    yield self.word[first : first + hi - lo].decode(self.encoding, "replace"), first, 1
                else:
                    first = fc + 2 * (lo - self.cps[k])
                    yield self.word[first : first + 2 * (hi - lo)].decode("utf-16-le", "replace"), first, 2
            k += 1


@dataclass(frozen=True)
class _Paragraph:
    heading: int  # 0: body text; 1-9: heading level (the Title style is 1)
    in_table: bool
    row_end: bool


_BODY = _Paragraph(0, False, False)


class _ParagraphProperties:
    """Each paragraph's style and table marks, looked up by the FC of its last character (its paragraph mark), from
    the formatted disk pages (FKPs) the PlcBtePapx points to."""

    def __init__(self, word: bytes, plc: bytes, stis: dict[int, int]) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.properties: list[_Paragraph] = []
        n = (len(plc) - 4) // 8
        if n <= 0:
            return
        pages = struct.unpack_from(f"<{n}I", plc, 4 * (n + 1))
        for pn in pages:
            page = word[(pn & 0x3FFFFF) * _FKP_SIZE :][:_FKP_SIZE]
            if len(page) < _FKP_SIZE:
                continue
            crun = page[-1]
            if 4 * (crun + 1) + 13 * crun > _FKP_SIZE - 1:
                continue
            fcs = struct.unpack_from(f"<{crun + 1}I", page, 0)
            for i in range(crun):
                offset = 2 * page[4 * (crun + 1) + 13 * i]
                self.starts.append(fcs[i])
                self.ends.append(fcs[i + 1])
                self.properties.append(_papx(page, offset, stis) if offset else _BODY)
        order = sorted(range(len(self.starts)), key=self.starts.__getitem__)
        self.starts = [self.starts[i] for i in order]
        self.ends = [self.ends[i] for i in order]
        self.properties = [self.properties[i] for i in order]

    def at(self, fc: int) -> _Paragraph | None:
        i = bisect.bisect_right(self.starts, fc) - 1
        return self.properties[i] if i >= 0 and fc < self.ends[i] else None


def _papx(page: bytes, offset: int, stis: dict[int, int]) -> _Paragraph:
    """A paragraph's properties from its PapxInFkp at ``offset`` in an FKP page: its style (istd) and sprms."""
    cb = page[offset]
    grpprl = page[offset + 2 : offset + 2 + 2 * page[offset + 1]] if cb == 0 else page[offset + 1 : offset + 2 * cb]
    if len(grpprl) < 2:
        return _BODY
    (istd,) = struct.unpack_from("<H", grpprl, 0)
    sti = stis.get(istd)
    heading = 1 if sti == _STI_TITLE else sti if sti is not None and 1 <= sti <= 9 else 0
    in_table = row_end = False
    for sprm, operand in _sprms(grpprl[2:]):
        if sprm in (_SPRM_IN_TABLE, _SPRM_ITAP):
            in_table = in_table or any(operand)
        elif sprm in (_SPRM_TTP, _SPRM_INNER_TTP):
            row_end = row_end or any(operand)
    return _Paragraph(heading, in_table or row_end, row_end)


def _sprms(grpprl: bytes) -> Iterator[tuple[int, bytes]]:
    """The (sprm, operand) pairs of a property list; stops at one cut short."""
    at = 0
    while at + 2 <= len(grpprl):
        (sprm,) = struct.unpack_from("<H", grpprl, at)
        at += 2
        size = (1, 1, 2, 4, 2, 2, 0, 3)[sprm >> 13]
        if size == 0:  # a variable-length operand: its size comes first
            if sprm == _SPRM_TDEF_TABLE and at + 2 <= len(grpprl):
                size = struct.unpack_from("<H", grpprl, at)[0] + 1
            elif sprm == _SPRM_CHG_TABS and at < len(grpprl) and grpprl[at] == 255:
                return  # its own layout, and not one this reader needs
            elif at < len(grpprl):
                size = grpprl[at] + 1
            else:
                return
        if at + size > len(grpprl):
            return
        yield sprm, grpprl[at : at + size]
        at += size


def _style_identifiers(stsh: bytes) -> dict[int, int]:
    """istd -> sti (the built-in style it is: heading 1-9, Title) from the style sheet (STSH)."""
    if len(stsh) < 6:
        return {}
    (cb_stshi,) = struct.unpack_from("<H", stsh, 0)
    cstd, _base_size = struct.unpack_from("<HH", stsh, 2)
    at = 2 + cb_stshi
    stis = {}
    for istd in range(cstd):
        if at + 2 > len(stsh):
            break
        (cb_std,) = struct.unpack_from("<H", stsh, at)
        if cb_std >= 2 and at + 4 <= len(stsh):
            stis[istd] = struct.unpack_from("<H", stsh, at + 2)[0] & 0x0FFF
        at += 2 + cb_std
    return stis


class _Markdown:
    """Paragraphs of a span of the text as Markdown blocks: headings, tables' rows of cells, fields' results."""

    def __init__(self, pieces: _Pieces, paragraphs: _ParagraphProperties) -> None:
        self.pieces = pieces
        self.paragraphs = paragraphs
        self.fields: list[bool] = []  # one per open field: True once its separator is passed (its result shows)

    def render(self, start: int, end: int) -> str:
        blocks: list[str] = []
        rows: list[str] = []
        cells: list[str] = []
        cell: list[str] = []
        text: list[str] = []
        for mark, _fc, paragraph in self._paragraphs(start, end, text):
            line = " ".join("".join(text).translate(_CHARACTERS).split())
            text.clear()
            props = paragraph or (_Paragraph(0, True, not line and not cell) if mark == _CELL_END else _BODY)
            if props.row_end:
                if cells:
                    rows.append(" | ".join(c for c in cells if c))
                cells, cell = [], []
            elif mark == _CELL_END:
                cells.append(" ".join([*cell, line]).strip())
                cell = []
            elif props.in_table:
                cell.append(line)  # a paragraph inside a cell
            else:
                if rows:
                    blocks.append("\n".join(r for r in rows if r))
                    rows = []
                if line:
                    blocks.append(f"{'#' * min(props.heading, 6)} {line}" if props.heading else line)
        if cells:
            rows.append(" | ".join(c for c in cells if c))
        if rows:
            blocks.append("\n".join(r for r in rows if r))
        return "\n\n".join(b for b in blocks if b)

    def _paragraphs(self, start: int, end: int, text: list[str]) -> Iterator[tuple[str, int, _Paragraph | None]]:
        """Each paragraph's mark, FC and properties, once its shown text (fields' instructions left out) is in
        ``text``."""
        for run, first_fc, width in self.pieces.runs(start, end):
            for i, char in enumerate(run):
                if char in (_PARAGRAPH_END, _CELL_END):
                    fc = first_fc + width * i
                    yield char, fc, self.paragraphs.at(fc)
                elif char == _FIELD_BEGIN:
                    self.fields.append(False)
                elif char == _FIELD_SEPARATOR:
                    if self.fields:
                        self.fields[-1] = True
                elif char == _FIELD_END:
                    if self.fields:
                        self.fields.pop()
                elif all(self.fields):
                    text.append(char)
        if text:
            yield _PARAGRAPH_END, -1, None
