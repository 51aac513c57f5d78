"""The main job on the real default preset: ingest a folder of text, search it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

# The RAG extras (pip install 'c2v-rag[all]'); without them these tests are skipped, visibly.
for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

import c2v_rag
from c2v_rag.cli import main
from c2v_rag.rag import DEFAULT_QUERY_TASK, load_model
from c2v_rag.rag.ingestion.config import DEFAULT_DECODER_MAX_LENGTH

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "docs"


@pytest.mark.real_weights
def test_ingest_a_folder_and_search_it_with_the_default_preset(tmp_path, capsys):
    store = str(tmp_path / "qdrant")
    assert main(["ingest", str(EXAMPLES), "--path", store, "-q"]) == 0
    assert capsys.readouterr().out.startswith(f"ingested {len(list(EXAMPLES.iterdir()))} documents")
    query = "What causes spring tides?"
    hits = c2v_rag.search(query, top_k=3, path=store)
    assert main(["search", query, "--path", store, "-k", "3"]) == 0
    printed = capsys.readouterr().out
    assert all(f"{h.score:.4f}  {h.source}" in printed for h in hits)

    # The scores are the cosines of the preset's own query and document vectors, the documents read as a new
    # collection reads them: the decoder at the first 96 tokens of each chunk (whole chunks score ~0.006 apart).
    model = load_model(None)
    texts = {h.id: h.text for h in c2v_rag.search(query, top_k=100, path=store)}
    doc_vectors = model.encode_documents(
        list(texts.values()), normalize_embeddings=True, max_length=DEFAULT_DECODER_MAX_LENGTH
    )
    # Queries get the preset's own default task, or the RAG default when it names none.
    q = model.encode_queries(query, task=model.config.default_task or DEFAULT_QUERY_TASK, normalize_embeddings=True)
    expected = dict(zip(texts, (doc_vectors @ q).tolist()))
    assert len(texts) >= len(list(EXAMPLES.iterdir()))
    np.testing.assert_allclose([h.score for h in hits], sorted(expected.values(), reverse=True)[:3], atol=2e-3)
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.id], abs=2e-3)
        assert hit.text in (EXAMPLES / Path(hit.source).name).read_text(encoding="utf-8")
