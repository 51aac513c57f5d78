"""c2v_rag: decoder-only LLMs as text embedders (Causal2Vec), for retrieval and RAG."""

from .config import Causal2VecConfig, PromptFormat
from .errors import C2VError, MissingPackageError, ModelSourceError, UnsupportedArchitectureError, VariantLoadError
from .instructions import InContextPrompt, Task, TaskKind, get_task, list_tasks, register_task
from .long_texts import LongTexts
from .modeling import Causal2Vec
from .presets import DEFAULT_PRESET, list_presets

__version__ = "0.1.0"

__all__ = [
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
# optional qdrant/llama-index packages, which ingest and search ask for when called.
_RAG_EXPORTS = frozenset({"ingest", "embed", "search", "search_many", "asearch", "reindex", "migrate", "IngestConfig",
                          "QdrantConfig"})


def __getattr__(name: str):
    if name in _RAG_EXPORTS:
        from . import rag

        return getattr(rag, name)
    raise AttributeError(f"module 'c2v_rag' has no attribute {name!r}")
