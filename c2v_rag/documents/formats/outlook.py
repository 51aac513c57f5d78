"""Outlook messages (``.msg``, as Outlook saves a mail dragged out of it): one document per file, read as an
``.eml`` is: the subject leading as a heading, the ``From``, ``To``, ``Cc`` and ``Date`` lines, the plain-text body
(else the HTML body as Markdown, the ``html`` extra); attachments' names in the metadata, and each attached file a
format reads as documents of its own, as an ``.eml``'s are. An attached message (a mail dragged into another) is
read as an attached ``.eml`` is: a message of its own, with its own attachments.

olefile opens the compound file. What is ours is the message's layout ([MS-OXMSG]): each property a stream named by
its tag (``__substg1.0_0037001F``, the subject as UTF-16), fixed-size ones (the dates) in the property stream, each
attachment a storage of its own. (extract-msg, the maintained reader, is GPL-3.0.)
"""

from __future__ import annotations

import datetime
import email.message
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.header import Header
from pathlib import Path
from typing import Any

from c2v_rag.core.errors import MissingPackageError
from c2v_rag.core.extras import Requirement
from c2v_rag.documents.formats.base import FileFormat, SkipFile, file_document, parse_file
from c2v_rag.documents.formats.mail import attachment_documents, eml_name, html_body, mail_layout
from c2v_rag.documents.formats.ole import OLE_MAGIC, compound_file, single_byte_codec
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

# Property ids ([MS-OXPROPS]).
_SUBJECT, _SENDER_NAME, _SENDER_ADDRESS, _SENDER_SMTP = 0x0037, 0x0C1A, 0x0C1F, 0x5D01
_DISPLAY_TO, _DISPLAY_CC, _BODY, _HTML = 0x0E04, 0x0E03, 0x1000, 0x1013
_SUBMIT_TIME, _DELIVERY_TIME = 0x0039, 0x0E06
_MESSAGE_CODEPAGE, _INTERNET_CODEPAGE, _MESSAGE_LOCALE = 0x3FFD, 0x3FDE, 0x3FF1
_ATTACH_LONG_NAME, _ATTACH_NAME, _ATTACH_DISPLAY_NAME, _ATTACH_DATA = 0x3707, 0x3704, 0x3001, 0x3701
# Property types: 8-bit and UTF-16 strings, binary, a 32-bit integer, a FILETIME.
_STRING8, _UNICODE, _BINARY, _LONG, _TIME = 0x001E, 0x001F, 0x0102, 0x0003, 0x0040
_PROPERTIES = "__properties_version1.0"
_ATTACHMENT_PREFIX = "__attach_version1.0_#"
_EMBEDDED_MESSAGE = "__substg1.0_3701000D"  # an attachment's data as an object: a message of its own
# The property stream's header before its 16-byte entries: the message's, an attachment's, an attached message's.
_MESSAGE_HEADER, _ATTACHMENT_HEADER, _EMBEDDED_HEADER = 32, 8, 24
_MAX_NESTING = 8  # messages attached inside attached messages, as deep as any real mail goes
_FILETIME_EPOCH = datetime.datetime(1601, 1, 1, tzinfo=datetime.UTC)


class OutlookMessage(FileFormat):
    name = "Outlook message"
    suffixes = (".msg",)
    requires = (Requirement("olefile", "olefile", "msg"),)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        parsed = parse_file(file, options, log, ".msg", lambda: msg_text(file.read_bytes()))
        if parsed is None:
            return
        text, metadata, attached = parsed
        if text is None:
            log.skip_file(file, "an empty message (no subject, no sender, no body)")
            return
        yield file_document(file, root, text, metadata)
        yield from attachment_documents(file, None, file.as_posix(), attached, root, options, log)


def msg_text(data: bytes) -> tuple[str | None, dict[str, Any], list[tuple[str, bytes]]]:
    """An Outlook message's text and metadata, as :func:`~c2v_rag.documents.formats.mail.mail_layout` lays a
    message out (None for the text of an empty one), and its attached files' names and bytes (an attached message
    as an ``.eml`` file)."""
    if not data.startswith(OLE_MAGIC):
        raise SkipFile("not an Outlook message (not an OLE compound file; an .eml saved as .msg? Rename it to .eml)")
    with compound_file(data, ".msg") as ole:
        # Listed once: a message may hold hundreds of parts.
        listing = (ole.listdir(streams=True, storages=False), ole.listdir(streams=False, storages=True))
        props = _Properties(ole, "", listing[0], _MESSAGE_HEADER)
        if not props.streams:
            raise SkipFile("an OLE file without message properties: not an Outlook message")
        message = _read_message(ole, [], listing, props)
    body = message.body
    if message.html:
        try:
            body = html_body(message.html)
        except MissingPackageError as err:
            raise SkipFile(str(err)) from err
    date = message.date.isoformat() if message.date else None
    text, metadata = mail_layout(message.subject, message.shown(), body, date, message.names)
    return text, metadata, message.attached


