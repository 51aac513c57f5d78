"""Exceptions with messages that name the input at fault and the fix."""


class C2VError(Exception):
    """Base class for c2v_rag errors."""


class MissingPackageError(C2VError, ImportError):
    """An optional dependency or a packaged model source is not installed."""


class ModelSourceError(C2VError, OSError):
    """A base model reference could not be resolved to weights."""


class LMHeadNotFoundError(ModelSourceError, ValueError):
    """A decoder with untied output embeddings whose ``lm_head.weight`` is not in local weights."""


class VariantLoadError(C2VError, OSError):
    """A variant directory is missing a file, or a file in it is corrupt."""


class UnsupportedArchitectureError(C2VError, ValueError):
    """A configured option (bidirectional attention, SimCSE dropout...) cannot reach this backbone."""
