"""Files of the ONNX cache written so that no reader ever sees half of one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomically(target: Path, build: Callable[[Path], Path]) -> Path:
    """``build(tmp)`` writes a file in a temporary folder beside ``target`` and returns its path; that file is then
    renamed to ``target`` in one step, and the folder removed, also when ``build`` fails: a crash, or another
    process writing the same file, leaves ``target`` whole or absent."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".tmp-") as tmp:
        built = build(Path(tmp))
        os.replace(built, target)
    return target
