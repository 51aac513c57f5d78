"""The notebooks run top to bottom (real default preset), so they cannot rot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The RAG notebooks; the fine-tuning notebook has its own test (tests/training/test_notebook.py),
# which points it at the shared data and its fast mode.
NOTEBOOKS = [
    ROOT / "notebooks" / name
    for name in ("01_quickstart.ipynb", "02_llamaindex_rag.ipynb", "03_langchain_retriever.ipynb")
]


@pytest.mark.real_weights
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(notebook, monkeypatch):
    for module in ("qdrant_client", "llama_index.vector_stores.qdrant", "langchain_qdrant", "ipykernel"):
        pytest.importorskip(module)
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    # The kernel imports the checkout and the integration packages whether or not they are installed.
    paths = [
        ROOT,
        ROOT / "integrations" / "llama-index-embeddings-causal2vec",
        ROOT / "integrations" / "langchain-causal2vec",
    ]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([*map(str, paths), os.environ.get("PYTHONPATH", "")]))
    book = nbformat.read(notebook, as_version=4)
    client = nbclient.NotebookClient(
        book, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(notebook.parent)}}
    )
    client.execute()
    outputs = [o for cell in book.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any(o.output_type == "stream" and o.name == "stdout" for o in outputs)
