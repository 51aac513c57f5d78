"""The kinds of in-memory document a caller may pass: a string, a dict, a LangChain or a LlamaIndex document.

Each kind says whether an item is one of it, what its text is (for a progress bar, before the item is read) and
which :class:`~c2v_rag.documents.source_document.SourceDocument` it becomes. Paths are not items: they name files,
which :mod:`c2v_rag.documents.files` reads. A new kind is a class here and a line in :data:`ITEM_KINDS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from c2v_rag.core.arguments import check_unicode
from c2v_rag.documents.source_document import (
    SourceDocument,
    check_metadata,
    content_doc_id,
    from_record,
    record_text,
    source_of,
)

__all__ = ["ItemKind", "ITEM_KINDS", "item_kind", "item_text_length", "EXPECTED_ITEMS"]

# What the error for any other object names.
EXPECTED_ITEMS = "a str, a dict with 'text', a LlamaIndex Document/Node, a LangChain Document or a pathlib.Path"


class ItemKind:
    """One kind of in-memory document."""

    name: ClassVar[str]

    def matches(self, item: Any) -> bool:
        raise NotImplementedError

    def text(self, item: Any) -> str | None:
        """The item's text as its document will hold it; None where the document will refuse it."""
        raise NotImplementedError

    def document(self, item: Any, where: str) -> SourceDocument:
        """The item as a document (``where`` names it in an error)."""
        raise NotImplementedError


class Text(ItemKind):
    """A string: its text, its id a hash of it."""

    name = "str"

    def matches(self, item: Any) -> bool:
        return isinstance(item, str)

    def text(self, item: str) -> str:
        return item

    def document(self, item: str, where: str) -> SourceDocument:
        check_unicode(item, where)
        return SourceDocument(content_doc_id(item), item)


class Record(ItemKind):
    """A dict, as a JSONL record reads: :func:`~c2v_rag.documents.source_document.from_record`."""

    name = "dict"

    def matches(self, item: Any) -> bool:
        return isinstance(item, Mapping)

    def text(self, item: Mapping[str, Any]) -> str | None:
        return record_text(item)

    def document(self, item: Mapping[str, Any], where: str) -> SourceDocument:
        return from_record(item, where)


class LangChainDocument(ItemKind):
    """A LangChain ``Document``: ``page_content``, ``metadata`` and its ``id`` where it has one. Duck-typed, as is
    the LlamaIndex kind, so that neither framework has to be installed to ingest plain inputs."""

    name = "langchain"

    def matches(self, item: Any) -> bool:
        return hasattr(item, "page_content") and hasattr(item, "metadata")

    def text(self, item: Any) -> str:
        return item.page_content or ""

    def document(self, item: Any, where: str) -> SourceDocument:
        metadata = dict(item.metadata or {})
        check_metadata(metadata, where)
        doc_id = getattr(item, "id", None) or content_doc_id(item.page_content)
        return SourceDocument(str(doc_id), item.page_content, metadata, source_of(metadata))


class LlamaIndexNode(ItemKind):
    """A LlamaIndex ``Document`` (its id is its doc id) or a chunk-level ``Node``, taken as a document of its own:
    grouping nodes by ``ref_doc_id`` would delete siblings that are not in this input."""

    name = "llama_index"

    def matches(self, item: Any) -> bool:
        return hasattr(item, "get_content") and hasattr(item, "node_id") and hasattr(item, "metadata")

    def text(self, item: Any) -> str:
        return item.get_content()

    def document(self, item: Any, where: str) -> SourceDocument:
        metadata = dict(item.metadata or {})
        check_metadata(metadata, where)
        return SourceDocument(str(item.node_id), item.get_content(), metadata, source_of(metadata))


# Tried in order: the first that matches an item reads it.
ITEM_KINDS: tuple[ItemKind, ...] = (Text(), Record(), LangChainDocument(), LlamaIndexNode())


def item_kind(item: Any) -> ItemKind | None:
    """The kind of in-memory document ``item`` is; None for anything else (a path among them)."""
    return next((kind for kind in ITEM_KINDS if kind.matches(item)), None)


def item_text_length(item: Any) -> int:
    """The characters of an in-memory document's text, for a progress bar's weights; 0 for an item that will be
    refused."""
    kind = item_kind(item)
    text = kind.text(item) if kind is not None else None
    return len(text) if isinstance(text, str) else 0
