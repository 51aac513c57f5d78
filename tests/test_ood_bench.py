"""The out-of-domain benchmarks' committed files (bench/ood/<name>/) and their metric code.

Needs neither the Debian packages the documents are built from nor a model: the judged documents'
titles are committed beside the questions, so the leakage check runs on them alone.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from script_loading import load_script

OOD = Path(__file__).resolve().parents[1] / "bench" / "ood"
# What a document id of each benchmark looks like (build.py's ids: the file's path without .md).
ID_PATTERNS = {
    "manpages": re.compile(r"^man\d/[^/\s]+$"),
    "jargon": re.compile(r"^jargon/[a-z0-9]+(-[a-z0-9]+)*$"),
    "postfix": re.compile(r"^[a-z0-9_]+_readme/[a-z0-9]+(-[a-z0-9]+)*$|^overview/[a-z0-9]+(-[a-z0-9]+)*$"),
}
# The fewest documents a benchmark's corpus has: enough distractors that finding the answer is not luck.
MIN_DOCUMENTS = {"manpages": 1000, "jargon": 1000, "postfix": 500}


def _load(name: str):
    """A bench/ood module by path: bench/ is scripts, not a package."""
    return load_script(OOD / f"{name}.py", f"ood_{name}")


questions = _load("questions")
metrics = _load("metrics")
BENCHMARKS = questions.benchmark_names(OOD)


def test_every_benchmark_is_committed():
    assert BENCHMARKS == sorted(ID_PATTERNS)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_files_agree(name):
    bench = questions.load(name, OOD)
    assert len(bench.queries) >= 50
    assert set(bench.qrels) == set(bench.queries), "every question is judged and every judgement names a question"
    assert len(set(map(str.lower, bench.queries.values()))) == len(bench.queries), "duplicate question"
    for query, judged in bench.qrels.items():
        assert max(judged.values()) == 2, f"{query} has no document graded 2 (answers it)"
        assert set(judged.values()) <= {1, 2}
        for doc in judged:
            assert ID_PATTERNS[name].match(doc), doc
            assert doc in bench.judged, f"{doc} has no title in judged.jsonl"
        assert bench.notes[query], f"{query} has no note saying why its answer answers it"
    assert set(bench.judged) == {d for judged in bench.qrels.values() for d in judged}
    assert bench.corpus["documents"] >= MIN_DOCUMENTS[name] and re.fullmatch(r"[0-9a-f]{64}", bench.corpus["digest"])


@pytest.mark.parametrize("name", BENCHMARKS)
def test_no_question_gives_its_answer_away(name):
    bench = questions.load(name, OOD)
    leaks = {
        (q, d): problems
        for q, judged in bench.qrels.items()
        for d in judged
        if (problems := questions.leaks(bench.queries[q], bench.judged[d]))
    }
    assert not leaks


def test_leak_check_catches_title_words_and_heavy_overlap():
    fork = {"id": "man2/fork.2", "title": "fork(2)", "summary": "fork - create a child process"}
    assert questions.leaks("how do I fork my program?", fork)
    assert questions.leaks("how do I create a child process?", fork)  # 3 of 3 content words in the summary
    assert not questions.leaks("how does a running program split itself into two copies?", fork)
    assert questions.leaks("which services does this box offer?", {"id": "man5/services.5", "title": "services(5)"})
    assert [questions.stem(w) for w in ("processes", "running", "created", "files")] == [
        "process",
        "run",
        "creat",
        "fil",
    ]


def test_metrics_match_a_hand_computed_ranking():
    # d1 (grade 2) at rank 2, d2 (grade 1) at rank 3, d3 unjudged at rank 1.
    scores = metrics.query_metrics(["d3", "d1", "d2", "d4"], {"d1": 2, "d2": 1, "d5": 0})
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    ideal = 2 / math.log2(2) + 1 / math.log2(3)
    assert scores == pytest.approx(
        {"mrr@10": 0.5, "ndcg@10": dcg / ideal, "hit@1": 0.0, "hit@5": 1.0, "recall@10": 1.0}
    )
    missed = metrics.query_metrics(["d9"] * 1, {"d1": 1})
    assert missed == {"mrr@10": 0.0, "ndcg@10": 0.0, "hit@1": 0.0, "hit@5": 0.0, "recall@10": 0.0}
    both = metrics.evaluate({"a": ["d1"], "b": ["x", "y", "d2"]}, {"a": {"d1": 1}, "b": {"d2": 1, "d3": 1}})
    assert both["mrr@10"] == pytest.approx((1 + 1 / 3) / 2) and both["recall@10"] == pytest.approx((1 + 0.5) / 2)
    with pytest.raises(ValueError):
        metrics.query_metrics(["d1"], {"d1": 0})
    with pytest.raises(ValueError):
        metrics.query_metrics(["d1", "d1"], {"d1": 1})


def test_metrics_match_trec_eval():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = {"q1": {"a": 2, "b": 1, "c": 0}, "q2": {"d": 1, "e": 2}, "q3": {"f": 1}}
    run = {"q1": ["c", "b", "x", "a"], "q2": ["e", "y", "d"], "q3": [f"z{i}" for i in range(10)] + ["f"]}
    # trec_eval ranks by score, so the ranking becomes descending scores.
    trec_run = {q: {doc: float(len(docs) - i) for i, doc in enumerate(docs)} for q, docs in run.items()}
    reference = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recip_rank", "recall.10"}).evaluate(trec_run)
    for query, judged in qrels.items():
        ours = metrics.query_metrics(run[query], judged)
        assert ours["ndcg@10"] == pytest.approx(reference[query]["ndcg_cut_10"])
        assert ours["recall@10"] == pytest.approx(reference[query]["recall_10"])
        if query != "q3":  # trec_eval's recip_rank has no cut-off: f at rank 11 counts there, not in MRR@10
            assert ours["mrr@10"] == pytest.approx(reference[query]["recip_rank"])
    assert metrics.query_metrics(run["q3"], qrels["q3"])["mrr@10"] == 0.0


def test_a_cached_collection_is_keyed_by_the_base_models_its_adapters_apply_to(tiny_model_factory):
    score = _load("score")
    model = tiny_model_factory()
    model.weights_digest, model.adapters_digest = "w" * 16, "a" * 16
    keys = set()
    for bases in (None, {"decoder": "1" * 16, "encoder": "2" * 16}, {"decoder": "3" * 16, "encoder": "2" * 16}):
        model.bases_digests = bases
        keys.add(score.model_key(model, "variant"))
    assert len(keys) == 3  # another base under the same adapters embeds otherwise: never the cached collection
    model.bases_digests = {"encoder": "2" * 16, "decoder": "1" * 16}  # the same bases, listed in another order
    assert score.model_key(model, "variant") in keys


def test_sparse_and_hybrid_rows_search_a_bm25_collection_of_their_own(tiny_model_factory, tmp_path):
    """``--mode`` takes a user's hybrid path: an ingest with ``sparse="bm25"``, cached apart from the dense one, and
    a search in that mode; BM25 alone finds each question's one rare word, where a tiny random model cannot."""
    pytest.importorskip("bm25s")
    score = _load("score")
    model = tiny_model_factory()
    docs = {
        "a/zebra": "Zebras have black and white stripes that confuse biting flies.",
        "a/kiln": "A kiln fires clay pots at temperatures above a thousand degrees.",
        "a/sonar": "Sonar measures depth by timing the echo of a sound pulse.",
        "a/yeast": "Yeast ferments sugar into alcohol and carbon dioxide.",
    }
    asked = {"q1": "why do zebras look like that", "q2": "how is a kiln used", "q3": "what does sonar time"}
    qrels = {"q1": {"a/zebra": 1}, "q2": {"a/kiln": 1}, "q3": {"a/sonar": 1}}
    bench = score.questions.Benchmark("tiny", asked, {}, qrels, {}, {})
    corpus = score.Corpus("tiny", docs, "digest", bench)
    args = score.argparse.Namespace(
        cache=tmp_path, decoder_max_length=None, chunk_size=64, chunk_overlap=8, truncate_dim=None,
        truncate_ingest=False, task=None, instruction=None, rerank=None, mode="sparse", chunk_context="lead",
    )  # fmt: skip
    [row] = score.score_model(corpus, args, "tiny", model, [])
    assert row.system.endswith(" sparse") and row.settings["mode"] == "sparse"
    assert {q: ranked[0] for q, ranked in row.rankings.items()} == {q: next(iter(j)) for q, j in qrels.items()}
    args.mode = "hybrid"
    [hybrid] = score.score_model(corpus, args, "tiny", model, [])
    assert hybrid.system.endswith(" hybrid") and set(hybrid.rankings) == set(qrels)
    cap = score.decoder_cap(model, None)
    dense = score.collection_dir(tmp_path, corpus, model, "tiny", None, cap, (64, 8))
    bm25 = score.collection_dir(tmp_path, corpus, model, "tiny", None, cap, (64, 8), "bm25")
    assert bm25 != dense and (bm25 / "complete.json").is_file() and not dense.exists()  # one ingest, with BM25
    unled = score.collection_dir(tmp_path, corpus, model, "tiny", None, cap, (64, 8), "bm25", "none")
    assert unled != bm25 and row.settings["chunk_context"] == "lead"  # --chunk-context none: a collection of its own


def test_postfix_guides_are_cut_into_their_sections():
    build = _load("build")
    parser = build._GuideSections()
    parser.feed(
        """<html><head><title>Postfix Small/Home
        Office Hints</title></head><body><h1>Postfix Small/Home Office Hints</h1>
        <p>Before the first section: not a document.</p>
        <h2><a name="a">Relaying   mail</a></h2>
        <p> Mail from
        elsewhere &amp; more. </p>
        <pre>
/etc/postfix/main.cf:
    relayhost = [mail.isp.example]
</pre>
        <ul><li>first item<li>second item</ul>
        <h3>A subsection</h3><p>Its own text.</p></body></html>"""
    )
    assert parser.title == "Postfix Small/Home Office Hints"
    (heading, parts), (sub, sub_parts) = parser.sections
    assert (heading, sub) == ("Relaying mail", "A subsection")
    paragraphs = [p.strip(" ") for p in re.split(r"\n\s*\n", "".join(parts)) if p.strip()]
    assert paragraphs == [
        "Mail from elsewhere & more.",
        "/etc/postfix/main.cf:\n    relayhost = [mail.isp.example]",
        "- first item",
        "- second item",
    ]
    assert "".join(sub_parts).strip() == "Its own text."
