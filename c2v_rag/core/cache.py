"""Where c2v_rag keeps what it can compute again (converted weights, ONNX graphs, tokenizers, digests, scores).

Everything lives under one folder, :func:`cache_dir`; each kind of entry has a subfolder, and some have an
environment variable of their own that names another folder for them or turns them off.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from c2v_rag.core.files import write_text_atomically

logger = logging.getLogger(__name__)

CACHE_ENV = "C2V_RAG_CACHE"
OFF_VALUES = ("0", "off", "false", "no")


def cache_dir() -> Path:
    """``$C2V_RAG_CACHE``, else the user cache directory (``~/.cache/c2v_rag`` on Linux)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("c2v_rag"))


def switched_off(variable: str) -> bool:
    """True when the environment variable ``variable`` is ``0``, ``off``, ``false`` or ``no`` (any case)."""
    return os.environ.get(variable, "").strip().lower() in OFF_VALUES


def cache_folder(name: str, variable: str | None = None) -> Path | None:
    """The folder of one kind of cache entry: the folder ``$variable`` names, None when it turns the cache off
    (:func:`switched_off`), else ``name`` under :func:`cache_dir`."""
    if variable is not None:
        if switched_off(variable):
            return None
        env = os.environ.get(variable, "").strip()
        if env:
            return Path(env).expanduser()
    return cache_dir() / name


def keep_text(target: Path, text: str) -> OSError | None:
    """Write a cache file whole or not at all. Where it cannot be written (a read-only home, say) the error is
    returned, not raised, with a debug line: a cache saves time, and the value is computed again next time."""
    try:
        write_text_atomically(target, text)
    except OSError as err:
        logger.debug("could not keep %s in the cache: %s", target, err)
        return err
    return None
