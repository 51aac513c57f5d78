"""Loaders, dev splits, homogeneous batches, the step layout and hard-negative mining."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from c2v_rag.core import instructions
from c2v_rag.core.instructions import InContextPrompt, get_task, register_task
from c2v_rag.training.config import DatasetSection, TrainConfig
from c2v_rag.training.data import Example, dump_examples, load_section, read_examples, write_jsonl
from c2v_rag.training.mining import _report_mining, mine_hard_negatives
from c2v_rag.training.sampling import HomogeneousBatchPlan, layout_step
from c2v_rag.training.trainer import build_evaluators

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def _section(**kw) -> DatasetSection:
    return DatasetSection.model_validate(kw)


@pytest.fixture
def beir_dir(tmp_path):
    root = tmp_path / "beir"
    (root / "qrels").mkdir(parents=True)
    docs = {f"d{i}": (f"title {i}", f"text about topic {i % 5}") for i in range(20)}
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n" for k, (t, x) in docs.items())
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": f"question {i}"}) + "\n" for i in range(10))
    )
    rows = ["query-id\tcorpus-id\tscore"] + [f"q{i}\td{i}\t1" for i in range(10)] + ["q0\td10\t1", "q1\td11\t0"]
    (root / "qrels" / "train.tsv").write_text("\n".join(rows) + "\n")
    return root


def test_beir_loader_splits_by_query(beir_dir):
    loaded = load_section(_section(format="beir", path=str(beir_dir), task="SciFact", dev_fraction=0.3))
    assert len(loaded.dev.queries) == 3
    train_queries = {e.query for e in loaded.examples}
    assert not train_queries & set(loaded.dev.queries.values())
    assert len(loaded.corpus) == 20 and loaded.corpus["d3"] == "title 3 text about topic 3"
    # Score-0 judgements are not positives; a query with two positives gives two examples.
    instruction = get_task("SciFact").instruction
    for e in loaded.examples:
        assert e.query_instruction == instruction and e.passage_instruction is None
        assert "d11" not in e.known_positive_keys
    if "question 0" in train_queries:
        q0 = [e for e in loaded.examples if e.query == "question 0"]
        assert {e.positive_key for e in q0} == {"d0", "d10"} and q0[0].known_positive_keys == {"d0", "d10"}
    # Deterministic.
    again = load_section(_section(format="beir", path=str(beir_dir), task="SciFact", dev_fraction=0.3))
    assert again.dev.queries == loaded.dev.queries


def test_a_retrieval_dev_set_that_holds_out_no_query_is_refused_before_training(beir_dir):
    config = TrainConfig.model_validate(
        {
            "model": {"decoder": "d"},
            "datasets": [{"format": "beir", "path": str(beir_dir), "name": "tiny", "dev_fraction": 0.01}],
            "evaluation": {"retrieval_dataset": "tiny"},
            "output": {"dir": "o"},
        }
    )
    loaded = [load_section(config.datasets[0])]
    assert loaded[0].dev is None  # 1% of 10 queries rounds to none
    with pytest.raises(ValueError, match="retrieval_dataset='tiny' has no dev queries"):
        build_evaluators(config, loaded)


def test_tsv_loaders_detect_headers_and_report_bad_rows(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("anchor\tpositive\tnegative\na\tb\tc\na\td\te\n")
    loaded = load_section(_section(format="triplets_tsv", path=str(path), task="NLI"))
    assert [(e.query, e.positive, e.negatives) for e in loaded.examples] == [("a", "b", ("c",)), ("a", "d", ("e",))]
    # Both positives of "a" are known positives of each example.
    assert all(e.known_positive_keys == {"b", "d"} for e in loaded.examples)
    headerless = tmp_path / "p.tsv"
    headerless.write_text("q1\tp1\nq2\tp2\n")
    assert len(load_section(_section(format="pairs_tsv", path=str(headerless))).examples) == 2
    bad = tmp_path / "bad.tsv"
    bad.write_text("q1\tp1\nonly-one-column\n")
    with pytest.raises(ValueError, match="row 2"):
        load_section(_section(format="pairs_tsv", path=str(bad)))
    with pytest.raises(FileNotFoundError, match=r"does not exist\. Set the dataset's path .*--data PATH"):
        load_section(_section(format="pairs_tsv", path=str(tmp_path / "missing.tsv")))


def test_jsonl_records_and_errors(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"query": "q1", "positive": "p1", "negatives": "n1", "task": "STSBenchmark"},
                {
                    "query": "q2",
                    "positive": "p2",
                    "negatives": ["n2", "n3"],
                    "instruction": "Find it",
                    "dataset": "other",
                },
                {"query": "q3", "positive": "p3"},
            ]
        )
        + "\n"
    )
    examples = load_section(_section(format="jsonl", path=str(path), name="main")).examples
    by_query = {e.query: e for e in examples}
    sts = get_task("STSBenchmark").instruction
    # Symmetric task: the passage gets the instruction too; a literal instruction defaults to asymmetric.
    assert by_query["q1"].passage_instruction == sts == by_query["q1"].query_instruction
    assert by_query["q2"].query_instruction == "Find it" and by_query["q2"].passage_instruction is None
    assert by_query["q2"].dataset == "other" and by_query["q3"].dataset == "main"
    assert by_query["q3"].query_instruction is None
    # The export format reads back; the internal dump keeps keys.
    assert (
        len(load_section(_section(format="jsonl", path=str(write_jsonl(examples, tmp_path / "x.jsonl")))).examples) == 3
    )
    assert read_examples(dump_examples(examples, tmp_path / "y.jsonl")) == examples
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"query": "q", "positive": ""}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: 'positive'"):
        load_section(_section(format="jsonl", path=str(bad)))
    bad.write_text(json.dumps({"query": "q", "positive": "p", "pos": "x"}) + "\n")
    with pytest.raises(ValueError, match="unknown field"):
        load_section(_section(format="jsonl", path=str(bad)))


def test_examples_of_a_task_with_in_context_examples_are_written_and_read_back(tmp_path, monkeypatch):
    # A registered task's examples come with its instruction: the dump (the mined-negatives cache) and the export
    # both keep them, where JSON cannot hold the prompt object itself.
    monkeypatch.setattr(instructions, "_REGISTRY", dict(instructions._REGISTRY))  # the task is this test's alone
    register_task("IclDataTest", "Find the evidence", examples=[("a claim", "its evidence")])
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"query": "q1", "positive": "p1", "task": "IclDataTest"}) + "\n")
    examples = load_section(_section(format="jsonl", path=str(path))).examples
    assert examples[0].query_instruction == InContextPrompt(
        "Find the evidence", (("a claim", "its evidence"),), "IclDataTest"
    )
    assert read_examples(dump_examples(examples, tmp_path / "dump.jsonl")) == examples
    exported = write_jsonl(examples, tmp_path / "export.jsonl")
    assert load_section(_section(format="jsonl", path=str(exported))).examples == examples


def test_labelled_pairs_share_a_label(tmp_path):
    path = tmp_path / "l.txt"
    rows = [f"text {i} of {lab};{lab}" for lab in ("joy", "fear", "anger") for i in range(5)]
    path.write_text("text;label_name\n" + "\n".join(rows) + "\n")
    examples = load_section(_section(format="labelled", path=str(path), num_pairs=30)).examples
    assert len(examples) == 30
    for e in examples:
        assert e.query != e.positive and e.query.split(" of ")[1] == e.positive.split(" of ")[1] == e.positive_key
        assert e.negatives[0].split(" of ")[1] == e.negative_keys[0] != e.positive_key
        assert e.known_positive_keys == {e.positive_key}
        # Symmetric by default: both sides get the (here absent) instruction alike.
        assert e.query_instruction == e.passage_instruction


def test_scored_pairs_keep_high_scores_in_both_directions(tmp_path):
    path = tmp_path / "sts.tsv"
    path.write_text(
        "genre\tsubset\tscore\tsentence1\tsentence2\n"
        "news\tx\t4.6\tA man plays a guitar.\tA man is playing guitar.\n"
        "news\tx\t1.0\tA cat sleeps.\tThe stock fell.\n"
        "news\tx\t4.0\tA man plays a guitar.\tSomeone plays the guitar.\n"
    )
    examples = load_section(
        _section(format="scored_pairs", path=str(path), min_score=4.0, task="STSBenchmark")
    ).examples
    pairs = {(e.query, e.positive) for e in examples}
    assert pairs == {
        ("A man plays a guitar.", "A man is playing guitar."),
        ("A man is playing guitar.", "A man plays a guitar."),
        ("A man plays a guitar.", "Someone plays the guitar."),
        ("Someone plays the guitar.", "A man plays a guitar."),
    }
    hub = next(e for e in examples if e.query == "A man plays a guitar.")
    # Every partner of a sentence, and the sentence itself, is off limits as an in-batch negative.
    assert hub.known_positive_keys == {"A man plays a guitar.", "A man is playing guitar.", "Someone plays the guitar."}
    assert all(e.query_instruction == e.passage_instruction is not None for e in examples)


def test_scored_pairs_need_a_threshold(tmp_path):
    with pytest.raises(ValueError, match="min_score"):
        _section(format="scored_pairs", path=str(tmp_path / "x.tsv"))


def _examples(dataset: str, n: int) -> list[Example]:
    return [Example(f"{dataset} q{i}", f"{dataset} p{i}", (f"{dataset} n{i}",), dataset) for i in range(n)]


def test_batches_are_homogeneous_shuffled_and_deterministic():
    data = {"a": _examples("a", 40), "b": _examples("b", 24)}
    plan = HomogeneousBatchPlan(data, 8, seed=1)
    assert plan.epoch_length == 5 + 3
    names = [plan.global_batch(s)[0] for s in range(plan.epoch_length)]
    assert sorted(names) == ["a"] * 5 + ["b"] * 3
    assert names != sorted(names) or names != sorted(names, reverse=True)
    for step in range(20):
        name, batch = plan.global_batch(step)
        assert {e.dataset for e in batch} == {name} and len({e.query for e in batch}) == 8
    # An epoch covers every example of a dataset once.
    seen = [e.query for s in range(plan.epoch_length) for e in plan.global_batch(s)[1] if e.dataset == "a"]
    assert sorted(seen) == sorted(e.query for e in data["a"])
    assert [plan.global_batch(s)[1] for s in range(8)] == [
        HomogeneousBatchPlan(data, 8, seed=1).global_batch(s)[1] for s in range(8)
    ]
    assert [plan.global_batch(s)[1] for s in range(8)] != [
        HomogeneousBatchPlan(data, 8, seed=2).global_batch(s)[1] for s in range(8)
    ]
    shards = [plan.batch(3, rank=r, world_size=2).local for r in range(2)]
    assert shards[0] + shards[1] == plan.global_batch(3)[1]
    with pytest.raises(ValueError, match="fewer than one batch"):
        HomogeneousBatchPlan({"a": _examples("a", 3)}, 8, seed=0)


def test_layout_targets_and_exclusions():
    examples = [
        Example("q0", "p0", ("n0",), "d"),
        Example("q0", "p0b", ("n1",), "d", known_positive_keys=frozenset({"p0b", "p0"})),
        Example("q2", "p2", ("p0",), "d"),
        Example("q3", "p3", ("n3",), "d"),
    ]
    plan = HomogeneousBatchPlan({"d": examples}, 4, seed=0)
    world = 2
    layouts = [
        layout_step(plan.batch(0, r, world), num_negatives=1, seed=0, step=0, world_size=world) for r in range(world)
    ]
    global_passages = [p for lay in layouts for p in lay.passages]
    for rank, lay in enumerate(layouts):
        for i, (target, exclude) in enumerate(zip(lay.targets, lay.exclude)):
            example = plan.batch(0, rank, world).local[i]
            assert global_passages[target] == example.positive
            for j, passage in enumerate(global_passages):
                # Another positive of the same query (even as someone's hard negative) is never a negative.
                assert exclude[j] == (j != target and passage in example.known_positive_keys)


def test_bm25_mining_picks_lexical_neighbours_and_excludes_positives():
    corpus = {
        "pos": "vitamin d deficiency and bone loss in elderly people",
        "hard": "vitamin d supplements reduce bone fractures",
        "other": "the stock market fell sharply today",
        "pets": "cats and dogs are popular pets",
    }
    example = Example(
        "vitamin d bone loss", corpus["pos"], (), "s", positive_key="pos", known_positive_keys=frozenset({"pos"})
    )
    [mined] = mine_hard_negatives([example], method="bm25", depth=1, corpus=corpus)
    assert mined.negative_keys == ("hard",) and mined.negatives == (corpus["hard"],)
    # When "hard" is also a known positive of the query, it is skipped.
    example2 = Example(
        "vitamin d bone loss",
        corpus["hard"],
        (),
        "s",
        positive_key="hard",
        known_positive_keys=frozenset({"pos", "hard"}),
    )
    mined = mine_hard_negatives([example, example2], method="bm25", depth=1, corpus=corpus)
    assert all(m.negative_keys[0] not in {"pos", "hard"} for m in mined)


def test_model_mining_takes_the_nearest_non_positive(tiny_model_factory):
    model = tiny_model_factory()
    pool = {
        f"k{i}": text
        for i, text in enumerate(["a cat sat", "stock prices fell", "dogs are pets", "bone loss", "proteins fold"])
    }
    examples = [
        Example("cats and dogs", pool["k0"], (), "s", positive_key="k0"),
        Example("market news", pool["k1"], (), "s", positive_key="k1"),
    ]
    mined = mine_hard_negatives(examples, method="model", model=model, depth=1, corpus=pool)
    keys = list(pool)
    p = model.encode(list(pool.values()), normalize_embeddings=True)
    for e, m in zip(examples, mined):
        q = model.encode([e.query], normalize_embeddings=True)[0]
        ranked = [keys[i] for i in np.argsort(-(p @ q)) if keys[i] != e.positive_key]
        assert m.negative_keys == (ranked[0],)


def test_mining_says_how_many_queries_got_random_negatives_and_why(tiny_model_factory, caplog):
    """A query whose ranked candidates all fall within the margin of its positive (or that has too few of them)
    trains against random passages: the log says how many queries of how many, and why, so a user can tell whether
    it matters (adapt's runs said "581 negatives were random passages" and no more)."""
    model = tiny_model_factory()
    texts = ["a cat sat", "stock prices fell", "dogs are pets", "bone loss", "proteins fold", "rain today"]
    pool = {f"k{i}": text for i, text in enumerate(texts)}
    examples = [Example(q, pool[k], (), "s", positive_key=k) for q, k in (("cats and dogs", "k0"), ("market", "k1"))]
    # A margin of 10 takes every candidate (cosines differ by at most 2): both queries fall back to random passages.
    with caplog.at_level("INFO", logger="c2v_rag"):
        mined = mine_hard_negatives(examples, method="model", model=model, depth=2, corpus=pool, margin=10.0)
    assert all(len(m.negative_keys) == 1 and m.negative_keys[0] != e.positive_key for e, m in zip(examples, mined))
    [said] = [r for r in caplog.records if "random passages" in r.getMessage()]
    assert said.levelname == "WARNING"
    assert said.getMessage().startswith(
        "mining: 2 of 2 queries train against 2 random passages instead of hard negatives (2 had all their top 2 "
        "candidates within the margin)"
    )
    assert "4 ranked candidates scored within the margin (10.0)" in caplog.text
    # Too few ranked (depth 1, two negatives each, no margin): the other reason.
    caplog.clear()
    with caplog.at_level("INFO", logger="c2v_rag"):
        mined = mine_hard_negatives(examples, method="model", model=model, depth=1, corpus=pool, num_negatives=2)
    assert all(len(set(m.negative_keys)) == 2 for m in mined)
    [said] = [r for r in caplog.records if "random passages" in r.getMessage()]
    assert "(2 had too few other passages ranked)" in said.getMessage() and "within the margin" not in caplog.text
    # Half the queries or fewer is information, not a warning.
    caplog.clear()
    with caplog.at_level("INFO", logger="c2v_rag"):
        _report_mining(3, {"margin": 1, "pool": 1}, 0, 4, depth=30, margin=0.05)
    [said] = caplog.records
    assert said.levelname == "INFO" and said.getMessage().startswith("mining: 2 of 4 queries train against 3 random")


def test_mining_labels_its_progress_bar(tiny_model_factory, capsys):
    """A pool large enough for a bar (over 256 texts) shows what is encoded: adapt's log showed "Encoding" bars
    with nothing to tell mining's from the gate's."""
    model = tiny_model_factory()
    pool = {f"k{i}": f"passage number {i} about topic {i % 7}" for i in range(300)}
    examples = [Example("topic 3", pool["k3"], (), "s", positive_key="k3")]
    mine_hard_negatives(examples, method="model", model=model, depth=2, corpus=pool)
    bars = capsys.readouterr().err
    assert "Mining: the passages" in bars and "300/300 texts" in bars


@pytest.mark.skipif(not (DATA / "scifact" / "qrels" / "train.tsv").is_file(), reason="shared data not present")
def test_real_scifact_split_holds_out_whole_claims():
    loaded = load_section(_section(format="beir", path=str(DATA / "scifact"), task="SciFact", dev_fraction=0.2))
    assert len(loaded.corpus) == 5183
    # 809 judged claims; two pairs of them share a text (807 distinct): split by text, no leak.
    dev_texts = set(loaded.dev.queries.values())
    assert len(dev_texts) == round(0.2 * 807)
    assert len(dev_texts) + len({e.query for e in loaded.examples}) == 807
    assert not {e.query for e in loaded.examples} & set(loaded.dev.queries.values())


def test_cosent_keeps_every_pair_once_with_its_score(tmp_path):
    path = tmp_path / "sts.tsv"
    path.write_text(
        "genre\tsubset\tscore\tsentence1\tsentence2\n"
        "news\tx\t4.6\tA man plays a guitar.\tA man is playing guitar.\n"
        "news\tx\t1.0\tA cat sleeps.\tThe stock fell.\n"
        "news\tx\t0.0\tA dog runs.\tA dog runs.\n"
    )
    examples = load_section(
        _section(format="scored_pairs", path=str(path), loss="cosent", task="STSBenchmark")
    ).examples
    assert [(e.query, e.positive, e.score) for e in examples] == [
        ("A man plays a guitar.", "A man is playing guitar.", 4.6),
        ("A cat sleeps.", "The stock fell.", 1.0),
        ("A dog runs.", "A dog runs.", 0.0),
    ]
    plan = HomogeneousBatchPlan({"sts": examples}, 3, seed=0)
    step = layout_step(plan.batch(0), num_negatives=0, seed=0, step=0, world_size=1)
    assert sorted(step.scores) == [0.0, 1.0, 4.6]
    assert [e for e in step.scores] == [next(x.score for x in examples if x.query == q) for q in step.queries]


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(format="triplets_tsv"), "needs scored pairs"),
        (dict(format="scored_pairs", min_score=4.0), "min_score"),
        (dict(format="scored_pairs", hard_negatives=1), "hard_negatives"),
    ],
)
def test_cosent_refuses_settings_it_cannot_use(tmp_path, kw, message):
    with pytest.raises(ValueError, match=message):
        _section(path=str(tmp_path / "x.tsv"), loss="cosent", **kw)
