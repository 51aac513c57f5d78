"""Optional dependencies of the RAG layer, each with the pip command that installs it."""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import MissingPackageError

# module -> (distribution, extra of c2v-rag that brings it)
_PACKAGES = {
    "qdrant_client": ("qdrant-client", "qdrant"),
    "llama_index.core": ("llama-index-core", "qdrant"),
    "tenacity": ("tenacity", "qdrant"),
}
# Imported only by the features that need them, not checked up front.
_OPTIONAL = {"pyarrow.parquet": ("pyarrow", "parquet")}


def require(module: str, feature: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingPackageError` naming ``feature`` and the fix."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        distribution, extra = _PACKAGES.get(module) or _OPTIONAL[module]
        raise MissingPackageError(
            f"{feature} needs the package {distribution!r}, which is not installed. Install it with:\n"
            f"    pip install 'c2v-rag[{extra}]'"
        ) from err


def require_rag(feature: str) -> None:
    """Check every package that ingestion and search use, before any work starts."""
    for module in _PACKAGES:
        require(module, feature)
