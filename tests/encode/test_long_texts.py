"""long_texts="truncate" | "chunk": windows that fit, pooled as the windows' own vectors say; MaxP scoring."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_corpus import CORPUS, write_scifact

from c2v_rag.encode.long_texts import LongTexts
from c2v_rag.encode.loop import prepare_texts

LONG = " ".join(CORPUS[:7] * 2)  # ~200 tokens: several windows at max_length=48
SHORT = CORPUS[0]


@pytest.fixture(scope="module")
def model(tiny_model_factory):
    return tiny_model_factory("llama", max_length=48)


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_windows_fit_the_model_cover_the_text_and_overlap(model):
    windows = model.long_text_windows([SHORT, LONG])
    assert windows.texts[0] == SHORT and list(windows.owners).count(0) == 1
    long_windows = [t for t, o in zip(windows.texts, windows.owners) if o == 1]
    assert len(long_windows) >= 3
    # Every window is read whole by both the decoder and the encoder.
    assert not any(prepare_texts(model, long_windows, None).truncated)
    assert prepare_texts(model, [LONG], None).truncated == [True]
    # Together they hold every word of the text, in order.
    assert set(LONG.split()) <= set(" ".join(long_windows).split())
    assert long_windows[0].split()[0] == LONG.split()[0] and long_windows[-1].split()[-1] == LONG.split()[-1]


@pytest.mark.parametrize("pooling", ["max", "mean"])
def test_chunk_pools_the_windows_own_vectors(model, pooling):
    windows = model.long_text_windows([LONG])
    each = _unit(np.stack([model.encode(w) for w in windows.texts]))  # one window at a time
    expected = each.max(axis=0) if pooling == "max" else each.mean(axis=0)
    got = model.encode([LONG], long_texts=LongTexts(mode="chunk", pooling=pooling))[0]
    np.testing.assert_allclose(got, expected, atol=1e-5)
    truncated = model.encode(LONG)
    assert not np.allclose(got, truncated, atol=1e-3)


def test_chunk_leaves_short_texts_alone_and_keeps_the_order(model):
    texts = [SHORT, LONG, CORPUS[3]]
    chunked = model.encode(texts, long_texts="chunk")
    np.testing.assert_allclose(chunked[0], model.encode(SHORT), atol=1e-5)
    np.testing.assert_allclose(chunked[2], model.encode(CORPUS[3]), atol=1e-5)
    np.testing.assert_allclose(chunked[1], model.encode([LONG], long_texts="chunk")[0], atol=1e-5)
    assert model.encode(SHORT, long_texts="chunk").shape == (model.embedding_dim,)
    assert model.encode([], long_texts="chunk").shape == (0, model.embedding_dim)


def test_window_and_overlap_follow_the_settings(model):
    small = model.long_text_windows([LONG], long_texts={"mode": "chunk", "window": 16, "overlap": 0})
    large = model.long_text_windows([LONG], long_texts={"mode": "chunk", "window": 30, "overlap": 0})
    assert len(small.texts) > len(large.texts) > 1
    assert all(len(model.tokenizer(t, add_special_tokens=False)["input_ids"]) <= 16 + 2 for t in small.texts)
    # Without overlap the windows partition the words; with it, neighbours repeat some.
    assert sum(len(t.split()) for t in small.texts) == len(LONG.split())
    overlapping = model.long_text_windows([LONG], long_texts={"mode": "chunk", "window": 16, "overlap": 8})
    assert sum(len(t.split()) for t in overlapping.texts) > len(LONG.split())


def test_bad_long_texts_values_are_refused_with_the_choices(model):
    with pytest.raises(ValueError, match="'truncate'.*'chunk'"):
        model.encode([LONG], long_texts="split")
    with pytest.raises(ValueError, match="pooling"):
        model.encode([LONG], long_texts={"mode": "chunk", "pooling": "median"})
    with pytest.raises(ValueError, match="window=400 does not fit"):
        model.encode([LONG], long_texts={"mode": "chunk", "window": 400})
    with pytest.raises(ValueError, match="overlap=40 must be smaller"):
        model.encode([LONG], long_texts={"mode": "chunk", "window": 20, "overlap": 40})
    # room for no window beside the template: the fix named (a LlamaIndex user met it with max_length=24)
    with pytest.raises(ValueError, match="too few to chunk long texts into windows; raise max_length"):
        model.encode([LONG], long_texts="chunk", max_length=16)


def test_bi_encoder_chunks_in_its_own_tokens(tiny_dirs):
    from c2v_rag.evaluation import BiEncoder

    encoder = BiEncoder(str(tiny_dirs["bert"]), device="cpu")
    windows = encoder.long_text_windows([SHORT, LONG])
    assert list(windows.owners).count(1) >= 3
    assert all(len(encoder.tokenizer(t)["input_ids"]) <= encoder.max_length for t in windows.texts)
    each = _unit(np.stack([encoder.encode(t) for t in windows.texts[1:]]))
    chunked = encoder.encode([SHORT, LONG], long_texts="chunk")  # mean-pooled by default
    np.testing.assert_allclose(chunked[1], each.mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(chunked[0], encoder.encode(SHORT), atol=1e-5)


def test_maxp_ranks_documents_by_their_best_window():
    from c2v_rag.evaluation.evaluators import search_maxp

    rng = np.random.default_rng(0)
    queries, windows = rng.normal(size=(5, 8)), rng.normal(size=(11, 8))
    owners = np.array([0, 0, 0, 1, 2, 2, 3, 3, 3, 3, 4])
    doc_ids = ["a", "b", "c", "d", "e"]
    cosine = _unit(queries) @ _unit(windows).T
    best = np.stack([cosine[:, owners == d].max(axis=1) for d in range(5)], axis=1)
    expected = [[doc_ids[i] for i in np.argsort(-row)[:3]] for row in best]
    assert search_maxp(queries, windows, owners, doc_ids, 3) == expected


def test_retrieval_eval_takes_each_long_text_mode(model):
    from c2v_rag.evaluation.datasets import PairScoreData, RetrievalData
    from c2v_rag.evaluation.evaluators import evaluate

    data = RetrievalData(
        corpus={"long": LONG, "short": CORPUS[3]}, queries={"q": "Cats and dogs"}, qrels={"q": {"short": 1}}
    )
    for mode in ("truncate", "chunk", "maxp"):
        scores = evaluate(model, data, long_texts=mode)
        assert 0 <= scores["ndcg@10"] <= 1
    sts = PairScoreData([SHORT, LONG], [LONG, SHORT], [1.0, 0.0])
    with pytest.raises(ValueError, match="retrieval sets only"):
        evaluate(model, sts, long_texts="maxp")


def test_eval_cli_long_texts_scores_as_the_evaluator_does(model, tmp_path):
    import json

    from c2v_rag import Causal2Vec
    from c2v_rag.cli import main
    from c2v_rag.evaluation.datasets import scifact_dev
    from c2v_rag.evaluation.evaluators import evaluate_retrieval

    docs = {f"d{i}": " ".join(CORPUS[i % 7 : i % 7 + 3] * (1 + i % 3)) for i in range(12)}
    write_scifact(
        tmp_path / "data", docs, {f"q{i}": CORPUS[i % 7][:30] for i in range(10)}, {f"q{i}": f"d{i}" for i in range(10)}
    )
    variant = tmp_path / "variant"
    model.save_pretrained(variant)
    reloaded = Causal2Vec.from_pretrained(variant, device="cpu", dtype="float32")
    data = scifact_dev(tmp_path / "data")
    for mode in ("chunk", "maxp"):
        out = tmp_path / f"{mode}.json"
        assert (
            main(
                [
                    "eval",
                    str(variant),
                    "--data",
                    str(tmp_path / "data"),
                    "--sets",
                    "scifact-dev",
                    "--long-texts",
                    mode,
                    "--dtype",
                    "float32",
                    "--json",
                    str(out),
                ]
            )
            == 0
        )
        (row,) = json.loads(out.read_text()).values()
        expected = evaluate_retrieval(reloaded, data, long_texts=mode)
        assert row["scifact-dev"]["ndcg@10"] == pytest.approx(expected["ndcg@10"])
    with pytest.raises(SystemExit, match="--chunk-pooling applies to --long-texts chunk only"):
        main(["eval", str(variant), "--data", str(tmp_path / "data"), "--chunk-pooling", "mean"])
