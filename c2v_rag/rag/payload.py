"""The point payload, laid out so LlamaIndex and LangChain can both open the collection.

One payload carries both layouts:

- LlamaIndex's ``QdrantVectorStore``: the node serialized by LlamaIndex itself
  (``_node_content``, ``_node_type``, ``doc_id``/``ref_doc_id``/``document_id``, flat metadata);
- LangChain's ``QdrantVectorStore``: ``page_content`` and ``metadata``.

Using LlamaIndex's own ``node_to_metadata_dict`` keeps the node layout right across its versions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .chunking import Chunk
from .documents import SourceDocument

CONTENT_KEY = "page_content"
METADATA_KEY = "metadata"
DOC_ID_KEY = "doc_id"
# The file or folder a chunk was ingested from (the path the caller passed, resolved): what a
# sync mirrors. Outside the metadata, so it is not part of the content hash (point ids stay put)
# and a later ingest of the same file through another root can claim the points.
SOURCE_ROOT_KEY = "source_root"
# Bookkeeping keys the LLM need not read when LlamaIndex puts retrieved chunks in a prompt.
HIDDEN_FROM_LLM = ["doc_id", "chunk_index"]


def chunk_metadata(doc: SourceDocument, chunk: Chunk) -> dict[str, Any]:
    """The metadata a chunk's point carries: the document's, plus where the chunk sits."""
    metadata = dict(doc.metadata)
    if doc.source is not None:
        metadata.setdefault("source", doc.source)
    metadata["doc_id"] = doc.doc_id
    metadata["chunk_index"] = chunk.index
    return metadata


def chunk_payload(doc: SourceDocument, chunk: Chunk, point_id: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The payload of one chunk's point (``metadata`` from :func:`chunk_metadata`)."""
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
    from llama_index.core.vector_stores.utils import node_to_metadata_dict

    node = TextNode(
        id_=point_id,
        text=chunk.text,
        metadata=dict(metadata),
        start_char_idx=chunk.start_char,
        end_char_idx=chunk.end_char,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc.doc_id)},
        # The stored vector embeds the chunk text alone; LlamaIndex must not think otherwise.
        excluded_embed_metadata_keys=list(metadata),
        excluded_llm_metadata_keys=[k for k in HIDDEN_FROM_LLM if k in metadata],
    )
    payload = node_to_metadata_dict(node, remove_text=False, flat_metadata=False)
    # JSON-safe copies of the metadata values (datetimes become strings) come from the dump above.
    payload[METADATA_KEY] = {key: payload[key] for key in metadata}
    payload[CONTENT_KEY] = chunk.text
    if doc.source_root is not None:
        payload[SOURCE_ROOT_KEY] = doc.source_root
    return payload


def payload_text(payload: Mapping[str, Any]) -> str:
    """The chunk text of a payload written by c2v_rag, LangChain or LlamaIndex."""
    if isinstance(payload.get(CONTENT_KEY), str):
        return payload[CONTENT_KEY]
    node_json = payload.get("_node_content")
    if isinstance(node_json, str):
        import json

        try:
            return str(json.loads(node_json).get("text", ""))
        except ValueError:
            return ""
    return str(payload.get("text", ""))


def payload_metadata(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata of a payload written by c2v_rag, LangChain or LlamaIndex."""
    metadata = payload.get(METADATA_KEY)
    if isinstance(metadata, Mapping):
        return dict(metadata)
    internal = {"_node_content", "_node_type", "document_id", "ref_doc_id", CONTENT_KEY, "text"}
    return {k: v for k, v in payload.items() if k not in internal}
