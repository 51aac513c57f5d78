"""Optional dependencies of the RAG layer: which c2v-rag extra brings each one."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from c2v_rag.core.extras import extra_command, missing_package
from c2v_rag.core.extras import require as require_package

# module -> (distribution, extra of c2v-rag that brings it)
_PACKAGES = {
    "qdrant_client": ("qdrant-client", "qdrant"),
    "llama_index.core": ("llama-index-core", "qdrant"),
    "tenacity": ("tenacity", "qdrant"),
}
# Checked up front but not imported there: only chunking uses it (ingest imports it then, through
# c2v_rag.encode.splitting), and its import takes seconds that a search would otherwise wait for.
_FOUND_ONLY = frozenset({"llama_index.core"})


def require(module: str, feature: str) -> ModuleType:
    """Import ``module`` or raise :class:`~c2v_rag.core.errors.MissingPackageError` naming ``feature`` and the fix."""
    distribution, extra = _PACKAGES[module]
    return require_package(module, feature, extra, distribution=distribution)


def require_rag(feature: str) -> None:
    """Check every package that ingestion and search use, before any work starts."""
    for module in _PACKAGES:
        if module in _FOUND_ONLY:
            _find(module, feature)
        else:
            require(module, feature)


def _find(module: str, feature: str) -> None:
    """Raise :func:`require`'s error when ``module`` is not installed, without importing it."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # its parent package is missing (or blocked in sys.modules)
        found = False
    if not found:
        distribution, extra = _PACKAGES[module]
        raise missing_package(feature, f"the package {distribution!r}", extra_command(extra))
