"""A Hugging Face cache laid out by hand: what a download leaves, for tests that load hub ids without the hub.

A module of its own, not conftest.py: tests in several folders import it (see tiny_models.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path


def publish_snapshot(cache: Path, repo: str, folder: Path | None, commit: str, *, main: bool = True) -> Path:
    """``folder``'s files (None: none yet) as the Hugging Face cache ``cache`` holds a download of ``repo`` at
    ``commit``; with ``main``, its ``main`` ref names that commit. The snapshot folder."""
    home = cache / f"models--{repo.replace('/', '--')}"
    snapshot = home / "snapshots" / commit
    if folder is None:
        snapshot.mkdir(parents=True)
    else:
        shutil.copytree(folder, snapshot)
    if main:
        (home / "refs").mkdir(parents=True, exist_ok=True)
        (home / "refs" / "main").write_text(commit)
    return snapshot
