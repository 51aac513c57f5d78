"""Optional dependencies of the RAG layer: which c2v-rag extra brings each one."""

from __future__ import annotations

from types import ModuleType

from c2v_rag.core.extras import require as require_package

# module -> (distribution, extra of c2v-rag that brings it)
_PACKAGES = {
    "qdrant_client": ("qdrant-client", "qdrant"),
    "llama_index.core": ("llama-index-core", "qdrant"),
    "tenacity": ("tenacity", "qdrant"),
}
# Imported only by the features that need them, not checked up front.
_OPTIONAL = {"pyarrow.parquet": ("pyarrow", "parquet")}


def require(module: str, feature: str) -> ModuleType:
    """Import ``module`` or raise :class:`~c2v_rag.core.errors.MissingPackageError` naming ``feature`` and the fix."""
    distribution, extra = _PACKAGES.get(module) or _OPTIONAL[module]
    return require_package(module, feature, extra, distribution=distribution)


def require_rag(feature: str) -> None:
    """Check every package that ingestion and search use, before any work starts."""
    for module in _PACKAGES:
        require(module, feature)