@dataclass
class _Message:
    """What a message holds: its header fields, its body (plain, else ``html``), and its attachments' names and
    the files among them (name, bytes)."""

    subject: str
    sender: str
    to: str
    cc: str
    date: datetime.datetime | None
    body: str
    html: str
    names: list[str] = field(default_factory=list)
    attached: list[tuple[str, bytes]] = field(default_factory=list)

    def shown(self) -> dict[str, str]:
        return {"From": self.sender, "To": self.to, "Cc": self.cc, "Date": _shown_date(self.date)}


def _read_message(
    ole: Any, path: list[str], listing: tuple[list[list[str]], list[list[str]]], props: _Properties
) -> _Message:
    """The message stored at ``path`` (the file's root, or an attachment's embedded message), whose properties are
    ``props``, with its attachments."""
    streams, storages = listing
    body = props.string(_BODY).replace("\r\n", "\n")
    message = _Message(
        subject=props.string(_SUBJECT),
        sender=_sender(props),
        to=props.string(_DISPLAY_TO),
        cc=props.string(_DISPLAY_CC),
        date=props.time(_SUBMIT_TIME) or props.time(_DELIVERY_TIME),
        body=body,
        html=props.html() if not body.strip() else "",
    )
    for entry in storages:
        if len(entry) != len(path) + 1 or entry[: len(path)] != path or not entry[-1].startswith(_ATTACHMENT_PREFIX):
            continue
        part = _Properties(ole, "/".join(entry) + "/", streams, _ATTACHMENT_HEADER)
        name = part.first_string(_ATTACH_LONG_NAME, _ATTACH_NAME, _ATTACH_DISPLAY_NAME)
        content = part.streams.get((_ATTACH_DATA, _BINARY))
        if content is not None:
            message.names.append(name)
            if name:
                message.attached.append((name, ole.openstream(content).read()))
        elif [*entry, _EMBEDDED_MESSAGE] in storages and len(path) < 2 * _MAX_NESTING:
            inner_path = [*entry, _EMBEDDED_MESSAGE]
            inner_props = _Properties(ole, "/".join(inner_path) + "/", streams, _EMBEDDED_HEADER)
            inner = _read_message(ole, inner_path, listing, inner_props)
            # Read as the .eml it is turned into: "earlier.msg" reads as "earlier.eml".
            shown = eml_name(name[:-4] if name.lower().endswith(".msg") else name, inner.subject)
            message.names.append(shown)
            message.attached.append((shown, _as_eml(inner)))
        else:
            message.names.append(name)  # a link, an OLE object: named, nothing to read
    message.names = [name for name in message.names if name]
    return message


def _as_eml(message: _Message) -> bytes:
    """``message`` as an ``.eml`` file (MIME), its attachments as parts: read by the e-mail format as any attached
    ``.eml`` is. Header values are RFC 2047-encoded, so any name or subject survives."""
    eml = email.message.EmailMessage()
    for name, value in (("Subject", message.subject), ("To", message.to), ("Cc", message.cc)):
        if value.strip():
            eml[name] = Header(" ".join(value.split()), "utf-8").encode()
    if message.sender.strip():
        eml["From"] = Header(message.sender, "utf-8").encode()
    if message.date is not None:
        eml["Date"] = _shown_date(message.date)
    if message.body.strip() or not message.html:
        eml.set_content(message.body)
    else:
        eml.set_content(message.html, subtype="html")
    for name, data in message.attached:
        eml.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return eml.as_bytes()


