"""mteb.evaluate on a variant the way mteb's documentation runs a model, offline, on a custom task."""

from __future__ import annotations

import numpy as np
import pytest
import torch

mteb = pytest.importorskip("mteb")
pytest.importorskip("sentence_transformers")
from sentence_transformers import SentenceTransformer  # noqa: E402
from tiny_corpus import CORPUS  # noqa: E402

from c2v_rag import get_task  # noqa: E402
from c2v_rag.evaluation.mteb_adapter import local_retrieval_task  # noqa: E402
from c2v_rag.hub.st_files import variant_revision  # noqa: E402

DOCS = {f"d{i}": text for i, text in enumerate(CORPUS[:7])}
QUERIES = {"q0": "vitamin D and bone loss", "q1": "the stock market fell", "q4": "how proteins fold"}
QRELS = {"q0": {"d0": 1}, "q1": {"d1": 1}, "q4": {"d4": 1}}


def local_task():
    """A custom retrieval task built from local data (no hub)."""
    return local_retrieval_task("C2VLocalRetrieval", DOCS, QUERIES, QRELS, description="tiny local task")


def ndcg_at_10(queries: np.ndarray, docs: np.ndarray) -> float:
    """Independent nDCG@10 with one relevant document per query: 1 / log2(rank + 1)."""
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    d = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    ids = list(DOCS)
    gains = []
    for row, qid in enumerate(QUERIES):
        ranking = [ids[i] for i in np.argsort(-(d @ q[row]), kind="stable")]
        rank = ranking.index(next(iter(QRELS[qid]))) + 1
        gains.append(1 / np.log2(rank + 1) if rank <= 10 else 0.0)
    return float(np.mean(gains))


@pytest.fixture(scope="module")
def variant(tiny_model_factory, tmp_path_factory):
    path = tmp_path_factory.mktemp("mteb-variant") / "tiny-c2v"
    model = tiny_model_factory("llama", default_task="SciFact", max_length=80)
    model.save_pretrained(path)
    return path, model


def test_mteb_evaluate_a_variant_as_a_sentence_transformers_model(variant):
    path, model = variant
    st_model = SentenceTransformer(
        str(path), device="cpu", trust_remote_code=True, model_kwargs={"dtype": torch.float32}
    )
    result = mteb.evaluate(st_model, local_task(), cache=None, show_progress_bar=False)

    assert (result.model_name, result.model_revision) == ("c2v_rag/tiny-c2v", variant_revision(path))
    meta = mteb.models.SentenceTransformerEncoderWrapper(st_model).mteb_model_meta
    assert (meta.embed_dim, meta.max_tokens, str(meta.similarity_fn_name.value)) == (model.embedding_dim, 80, "cosine")
    # The task is not in the paper's table: queries get the retrieval prompt (the variant's query
    # instruction), documents none, exactly as encode_queries / encode_documents give them.
    score = result.task_results[0].get_score()
    expected = ndcg_at_10(
        model.encode_queries(list(QUERIES.values()), task="SciFact"), model.encode_documents(list(DOCS.values()))
    )
    assert score == pytest.approx(expected, abs=1e-4)
    uninstructed = ndcg_at_10(model.encode(list(QUERIES.values())), model.encode_documents(list(DOCS.values())))
    print(f"nDCG@10 {score:.4f} (queries without instruction: {uninstructed:.4f})")


def test_prompts_per_task_and_type_follow_the_paper(variant):
    path, _ = variant
    st_model = SentenceTransformer(str(path), device="cpu", trust_remote_code=True)
    from mteb.models.abs_encoder import get_prompt
    from mteb.types import PromptType

    prompts = st_model.prompts
    scifact, sts = mteb.get_task("SciFact").metadata, mteb.get_task("STSBenchmark").metadata
    assert get_prompt(prompts, scifact, PromptType.query) == get_task("SciFact").instruction
    assert get_prompt(prompts, scifact, PromptType.document) == ""
    assert get_prompt(prompts, sts, PromptType.query) == get_prompt(prompts, sts, None) == get_task("STS12").instruction
    banking = mteb.get_task("Banking77Classification").metadata
    assert get_prompt(prompts, banking, None) == get_task("Banking77Classification").instruction


def test_mteb_encoder_has_the_model_meta_mteb_asks_for(variant):
    from c2v_rag.evaluation.mteb_adapter import MTEBEncoder

    _, model = variant
    encoder = MTEBEncoder(model, name="c2v_rag/tiny-c2v", revision="abc")
    result = mteb.evaluate(encoder, local_task(), cache=None, show_progress_bar=False)
    assert (result.model_name, result.model_revision) == ("c2v_rag/tiny-c2v", "abc")
    assert encoder.mteb_model_meta.embed_dim == model.embedding_dim
    assert 0 <= result.task_results[0].get_score() <= 1


def test_mteb_encoder_gives_queries_in_context_examples(variant):
    from c2v_rag.evaluation.mteb_adapter import MTEBEncoder

    _, model = variant
    examples = [("cats purr when happy", "Purring signals a content cat.")]
    encoder = MTEBEncoder(model, name="c2v_rag/tiny-c2v", examples={"SciFact": examples})
    # Named SciFact, so the adapter finds its instruction (an unknown retrieval task's queries get none, and
    # examples go only with an instruction).
    task = local_retrieval_task("SciFact", DOCS, QUERIES, QRELS, description="tiny local task")
    model.max_seq_length = 200  # the fixture's 80 tokens leave no room once an example (and its instruction) is in
    try:
        score = mteb.evaluate(encoder, task, cache=None, show_progress_bar=False).task_results[0].get_score()
        # Independently: queries with the examples before their instruction, documents (asymmetric task) bare.
        queries = list(QUERIES.values())
        docs = model.encode_documents(list(DOCS.values()))
        expected = ndcg_at_10(model.encode_queries(queries, task="SciFact", examples=examples), docs)
        assert score == pytest.approx(expected, abs=1e-4)
        got = encoder.encode([{"text": queries}], task_metadata=task.metadata, prompt_type=None)
        assert not np.allclose(got, model.encode_queries(queries, task="SciFact"), atol=1e-4)
    finally:
        model.max_seq_length = 80
    with pytest.raises(ValueError, match="registered"):
        MTEBEncoder(model, examples="all")


def test_sentence_transformers_encode_takes_examples(variant, monkeypatch):
    path, model = variant
    st_model = SentenceTransformer(
        str(path), device="cpu", trust_remote_code=True, model_kwargs={"dtype": torch.float32}
    )
    st_model.max_seq_length = 200  # room for the example, as in the test above
    monkeypatch.setattr(model, "max_seq_length", 200)  # the shared model gets its length back even on failure
    examples = [("cats purr when happy", "Purring signals a content cat.")]
    instruction = get_task("SciFact").instruction
    queries = list(QUERIES.values())
    got = st_model.encode(queries, prompt=instruction, examples=examples)
    np.testing.assert_allclose(got, model.encode_queries(queries, task="SciFact", examples=examples), atol=1e-5)
    assert not np.allclose(got, st_model.encode(queries, prompt=instruction), atol=1e-4)
    with pytest.raises(ValueError, match="in-context examples"):
        st_model.encode(queries, examples=examples)  # examples need an instruction to precede
