"""The point payload's keys and readers, kept importable here: they are defined in
:mod:`c2v_rag.rag.point_schema`, with the rest of what a point is."""

from .point_schema import (
    CONTENT_KEY,
    DOC_ID_KEY,
    HIDDEN_FROM_LLM,
    PAYLOAD_METADATA_KEY,
    SOURCE_ROOT_KEY,
    chunk_metadata,
    chunk_payload,
    payload_metadata,
    payload_text,
)

__all__ = ["CONTENT_KEY", "DOC_ID_KEY", "HIDDEN_FROM_LLM", "PAYLOAD_METADATA_KEY", "SOURCE_ROOT_KEY",
           "chunk_metadata", "chunk_payload", "payload_metadata", "payload_text"]
