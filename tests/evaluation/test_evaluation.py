"""Evaluation metrics against trec_eval (pytrec_eval), and the evaluators on controlled embedders."""

from __future__ import annotations

import random

import numpy as np
import pytest

from c2v_rag.evaluation import (
    LabelledData,
    PairScoreData,
    RetrievalData,
    evaluate_classification,
    evaluate_retrieval,
    evaluate_run,
    evaluate_sts,
    split_queries,
)


def _random_fixture(seed: int):
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(200)]
    qrels = {f"q{j}": {d: rng.choice([1, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, 6))} for j in range(40)}
    run = {q: rng.sample(docs, 120) for q in qrels}
    run["q0"] = list(qrels["q0"]) + [d for d in run["q0"] if d not in qrels["q0"]]  # relevant docs on top
    run.pop("q1")  # one query with no results at all
    return qrels, run


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metrics_match_trec_eval(seed):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = _random_fixture(seed)
    ours = evaluate_run(run, qrels, ndcg_k=10, recall_k=100, mrr_k=10)
    # trec_eval ranks by score: give descending scores in our order; MRR@10 = recip_rank on a top-10 cut.
    trec_run = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in run.items()}
    trec_run["q1"] = {}
    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"}).evaluate(trec_run)
    top10 = {q: dict(list(r.items())[:10]) for q, r in trec_run.items()}
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    mean = lambda name, res: np.mean([res.get(q, {}).get(name, 0.0) for q in qrels])
    assert ours["ndcg@10"] == pytest.approx(mean("ndcg_cut_10", full), abs=1e-9)
    assert ours["recall@100"] == pytest.approx(mean("recall_100", full), abs=1e-9)
    assert ours["mrr@10"] == pytest.approx(mean("recip_rank", rr), abs=1e-9)


class LookupEmbedder:
    """Maps each text to a fixed vector, so the expected scores are known exactly."""

    def __init__(self, table: dict[str, np.ndarray]):
        self.table = table
        self.tasks = []

    def encode_queries(self, texts, *, task=None, **_):
        self.tasks.append(("query", task))
        return np.stack([self.table[t] for t in texts])

    def encode_documents(self, texts, *, task=None, **_):
        self.tasks.append(("document", task))
        return np.stack([self.table[t] for t in texts])


def test_retrieval_evaluator_finds_the_planted_documents():
    rng = np.random.default_rng(0)
    corpus = {f"d{i}": f"doc {i}" for i in range(50)}
    table = {text: rng.normal(size=16) for text in corpus.values()}
    queries = {"q0": "query 0", "q1": "query 1"}
    table["query 0"] = table["doc 7"] + 0.01 * rng.normal(size=16)  # q0 ~ d7
    table["query 1"] = -table["doc 3"]  # q1 is furthest from its relevant doc
    qrels = {"q0": {"d7": 1}, "q1": {"d3": 1}}
    model = LookupEmbedder(table)
    scores = evaluate_retrieval(model, RetrievalData(corpus, queries, qrels, task="SciFact"), top_k=49)
    assert scores["ndcg@10"] == pytest.approx(0.5)
    assert scores["mrr@10"] == pytest.approx(0.5)
    assert scores["recall@49"] == pytest.approx(0.5)
    assert ("query", "SciFact") in model.tasks and ("document", "SciFact") in model.tasks


def test_sts_evaluator_is_spearman_of_cosines():
    rng = np.random.default_rng(1)
    first = [f"a{i}" for i in range(30)]
    second = [f"b{i}" for i in range(30)]
    table = {t: rng.normal(size=8) for t in first + second}
    cos = [
        float(table[a] @ table[b] / np.linalg.norm(table[a]) / np.linalg.norm(table[b])) for a, b in zip(first, second)
    ]
    rank = lambda xs: np.argsort(np.argsort(xs))
    gold = list(rng.normal(size=30))
    expected = 1 - 6 * np.sum((rank(cos) - rank(gold)) ** 2) / (30 * (30**2 - 1))  # no ties
    got = evaluate_sts(LookupEmbedder(table), PairScoreData(first, second, gold))["spearman"]
    assert got == pytest.approx(expected, abs=1e-9)


