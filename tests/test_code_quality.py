"""The code's own checks, run as tests so that CI runs them: ruff's lint and format, and mypy on the public API.

Both tools read their settings from pyproject.toml ([tool.ruff], [tool.mypy]); the test extra installs them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_finds_nothing_to_fix():
    result = run("ruff", "check", "--no-cache", ".")
    assert result.returncode == 0, f"ruff check (fix with `ruff check --fix .`):\n{result.stdout}{result.stderr}"


def test_the_code_is_formatted():
    result = run("ruff", "format", "--check", "--no-cache", ".")
    assert result.returncode == 0, f"unformatted files (fix with `ruff format .`):\n{result.stdout}{result.stderr}"


def test_the_public_api_type_checks():
    result = run("mypy", "--no-incremental")
    assert result.returncode == 0, f"mypy (files in pyproject.toml's [tool.mypy]):\n{result.stdout}{result.stderr}"
