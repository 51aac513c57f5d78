"""c2v_rag: decoder-only LLMs as text embedders (Causal2Vec), for retrieval and RAG.

This module is the facade, the top of the package's layers (``[tool.importlinter]`` in pyproject.toml):
it re-exports names from the modules that define them, and no module inside the package imports it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from c2v_rag.core.config import register_representations_on_use
from c2v_rag.version import __version__

if TYPE_CHECKING:
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
    from c2v_rag.encode.splitting import make_splitter
    from c2v_rag.hub.presets import DEFAULT_PRESET, list_presets
    from c2v_rag.model.causal2vec import Causal2Vec
    from c2v_rag.rag import (
        Collection,
        CollectionSummary,
        DeleteResult,
        EmbedderOptions,
        IngestConfig,
        QdrantConfig,
        RetrieverOptions,
        SearchHit,
        SearchOptions,
        asearch,
        delete_documents,
        embed,
        ingest,
        list_collections,
        load_embedded,
        migrate,
        open_collection,
        reindex,
        search,
        search_many,
    )
    from c2v_rag.rag.embedding import apply_encode_kwargs, check_encode_kwargs
    from c2v_rag.rag.retriever import RERANK_SCORE_KEY, warn_if_reranked
    from c2v_rag.rerank import Causal2VecReranker, RerankResult
    from c2v_rag.store.point_schema import HIDDEN_FROM_LLM, metadata_field
    from c2v_rag.training.adapt.config import AdaptConfig
    from c2v_rag.training.adapt.report import AdaptReport
    from c2v_rag.training.adapt.run import adapt

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
    "load_embedded",
    "search",
    "search_many",
    "asearch",
    "reindex",
    "migrate",
    "delete_documents",
    "DeleteResult",
    "list_collections",
    "IngestConfig",
    "QdrantConfig",
    "Collection",
    "CollectionSummary",
    "open_collection",
    "SearchHit",
    "SearchOptions",
    "Causal2VecReranker",
    "RerankResult",
    # what the LlamaIndex and LangChain packages in integrations/ build on (they import nothing else of c2v_rag)
    "EmbedderOptions",
    "RetrieverOptions",
    "apply_encode_kwargs",
    "check_encode_kwargs",
    "make_splitter",
    "HIDDEN_FROM_LLM",
    "metadata_field",
    "RERANK_SCORE_KEY",
    "warn_if_reranked",
    "adapt",
    "AdaptConfig",
    "AdaptReport",
]

# Every name is loaded on first use, from the module that defines it: importing c2v_rag (which importing any
# module of the package does first) stays light, so that `c2v-rag --help` needs no torch and a command loads
# only what it uses; the RAG layer also works without the optional qdrant/llama-index packages, which ingest
# and search ask for when called. The facade sits above every layer, so these imports point down.
_EXPORTS = {
    "Causal2Vec": "c2v_rag.model.causal2vec",
    "adapt": "c2v_rag.training.adapt.run",
    "AdaptConfig": "c2v_rag.training.adapt.config",
    "AdaptReport": "c2v_rag.training.adapt.report",
    "Causal2VecConfig": "c2v_rag.core.config",
    "PromptFormat": "c2v_rag.core.config",
    "C2VError": "c2v_rag.core.errors",
    "MissingPackageError": "c2v_rag.core.errors",
    "ModelSourceError": "c2v_rag.core.errors",
    "UnsupportedArchitectureError": "c2v_rag.core.errors",
    "VariantLoadError": "c2v_rag.core.errors",
    "InContextPrompt": "c2v_rag.core.instructions",
    "Task": "c2v_rag.core.instructions",
    "TaskKind": "c2v_rag.core.instructions",
    "get_task": "c2v_rag.core.instructions",
    "list_tasks": "c2v_rag.core.instructions",
    "register_task": "c2v_rag.core.instructions",
    "LongTexts": "c2v_rag.encode.long_texts",
    "DEFAULT_PRESET": "c2v_rag.hub.presets",
    "list_presets": "c2v_rag.hub.presets",
    **{
        name: "c2v_rag.rag"
        for name in ("ingest", "embed", "load_embedded", "search", "search_many", "asearch", "reindex", "migrate")
        + ("list_collections",)
        + ("delete_documents", "DeleteResult")
        + ("Collection", "CollectionSummary", "open_collection", "SearchHit", "SearchOptions", "IngestConfig")
        + ("QdrantConfig",)
        + ("EmbedderOptions", "RetrieverOptions")
    },
    "apply_encode_kwargs": "c2v_rag.rag.embedding",
    "Causal2VecReranker": "c2v_rag.rerank",
    "RerankResult": "c2v_rag.rerank",
    "check_encode_kwargs": "c2v_rag.rag.embedding",
    "make_splitter": "c2v_rag.encode.splitting",
    "HIDDEN_FROM_LLM": "c2v_rag.store.point_schema",
    "metadata_field": "c2v_rag.store.point_schema",
    "RERANK_SCORE_KEY": "c2v_rag.rag.retriever",
    "warn_if_reranked": "c2v_rag.rag.retriever",
}


def _register_representations() -> None:
    # Importing it registers the representations that Causal2VecConfig validates `representation` against (and
    # imports torch): run before the first config is validated, by whichever module validates it.
    from c2v_rag.nn import readout  # noqa: F401


register_representations_on_use(_register_representations)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'c2v_rag' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found here directly from now on
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
