"""E-mail: a message saved as a file (.eml) is one document, a mailbox (.mbox, as Thunderbird, mutt and Google
Takeout export one) one document per message.

A message reads as its subject (leading it as a heading), its ``From``, ``To``, ``Cc`` and ``Date`` lines, and its
body: the plain-text part, else the HTML part as Markdown (the ``html`` extra), in the charset the message names.
Its attachments' file names are listed in the metadata, beside ``title`` (the subject), ``from``, ``to`` and
``date`` (ISO 8601). Python's own ``email`` and ``mailbox`` packages parse them.

An attachment that a format reads (a PDF, a Word file, a spreadsheet) gives documents of its own, read as the file
would be, named by the message file and its name (``/mail/offer.eml/terms.pdf``; in a mailbox
``/mail/inbox.mbox/<Message-ID>/terms.pdf``), ``attachment_of`` naming the message's id; ``exclude`` patterns match
that path (``*.xlsx`` leaves out spreadsheets attached). An attached message (mail forwarded as an attachment) reads
as an ``.eml`` file would, its own attachments included: ``/mail/offer.eml/Fwd - Q3 numbers.eml``, named by its file
name or its subject.

A mailbox's message is known by its ``Message-ID`` header: its id is ``FILE:<Message-ID>``, which stays the same
when other messages are deleted or the mail client compacts the file, so a re-run embeds only the new messages
(ids by position would shift every message after a deleted one and embed them all again). A message without the
header is known by a hash of its text (``FILE:sha256:...``); one appearing again in the same mailbox (a copy, a
list's echo) gets ``#2``, ``#3``, ... after its id.
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import functools
import io
from collections import Counter
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path, PurePosixPath
from typing import Any

from c2v_rag.core.errors import MissingPackageError
from c2v_rag.documents.formats.base import FileFormat, file_document, led_by_title, opens_as_text, within_size
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument, check_metadata, content_doc_id

# The header lines a message's text carries under its subject, in this order.
SHOWN_HEADERS = ("From", "To", "Cc", "Date")


class Email(FileFormat):
    name = "e-mail"
    suffixes = (".eml",)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        if not within_size(file, options, log):
            return
        data = file.read_bytes()
        if not opens_as_text(file, log, data):
            return
        message = email.message_from_bytes(data, policy=email.policy.default)
        try:
            text, metadata = message_text(message)
        except MissingPackageError as err:
            log.skip_file(file, str(err))
            return
        if text is None:
            log.skip_file(file, "not an e-mail message (no headers and no body)")
            return
        yield file_document(file, root, text, metadata)
        attached = attached_files(message)
        yield from attachment_documents(file, None, file.as_posix(), attached, root, options, log)


class Mbox(FileFormat):
    name = "mailbox"
    suffixes = (".mbox",)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        import mailbox

        if not opens_as_text(file, log):
            return
        # Streamed, as JSONL is: a mailbox of years of mail is read a message at a time, whatever its size.
        box = mailbox.mbox(file, factory=None, create=False)
        try:
            keys = box.keys()  # one pass over the file, finding where each message starts
            if not keys and file.stat().st_size:
                log.skip_file(file, "not an mbox mailbox (no line starting 'From ' opens a message)")
                return
            seen: Counter[str] = Counter()
            for n, key in enumerate(keys, start=1):
                where = f"{file}: message {n}"
                try:
                    message = email.message_from_bytes(box.get_bytes(key), policy=email.policy.default)
                    text, metadata = message_text(message)
                    if text is None:
                        raise ValueError("an empty message (no headers and no body)")
                    check_metadata(metadata, where)
                except (ValueError, TypeError, LookupError, MissingPackageError) as err:
                    if options.on_error == "raise":
                        raise
                    log.skip_record(where, file, f"{type(err).__name__}: {err}")
                    continue
                log.document_span = ((n - 1) / len(keys), n / len(keys))
                key = _message_key(message, text, seen)
                doc_id = f"{file}:{key}"
                yield SourceDocument(doc_id, text, {**metadata, "source": str(file)}, str(file), root)
                attached = attached_files(message)
                yield from attachment_documents(file, key, doc_id, attached, root, options, log, log.document_span)
        finally:
            box.close()


def message_text(message: EmailMessage) -> tuple[str | None, dict[str, Any]]:
    """A message's text (its subject as a heading, its header lines, its body) and metadata; None for the text of
    something that is not a message (no header and no body)."""
    subject = _valid(str(message.get("Subject") or ""))
    shown = {name: _valid(str(message[name])) for name in SHOWN_HEADERS if message.get(name)}
    attachments = [name for part in message.iter_attachments() if (name := _attachment_name(part))]
    return mail_layout(subject, shown, _valid(_body(message)), _iso_date(message.get("Date")), attachments)


def attached_files(message: EmailMessage) -> list[tuple[str, bytes]]:
    """The name and bytes of each file attached to ``message``. An attached message (mail forwarded as an
    attachment) is an ``.eml`` file, so that it reads as a message file does, its own attachments included."""
    files = []
    for part in message.iter_attachments():
        name = _attachment_name(part)
        if part.get_content_type() == "message/rfc822":
            inner = part.get_content()
            data = inner.as_bytes() if isinstance(inner, email.message.Message) else None
        else:
            payload = part.get_payload(decode=True)
            data = payload if isinstance(payload, bytes) else None
        if name and data is not None:
            files.append((name, data))
    return files


def _attachment_name(part: EmailMessage) -> str | None:
    """An attachment's file name; an attached message's ends in ``.eml``, and one that has none is named by its
    subject (``Fwd - Q3 numbers.eml``), else ``message.eml``."""
    name = _valid(str(part.get_filename())) if part.get_filename() else None
    if part.get_content_type() != "message/rfc822":
        return name
    inner = part.get_content()
    subject = _valid(str(inner.get("Subject") or "")) if isinstance(inner, email.message.Message) else ""
    return eml_name(name, subject)


def eml_name(name: str | None, subject: str) -> str:
    """The file name an attached message reads under: its own name, else its subject made a file name
    (``Fwd - Q3 numbers.eml``), else ``message.eml``; always ending in ``.eml``."""
    if not name:
        name = " ".join(subject.replace("/", " ").replace("\\", " ").replace(":", " -").split())[:80] or "message"
    return name if name.lower().endswith(".eml") else f"{name}.eml"


def attachment_documents(
    file: Path,
    key: str | None,
    doc_id: str,
    attached: list[tuple[str, bytes]],
    root: str,
    options: ReadOptions,
    log: ReadLog,
    span: tuple[float, float] = (0.0, 1.0),
) -> Iterator[SourceDocument]:
    """The documents of a message's ``attached`` files (name, bytes) that a format reads, each at ``key/name`` inside
    ``file`` (the message file, or the mailbox with the message's ``key``), ``attachment_of`` naming the message's
    ``doc_id``."""
    from c2v_rag.documents.formats.archives import Member, read_inner

    inside = []
    names: Counter[str] = Counter()
    for given, data in attached:
        name = PurePosixPath(given.replace("\\", "/")).name
        if not name:
            continue
        names[name] += 1
        if names[name] > 1:  # two attachments of one name: the second is name-2.pdf
            shown = PurePosixPath(name)
            name = f"{shown.stem}-{names[shown.name]}{shown.suffix}"
        path = PurePosixPath(key, name) if key else PurePosixPath(name)
        inside.append((path, Member(name, len(data), functools.partial(io.BytesIO, data))))
    if inside:
        yield from read_inner(file, inside, root, options, log, {"attachment_of": doc_id}, span)


def mail_layout(
    subject: str, shown: dict[str, str], body: str, date: str | None, attachments: list[str]
) -> tuple[str | None, dict[str, Any]]:
    """A message's text and metadata from its parts, as every mail format gives them: the subject leading as a
    heading, the ``shown`` header lines (:data:`SHOWN_HEADERS`, in that order), the body; ``title``, ``from``,
    ``to``, ``date`` (ISO 8601) and ``attachments`` in the metadata. None for the text of an empty message."""
    subject = " ".join(subject.split())
    shown = {name: " ".join(shown[name].split()) for name in SHOWN_HEADERS if shown.get(name, "").strip()}
    body = body.strip()
    if not shown and not subject and not body:
        return None, {}
    metadata: dict[str, Any] = {}
    if subject:
        metadata["title"] = subject
    for name in ("From", "To"):
        if name in shown:
            metadata[name.lower()] = shown[name]
    if date:
        metadata["date"] = date
    if attachments:
        metadata["attachments"] = attachments
    headers = "\n".join(f"{name}: {value}" for name, value in shown.items())
    text = "\n\n".join(part for part in (headers, body) if part)
    return led_by_title(subject, text), metadata


def _message_key(message: EmailMessage, text: str, seen: Counter[str]) -> str:
    """A message's key within its mailbox: its Message-ID, else a hash of its text (not of its bytes: Thunderbird
    rewrites its ``X-Mozilla-Status`` lines in place as mail is read), with ``#N`` for the Nth appearance."""
    key = _valid("".join(str(message.get("Message-ID") or "").split())) or content_doc_id(text)
    seen[key] += 1
    return key if seen[key] == 1 else f"{key}#{seen[key]}"


def _body(message: EmailMessage) -> str:
    """The plain-text body, else the HTML body as Markdown; "" for a message with neither."""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, ValueError):  # a charset Python does not know, a broken transfer encoding
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else str(payload or "")
    if not isinstance(content, str):
        return ""
    if part.get_content_subtype() == "html":
        return html_body(content)
    return content.replace("\r\n", "\n").strip()


def html_body(content: str) -> str:
    """An HTML message body as Markdown (the ``html`` extra)."""
    from c2v_rag.documents.formats.html import Html, html_to_markdown

    missing = Html().missing()
    if missing is not None:
        raise MissingPackageError(f"{missing} (the message has no plain-text part, only HTML)")
    return html_to_markdown(content)[1].strip()


def _valid(text: str) -> str:
    """``text`` with any raw bytes of a header not in its declared charset (which the ``email`` package keeps as
    surrogates) read as UTF-8, or replaced where they are not."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _iso_date(value: Any) -> str | None:
    if not value:
        return None
    try:
        return email.utils.parsedate_to_datetime(str(value)).isoformat()
    except (TypeError, ValueError):
        return None
