"""What the LlamaIndex and LangChain integration packages build on: a public, stable surface.

The packages in ``integrations/`` import ``c2v_rag`` and this module only (tests/integrations/test_public_api.py
checks it), so moving a module inside c2v_rag never breaks them. A name here keeps its meaning across releases.
"""

from __future__ import annotations

from c2v_rag.encode.splitting import make_splitter
from c2v_rag.hub.presets import DEFAULT_PRESET
from c2v_rag.rag.embedding import EmbedderOptions, apply_encode_kwargs, check_encode_kwargs
from c2v_rag.rag.handle import Collection
from c2v_rag.rag.retrieval.search import SearchHit
from c2v_rag.rag.retriever import RetrieverOptions
from c2v_rag.store.point_schema import HIDDEN_FROM_LLM, metadata_field

__all__ = [
    "DEFAULT_PRESET",
    "HIDDEN_FROM_LLM",
    "Collection",
    "EmbedderOptions",
    "RetrieverOptions",
    "SearchHit",
    "apply_encode_kwargs",
    "check_encode_kwargs",
    "make_splitter",
    "metadata_field",
]
