"""The package root: importing it loads no model library, and every name it exports loads on first use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import c2v_rag

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return out.stdout.split()


def test_importing_the_package_loads_no_model_library():
    code = (
        "import sys, c2v_rag\n"
        "print(sorted(m for m in ('torch', 'transformers', 'numpy', 'c2v_rag.model') if m in sys.modules))"
    )
    assert run_python(code) == ["[]"]


def test_a_config_is_validated_against_the_representations_without_importing_them_first():
    # The representations register when the first config is validated, not when the package is imported.
    code = (
        "import sys\n"
        "from c2v_rag.core.config import Causal2VecConfig\n"
        "print(Causal2VecConfig(decoder='d', encoder='e').representation, 'c2v_rag.nn.readout' in sys.modules)\n"
        "try:\n    Causal2VecConfig(decoder='d', encoder='e', representation='nope')\n"
        "except ValueError as err:\n    print('refused', 'concat' in str(err))"
    )
    assert run_python(code) == ["concat", "True", "refused", "True"]


def test_every_exported_name_loads():
    for name in c2v_rag.__all__:
        assert getattr(c2v_rag, name) is not None, name
    assert c2v_rag.Causal2Vec.__module__ == "c2v_rag.model.causal2vec"
    assert set(c2v_rag.__all__) <= set(dir(c2v_rag))
