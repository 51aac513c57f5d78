"""What a point is: its id, its payload and the names of its vectors, defined once for every writer and reader.

A point is one chunk of one document.

- **Id**: a UUID (Qdrant's id type) derived from the document id, the chunk's index and a hash of
  its text and metadata (:func:`point_id`, :func:`content_hash`), so the same chunk of the same
  document always lands on the same point and a re-run writes nothing twice.
- **Payload**: one payload carries both frameworks' layouts, so LlamaIndex and LangChain can both
  open the collection:

  - LlamaIndex's ``QdrantVectorStore``: the node serialized by LlamaIndex itself (``_node_content``,
    ``_node_type``, ``doc_id``/``ref_doc_id``/``document_id``, flat metadata); using LlamaIndex's own
    ``node_to_metadata_dict`` keeps the node layout right across its versions;
  - LangChain's ``QdrantVectorStore``: ``page_content`` and ``metadata``;

  plus ``source_root``, the path a sync mirrors (:mod:`c2v_rag.rag.ingestion.sync`), and ``_doc_hash``, the
  hash of the document as chunked once all its points are stored
  (:func:`~c2v_rag.rag.ingestion.points.document_hash`).
- **Vectors**: one dense vector, unnamed in a dense-only collection and named
  :data:`HYBRID_DENSE_NAME` next to a sparse one (:data:`DEFAULT_SPARSE_NAME`); which of them a
  collection carries is its :class:`~c2v_rag.store.vectors.CollectionVectors`.

Writing points (skipping stored ones, deleting stale ones) is :mod:`c2v_rag.rag.ingestion.points`.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from c2v_rag.documents.payload_keys import (
    CHUNK_INDEX_KEY,
    CONTENT_KEY,
    DOC_ID_KEY,
    LEAD_CHARS_KEY,
    PAGE_LABEL_KEY,
    PAYLOAD_METADATA_KEY,
    SECTION_KEY,
    SECTION_SEPARATOR,
)
from c2v_rag.documents.payload_keys import NODE_KEYS as _NODE_KEYS

# ---------------------------------------------------------------------------------------- id

# Fixed forever: changing it would give every stored chunk a new id, so a re-run would
# duplicate whole collections.
POINT_NAMESPACE = uuid.UUID("6c0c2a52-7d7e-5a3c-9a61-3f1d8e0b2c7a")


def content_hash(text: str, metadata: Mapping[str, Any]) -> str:
    """A hash of what a point stores: its text and its metadata.

    Metadata is part of it so that editing a document's metadata alone also rewrites its points.
    """
    blob = json.dumps(dict(metadata), sort_keys=True, ensure_ascii=False, default=str)
    digest = hashlib.sha256()
    digest.update(text.encode("utf-8"))
    digest.update(b"\x00")
    digest.update(blob.encode("utf-8"))
    return digest.hexdigest()


# Goes into every document's hash (payload_keys.DOC_HASH_KEY): raise it when a point's payload changes for the same
# document and chunks, so that a re-run rewrites the documents stored before, rather than skipping them as unchanged.
PAYLOAD_LAYOUT = 1


def point_id(doc_id: str, chunk_index: int, chunk_hash: str) -> str:
    """A UUID (Qdrant's id type) from the document id, the chunk index and the content hash."""
    return str(uuid.uuid5(POINT_NAMESPACE, f"{doc_id}\x1f{chunk_index}\x1f{chunk_hash}"))


# ----------------------------------------------------------------------------------- payload

# The page content, metadata, document id and chunk index keys, LlamaIndex's node fields, and the
# metadata keys they reserve, are defined in c2v_rag.documents.payload_keys: reading refuses
# metadata under them before anything is embedded.
# The file or folder a chunk was ingested from (the path the caller passed, resolved): what a
# sync mirrors. Outside the metadata, so it is not part of the content hash (point ids stay put)
# and a later ingest of the same file through another root can claim the points.
SOURCE_ROOT_KEY = "source_root"
# Bookkeeping keys the LLM need not read when LlamaIndex puts retrieved chunks in a prompt.
HIDDEN_FROM_LLM = [DOC_ID_KEY, CHUNK_INDEX_KEY, LEAD_CHARS_KEY]


class DocumentFields(Protocol):
    """What a point takes from its document (a :class:`~c2v_rag.documents.source_document.SourceDocument`)."""

    @property
    def doc_id(self) -> str: ...
    @property
    def metadata(self) -> Mapping[str, Any]: ...
    @property
    def source(self) -> str | None: ...
    @property
    def source_root(self) -> str | None: ...
    def page_at(self, offset: int) -> str | None: ...


class ChunkFields(Protocol):
    """What a point takes from its chunk (a :class:`~c2v_rag.documents.chunking.Chunk`)."""

    @property
    def text(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def start_char(self) -> int | None: ...
    @property
    def end_char(self) -> int | None: ...
    @property
    def lead_chars(self) -> int: ...
    @property
    def section(self) -> tuple[str, ...]: ...


def chunk_point(doc: DocumentFields, chunk: ChunkFields) -> tuple[str, dict[str, Any]]:
    """The id and the payload of ``chunk``'s point."""
    metadata = chunk_metadata(doc, chunk)
    pid = point_id(doc.doc_id, chunk.index, content_hash(chunk.text, metadata))
    return pid, chunk_payload(doc, chunk, pid, metadata)


def chunk_metadata(doc: DocumentFields, chunk: ChunkFields) -> dict[str, Any]:
    """The metadata a chunk's point carries: the document's, plus where the chunk sits."""
    metadata = dict(doc.metadata)
    if doc.source is not None:
        metadata.setdefault("source", doc.source)
    metadata[DOC_ID_KEY] = doc.doc_id
    metadata[CHUNK_INDEX_KEY] = chunk.index
    page = doc.page_at(chunk.start_char) if chunk.start_char is not None else None
    if page is not None:
        metadata[PAGE_LABEL_KEY] = page
    if chunk.section:
        metadata.setdefault(SECTION_KEY, SECTION_SEPARATOR.join(chunk.section))
    if chunk.lead_chars:
        metadata[LEAD_CHARS_KEY] = chunk.lead_chars
    return metadata


def chunk_payload(
    doc: DocumentFields, chunk: ChunkFields, point_id: str, metadata: Mapping[str, Any]
) -> dict[str, Any]:
    """The payload of one chunk's point (``metadata`` from :func:`chunk_metadata`)."""
    return point_payload(
        point_id, doc.doc_id, chunk.text, metadata, (chunk.start_char, chunk.end_char), doc.source_root
    )


def point_payload(
    point_id: str,
    doc_id: str,
    text: str,
    metadata: Mapping[str, Any],
    span: tuple[int | None, int | None] = (None, None),
    source_root: str | None = None,
) -> dict[str, Any]:
    """The payload of the point ``point_id``: chunk ``text`` of document ``doc_id`` with its ``metadata``, at
    ``span`` (start and end characters in the document's text) and read through ``source_root``."""
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
    from llama_index.core.vector_stores.utils import node_to_metadata_dict

    node = TextNode(
        id_=point_id,
        text=text,
        metadata=dict(metadata),
        start_char_idx=span[0],
        end_char_idx=span[1],
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc_id)},
        # The stored vector embeds the chunk text alone; LlamaIndex must not think otherwise.
        excluded_embed_metadata_keys=list(metadata),
        excluded_llm_metadata_keys=[k for k in HIDDEN_FROM_LLM if k in metadata],
    )
    payload = node_to_metadata_dict(node, remove_text=False, flat_metadata=False)
    # JSON-safe copies of the metadata values (datetimes become strings) come from the dump above.
    payload[PAYLOAD_METADATA_KEY] = {key: payload[key] for key in metadata}
    payload[CONTENT_KEY] = text
    if source_root is not None:
        payload[SOURCE_ROOT_KEY] = source_root
    return payload


