"""Optional dependencies: import one, or say which package is missing and the command that installs it.

Every feature that needs a package outside the core install (Qdrant, BM25, Ray, Parquet, packaged
model weights...) asks here, so a missing package always fails the same way: a
:class:`~c2v_rag.core.errors.MissingPackageError` (an ``ImportError``) naming the feature, the package
and the pip command.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from types import ModuleType
from typing import NamedTuple

from c2v_rag.core.errors import MissingPackageError


class Requirement(NamedTuple):
    """A package a feature needs: the module it imports, the name pip knows it by, and the c2v-rag extra that
    brings it."""

    module: str
    distribution: str
    extra: str


def missing_requirements(requirements: Sequence[Requirement], feature: str) -> MissingPackageError | None:
    """The error :func:`require` would raise for ``feature`` when a package of ``requirements`` is not installed,
    else None; nothing is imported (what a check of many files, before any work, can afford)."""
    absent = [r for r in requirements if not _installed(r.module)]
    if not absent:
        return None
    named = " and ".join(repr(r.distribution) for r in absent)
    return missing_package(
        feature, f"the package{'s' if len(absent) > 1 else ''} {named}", extra_command(absent[0].extra)
    )


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or set to None in sys.modules
        return False


def extra_command(extra: str) -> str:
    """The pip command that installs c2v-rag's optional dependency group ``extra``."""
    return f"pip install 'c2v-rag[{extra}]'"


def missing_package(
    feature: str, package: str, command: str, *, needs: str = "needs", note: str = ""
) -> MissingPackageError:
    """The error for ``feature`` when ``package`` (a phrase: ``"the package 'bm25s'"``, ``"Ray Data"``) is
    not installed; ``command`` installs it, ``note`` follows it (a second way out, on its own line)."""
    return MissingPackageError(
        f"{feature} {needs} {package}, which is not installed. Install it with:\n    {command}{note}"
    )


def require(
    module: str,
    feature: str,
    extra: str | None = None,
    *,
    distribution: str | None = None,
    package: str | None = None,
    command: str | None = None,
    needs: str = "needs",
) -> ModuleType:
    """Import ``module``, or raise :func:`missing_package`'s error for ``feature``.

    Args:
        module: what to import (``"qdrant_client"``, ``"ray.data"``).
        feature: what needs it, as the message's subject (``"c2v_rag.ingest"``).
        extra: the c2v-rag extra that brings it (the command is ``pip install 'c2v-rag[extra]'``).
        distribution: the name pip knows it by (default: ``module``'s top-level name).
        package: how the message names it (default: ``the package 'distribution'``).
        command: the install command when no extra brings it.
        needs: the verb, ``"need"`` after a plural ``feature``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        if command is None:
            if extra is None:
                raise TypeError("require() needs extra= or command= to say how to install the package") from err
            command = extra_command(extra)
        named = package or f"the package {(distribution or module.partition('.')[0])!r}"
        raise missing_package(feature, named, command, needs=needs) from err
