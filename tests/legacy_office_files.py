"""Word 97-2003 (.doc) and PowerPoint 97-2003 (.ppt) files for the reading tests, written by hand as [MS-CFB],
[MS-DOC] and [MS-PPT] lay them out: no maintained Python library writes the formats. The readers were also checked
on files Word and PowerPoint wrote (``bench/results/read_formats_doc_avx2.json`` and the commits say which); these
let the committed tests say what each structure must give.

A Word paragraph is ``(text, style, table)``: ``text`` without its mark, ``style`` an index into ``STYLES``,
``table`` ``None`` (body text), ``"cell"`` (the text ends a table cell, ``\\x07``) or ``"row"`` (a row-end mark).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

# The style sheet written: istd -> sti. Heading 2 sits at istd 3, so a reader that took istd for the level fails.
STYLES = {0: 0, 1: 1, 2: 62, 3: 2}  # Normal, heading 1, Title, heading 2
NORMAL, HEADING_1, TITLE, HEADING_2 = 0, 1, 2, 3

_SECTOR = 512
_END_OF_CHAIN, _FAT_SECTOR, _FREE, _NO_STREAM = 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF, 0xFFFFFFFF
_TEXT_AT = 0x800  # where the text starts in the WordDocument stream (after the FIB)


def write_doc(
    path: Path,
    paragraphs: Sequence[tuple[str, int, str | None]],
    *,
    footnotes: Sequence[str] = (),
    title: str | None = None,
    encrypted: bool = False,
) -> Path:
    """A Word 97 document of ``paragraphs`` (then ``footnotes``, as the footnote story's paragraphs), its summary
    information recording ``title``. The text is stored in two pieces, as Word stores text typed outside cp1252:
    cp1252 bytes up to the first paragraph with such a character, UTF-16 from there."""
    marks = []
    for text, _style, table in paragraphs:
        marks.append(text + ("\x07" if table else "\r"))
    story = "".join(marks)
    notes = "".join(f"\x02 {note}\r" for note in footnotes)
    full = story + notes
    unicode_from = next((i for i, m in enumerate(marks) if not _in_cp1252(m)), len(marks))
    split = len("".join(marks[:unicode_from]))
    first, second = full[:split], full[split:]
    first_bytes = first.encode("cp1252")
    second_at = _TEXT_AT + len(first_bytes) + (len(first_bytes) % 2)
    second_bytes = second.encode("utf-16-le")
    fkp_page = (second_at + len(second_bytes) + _SECTOR - 1) // _SECTOR + 1

    # Each paragraph's FC range (bytes in the stream) and its properties.
    runs = []
    fc_positions = [(_TEXT_AT + i) for i in range(len(first))] + [second_at + 2 * i for i in range(len(second))]
    start = 0
    props = [*((style, table) for _t, style, table in paragraphs), *((NORMAL, None) for _ in footnotes)]
    for (style, table), mark in zip(props, [*marks, *(f"\x02 {n}\r" for n in footnotes)]):
        end = start + len(mark)
        last = fc_positions[end - 1]
        width = 1 if end - 1 < split else 2
        runs.append((fc_positions[start], last + width, style, table))
        start = end

    word = bytearray(fkp_page * _SECTOR + _SECTOR)
    word[_TEXT_AT : _TEXT_AT + len(first_bytes)] = first_bytes
    word[second_at : second_at + len(second_bytes)] = second_bytes
    word[fkp_page * _SECTOR : (fkp_page + 1) * _SECTOR] = _papx_fkp(runs)

    table = bytearray()
    pairs: dict[int, tuple[int, int]] = {}
    for index, blob in (
        (1, _style_sheet()),
        (13, struct.pack("<III", runs[0][0], runs[-1][1], fkp_page)),
        (33, _clx(len(first), len(second), second_at)),
    ):
        pairs[index] = (len(table), len(blob))
        table += blob
    word[:_TEXT_AT] = _fib(len(story), len(notes), pairs, encrypted)[:_TEXT_AT]
    streams = {"WordDocument": bytes(word), "1Table": bytes(table)}
    if title is not None:
        streams["\x05SummaryInformation"] = _summary_information(title)
    path.write_bytes(_compound_file(streams))
    return path


def _in_cp1252(text: str) -> bool:
    try:
        text.encode("cp1252")
    except UnicodeEncodeError:
        return False
    return True


def _fib(ccp_text: int, ccp_footnotes: int, pairs: dict[int, tuple[int, int]], encrypted: bool) -> bytes:
    flags = 0x0200 | (0x0100 if encrypted else 0)  # the 1Table stream; encrypted
    base = struct.pack("<HHHHHHHH", 0xA5EC, 0x00C1, 0, 0x0409, 0, flags, 0x00BF, 0) + bytes(16)
    longs = [0] * 22
    longs[3], longs[4] = ccp_text, ccp_footnotes
    raw = [0] * (2 * 93)
    for index, (fc, lcb) in pairs.items():
        raw[2 * index], raw[2 * index + 1] = fc, lcb
    fib = (
        base
        + struct.pack("<H", 14)
        + bytes(28)
        + struct.pack("<H", 22)
        + struct.pack("<22i", *longs)
        + struct.pack("<H", 93)
        + struct.pack(f"<{2 * 93}I", *raw)
        + struct.pack("<H", 0)
    )
    return fib + bytes(_TEXT_AT - len(fib))


def _clx(eight_bit: int, utf16: int, second_at: int) -> bytes:
    """A piece table of two pieces: ``eight_bit`` characters as cp1252 at _TEXT_AT, ``utf16`` at ``second_at``."""
    cps = [0, eight_bit] + ([eight_bit + utf16] if utf16 else [])
    pcds = [struct.pack("<HIH", 0, 0x40000000 | (2 * _TEXT_AT), 0)]
    if utf16:
        pcds.append(struct.pack("<HIH", 0, second_at, 0))
    plc = struct.pack(f"<{len(cps)}I", *cps) + b"".join(pcds)
    # A property modifier piece (Prc) first, as Word writes for fast-saved files: the reader steps over it.
    return b"\x01" + struct.pack("<H", 3) + b"\x03\x24\x01" + b"\x02" + struct.pack("<I", len(plc)) + plc


def _papx_fkp(runs: list[tuple[int, int, int, str | None]]) -> bytes:
    page = bytearray(_SECTOR)
    crun = len(runs)
    struct.pack_into(f"<{crun + 1}I", page, 0, *[r[0] for r in runs], runs[-1][1])
    at = _SECTOR - 1
    for i, (_start, _end, style, table) in enumerate(runs):
        grpprl = struct.pack("<H", style)
        if table:
            grpprl += struct.pack("<HB", 0x2416, 1)  # sprmPFInTable
        if table == "row":
            grpprl += struct.pack("<HB", 0x2417, 1)  # sprmPFTtp
        papx = (
            bytes([0, len(grpprl) // 2]) + grpprl if len(grpprl) % 2 == 0 else bytes([(len(grpprl) + 1) // 2]) + grpprl
        )
        at -= len(papx)
        at -= at % 2
        page[at : at + len(papx)] = papx
        page[4 * (crun + 1) + 13 * i] = at // 2
    page[-1] = crun
    return bytes(page)


def _style_sheet() -> bytes:
    stshif = struct.pack("<HHHHHHHHH", len(STYLES), 0x0A, 0, 0x5B, 0x0F, 0, 0, 0, 0)
    out = struct.pack("<H", len(stshif)) + stshif
    for istd in range(len(STYLES)):
        name = ["Normal", "heading 1", "Title", "heading 2"][istd].encode("utf-16-le")
        std = struct.pack("<H", STYLES[istd]) + bytes(8) + struct.pack("<H", len(name) // 2) + name + b"\x00\x00"
        out += struct.pack("<H", len(std)) + std
    return out


def _summary_information(title: str) -> bytes:
    fmtid = bytes.fromhex("E0859FF2F94F6810AB9108002B27B3D9")
    encoded = title.encode("cp1252") + b"\x00"
    encoded += bytes(-len(encoded) % 4)
    codepage = struct.pack("<IhH", 2, 1252, 0)  # VT_I2
    title_value = struct.pack("<II", 30, len(title.encode("cp1252")) + 1) + encoded  # VT_LPSTR
    header = 8 + 2 * 8
    section = struct.pack("<II", header + len(codepage) + len(title_value), 2)
    section += struct.pack("<IIII", 1, header, 2, header + len(codepage)) + codepage + title_value
    return struct.pack("<HHI16sI", 0xFFFE, 0, 0x00020005, bytes(16), 1) + fmtid + struct.pack("<I", 48) + section


def _compound_file(streams: dict[str, bytes]) -> bytes:
    """A compound file (version 3, 512-byte sectors) of ``streams``, each padded to 4,096 bytes or more so that
    none goes to the mini stream."""
    data = {n: streams[n] + bytes(max(4096 - len(streams[n]), 0)) for n in streams}
    sectors: list[bytes] = []
    fat: list[int] = []
    starts = {}
    for name in streams:
        blob = data[name] + bytes(-len(data[name]) % _SECTOR)
        count = len(blob) // _SECTOR
        starts[name] = len(sectors)
        sectors += [blob[i * _SECTOR : (i + 1) * _SECTOR] for i in range(count)]
        fat += [*range(starts[name] + 1, starts[name] + count), _END_OF_CHAIN]
    # The tree: the root's children, and each storage's ("storage/stream" names, storages inside storages too), as
    # chains of right siblings in the format's order (shorter names first).
    children: dict[str, list[str]] = {"": []}

    def place(name: str) -> None:
        storage = name.rpartition("/")[0]
        if storage and storage not in children:
            children[storage] = []
            place(storage)
        children[storage].append(name)

    for name in streams:
        place(name)
    ids: dict[str, int] = {}
    order = ["Root Entry"]
    for parent in children:
        children[parent].sort(key=lambda n: (len(n.rpartition("/")[2]), n.rpartition("/")[2].upper()))
        for name in children[parent]:
            ids[name] = len(order)
            order.append(name)
    entries = [_dir_entry("Root Entry", 5, _NO_STREAM, ids[children[""][0]], _END_OF_CHAIN, 0)]
    for name in order[1:]:
        siblings = children[name.rpartition("/")[0]]
        at = siblings.index(name)
        right = ids[siblings[at + 1]] if at + 1 < len(siblings) else _NO_STREAM
        leaf = name.rpartition("/")[2]
        if name in children:  # a storage
            entries.append(_dir_entry(leaf, 1, right, ids[children[name][0]], 0, 0))
        else:
            entries.append(_dir_entry(leaf, 2, right, _NO_STREAM, starts[name], len(streams[name]), len(data[name])))
    directory = b"".join(entries)
    directory += bytes(-len(directory) % _SECTOR)
    dir_start = len(sectors)
    dir_count = len(directory) // _SECTOR
    sectors += [directory[i * _SECTOR : (i + 1) * _SECTOR] for i in range(dir_count)]
    fat += [*range(dir_start + 1, dir_start + dir_count), _END_OF_CHAIN]
    fat_count = (len(fat) + 127 + 1) // 128
    while fat_count * 128 < len(fat) + fat_count:
        fat_count += 1
    fat_start = len(sectors)
    fat += [_FAT_SECTOR] * fat_count
    fat += [_FREE] * (fat_count * 128 - len(fat))
    fat_bytes = struct.pack(f"<{len(fat)}I", *fat)
    sectors += [fat_bytes[i * _SECTOR : (i + 1) * _SECTOR] for i in range(fat_count)]
    difat = [fat_start + i for i in range(fat_count)] + [_FREE] * (109 - fat_count)
    header = (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
        + bytes(16)
        + struct.pack("<HHHHH", 0x003E, 0x0003, 0xFFFE, 9, 6)
        + bytes(6)
        + struct.pack("<IIIIIIIII", 0, fat_count, dir_start, 0, 4096, _END_OF_CHAIN, 0, _END_OF_CHAIN, 0)
        + struct.pack("<109I", *difat)
    )
    return header + b"".join(sectors)


def _dir_entry(name: str, kind: int, right: int, child: int, start: int, size: int, padded: int = 0) -> bytes:
    encoded = name.encode("utf-16-le") + b"\x00\x00"
    # A stream's recorded size is its padded size: olefile reads streams under 4,096 bytes from the mini stream.
    recorded = max(size, padded)
    return (
        encoded
        + bytes(64 - len(encoded))
        + struct.pack("<HBB", len(encoded), kind, 1)
        + struct.pack("<III", _NO_STREAM, right, child)
        + bytes(16 + 4 + 16)
        + struct.pack("<IQ", start, recorded)
    )


def write_ppt(path: Path, *, title: str | None = None, encrypted: bool = False) -> Path:
    """A deck of two slides and one notes page, saved twice as PowerPoint saves in place: the first save's slide 2
    ("Old draft") is superseded by the second's, which lies first in the stream. Slide 1 keeps its title and body in
    the slide list and points at them from its shapes (OutlineTextRefAtom), as PowerPoint 97-2003 does; its third
    text box, slide 2's texts and the notes lie in the shapes themselves."""

    def rec(kind: int, body: bytes = b"", instance: int = 0, container: bool = False) -> bytes:
        return struct.pack("<HHI", (instance << 4) | (0x0F if container else 0), kind, len(body)) + body

    def header(kind: int) -> bytes:
        return rec(0x0F9F, struct.pack("<I", kind))

    def chars(text: str) -> bytes:
        return rec(0x0FA0, text.encode("utf-16-le"))

    def textbox(*atoms: bytes) -> bytes:  # a shape holding a text box
        return rec(0xF004, rec(0xF00D, b"".join(atoms), container=True), container=True)

    def drawing(*shapes: bytes) -> bytes:
        return rec(0x040C, rec(0xF002, rec(0xF003, b"".join(shapes), container=True), container=True), container=True)

    def slide(notes_id: int, *shapes: bytes) -> bytes:
        return rec(
            0x03EE, rec(0x03EF, bytes(16) + struct.pack("<IHH", notes_id, 0, 0)) + drawing(*shapes), container=True
        )

    def persist_atom(ref: int, slide_id: int) -> bytes:
        return rec(0x03F3, struct.pack("<IIiII", ref, 0, 0, slide_id, 0))

    slide_list = (
        persist_atom(2, 256) + header(0) + chars("Tides") + header(1) + rec(0x0FA8, b"The Moon pulls\rand the Sun")
    )
    slide_list += persist_atom(3, 257)
    document = rec(
        0x03E8,
        rec(0x0FF0, slide_list, instance=0, container=True)
        + rec(0x0FF0, persist_atom(4, 300), instance=2, container=True),
        container=True,
    )
    new_slide_2 = slide(0, textbox(header(0), chars("Ranges")), textbox(header(1), rec(0x0FA8, b"Brest 7 m")))
    stream = bytearray(new_slide_2)  # the second save's slide 2, first in the stream
    offsets = {3: 0}
    offsets[1] = len(stream)
    stream += document
    offsets[2] = len(stream)
    ref = struct.pack("<i", 0)
    stream += slide(
        300,
        textbox(header(0), rec(0x0F9E, ref)),
        textbox(header(1), rec(0x0F9E, struct.pack("<i", 1))),
        textbox(header(4), chars("Source: the tide log")),
    )
    offsets[4] = len(stream)
    stream += rec(0x03F0, drawing(textbox(header(2), chars("Mention the equinox."))), container=True)
    old_slide_2 = len(stream)
    stream += slide(0, textbox(header(0), chars("Old draft")))

    def directory(entries: dict[int, int]) -> bytes:
        body = b"".join(struct.pack("<II", ref | (1 << 20), at) for ref, at in sorted(entries.items()))
        return rec(0x1772, body)

    def user_edit(last_edit: int, directory_at: int) -> bytes:
        return rec(0x0FF5, struct.pack("<IHBBIIIIHH", 257, 0, 0, 3, last_edit, directory_at, 1, 5, 1, 0))

    first_directory = len(stream)
    stream += directory({1: offsets[1], 2: offsets[2], 3: old_slide_2, 4: offsets[4]})
    first_edit = len(stream)
    stream += user_edit(0, first_directory)
    second_directory = len(stream)
    stream += directory({3: offsets[3]})
    current_edit = len(stream)
    stream += user_edit(first_edit, second_directory)
    token = 0xF3D1C4DF if encrypted else 0xE391C05F
    current = rec(0x0FF6, struct.pack("<IIIHHBBH", 0x14, token, current_edit, 0, 0x03F4, 3, 0, 0))
    streams = {"PowerPoint Document": bytes(stream), "Current User": current}
    if title is not None:
        streams["\x05SummaryInformation"] = _summary_information(title)
    path.write_bytes(_compound_file(streams))
    return path


class AttachedMsg(NamedTuple):
    """A message attached to an Outlook message (``write_msg``'s ``attachments``), as Outlook stores a mail dragged
    into another: a storage holding the message, not bytes. ``name`` None: the attachment has no file name."""

    name: str | None
    subject: str
    body: str
    attachments: tuple[str | tuple[str, bytes] | AttachedMsg, ...] = ()


def write_msg(
    path: Path,
    *,
    subject: str = "Spring tides next week",
    body: str | None = "The range peaks on Friday.\r\n\r\n-- \r\nAda",
    html: bytes | None = None,
    attachments: Sequence[str | tuple[str, bytes] | AttachedMsg] = ("tables.pdf",),
    sender_address: str = "/O=EXCHANGELABS/OU=EXCHANGE ADMINISTRATIVE GROUP/CN=RECIPIENTS/CN=ADA",
    locale: int | None = None,
) -> Path:
    """An Outlook message as Outlook saves one ([MS-OXMSG]): strings as UTF-16 property streams, the sender's
    Exchange (X.500) address beside its SMTP one, the submit time in the property stream; ``html`` an HTML body
    stored as bytes; each of ``attachments`` a storage with its file name (and its bytes, given a (name, bytes)
    pair; an :class:`AttachedMsg` as a message stored inside it). With ``locale`` (an LCID), the subject is stored
    8-bit in that locale's code page, as older Outlook versions store strings."""
    streams = _msg_streams(
        "", subject, body, html, attachments, sender_address=sender_address, locale=locale, header=32
    )
    path.write_bytes(_compound_file(streams))
    return path


def _msg_streams(
    prefix: str,
    subject: str,
    body: str | None,
    html: bytes | None,
    attachments: Sequence[str | tuple[str, bytes] | AttachedMsg],
    *,
    sender_address: str,
    locale: int | None,
    header: int,
) -> dict[str, bytes]:
    """The streams of one message under ``prefix`` (its storage's path and ``/``; the root's is ""); ``header``: its
    property stream's header size (32 for the file's message, 24 for an attached one)."""

    def unicode(prop: int, text: str) -> tuple[str, bytes]:
        return f"{prefix}__substg1.0_{prop:04X}001F", text.encode("utf-16-le") + b"\x00\x00"

    streams = dict(
        [
            unicode(0x0C1A, "Ada Lovelace"),
            unicode(0x0C1F, sender_address),
            unicode(0x5D01, "ada@example.org"),
            unicode(0x0E04, "Tide desk"),
            unicode(0x0E03, "Harbour office"),
        ]
    )
    fixed = [(0x0039, 0x0040, 133_566_102_000_000_000)]  # PidTagClientSubmitTime: 2024-04-03 09:30:00 UTC
    if locale is None:
        streams.update([unicode(0x0037, subject)])
    else:
        codepage = {1049: "cp1251", 1031: "cp1252"}[locale]
        streams[f"{prefix}__substg1.0_0037001E"] = subject.encode(codepage) + b"\x00"
        fixed.append((0x3FF1, 0x0003, locale))
    if body is not None:
        streams.update([unicode(0x1000, body)])
    if html is not None:
        streams[f"{prefix}__substg1.0_10130102"] = html
    for n, attachment in enumerate(attachments):
        storage = f"{prefix}__attach_version1.0_#{n:08X}"
        if isinstance(attachment, AttachedMsg):
            if attachment.name is not None:
                streams[f"{storage}/__substg1.0_3707001F"] = attachment.name.encode("utf-16-le") + b"\x00\x00"
            streams.update(
                _msg_streams(
                    f"{storage}/__substg1.0_3701000D/",
                    attachment.subject,
                    attachment.body,
                    None,
                    attachment.attachments,
                    sender_address=sender_address,
                    locale=None,
                    header=24,
                )
            )
        else:
            name, content = (attachment, None) if isinstance(attachment, str) else attachment
            streams[f"{storage}/__substg1.0_3707001F"] = name.encode("utf-16-le") + b"\x00\x00"
            if content is not None:
                streams[f"{storage}/__substg1.0_37010102"] = content
        streams[f"{storage}/__properties_version1.0"] = bytes(8)
    properties = bytes(header) + b"".join(
        struct.pack("<IIQ", (prop << 16) | kind, 0, value) for prop, kind, value in fixed
    )
    streams[f"{prefix}__properties_version1.0"] = properties
    return streams
