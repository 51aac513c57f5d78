"""Turning what callers pass to ``ingest`` into a stream of :class:`SourceDocument`.

Accepted inputs: strings, dicts (``text`` + ``metadata`` + optional ``id``), LlamaIndex Documents
or Nodes, LangChain Documents, and paths to files or folders of ``.txt``, ``.md`` and ``.jsonl``.
Documents are yielded one at a time, so a folder of millions of files is never held in memory.

Every document gets a stable id, the key that lets a re-run replace a changed document's chunks:
an explicit id when the input has one, the resolved path for files, ``path:line`` for JSONL
records without an id, and a content hash otherwise. LlamaIndex Documents keep their ``id_``:
load files with ``SimpleDirectoryReader(filename_as_id=True)``, whose default ids are random and
would make every re-run look like new documents.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..encoding import check_unicode
from .files import JSONL_SUFFIXES, SUPPORTED_SUFFIXES, TEXT_SUFFIXES, ReadLog, ReadOptions, open_source

logger = logging.getLogger(__name__)

__all__ = ["SourceDocument", "iter_documents", "from_record", "content_doc_id", "names_existing_path",
           "TEXT_SUFFIXES", "JSONL_SUFFIXES", "SUPPORTED_SUFFIXES"]

# Keys the payload writer owns: user metadata under these names would be silently overwritten
# by LlamaIndex's node serialization, or shadow LangChain's layout.
RESERVED_METADATA_KEYS = frozenset(
    {"page_content", "metadata", "_node_content", "_node_type", "doc_id", "ref_doc_id", "document_id", "chunk_index"}
)
_TEXT_KEYS = ("text", "page_content", "content", "body")
_ID_KEYS = ("id", "doc_id", "_id")


@dataclass(frozen=True)
class SourceDocument:
    """One document to ingest: its stable id, its text, its metadata and where it came from.

    ``source_root`` is the file or folder the caller passed that this document was read from
    (resolved); a sync deletes only points recorded under the root it mirrors.
    """

    doc_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    source_root: str | None = None

    def with_root(self, root: str) -> "SourceDocument":
        return dataclasses.replace(self, source_root=root)


def content_doc_id(text: str) -> str:
    """The id of a document that has none of its own: a hash of its text."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def iter_documents(docs: Any, *, options: ReadOptions | None = None,
                   log: ReadLog | None = None) -> Iterator[SourceDocument]:
    """Yield :class:`SourceDocument` for every input; see the module docstring for the forms.

    A single top-level string that names an existing file or folder is read as a path; inside
    a list, strings are always texts (pass :class:`pathlib.Path` objects for paths), and a list
    whose strings all look like paths is refused (:func:`check_not_path_strings`). The input's
    type, and every path given at the top level or in a top-level list (existence, suffix, a
    folder's supported files), are checked on the call, before any document is read.
    ``options`` sets the file size limit and error handling; ``log`` collects what was skipped.
    """
    options = options or ReadOptions()
    log = log if log is not None else ReadLog()
    if isinstance(docs, str) and names_existing_path(docs):
        return open_source(Path(docs), options, log)
    if isinstance(docs, os.PathLike):
        return open_source(Path(docs), options, log)
    if isinstance(docs, (str, Mapping)) or _framework_kind(docs):
        return _from_item(docs, "docs", options, log)
    if isinstance(docs, Iterable) and not isinstance(docs, (bytes, bytearray)):
        if isinstance(docs, (list, tuple)):
            check_not_path_strings(docs)
            # Open (check) every path now; their files are still read one at a time.
            opened = {i: open_source(Path(item), options, log) for i, item in enumerate(docs)
                      if isinstance(item, os.PathLike)}
            return (doc for i, item in enumerate(docs)
                    for doc in (opened[i] if i in opened else _from_item(item, f"docs[{i}]", options, log)))
        return (doc for i, item in enumerate(docs) for doc in _from_item(item, f"docs[{i}]", options, log))
    raise TypeError(
        f"docs must be a string, a dict, a document object, a path or an iterable of them; "
        f"got {type(docs).__name__}"
    )