class _Properties:
    """The properties of a message, of one of its attachments or of an attached message (``prefix``: its storage's
    path and ``/``; ``header``: its property stream's header size), from the file's ``streams`` (olefile's
    listing)."""

    def __init__(self, ole: Any, prefix: str, streams: list[list[str]], header: int) -> None:
        self.ole = ole
        # Property streams by (id, type): __substg1.0_IIIITTTT.
        self.streams: dict[tuple[int, int], str] = {}
        depth = prefix.count("/")
        for entry in streams:
            name = "/".join(entry)
            if len(entry) != depth + 1 or not name.startswith(prefix):
                continue
            tag = entry[-1].removeprefix("__substg1.0_")
            if len(tag) == 8 and tag != entry[-1]:
                try:
                    self.streams[(int(tag[:4], 16), int(tag[4:], 16))] = name
                except ValueError:
                    continue
        self.fixed = self._fixed(prefix + _PROPERTIES, header)
        # 8-bit strings are in the message's code page, which Outlook often leaves out: then in the Windows code page
        # of the message's locale, else of its internet headers. An HTML body is in the latter's.
        message, internet = self.fixed.get((_MESSAGE_CODEPAGE, _LONG)), self.fixed.get((_INTERNET_CODEPAGE, _LONG))
        locale = _locale_codepage(self.fixed.get((_MESSAGE_LOCALE, _LONG)))
        self.encoding = _codec(message or locale or internet)
        self.html_encoding = _codec(internet or message or locale)

    def _fixed(self, name: str, header: int) -> dict[tuple[int, int], int]:
        """(id, type) -> the 8-byte value of each fixed-size property in the property stream."""
        if not self.ole.exists(name):
            return {}
        data = self.ole.openstream(name).read()
        values = {}
        for at in range(header, len(data) - 15, 16):
            tag, _flags, value = struct.unpack_from("<IIQ", data, at)
            values[(tag >> 16, tag & 0xFFFF)] = value
        return values

    def string(self, prop: int) -> str:
        for kind, decode in ((_UNICODE, "utf-16-le"), (_STRING8, self.encoding)):
            name = self.streams.get((prop, kind))
            if name is not None:
                text = self.ole.openstream(name).read().decode(decode, "replace")
                return text.split("\x00", 1)[0]
        return ""

    def first_string(self, *props: int) -> str:
        return next((text for text in map(self.string, props) if text.strip()), "")

    def html(self) -> str:
        """The HTML body, stored as bytes (in the message's code page) or as a string."""
        name = self.streams.get((_HTML, _BINARY))
        if name is None:
            return self.string(_HTML)
        raw = self.ole.openstream(name).read().rstrip(b"\x00")
        return raw.decode("utf-8" if raw.startswith(b"\xef\xbb\xbf") else self.html_encoding, "replace")

    def time(self, prop: int) -> datetime.datetime | None:
        value = self.fixed.get((prop, _TIME))
        if not value:
            return None
        try:
            return _FILETIME_EPOCH + datetime.timedelta(microseconds=value // 10)
        except OverflowError:
            return None


def _codec(codepage: int | None) -> str:
    """The Python codec of a Windows code page (cp1252 for none, or one Python lacks)."""
    if codepage == 65001:
        return "utf-8"
    if codepage in (932, 936, 949, 950):  # Japanese, Chinese and Korean: two bytes for some characters
        return f"cp{codepage}"
    return single_byte_codec(codepage)


# A locale's primary language -> its Windows code page where that is not cp1252 (Chinese: by the full locale id).
_LANGUAGE_CODEPAGES = {
    **dict.fromkeys((0x02, 0x19, 0x22, 0x23, 0x2F, 0x3F, 0x40, 0x43, 0x44, 0x50), 1251),  # Cyrillic
    **dict.fromkeys((0x05, 0x0E, 0x15, 0x18, 0x1B, 0x24, 0x1C), 1250),  # Central European
    0x08: 1253, 0x1F: 1254, 0x0D: 1255,  # Greek, Turkish, Hebrew
    **dict.fromkeys((0x01, 0x20, 0x29), 1256),  # Arabic, Urdu, Persian
    **dict.fromkeys((0x25, 0x26, 0x27), 1257),  # Baltic
    0x2A: 1258, 0x1E: 874, 0x11: 932, 0x12: 949,  # Vietnamese, Thai, Japanese, Korean
}  # fmt: skip
_CHINESE_CODEPAGES = {0x0804: 936, 0x1004: 936, 0x0404: 950, 0x0C04: 950, 0x1404: 950}


def _locale_codepage(lcid: int | None) -> int | None:
    if not lcid:
        return None
    lcid &= 0xFFFF
    return _CHINESE_CODEPAGES.get(lcid) or _LANGUAGE_CODEPAGES.get(lcid & 0x3FF, 1252)


def _sender(message: _Properties) -> str:
    """``Name <address>``, the SMTP address where an Exchange sender has only an X.500 one."""
    name = message.string(_SENDER_NAME).strip()
    address = message.string(_SENDER_SMTP).strip() or message.string(_SENDER_ADDRESS).strip()
    if address.lower().startswith("/o="):  # an Exchange directory path, not an address anyone reads
        address = ""
    if name and address and address.lower() != name.lower():
        return f"{name} <{address}>"
    return name or address


def _shown_date(date: datetime.datetime | None) -> str:
    return date.strftime("%a, %d %b %Y %H:%M:%S +0000") if date else ""