def test_classification_protocol_separable_vs_random_labels():
    rng = np.random.default_rng(2)
    centers = {"x": np.eye(4)[0] * 5, "y": np.eye(4)[1] * 5, "z": np.eye(4)[2] * 5}
    texts, labels, table = [], [], {}
    for i in range(300):
        label = "xyz"[i % 3]
        text = f"t{i}"
        texts.append(text)
        labels.append(label)
        table[text] = centers[label] + rng.normal(size=4) * 0.3
    data = LabelledData(texts[:200], labels[:200], texts[200:], labels[200:], samples_per_label=4)
    assert evaluate_classification(LookupEmbedder(table), data, seeds=3)["accuracy"] == pytest.approx(1.0)
    shuffled = LabelledData(
        texts[:200], labels[:200], texts[200:], list(rng.permutation(labels[200:])), samples_per_label=4
    )
    assert evaluate_classification(LookupEmbedder(table), shuffled, seeds=3)["accuracy"] < 0.6


def test_split_queries_is_disjoint_and_seeded():
    qrels = {f"q{i}": {"d": 1} for i in range(100)}
    data = RetrievalData({"d": "doc"}, {q: q for q in qrels}, qrels)
    train, dev = split_queries(data, dev_fraction=0.2, seed=0)
    assert len(dev.qrels) == 20 and not set(dev.qrels) & set(train.qrels)
    assert split_queries(data, dev_fraction=0.2, seed=0)[1].qrels.keys() == dev.qrels.keys()


def test_evaluators_run_on_a_real_causal2vec(tiny_model_factory):
    model = tiny_model_factory("llama")
    corpus = {f"d{i}": t for i, t in enumerate(["cats and dogs", "stock market", "proteins fold", "vitamin D"])}
    data = RetrievalData(corpus, {"q": "vitamin D and bone"}, {"q": {"d3": 1}}, task="SciFact")
    scores = evaluate_retrieval(model, data, top_k=4)
    assert 0 < scores["ndcg@10"] <= 1 and scores["recall@4"] == 1.0


def test_mteb_adapter_puts_instructions_where_the_paper_does(tiny_model_factory):
    from types import SimpleNamespace

    from c2v_rag.evaluation.mteb_adapter import MTEBEncoder

    model = tiny_model_factory("llama")
    adapter = MTEBEncoder(model)
    loader = [{"text": ["a claim", "another"]}, {"text": ["third"]}]
    sci = SimpleNamespace(name="SciFact", type="Retrieval")
    queries = adapter.encode(loader, task_metadata=sci, hf_split="test", hf_subset="default", prompt_type="query")
    docs = adapter.encode(loader, task_metadata=sci, hf_split="test", hf_subset="default", prompt_type="passage")
    texts = ["a claim", "another", "third"]
    np.testing.assert_array_equal(queries, model.encode_queries(texts, task="SciFact"))
    np.testing.assert_array_equal(docs, model.encode(texts))
    sts = adapter.encode(loader, task_metadata=SimpleNamespace(name="SomeNewSTS", type="STS"), prompt_type=None)
    np.testing.assert_array_equal(sts, model.encode(texts, instruction="Retrieve semantically similar text."))


def test_an_embedder_without_the_two_methods_is_named_with_what_it_lacks():
    """training.md said the evaluators score any embedder: a SentenceTransformer failed half-way with
    AttributeError ('no attribute encode_documents')."""

    class OnlyEncode:
        def encode(self, texts, **_):
            return np.ones((len(texts), 4))

    data = PairScoreData(name="sts", first=["a", "b"], second=["c", "d"], scores=[1.0, 0.0], task="STSBenchmark")
    with pytest.raises(TypeError, match="OnlyEncode has no encode_queries or encode_documents: .*mteb"):
        evaluate_sts(OnlyEncode(), data)


def test_eval_readout_option_names_the_fields_it_takes():
    from c2v_rag.cli import main

    with pytest.raises(SystemExit, match="representation"):
        main(["eval", "default", "--data", "nowhere", "--readout", "max_length=8"])