def check_not_path_strings(docs: "list[Any] | tuple[Any, ...]") -> None:
    """Refuse a list whose strings are all file paths rather than texts.

    ``ingest(["a.md", "b.md", ...])`` would embed the path strings themselves (strings in a list
    are texts) and every search would then return file names. Reading them as paths instead
    would make the meaning of the same call depend on the file system: on a machine where the
    files are missing, or after a typo, the names would again be embedded silently. So a list
    whose strings each end in a readable suffix (``.md``, ``.txt``, ``.jsonl``...) or name an
    existing file or folder with a separator or suffix in the name (``docs/a``, ``a.pdf``; a bare
    word like ``"notes"`` stays a text even when such a folder exists) is an error naming the fix.

    Raises:
        ValueError: every string in ``docs`` looks like a path (at least one string).
    """
    strings = [item for item in docs if isinstance(item, str)]
    if not strings or not all(_looks_like_path(s) for s in strings):
        return
    existing = sum(names_existing_path(s) for s in strings)
    first = next(i for i, item in enumerate(docs) if isinstance(item, str))
    sample = f"docs[{first}]={strings[0]!r}" + (f" and {len(strings) - 1} more" if len(strings) > 1 else "")
    found = (f"all {len(strings)} of them name existing files or folders" if existing == len(strings)
             else f"{existing} of {len(strings)} name existing files or folders, the others end in a file suffix")
    raise ValueError(
        f"the strings in docs look like file paths ({sample}); {found}. Strings inside a list are "
        "embedded as texts, so these file names, not the files, would be stored. To read the files pass "
        "pathlib.Path objects ([Path(p) for p in paths]) or their folder; to embed the strings as texts anyway "
        "pass them as dicts ([{'text': s} for s in strings])."
    )


def _looks_like_path(text: str) -> bool:
    text = text.strip()
    if not text or "\n" in text or len(text) > 1024:
        return False
    if Path(text).suffix.lower() in SUPPORTED_SUFFIXES:
        return True
    return (os.sep in text or "/" in text or bool(Path(text).suffix)) and names_existing_path(text)


def names_existing_path(text: str) -> bool:
    """Whether a top-level string passed to ``ingest`` is read as a path (an existing one)."""
    if "\n" in text or len(text) > 4096:
        return False
    try:
        return Path(text).expanduser().exists()
    except (OSError, ValueError):  # a long or odd string (or one with NUL) is no path
        return False


def _from_item(item: Any, where: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
    if isinstance(item, str):
        check_unicode(item, where)
        yield SourceDocument(content_doc_id(item), item)
    elif isinstance(item, os.PathLike):
        yield from open_source(Path(item), options, log)
    elif isinstance(item, Mapping):
        yield from_record(item, where)
    elif (kind := _framework_kind(item)) == "langchain":
        metadata = dict(item.metadata or {})
        _check_metadata(metadata, where)
        doc_id = getattr(item, "id", None) or content_doc_id(item.page_content)
        yield SourceDocument(str(doc_id), item.page_content, metadata, _source_of(metadata))
    elif kind == "llama_index":
        metadata = dict(item.metadata or {})
        _check_metadata(metadata, where)
        # A Document's id is its doc id; a chunk-level Node is treated as a document of its own
        # (grouping nodes by ref_doc_id would delete siblings that are not in this input).
        yield SourceDocument(str(item.node_id), item.get_content(), metadata, _source_of(metadata))
    else:
        raise TypeError(
            f"{where} is a {type(item).__name__}; expected a str, a dict with 'text', a LlamaIndex "
            "Document/Node, a LangChain Document or a pathlib.Path"
        )


def _framework_kind(item: Any) -> str | None:
    # Duck-typed so neither framework has to be installed to ingest plain inputs.
    if hasattr(item, "page_content") and hasattr(item, "metadata"):
        return "langchain"
    if hasattr(item, "get_content") and hasattr(item, "node_id") and hasattr(item, "metadata"):
        return "llama_index"
    return None


def _source_of(metadata: Mapping[str, Any]) -> str | None:
    for key in ("source", "file_path", "url"):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _check_metadata(metadata: Mapping[str, Any], where: str) -> None:
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


def from_record(record: Mapping[str, Any], where: str, default_id: str | None = None,
                source: str | None = None) -> SourceDocument:
    """A document from a dict or a JSONL record.

    The text is the first of ``text``, ``page_content``, ``content``, ``body``; a ``title`` is put
    before it (BEIR corpora); the id is the first of ``id``, ``doc_id``, ``_id``. Other scalar
    fields join ``metadata``.
    """
    text_key = next((k for k in _TEXT_KEYS if k in record), None)
    if text_key is None:
        raise ValueError(
            f"{where} has no text: expected one of the keys {', '.join(_TEXT_KEYS)}; got {sorted(map(str, record))}"
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
        if key in (*_TEXT_KEYS, *_ID_KEYS, "metadata") or key in metadata:
            continue
        if isinstance(value, (str, int, float, bool)) or value is None:
            metadata[key] = value
    title = record.get("title")
    if isinstance(title, str) and title.strip():
        text = f"{title.strip()}\n\n{text}" if text.strip() else title.strip()
    _check_metadata(metadata, where)
    if source is not None:
        metadata.setdefault("source", source)
    doc_id = str(record[id_key]) if id_key else (default_id or content_doc_id(text))
    return SourceDocument(doc_id, text, metadata, _source_of(metadata))
