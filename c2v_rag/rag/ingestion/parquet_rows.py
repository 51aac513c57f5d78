"""The Parquet rows ``embed`` writes: one row per embedded chunk, the same whichever engine embedded it.

``id`` (string, the point id), ``doc_id`` (string), ``chunk_index`` (int32), ``text`` (string),
``metadata`` (string: a JSON object, the payload's ``metadata``), ``vector``
(``fixed_size_list<float32>[dim]``, unit length): what a Qdrant point of the chunk would hold
(:mod:`c2v_rag.store.point_schema`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from c2v_rag.store.point_schema import CHUNK_INDEX_KEY, DOC_ID_KEY, PAYLOAD_METADATA_KEY

if TYPE_CHECKING:
    import pyarrow as pa

    from c2v_rag.rag.ingestion.pipeline import EmbeddedBatch


def chunk_table(embedded: EmbeddedBatch) -> pa.Table:
    """The Parquet layout of ``embed``: one row per embedded chunk with its point id, document id, chunk
    index, text, metadata (a JSON object) and vector (``fixed_size_list<float32>[dim]``)."""
    import numpy as np
    import pyarrow as pa

    chunks, vectors = embedded.chunks, np.asarray(embedded.vectors, dtype=np.float32)
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
        }
    )
