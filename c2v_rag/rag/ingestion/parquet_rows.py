"""The Parquet rows ``embed`` writes: one row per embedded chunk, the same whichever engine embedded it, and the
points they stand for.

``id`` (string, the point id), ``doc_id`` (string), ``chunk_index`` (int32), ``text`` (string),
``metadata`` (string: a JSON object, the payload's ``metadata``), ``vector``
(``fixed_size_list<float32>[dim]``, unit length), ``start_char`` and ``end_char`` (int32, null where not known:
where the chunk sits in its document's text), ``source_root`` (string, null for documents not read from a path:
the file or folder the run was given, which a sync mirrors): what a Qdrant point of the chunk holds
(:mod:`c2v_rag.store.point_schema`), but for the document hash by which a later ingest skips a whole unchanged
document. Files of runs before the last three columns lack them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from c2v_rag.rag.ingestion.points import PendingChunk
from c2v_rag.store.point_schema import (
    CHUNK_INDEX_KEY,
    DOC_ID_KEY,
    PAYLOAD_METADATA_KEY,
    payload_char_span,
    point_payload,
)

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from c2v_rag.rag.ingestion.pipeline import EmbeddedBatch

# The columns a file must have for its rows to become points (start_char/end_char are optional).
POINT_COLUMNS = ("id", "doc_id", "text", "metadata", "vector")
# Columns later runs added: a file of an earlier run lacks them.
OPTIONAL_COLUMNS = ("start_char", "end_char", "source_root")


def chunk_table(embedded: EmbeddedBatch) -> pa.Table:
    """The Parquet layout of ``embed``: one row per embedded chunk with its point id, document id, chunk
    index, text, metadata (a JSON object), vector (``fixed_size_list<float32>[dim]``), place in its document and
    source root."""
    import numpy as np
    import pyarrow as pa

    chunks, vectors = embedded.chunks, np.asarray(embedded.vectors, dtype=np.float32)
    spans = [payload_char_span(c.payload) for c in chunks]
    return pa.table(
        {
            "id": pa.array([c.point_id for c in chunks], pa.string()),
            "doc_id": pa.array([c.payload[DOC_ID_KEY] for c in chunks], pa.string()),
            "chunk_index": pa.array([c.payload[PAYLOAD_METADATA_KEY][CHUNK_INDEX_KEY] for c in chunks], pa.int32()),
            "text": pa.array([c.text for c in chunks], pa.string()),
            "metadata": pa.array(
                [json.dumps(c.payload[PAYLOAD_METADATA_KEY], ensure_ascii=False) for c in chunks], pa.string()
            ),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), vectors.shape[1]),
            "start_char": pa.array([s for s, _ in spans], pa.int32()),
            "end_char": pa.array([e for _, e in spans], pa.int32()),
            "source_root": pa.array([c.source_root for c in chunks], pa.string()),
        }
    )


def table_points(table: pa.Table) -> tuple[list[PendingChunk], np.ndarray]:
    """The chunks of rows of :func:`chunk_table` (a batch read back from a file), with the payloads their points
    get, and their vectors (``float32[rows, dim]``)."""
    import numpy as np

    present = [name for name in (*POINT_COLUMNS[:-1], *OPTIONAL_COLUMNS) if name in table.column_names]
    columns = {name: table.column(name).to_pylist() for name in present}
    vectors = table.column("vector").combine_chunks()
    dim = vectors.type.list_size
    matrix = np.asarray(vectors.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)
    none = [None] * table.num_rows
    chunks = []
    for i, (pid, doc_id, text, metadata) in enumerate(
        zip(columns["id"], columns["doc_id"], columns["text"], columns["metadata"])
    ):
        span = (columns.get("start_char", none)[i], columns.get("end_char", none)[i])
        root = columns.get("source_root", none)[i]
        payload = point_payload(pid, doc_id, text, _metadata(metadata), span, root)
        chunks.append(PendingChunk(pid, text, payload, root, span[1]))
    return chunks, matrix


def _metadata(raw: Any) -> dict[str, Any]:
    value = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(value, dict):
        raise ValueError(f"a row's metadata must be a JSON object, got {raw!r}")
    return value