def test_eval_checks_every_name_first_and_keeps_the_scores_made_before_an_error(tiny_model_factory, tmp_path, capsys):
    """A misspelt second variant, or a variant after --baseline, was found after the first was scored: minutes to
    hours of scores printed nowhere, and --json not written."""
    import json
    import shutil

    from c2v_rag.cli import main
    from c2v_rag.cli.errors import EXIT_BAD_INPUT

    variant = tmp_path / "variant"
    tiny_model_factory("llama").save_pretrained(variant)
    stsb = tmp_path / "data" / "stsb"
    stsb.mkdir(parents=True)
    pairs = [("A cat sleeps.", "A cat is asleep.", 4.5), ("A man cooks.", "The sky is blue.", 0.2)] * 3
    pairs += [("Dogs bark.", "A dog barks loudly.", 3.8), ("Rain falls.", "Stocks rose today.", 0.5)]
    rows = "".join(f"{score}\t{a}\t{b}\n" for a, b, score in pairs)
    (stsb / "stsb.dev.tsv").write_text("score\tsentence1\tsentence2\n" + rows)
    out = tmp_path / "scores.json"
    common = ["--data", str(tmp_path / "data"), "--sets", "stsb-dev", "--dtype", "float32", "--json", str(out)]

    assert main(["eval", str(variant), str(tmp_path / "tyop"), *common]) == EXIT_BAD_INPUT
    assert "tyop' is neither a variant directory nor a preset" in capsys.readouterr().err and not out.exists()
    assert main(["eval", str(variant), *common, "--baseline", "all-minilm-l6-v2", str(variant)]) == EXIT_BAD_INPUT
    assert "name variants before --baseline" in capsys.readouterr().err and not out.exists()

    # A variant whose config reads but whose weights do not: found only when it loads, after the first was scored.
    broken = tmp_path / "broken"
    shutil.copytree(variant, broken)
    (broken / "projector.safetensors").write_bytes(b"not safetensors")
    assert main(["eval", str(variant), str(broken), *common]) == EXIT_BAD_INPUT
    printed = capsys.readouterr().out
    ((name, scores),) = json.loads(out.read_text()).items()
    assert name == str(variant) and 0 < abs(scores["stsb-dev"]["main"]) <= 1
    assert str(variant) in printed and f"written to {out}" in printed


def test_retrieval_run_reads_documents_at_document_max_length_and_queries_whole(tiny_model_factory, caplog):
    """``document_max_length`` cuts the documents' decoder view, as an ingest's ``decoder_max_length`` does, and
    leaves the queries whole: the ranking is the one of vectors computed so, independently. The cut is chosen, so it
    is not reported as truncation (adapt's gate warned "490 of 500 texts exceeded max_length=96" on every run)."""
    from tiny_corpus import CORPUS

    from c2v_rag.evaluation.evaluators import retrieval_run

    model = tiny_model_factory("llama")
    corpus = {f"d{i}": " ".join(CORPUS[i : i + 5]) for i in range(7)}  # long enough to be cut at 12 tokens
    queries = {f"q{i}": " ".join(CORPUS[i + 2 : i + 6]) for i in range(7)}
    data = RetrievalData(corpus, queries, {q: {f"d{q[1:]}": 1} for q in queries}, task="SciFact")
    with caplog.at_level("WARNING", logger="c2v_rag"):
        run = retrieval_run(model, data, top_k=7, document_max_length=12)
    assert "decoder tokens" not in caplog.text
    model.truncation_warned = False  # the encoder's cut was reported above: a model warns once
    with caplog.at_level("WARNING", logger="c2v_rag"):
        docs = model.encode_documents(list(corpus.values()), task="SciFact", max_length=12, normalize_embeddings=True)
    assert "exceeded max_length=12 decoder tokens" in caplog.text  # the same cut, asked for plainly, is reported
    asked = model.encode_queries(list(queries.values()), task="SciFact", normalize_embeddings=True)
    expected = {q: [f"d{i}" for i in np.argsort(-(docs @ v))] for q, v in zip(queries, asked)}
    assert run == expected
    whole = model.encode_documents(list(corpus.values()), task="SciFact", normalize_embeddings=True)
    assert not np.allclose(docs, whole, atol=1e-3)  # the cut changes the documents: the check above can tell
