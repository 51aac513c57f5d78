"""The payload keys a stored chunk's writer owns, so that a document's metadata may not use them.

A point's payload (:mod:`c2v_rag.store.point_schema`, which lays it out and imports these names)
carries a chunk's text, its document id and index, and LlamaIndex's node fields next to the
document's metadata. Reading refuses metadata under these names
(:func:`~c2v_rag.documents.source_document.check_metadata`) before anything is embedded, so the
names are defined here, below both reading and the store.
"""

from __future__ import annotations

CONTENT_KEY = "page_content"
# The payload field holding a chunk's metadata (LangChain's layout); filters address metadata keys
# below it, as ``metadata.<key>``.
PAYLOAD_METADATA_KEY = "metadata"
DOC_ID_KEY = "doc_id"
CHUNK_INDEX_KEY = "chunk_index"
# Characters of a chunk's text that are its document's lead (ingest's chunk_context="lead"), on chunks that have one.
LEAD_CHARS_KEY = "lead_chars"
# The page a chunk of a paged document (a PDF) starts on, as the document labels it; LlamaIndex's and LangChain's
# PDF readers' name. Not reserved: a framework document read by their PDF readers brings it in its own metadata.
PAGE_LABEL_KEY = "page_label"
# The headings of the section a chunk starts in, outermost first and joined by " › " (the document's title aside):
# ``Repositories and branches › Merging``, for a citation and for the LLM that reads the chunk. Not reserved: a
# document's own ``section`` stays.
SECTION_KEY = "section"
# Between the headings of a section's path (a breadcrumb, as documentation sites show one): the section field's, and
# that of the lead of chunk_context="headings".
SECTION_SEPARATOR = " › "
# The row of a table (CSV, TSV) a chunk's document is, under its header; LangChain's CSV loader's name. Not reserved.
ROW_KEY = "row"
# The sheet of a workbook (.xlsx) a row is on. Not reserved.
SHEET_KEY = "sheet"
# The node of a GNU Info manual a chunk's document is. Not reserved.
NODE_KEY = "node"
# The hash of a document as it was chunked (its text, metadata and the chunking settings), set on each of its points
# once all of them are stored: a re-run that meets the document again unchanged skips it before chunking. Outside the
# metadata, like the source root, but LlamaIndex puts metadata keys beside it, so it is reserved.
DOC_HASH_KEY = "_doc_hash"
# The key under which c2v_rag records the model and settings its vectors were made with: in a collection's metadata,
# and in the schema metadata of each Parquet file ``embed`` writes (which the Parquet reader therefore knows as
# vectors to load, not documents to read).
RECORD_METADATA_KEY = "c2v_rag"
# LlamaIndex's node fields in a payload.
NODE_KEYS = ("_node_content", "_node_type", "ref_doc_id", "document_id")
# Keys the payload writer owns: user metadata under these names would be silently overwritten
# by LlamaIndex's node serialization, or shadow LangChain's layout.
RESERVED_METADATA_KEYS = frozenset(
    {CONTENT_KEY, PAYLOAD_METADATA_KEY, DOC_ID_KEY, CHUNK_INDEX_KEY, LEAD_CHARS_KEY, DOC_HASH_KEY, *NODE_KEYS}
)
