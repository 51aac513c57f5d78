"""Causal2VecReranker: its scores against a plain transformers forward of the same decoder, one pair at a time;
invariance to batching and order; truncation counted; fusion; the errors of bad input."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from rag_helpers import RERANK_DOCS, RERANK_QUERY, save_lm_variant

from c2v_rag.hub.fast_tokenizer import FastTokenizer, transformers_tokenizer
from c2v_rag.rerank import Causal2VecReranker, RerankTemplate, fuse, zscore

DOCS, QUERY = RERANK_DOCS, RERANK_QUERY


@pytest.fixture(
    scope="module", params=[("llama", False), ("qwen2", True)], ids=["llama-untied-bos", "qwen2-tied-chatml"]
)
def lm_variant(request, tmp_path_factory, tiny_dirs):
    """A saved tiny variant whose base decoder has a language-model head, and that base's folder."""
    family, tied = request.param
    return save_lm_variant(tmp_path_factory.mktemp("rerank"), family, tied, tiny_dirs["bert"])


def reference_scores(base, pairs) -> np.ndarray:
    """Mean log-probability of each pair's query tokens, from transformers' causal LM, unbatched."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    out = []
    for pair in pairs:
        with torch.no_grad():
            logits = model(torch.tensor([pair.ids])).logits[0].double()
        logp = logits.log_softmax(-1)
        query = range(pair.query_start, len(pair.ids))
        out.append(np.mean([float(logp[t - 1, pair.ids[t]]) for t in query]))
    return np.asarray(out)


def test_scores_are_the_decoders_query_log_probabilities(lm_variant):
    variant, base = lm_variant
    reranker = Causal2VecReranker(variant, device="cpu", dtype="float32", batch_tokens=4096)
    pairs = reranker.pairs.pairs(reranker.pairs.query_ids(QUERY), DOCS)
    np.testing.assert_allclose(reranker.score(QUERY, DOCS), reference_scores(base, pairs), rtol=1e-5, atol=1e-5)


def test_pairs_put_the_document_in_the_template_and_the_query_last(lm_variant):
    variant, base = lm_variant
    reranker = Causal2VecReranker(variant, device="cpu", dtype="float32")
    tokenizer = reranker.scoring.tokenizer
    (pair,) = reranker.pairs.pairs(reranker.pairs.query_ids(QUERY), [DOCS[0]])
    chatml = "qwen2" in base.name
    # The tiny ChatML template opens no assistant turn; without a chat template the turn ends with a newline.
    head, close = ("<|im_start|>user\n", "<|im_end|>\n") if chatml else ("", "\n")
    expected = (
        ([tokenizer.bos_token_id] if not chatml else [])
        + tokenizer(head, add_special_tokens=False)["input_ids"]
        + tokenizer(DOCS[0], add_special_tokens=False)["input_ids"]
        + tokenizer("\n\nWrite a search query that this text answers." + close, add_special_tokens=False)["input_ids"]
    )
    assert pair.ids == expected + tokenizer(QUERY, add_special_tokens=False)["input_ids"]
    assert pair.query_start == len(expected) and not pair.truncated


def test_scores_do_not_depend_on_batching_or_order(lm_variant):
    variant, _ = lm_variant
    one_at_a_time = Causal2VecReranker(variant, device="cpu", dtype="float32", batch_tokens=1)
    batched = Causal2VecReranker(variant, device="cpu", dtype="float32", batch_tokens=4096)
    expected = one_at_a_time.score(QUERY, DOCS)
    np.testing.assert_allclose(batched.score(QUERY, DOCS), expected, rtol=1e-5, atol=1e-5)
    order = [3, 0, 4, 2, 1]
    np.testing.assert_allclose(batched.score(QUERY, [DOCS[i] for i in order]), expected[order], rtol=1e-5, atol=1e-5)
    assert len(set(np.round(expected, 6))) == len(DOCS)  # the documents are told apart: the checks above can fail


def test_long_documents_keep_their_head_and_are_counted(lm_variant, caplog):
    variant, _ = lm_variant
    probe = Causal2VecReranker(variant, device="cpu", dtype="float32")
    query_ids = probe.pairs.query_ids(QUERY)
    room = 8  # document tokens that fit: "Bone" does, the long one does not
    max_length = len(probe.pairs.head) + len(probe.pairs.middle) + len(query_ids) + room
    reranker = Causal2VecReranker(variant, device="cpu", dtype="float32", max_length=max_length)
    tokenizer = reranker.scoring.tokenizer
    long = " ".join(DOCS[:4] * 3)
    # decode is transformers' tokenizer's alone (the reranker's may be the tokenizers-only one of the cache)
    decode = transformers_tokenizer(tokenizer).decode
    head = decode(tokenizer(long, add_special_tokens=False)["input_ids"][:room])
    with caplog.at_level(logging.WARNING, logger="c2v_rag"):
        scores = reranker.score(QUERY, [long, DOCS[4]])
    assert reranker.truncated == 1
    assert f"1 of 2 documents exceeded the reranker's max_length={max_length}" in caplog.text
    (pair,) = reranker.pairs.pairs(query_ids, [long])
    assert len(pair.ids) == max_length and pair.truncated
    # The cut document scores as its head would: the same tokens (decoding and re-tokenizing the head keeps them).
    assert tokenizer(head, add_special_tokens=False)["input_ids"] == pair.ids[len(reranker.pairs.head) :][:room]
    # Batched beside another document or alone, float32 sums differ in the last bits (2e-6 on torch 2.6).
    assert scores[0] == pytest.approx(reranker.score(QUERY, [head])[0], abs=1e-5)
    reranker.score(QUERY, [long])
    assert reranker.truncated == 2


def test_rerank_returns_the_best_first_in_the_rerank_api_shape(lm_variant):
    variant, _ = lm_variant
    reranker = Causal2VecReranker(variant, device="cpu", dtype="float32")
    scores = reranker.score(QUERY, DOCS)
    results = reranker.rerank(QUERY, DOCS, top_n=3, return_documents=True)
    assert [r.index for r in results] == list(np.argsort(-scores)[:3])
    assert [r.relevance_score for r in results] == pytest.approx(sorted(scores, reverse=True)[:3])
    assert [r.document for r in results] == [DOCS[r.index] for r in results]
    assert all(r.document is None for r in reranker.rerank(QUERY, DOCS))


def test_the_variants_own_decoder_scores_through_its_merged_weights(lm_variant):
    variant, _ = lm_variant
    from c2v_rag import Causal2Vec

    model = Causal2Vec.from_pretrained(variant, device="cpu", dtype="float32")
    own = Causal2VecReranker(model, decoder="variant")
    assert own.scoring.likelihood.backbone is model.decoder
    # An untrained variant's decoder is its base: the two choices agree.
    base = Causal2VecReranker(model, decoder="base")
    np.testing.assert_allclose(own.score(QUERY, DOCS), base.score(QUERY, DOCS), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_loaded_models_base_decoder_runs_in_the_models_dtype(lm_variant, dtype):
    # "auto" picks bf16 on CPUs with avx512_bf16 and float32 elsewhere: a loaded model's own dtype must win, or
    # the base and the variant's decoder of a float32 model disagree on one CPU and agree on another.
    from c2v_rag import Causal2Vec

    variant, _ = lm_variant
    model = Causal2Vec.from_pretrained(variant, device="cpu", dtype=dtype)
    base = Causal2VecReranker(model, decoder="base")
    assert next(base.scoring.likelihood.backbone.parameters()).dtype == dtype
    assert (
        next(Causal2VecReranker(model, decoder="base", dtype="float32").scoring.likelihood.backbone.parameters()).dtype
        == torch.float32
    )


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda r: r.score("", DOCS), ValueError, "query must be a non-empty string"),
        (lambda r: r.score(QUERY, "one document"), TypeError, "wrap a single document in a list"),
        (lambda r: r.score(QUERY, [DOCS[0], 3]), TypeError, "input at index 1 is a int"),
        (lambda r: r.rerank(QUERY, DOCS, top_n=0), ValueError, "top_n must be a positive integer"),
        (lambda r: r.score(QUERY + " bone" * 200, DOCS), ValueError, "leaves no room for a document"),
        (lambda r: r.fused_scores(QUERY, DOCS, [0.1]), ValueError, "1 first-stage scores for 5 documents"),
    ],
)
def test_bad_input_is_refused_with_the_fix(lm_variant, call, error, message):
    variant, _ = lm_variant
    with pytest.raises(error, match=message):
        call(Causal2VecReranker(variant, device="cpu", dtype="float32"))


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="unknown rerank template 'nope'"):
        Causal2VecReranker(template="nope")
    with pytest.raises(ValueError, match="max_length must be a positive integer"):
        Causal2VecReranker(max_length=0)
    with pytest.raises(ValueError, match="decoder must be 'base' or 'variant'"):
        Causal2VecReranker(decoder="both")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must hold {document} exactly once"):
        RerankTemplate("bad", "no document here")


def test_fusion_is_a_weighted_sum_of_per_query_z_scores():
    dense, likelihood = [0.9, 0.7, 0.5, 0.4], [-3.0, -1.0, -2.0, -2.5]
    z_dense = (np.array(dense) - np.mean(dense)) / np.std(dense)
    z_like = (np.array(likelihood) - np.mean(likelihood)) / np.std(likelihood)
    np.testing.assert_allclose(fuse(dense, likelihood, 0.25), 0.75 * z_dense + 0.25 * z_like)
    np.testing.assert_allclose(fuse(dense, likelihood, 0.0), z_dense)
    # A constant factor or offset of the likelihood (sum vs mean vs PMI of one query's tokens) changes nothing.
    np.testing.assert_allclose(fuse(dense, 7 * np.array(likelihood) + 3, 0.4), fuse(dense, likelihood, 0.4))
    assert zscore([2.0, 2.0]).tolist() == [0.0, 0.0] and zscore([]).size == 0
    with pytest.raises(ValueError, match="weight must be between 0 and 1"):
        fuse(dense, likelihood, 1.5)


@pytest.mark.real_weights
def test_the_presets_reranker_scores_as_its_base_decoder_does():
    from transformers import AutoModelForCausalLM

    from c2v_rag.hub.sources import resolve_reference

    reranker = Causal2VecReranker(device="cpu", dtype="float32")
    tokenizer = reranker.scoring.tokenizer
    query = "How can my server program cut its ties to the terminal it was started from?"
    docs = [
        "setsid() creates a new session if the calling process is not a process group leader.",
        "Bananas are rich in potassium and grow in tropical climates.",
    ]
    base = AutoModelForCausalLM.from_pretrained(
        resolve_reference("smollm2-135m-instruct").location, dtype=torch.float32
    )
    expected = []
    for doc in docs:
        # The layout written out: SmolLM2's ChatML user turn with the document, the assistant's turn, the query.
        prompt = (
            tokenizer("<|im_start|>user\n", add_special_tokens=False)["input_ids"]
            + tokenizer(doc, add_special_tokens=False)["input_ids"]
            + tokenizer(
                "\n\nWrite a search query that this text answers.<|im_end|>\n<|im_start|>assistant\n",
                add_special_tokens=False,
            )["input_ids"]
        )
        ids = prompt + tokenizer(query, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = base(torch.tensor([ids])).logits[0].double().log_softmax(-1)
        expected.append(np.mean([float(logp[t - 1, ids[t]]) for t in range(len(prompt), len(ids))]))
    scores = reranker.score(query, docs)
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-4)
    assert scores[0] > scores[1]


def test_a_reranker_loads_its_tokenizer_from_the_cache_and_gives_transformers_ids(lm_variant, monkeypatch, tmp_path):
    """A reranker loaded by name reads the decoder's tokenizer with tokenizers alone once the cache holds it (no
    transformers import, a second off a search), and its pairs are the ids transformers' tokenizer gives."""
    variant, _ = lm_variant
    monkeypatch.setenv("C2V_RAG_TOKENIZER_CACHE", str(tmp_path / "tokenizers"))
    first = Causal2VecReranker(variant, device="cpu", dtype="float32")  # loads through transformers, writes the entry
    cached = Causal2VecReranker(variant, device="cpu", dtype="float32")
    assert isinstance(cached.scoring.tokenizer, FastTokenizer)
    assert not isinstance(first.scoring.tokenizer, FastTokenizer)
    query_ids = cached.pairs.query_ids(QUERY)
    assert query_ids == first.pairs.query_ids(QUERY)
    assert [p.ids for p in cached.pairs.pairs(query_ids, DOCS)] == [p.ids for p in first.pairs.pairs(query_ids, DOCS)]
    assert cached.scoring.tokenizer.__dict__["_transformers"] is None  # the chat turn came from the entry
    np.testing.assert_allclose(cached.score(QUERY, DOCS), first.score(QUERY, DOCS), rtol=1e-6, atol=1e-6)
