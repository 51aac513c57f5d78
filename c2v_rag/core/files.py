"""Files written so that no reader ever sees half of one.

Each writer here writes beside its target under a temporary name and renames the result onto the target in one
step: a crash, a full disk or another process writing the same file leaves the target whole (the old one or the
new one) or absent, never torn.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def replacing(target: Path, *, newline: str | None = None) -> Iterator[IO[str]]:
    """A text file (UTF-8) opened for writing beside ``target``, renamed onto it when the block ends without error
    and removed when it raises. The folder is made when missing. ``newline`` is :func:`open`'s. The file gets the
    permissions the user's umask gives any new file (``mkstemp``'s would be private to the user, whatever it says)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}-{uuid.uuid4().hex[:12]}.tmp"
    try:
        with tmp.open("x", encoding="utf-8", newline=newline) as handle:  # "x": never another writer's file
            yield handle
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomically(target: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``target`` through :func:`replacing`."""
    with replacing(target) as handle:
        handle.write(text)


def write_atomically(target: Path, build: Callable[[Path], Path]) -> Path:
    """``build(tmp)`` writes a file in a temporary folder beside ``target`` and returns its path; that file is then
    renamed to ``target`` in one step, and the folder removed, also when ``build`` fails (for files another library
    writes by path, such as ONNX graphs)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".tmp-") as tmp:
        built = build(Path(tmp))
        os.replace(built, target)
    return target