def payload_text(payload: Mapping[str, Any]) -> str:
    """The chunk text of a payload written by c2v_rag, LangChain or LlamaIndex."""
    if isinstance(payload.get(CONTENT_KEY), str):
        return payload[CONTENT_KEY]
    node = _serialized_node(payload)
    if node is not None:
        return str(node.get("text", ""))
    return str(payload.get("text", ""))


def payload_char_span(payload: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """Where a chunk of a c2v_rag or LlamaIndex payload starts and ends in its document's text (None: not recorded),
    from the node LlamaIndex serialized into it."""
    node = _serialized_node(payload) or {}
    start, end = node.get("start_char_idx"), node.get("end_char_idx")
    return (start if isinstance(start, int) else None), (end if isinstance(end, int) else None)


def _serialized_node(payload: Mapping[str, Any]) -> Any:
    """The node LlamaIndex serialized into a payload (``_node_content``, parsed); None where the payload has none,
    ``{}`` where it is not JSON."""
    node_json = payload.get("_node_content")
    if not isinstance(node_json, str):
        return None
    try:
        return json.loads(node_json)
    except ValueError:
        return {}


def payload_metadata(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata of a payload written by c2v_rag, LangChain or LlamaIndex."""
    metadata = payload.get(PAYLOAD_METADATA_KEY)
    if isinstance(metadata, Mapping):
        return dict(metadata)
    internal = {*_NODE_KEYS, CONTENT_KEY, "text"}
    return {k: v for k, v in payload.items() if k not in internal}


def metadata_field(key: str) -> str:
    """The payload path of metadata key ``key``, as filters and payload indexes name it."""
    return f"{PAYLOAD_METADATA_KEY}.{key}"


# ----------------------------------------------------------------------------------- vectors

# LlamaIndex QdrantVectorStore's defaults (llama_index/vector_stores/qdrant/base.py): a hybrid
# collection names its vectors so, since LlamaIndex cannot be told to use an unnamed dense vector
# next to a sparse one.
HYBRID_DENSE_NAME = "text-dense"
DEFAULT_SPARSE_NAME = "text-sparse-new"
