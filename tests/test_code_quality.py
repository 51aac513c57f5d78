"""The code's own checks, run as tests so that CI runs them: ruff's lint and format, and mypy on the package.

Both tools read their settings from pyproject.toml ([tool.ruff], [tool.mypy]); the test extra installs them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEWLINE = b"\n"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_finds_nothing_to_fix():
    result = run("ruff", "check", "--no-cache", ".")
    assert result.returncode == 0, f"ruff check (fix with `ruff check --fix .`):\n{result.stdout}{result.stderr}"


def test_the_code_is_formatted():
    result = run("ruff", "format", "--check", "--no-cache", ".")
    assert result.returncode == 0, f"unformatted files (fix with `ruff format .`):\n{result.stdout}{result.stderr}"


def test_the_public_api_type_checks():
    """mypy on the whole package (pyproject.toml's [tool.mypy] ``files``), the public API included."""
    result = run("mypy", "--no-incremental")
    assert result.returncode == 0, f"mypy on the c2v_rag package:\n{result.stdout}{result.stderr}"


def test_no_local_absolute_path_ships():
    """Nothing tracked names a folder of the machines this repository is developed on (the checkout under /work, the
    home and caches under /root): a command or a result must run anywhere, with paths relative to the repository
    (``../shared/data``), ``~/.cache`` or a placeholder. Example paths (``/home/me/docs``, ``/tmp/...``) are fine."""
    import re

    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:  # not a git checkout (an sdist): nothing to check against
        return
    local = re.compile(rb"(?<![\w.~/-])/(?:root|work)/")
    found = []
    for name in listed.stdout.decode().split("\0"):
        path = ROOT / name
        if not name or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:  # binary
            continue
        found += [f"{name}:{data.count(NEWLINE, 0, m.start()) + 1}" for m in local.finditer(data)]
    assert not found, "local absolute paths in tracked files:\n" + "\n".join(found[:40])
