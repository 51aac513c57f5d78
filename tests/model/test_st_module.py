"""A variant directory loaded by the real sentence-transformers, and the frameworks that load ST models."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

st = pytest.importorskip("sentence_transformers")
from packaging.version import Version  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from tiny_corpus import CORPUS  # noqa: E402

from c2v_rag import Causal2Vec, get_task  # noqa: E402
from c2v_rag.hub.st_files import (  # noqa: E402
    LEGACY_MODULE_TYPES,
    MODULE_TYPE,
    MODULES_FILE,
    ST_CONFIG_FILE,
    st_prompts,
    write_st_files,
)
from c2v_rag.model.st_module import Causal2VecModule  # noqa: E402

TEXTS = CORPUS[:7]
SCIFACT = get_task("SciFact").instruction
# sentence-transformers 6 asks for trust_remote_code before importing any module class outside its
# own package, an installed one included; 5.x imports an installed c2v_rag without it.
TRUST = {"trust_remote_code": True}
# The module path every variant's modules.json names from now on, promised stable (docs/frameworks.md), and
# the one the previous release wrote. Spelled out here, not read from st_files, so that changing what
# save writes fails a test rather than changing what the test expects.
STABLE_MODULE_TYPE = "c2v_rag.model.st_module.Causal2VecModule"
PREVIOUS_RELEASE_MODULE_TYPE = "c2v_rag.st_module.Causal2VecModule"


@pytest.fixture(scope="module")
def variant(tiny_model_factory, tmp_path_factory):
    """A saved tiny variant whose queries get the SciFact instruction by default."""
    path = tmp_path_factory.mktemp("st-variant")
    model = tiny_model_factory("qwen2", default_task="SciFact", max_length=96)
    model.save_pretrained(path)
    return path, model


def load_st(path, **kwargs):
    return SentenceTransformer(str(path), device="cpu", model_kwargs={"dtype": torch.float32}, **TRUST, **kwargs)


def test_encode_query_and_document_are_causal2vecs(variant):
    path, model = variant
    st_model = load_st(path)
    queries, docs = st_model.encode_query(TEXTS), st_model.encode_document(TEXTS)
    np.testing.assert_allclose(queries, model.encode_queries(TEXTS), atol=1e-5, rtol=0)
    np.testing.assert_allclose(docs, model.encode_documents(TEXTS), atol=1e-5, rtol=0)
    # The prompt reached the decoder template: queries and documents differ, and a prompt given by
    # hand is the instruction of Causal2Vec.encode.
    assert np.abs(queries - docs).max() > 1e-3
    np.testing.assert_allclose(
        st_model.encode(TEXTS[:3], prompt="Find pets"),
        model.encode(TEXTS[:3], instruction="Find pets"),
        atol=1e-5,
        rtol=0,
    )
    assert st_model.get_embedding_dimension() == model.embedding_dim
    assert st_model.max_seq_length == 96
    assert st_model.prompts["query"] == SCIFACT and st_model.prompts["document"] == ""
    # The native model's prompts are sentence-transformers' dict (it was the prompt builder: model.prompts["query"]
    # was a TypeError).
    assert model.prompts == st_model.prompts


def test_the_native_encode_takes_prompt_and_prompt_name_as_sentence_transformers_does(variant):
    """models.md says encode takes sentence-transformers' keywords; prompt= and prompt_name= were a TypeError
    naming an inner function (encode_texts)."""
    path, model = variant
    st_model = load_st(path)
    texts = TEXTS[:3]
    for name in ("query", "document", "SciFact-query", "STSBenchmark", "Retrieval-query"):
        np.testing.assert_allclose(
            model.encode(texts, prompt_name=name), st_model.encode(texts, prompt_name=name), atol=1e-5, rtol=0
        )
    np.testing.assert_allclose(
        model.encode_queries(texts, prompt_name="STSBenchmark"),
        model.encode(texts, task="STSBenchmark"),
        atol=1e-6,
        rtol=0,
    )
    np.testing.assert_allclose(
        model.encode_queries(texts, prompt="Find pets"), st_model.encode(texts, prompt="Find pets"), atol=1e-5, rtol=0
    )
    np.testing.assert_allclose(
        model.encode_documents(texts, prompt_name="query"), model.encode_queries(texts), atol=1e-6, rtol=0
    )
    # None, as callers written for sentence-transformers pass it, is no prompt: queries keep their default.
    np.testing.assert_array_equal(
        model.encode_queries(texts, prompt=None, prompt_name=None), model.encode_queries(texts)
    )
    with pytest.raises(ValueError, match="did you mean 'SciFact-query'"):
        model.encode(texts, prompt_name="Scifact-query")
    with pytest.raises(ValueError, match="set the instruction, as task= does: pass one"):
        model.encode_queries(texts, task="SciFact", prompt="Find pets")
    with pytest.raises(ValueError, match="not both"):
        model.encode(texts, prompt="a", prompt_name="query")
    with pytest.raises(TypeError, match=r"encode\(\) got an unexpected keyword argument 'batchsize' \(did you mean "):
        model.encode(texts, batchsize=8)
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got '8' .*pass it as an int"):
        model.encode(texts, batch_size="8")


def test_the_native_model_has_sentence_transformers_similarity_and_length_getters(variant):
    path, model = variant
    st_model = load_st(path)
    q, d = model.encode_queries(TEXTS[:3]), model.encode_documents(TEXTS[:3])
    assert model.similarity_fn_name == st_model.similarity_fn_name == "cosine"
    np.testing.assert_allclose(model.similarity_pairwise(q, d), st_model.similarity_pairwise(q, d), atol=1e-6)
    np.testing.assert_allclose(model.similarity(q, d), st_model.similarity(q, d), atol=1e-6)
    assert model.get_max_seq_length() == st_model.get_max_seq_length() == 96
    with pytest.raises(TypeError, match="similarity takes embeddings, not texts: encode them first"):
        model.similarity(["a"], ["b"])
    with pytest.raises(ValueError, match=f"one size, got {q.shape[1]} and 8 values"):
        model.similarity(q, d[:, :8])
    with pytest.raises(ValueError, match="pairs rows: got 3 and 2"):
        model.similarity_pairwise(q, d[:2])


def test_save_pretrained_writes_what_sentence_transformers_reads(variant):
    path, model = variant
    modules = json.loads((path / MODULES_FILE).read_text())
    assert modules == [{"idx": 0, "name": "0", "path": "", "type": "c2v_rag.model.st_module.Causal2VecModule"}]
    config = json.loads((path / ST_CONFIG_FILE).read_text())
    assert config["prompts"] == st_prompts(model.config) and config["similarity_fn_name"] == "cosine"
    assert not (path / "config.json").exists()  # nothing for transformers' Auto classes to mistake for a model


def test_a_variant_saved_before_the_st_files_loads_and_can_be_converted(variant, tmp_path):
    path, model = variant
    old = tmp_path / "old"
    shutil.copytree(path, old)
    for name in (MODULES_FILE, ST_CONFIG_FILE, "causal2vec_st_module.json"):
        (old / name).unlink()
    np.testing.assert_allclose(
        Causal2Vec.from_pretrained(old, device="cpu", dtype="float32").encode_queries(TEXTS),
        model.encode_queries(TEXTS),
        atol=1e-6,
    )
    write_st_files(old)
    np.testing.assert_allclose(load_st(old).encode_query(TEXTS), model.encode_queries(TEXTS), atol=1e-5, rtol=0)


def test_every_save_names_the_promised_module_path_and_every_path_ever_written_imports(variant, tmp_path):
    from sentence_transformers.util import import_from_string

    path, _ = variant
    assert MODULE_TYPE == STABLE_MODULE_TYPE
    assert PREVIOUS_RELEASE_MODULE_TYPE in LEGACY_MODULE_TYPES
    # Causal2Vec.save_pretrained (through write_st_files) and sentence-transformers' own save, which names
    # the class where it is defined: both must write the promised path.
    load_st(path).save(str(tmp_path / "st-saved"))
    converted = write_st_files(shutil.copytree(path, tmp_path / "converted"))
    for directory in (path, tmp_path / "st-saved", converted):
        modules = json.loads((directory / MODULES_FILE).read_text())
        assert [module["type"] for module in modules] == [STABLE_MODULE_TYPE], directory
    for class_path in (STABLE_MODULE_TYPE, *LEGACY_MODULE_TYPES):
        assert import_from_string(class_path) is Causal2VecModule, class_path


def test_a_variant_saved_by_the_previous_release_loads(variant, tmp_path):
    path, model = variant
    old = shutil.copytree(path, tmp_path / "saved-by-the-previous-release")
    # The previous release wrote the same variant files and ST files but for this one entry of modules.json.
    entry = {"idx": 0, "name": "0", "path": "", "type": PREVIOUS_RELEASE_MODULE_TYPE}
    (old / MODULES_FILE).write_text(json.dumps([entry], indent=2) + "\n", encoding="utf-8")
    then, now = load_st(old), load_st(path)
    assert type(then[0]) is Causal2VecModule
    np.testing.assert_allclose(then.encode_query(TEXTS), now.encode_query(TEXTS), atol=1e-6, rtol=0)
    np.testing.assert_allclose(then.encode_document(TEXTS), now.encode_document(TEXTS), atol=1e-6, rtol=0)
    np.testing.assert_allclose(then.encode_query(TEXTS), model.encode_queries(TEXTS), atol=1e-5, rtol=0)
    native = Causal2Vec.from_pretrained(old, device="cpu", dtype="float32")
    np.testing.assert_allclose(
        native.encode_queries(TEXTS),
        Causal2Vec.from_pretrained(path, device="cpu", dtype="float32").encode_queries(TEXTS),
        atol=1e-6,
        rtol=0,
    )


def test_sentence_transformers_save_round_trips(variant, tmp_path):
    path, model = variant
    texts = [" ".join(TEXTS), TEXTS[0]]
    st_model = load_st(path)
    st_model.max_seq_length = 48
    st_model.save(str(tmp_path / "saved"))
    again = load_st(tmp_path / "saved")
    assert again.max_seq_length == 48
    short = Causal2Vec.from_pretrained(tmp_path / "saved", device="cpu", dtype="float32")
    short.max_seq_length = 48
    np.testing.assert_allclose(again.encode_query(texts), short.encode_queries(texts), atol=1e-5, rtol=0)
    assert not np.allclose(again.encode_query(texts)[0], model.encode_queries(texts)[0], atol=1e-3)  # truncated


def test_unused_model_kwargs_are_refused(variant):
    path, _ = variant
    with pytest.raises(ValueError, match="attn_implementation.*not used by a Causal2Vec variant"):
        SentenceTransformer(str(path), device="cpu", model_kwargs={"attn_implementation": "eager"}, **TRUST)


def test_trust_remote_code_is_asked_only_by_sentence_transformers_6(variant):
    path, model = variant
    if Version(st.__version__) >= Version("6"):
        with pytest.raises(ValueError, match="trust_remote_code=True"):
            SentenceTransformer(str(path), device="cpu")
    else:  # 5.4-5.x import the installed c2v_rag module without it
        loaded = SentenceTransformer(str(path), device="cpu", model_kwargs={"dtype": torch.float32})
        np.testing.assert_allclose(loaded.encode_query(TEXTS), model.encode_queries(TEXTS), atol=1e-5, rtol=0)


def test_an_st_evaluator_scores_the_native_vectors(variant):
    from scipy.stats import spearmanr
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    path, model = variant
    a, b = TEXTS[:6], TEXTS[1:7]
    gold = [0.1, 0.9, 0.3, 0.5, 0.2, 0.8]
    evaluator = EmbeddingSimilarityEvaluator(a, b, gold, name="tiny")
    scores = load_st(path).evaluate(evaluator)
    va, vb = model.encode(a), model.encode(b)
    cosine = (va * vb).sum(1) / np.linalg.norm(va, axis=1) / np.linalg.norm(vb, axis=1)
    assert scores["tiny_spearman_cosine"] == pytest.approx(spearmanr(gold, cosine).statistic, abs=1e-9)


def test_langchain_huggingface_embeddings(variant):
    hf = pytest.importorskip("langchain_huggingface")
    path, model = variant
    emb = hf.HuggingFaceEmbeddings(
        model_name=str(path),
        model_kwargs={"device": "cpu", **TRUST},
        encode_kwargs={"normalize_embeddings": True},
        query_encode_kwargs={"prompt_name": "query", "normalize_embeddings": True},
    )
    np.testing.assert_allclose(
        emb.embed_documents(TEXTS), model.encode_documents(TEXTS, normalize_embeddings=True), atol=1e-5, rtol=0
    )
    np.testing.assert_allclose(
        emb.embed_query(TEXTS[0]), model.encode_queries(TEXTS[0], normalize_embeddings=True), atol=1e-5, rtol=0
    )


def test_llama_index_huggingface_embedding(variant):
    hf = pytest.importorskip("llama_index.embeddings.huggingface")
    path, model = variant
    # LlamaIndex passes its own query/text prompts, "" by default, which win over the saved ones:
    # the query instruction is given by name here.
    emb = hf.HuggingFaceEmbedding(model_name=str(path), device="cpu", query_instruction=SCIFACT, **TRUST)
    np.testing.assert_allclose(
        emb.get_text_embedding_batch(TEXTS), model.encode_documents(TEXTS, normalize_embeddings=True), atol=1e-5, rtol=0
    )
    np.testing.assert_allclose(
        emb.get_query_embedding(TEXTS[0]), model.encode_queries(TEXTS[0], normalize_embeddings=True), atol=1e-5, rtol=0
    )


@pytest.mark.real_weights
def test_the_preset_through_sentence_transformers():
    from c2v_rag.hub.presets import DEFAULT_PRESET, PRESETS_DIR

    path = PRESETS_DIR / DEFAULT_PRESET
    native = Causal2Vec.from_pretrained(path, device="cpu", dtype="float32")
    texts = [
        "What causes spring tides?",
        "Spring tides happen when the Sun and the Moon line up.",
        "Vitamin D deficiency is linked to rickets.",
        "How do I reset my card PIN?",
    ]
    st_model = load_st(path)
    queries, docs = st_model.encode_query(texts), st_model.encode_document(texts)
    np.testing.assert_allclose(queries, native.encode_queries(texts), atol=1e-5, rtol=0)
    np.testing.assert_allclose(docs, native.encode_documents(texts), atol=1e-5, rtol=0)
    assert st_model.prompts["query"] == get_task("MSMARCO-Passage").instruction  # the preset's default task
