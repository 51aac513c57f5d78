"""A command stopped by Ctrl-C exits 130, from ``python -m c2v_rag.cli`` too, with a line that says what running it
again does where that resumes or finishes its work.

CPython ends a ``python -m`` process with SIGINT after its teardown when a KeyboardInterrupt once left code that
``exec()`` ran from a string, even one caught afterwards (as the CLI catches every Ctrl-C): CI saw a training run
print its resume line and exit -2. Where the Ctrl-C lands is chance; here it lands inside ``exec`` every time, and
no ``exec`` runs after it (a later one clears what CPython noted).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from c2v_rag.cli.errors import EXIT_INTERRUPTED

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
import importlib
import sys

import c2v_rag.rag.errors  # noqa: F401  what reporting the Ctrl-C imports, imported before it
from c2v_rag.cli import app


def ctrl_c_inside_exec(args):
    # As when the Ctrl-C arrives while a dataclass or a namedtuple writes its methods.
    exec("import signal; signal.raise_signal(signal.SIGINT)")
    return 0


importlib.import_module(f"c2v_rag.cli.{sys.argv[1]}").run = ctrl_c_inside_exec
sys.exit(app.main())
"""


@pytest.mark.parametrize(
    ("words", "line"),
    [
        (["env"], "error: interrupted"),  # a command that only reads has nothing to resume
        (["ingest", "docs"], "error: interrupted; re-run the same command to resume (stored chunks are skipped)"),
        (["migrate", "--to-path", "new"], "error: interrupted; run it again to resume the copy"),
    ],
)
def test_a_ctrl_c_taken_inside_exec_still_exits_130_under_python_m(tmp_path, words, line):
    (tmp_path / "interrupted_cli.py").write_text(PROGRAM, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "interrupted_cli", *words],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == EXIT_INTERRUPTED, (done.returncode, done.stderr)
    assert done.stderr.strip().splitlines()[-1] == line, done.stderr
