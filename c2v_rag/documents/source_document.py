"""One document to ingest (:class:`SourceDocument`), and how a record or a dict becomes one.

Both the file readers (:mod:`c2v_rag.documents.files`) and the readers of in-memory inputs
(:mod:`c2v_rag.documents.documents`) build documents here, so an id, a text and metadata mean the same
whichever way a document came in.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from c2v_rag.core.arguments import check_unicode
from c2v_rag.documents.payload_keys import RESERVED_METADATA_KEYS

TEXT_KEYS = ("text", "page_content", "content", "body")
_ID_KEYS = ("id", "doc_id", "_id")


@dataclass(frozen=True)
class SourceDocument:
    """One document to ingest: its stable id, its text, its metadata and where it came from.

    ``source_root`` is the file or folder the caller passed that this document was read from
    (resolved); a sync deletes only points recorded under the root it mirrors. ``pages`` are
    ``(offset, label)`` pairs, in order, where a paged document's pages start in ``text`` (a PDF's);
    each chunk records the label of the page it starts on (``page_label``). ``lead`` is what leads the
    document's later chunks where its reader knows better than the text's opening (a PDF's title, without
    the author lines under it); None: :func:`~c2v_rag.documents.chunking.document_lead` of the text.
    ``plain_text`` says that the text is plain, not the Markdown that readers give structured documents as: its
    ``#`` lines are comments or shell prompts, not headings, so its chunks lie in no section.
    """

    doc_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    source_root: str | None = None
    pages: tuple[tuple[int, str], ...] = ()
    lead: str | None = None
    plain_text: bool = False

    def with_root(self, root: str) -> SourceDocument:
        return dataclasses.replace(self, source_root=root)

    def page_at(self, offset: int) -> str | None:
        """The label of the page that character ``offset`` of the text lies on (None: the document has no pages)."""
        if not self.pages:
            return None
        index = bisect.bisect_right(self.pages, (offset, chr(0x10FFFF))) - 1  # the last page starting at or before it
        return self.pages[max(index, 0)][1]


def content_doc_id(text: str) -> str:
    """The id of a document that has none of its own: a hash of its text."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def source_of(metadata: Mapping[str, Any]) -> str | None:
    """Where a document came from, as its metadata names it (``source``, ``file_path`` or ``url``)."""
    for key in ("source", "file_path", "url"):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def check_metadata(metadata: Mapping[str, Any], where: str) -> None:
    """Refuse metadata that the point payload cannot carry: reserved keys, keys that are not strings,
    and strings that are not valid Unicode (``where`` names the input in the message)."""
    clash = sorted(RESERVED_METADATA_KEYS.intersection(metadata))
    if clash:
        raise ValueError(
            f"{where} has metadata keys {clash} that the vector store layout reserves. Rename them; "
            "a document id belongs in the record's 'id' field, not in its metadata."
        )
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise TypeError(f"{where} has a metadata key {key!r} that is not a string")
        check_unicode(key, f"{where} metadata key {key!r}")
        if isinstance(value, str):
            check_unicode(value, f"{where}[metadata][{key!r}]")


def record_text(record: Mapping[str, Any]) -> str | None:
    """The text :func:`from_record` gives a record's document; None where it refuses the record for its text."""
    text_key = next((k for k in TEXT_KEYS if k in record), None)
    text = record[text_key] if text_key is not None else None
    return _titled(record, text) if isinstance(text, str) else None


def _titled(record: Mapping[str, Any], text: str) -> str:
    # A title goes before the text, as BEIR corpora keep it apart.
    title = record.get("title")
    if isinstance(title, str) and title.strip():
        return f"{title.strip()}\n\n{text}" if text.strip() else title.strip()
    return text


def from_record(
    record: Mapping[str, Any], where: str, default_id: str | None = None, source: str | None = None
) -> SourceDocument:
    """A document from a dict or a JSONL record.

    The text is the first of ``text``, ``page_content``, ``content``, ``body``; a ``title`` is put
    before it (BEIR corpora); the id is the first of ``id``, ``doc_id``, ``_id``. Other scalar
    fields join ``metadata``.
    """
    text_key = next((k for k in TEXT_KEYS if k in record), None)
    if text_key is None:
        raise ValueError(
            f"{where} has no text: expected one of the keys {', '.join(TEXT_KEYS)}; got {sorted(map(str, record))}"
        )
    text = record[text_key]
    if not isinstance(text, str):
        raise TypeError(f"{where}[{text_key!r}] is a {type(text).__name__}, not a str")
    check_unicode(text, f"{where}[{text_key!r}]")
    raw_metadata = record.get("metadata") or {}
    if not isinstance(raw_metadata, Mapping):
        raise TypeError(f"{where}['metadata'] must be a dict, got {type(raw_metadata).__name__}")
    metadata = dict(raw_metadata)
    id_key = next((k for k in _ID_KEYS if record.get(k) not in (None, "")), None)
    for key, value in record.items():
        if key in (*TEXT_KEYS, *_ID_KEYS, "metadata") or key in metadata:
            continue
        if isinstance(value, (str, int, float, bool)) or value is None:
            metadata[key] = value
    text = _titled(record, text)
    check_metadata(metadata, where)
    if source is not None:
        metadata.setdefault("source", source)
    doc_id = str(record[id_key]) if id_key else (default_id or content_doc_id(text))
    return SourceDocument(doc_id, text, metadata, source_of(metadata))
