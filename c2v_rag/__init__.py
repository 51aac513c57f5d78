"""c2v_rag: decoder-only LLMs as text embedders (Causal2Vec), for retrieval and RAG.

This module is the facade, the top of the package's layers (``[tool.importlinter]`` in pyproject.toml):
it re-exports names from the modules that define them, and no module inside the package imports it.
"""

from c2v_rag.core.config import Causal2VecConfig, PromptFormat
from c2v_rag.core.errors import (
    C2VError,
    MissingPackageError,
    ModelSourceError,
    UnsupportedArchitectureError,
    VariantLoadError,
)
from c2v_rag.core.instructions import InContextPrompt, Task, TaskKind, get_task, list_tasks, register_task
from c2v_rag.encode.long_texts import LongTexts
from c2v_rag.hub.presets import DEFAULT_PRESET, list_presets
from c2v_rag.model.causal2vec import Causal2Vec

# Registers the representations that Causal2VecConfig validates `representation` against, so that importing
# any module of the package (which runs this file first) makes them known before a config is built.
from c2v_rag.nn import readout as _readout  # noqa: F401
from c2v_rag.version import __version__

__all__ = [
    "__version__",
    "Causal2Vec",
    "Causal2VecConfig",
    "LongTexts",
    "PromptFormat",
    "Task",
    "TaskKind",
    "get_task",
    "list_tasks",
    "register_task",
    "InContextPrompt",
    "list_presets",
    "DEFAULT_PRESET",
    "C2VError",
    "MissingPackageError",
    "ModelSourceError",
    "VariantLoadError",
    "UnsupportedArchitectureError",
    "ingest",
    "embed",
    "search",
    "search_many",
    "asearch",
    "reindex",
    "migrate",
    "IngestConfig",
    "QdrantConfig",
]

# The RAG layer is loaded on first use: importing c2v_rag stays light, and works without the
# optional qdrant/llama-index packages, which ingest and search ask for when called. The facade sits
# above every layer, so this reach into c2v_rag.rag points down, as all its imports do.
_RAG_EXPORTS = frozenset(
    {"ingest", "embed", "search", "search_many", "asearch", "reindex", "migrate", "IngestConfig", "QdrantConfig"}
)


def __getattr__(name: str):
    if name in _RAG_EXPORTS:
        from c2v_rag import rag

        return getattr(rag, name)
    raise AttributeError(f"module 'c2v_rag' has no attribute {name!r}")
