"""adapt end to end on a tiny variant: pairs, training, the gate, the report, and what the output folder holds
when the variant is kept or not; the CLI's exit codes; errors before any work."""

from __future__ import annotations

import json
import shutil

import pytest
from rag_helpers import make_text
from train_helpers import FirstWords, use_generator

from c2v_rag.training.adapt.config import AdaptConfig, AdaptGate, AdaptTraining
from c2v_rag.training.adapt.decision import decide
from c2v_rag.training.adapt.gate import GateScores
from c2v_rag.training.adapt.general_data import GeneralDataError, find_general_data
from c2v_rag.training.adapt.run import adapt
from c2v_rag.training.pseudo.beir_cache import read_pairs
from c2v_rag.training.pseudo.config import PseudoPairsConfig

pytest.importorskip("bm25s")
pytest.importorskip("llama_index.core")
pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def start(tiny_model_factory, tmp_path_factory):
    """A tiny variant whose embedding mixes in the encoder's vector, as the preset's does."""
    path = tmp_path_factory.mktemp("start")
    tiny_model_factory("llama", max_length=256, representation="concat", encoder_share=0.5).save_pretrained(path)
    return path


@pytest.fixture
def folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(16):
        (docs / f"page{i}.md").write_text(f"# Page {i} about things\n\n{make_text(i, 8)}\n")
    return docs


HELD_OUT = ["generated", "heading"]  # the gate's evidence where no questions are given, as a --config file sets it


def config(general, **gate) -> AdaptConfig:
    """Settings for a small folder: a tiny gate that judges on a single held-out heading, unless ``gate`` says
    otherwise (the default 30 would stop these runs before training: test_too_few_to_judge_stops_before_training).
    The held-out queries are its evidence here; by default nothing is (test_without_questions_nothing_is_kept)."""
    return AdaptConfig(
        pairs=PseudoPairsConfig(generator="none", min_words=2, round_trip_k=None, holdout_fraction=0.25),
        training=AdaptTraining(steps=3, batch_size=4, precision="fp32", device="cpu"),
        gate=AdaptGate(corpus_size=20, sts_limit=20, **{"min_items": 1, "evidence": HELD_OUT, **gate}),
        general_data=str(general),
    )


def test_a_variant_that_passes_is_written_to_out_and_loads(start, folder, general, tmp_path):
    from c2v_rag import Causal2Vec

    out = tmp_path / "adapted"
    for i in range(8):  # pages without a heading: their held-out queries are crops
        (folder / f"note{i}.txt").write_text(make_text(40 + i, 8) + "\n")
    # A gate that any variant passes: the path a kept variant takes, whatever three steps did.
    report = adapt(folder, out, config=config(general, min_gain=-1.0, sts_tolerance=1.0), start=str(start))
    assert report.kept
    assert set(report.before) == set(report.after) >= {"ndcg@10", "mrr@10", "stsb_dev_spearman"}
    # The held-out queries' scores by source (crops, headings here) add up to the whole: a mean weighted by counts.
    for scores in (report.before, report.after):
        by_source = {k: v for k, v in scores.items() if k.startswith("ndcg@10 ")}
        counts = {k: int(k.split("(")[1].split()[0]) for k in by_source}
        assert {k.split()[1] for k in by_source} == {"crop", "heading"}
        assert sum(counts.values()) == report.pairs["heldout_pairs"]
        weighted = sum(by_source[k] * counts[k] for k in by_source) / sum(counts.values())
        assert weighted == pytest.approx(scores["ndcg@10"])
    assert report.pairs["train_pairs"] > 0 and report.pairs["heldout_pairs"] > 0
    assert set(report.seconds) == {"pairs", "training", "gate"}
    saved = json.loads((out / "adapt_report.json").read_text())
    assert saved["kept"] and saved["pairs"]["by_source"]["crop"]["kept"] > 0
    assert (out / "pairs" / "qrels" / "train.tsv").is_file() and not (out / "checkpoints").exists()
    adapted = Causal2Vec.from_pretrained(out, device="cpu")
    original = Causal2Vec.from_pretrained(start, device="cpu")
    texts = [make_text(1, 2), make_text(2, 2)]
    # The encoder's LoRA trained: the encoder's part of the vector moved.
    width = original.config.parts["encoder"].stop
    moved = abs(adapted.encode(texts)[:, :width] - original.encode(texts)[:, :width]).max()
    assert adapted.config.matryoshka_dims == [width]  # the prefix it trained is one it serves
    assert moved > 1e-6
    assert "KEPT" in report.table() and str(out) in report.table() and "--questions FILE" in report.table()
    assert "Real questions: not measured" in report.table()
    # The evidence is the held-out headings (no LLM here), each query's score in the report.
    headings = [row for row in report.per_query if row["source"] == "heading"]
    assert headings and f"ndcg@10 heading ({len(headings)} queries)" in report.before
    assert report.evidence["items"] == len(headings) and not report.evidence["real_questions_measured"]
    # A collection built with the start refuses the adapted variant, and says how to move it.
    import c2v_rag

    store = tmp_path / "qdrant"
    c2v_rag.ingest(folder, collection="docs", path=store, model=str(start), device="cpu", show_progress=False)
    with pytest.raises(Exception, match="c2v-rag reindex"):
        c2v_rag.ingest(folder, collection="docs", path=store, model=str(out), device="cpu", show_progress=False)
    c2v_rag.ingest(folder, collection="docs-adapted", path=store, model=str(out), device="cpu", show_progress=False)
    hits = c2v_rag.search(make_text(3, 1), collection="docs-adapted", path=store, model=str(out), device="cpu")
    assert hits


def test_a_variant_that_fails_the_gate_is_not_published(start, folder, general, tmp_path):
    out = tmp_path / "adapted"
    report = adapt(folder, out, config=config(general, min_gain=1.0), start=str(start))
    assert not report.kept
    assert not (out / "modules.json").exists() and (out / "candidate" / "modules.json").is_file()
    assert any("no clear gain" in r for r in report.reasons)
    assert "NOT KEPT" in report.table()


def test_without_general_data_it_trains_on_the_documents_alone_and_checks_no_sts(start, folder, tmp_path):
    out = tmp_path / "adapted"
    report = adapt(folder, out, config=config("none", min_gain=-1.0), start=str(start))
    assert report.kept and report.settings["general_data"] == "none"
    assert "stsb_dev_spearman" not in report.before and "stsb_dev_spearman" not in report.after
    assert report.reasons[-1] == "STS-B dev not checked: the run had no general data (--general-data none)"
    recipe = (out / "candidate" / "train_config.yaml").read_text()
    assert "name: corpus" in recipe and "stsb" not in recipe and "nli" not in recipe


def test_rerun_reuses_the_pairs_and_the_trained_candidate(start, folder, general, tmp_path, caplog):
    out = tmp_path / "adapted"
    first = adapt(folder, out, config=config(general, min_gain=1.0), start=str(start))
    again = adapt(folder, out, config=config(general, min_gain=1.0), start=str(start))
    assert again.pairs.get("reused") and again.before == first.before and again.after == first.after
    # A run folder moved elsewhere holds the same training: its candidate is reused, not refused as other settings.
    moved = tmp_path / "elsewhere" / "adapted"
    moved.parent.mkdir()
    shutil.move(out, moved)
    with caplog.at_level("INFO", logger="c2v_rag"):
        there = adapt(folder, moved, config=config(general, min_gain=1.0), start=str(start))
    assert f"reusing the trained candidate in {moved / 'candidate'}" in caplog.text
    assert there.after == first.after and "training" in there.seconds


def test_without_questions_nothing_is_kept_and_a_rerun_with_them_judges_the_candidate(
    start, folder, general, tmp_path, caplog
):
    """By default the held-out pseudo-queries are reported, not evidence: a run without questions trains a
    candidate, says so before any work, and keeps nothing, however the held-out queries moved; the same command with
    --questions reuses its pairs and candidate and lets the questions decide."""
    out = tmp_path / "adapted"
    settings = config(general, min_gain=-1.0, sts_tolerance=1.0)
    settings.gate = settings.gate.model_copy(update={"evidence": AdaptGate().evidence})
    with caplog.at_level("WARNING", logger="c2v_rag"):
        report = adapt(folder, out, config=settings, start=str(start))
    assert "keeps it only on your own questions" in caplog.text
    assert not report.kept and report.after and (out / "candidate" / "modules.json").is_file()
    assert report.reasons[0].startswith("no questions of yours to judge the variant on")
    # Every held-out source is reported with its scores (a gain of -1 would have kept on them).
    assert any(r.startswith("held-out headings (") and "reported, not evidence" in r for r in report.reasons)
    assert "re-run the same command with --questions FILE" in report.table()
    assert "NOT KEPT: no questions of yours to judge the adapted variant on" in report.table()
    assert report.evidence["signal"] == "none"
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"query": make_text(3, 1), "doc_ids": ["page3.md"]}) + "\n")
    caplog.clear()
    with caplog.at_level("INFO", logger="c2v_rag"):
        judged = adapt(folder, out, config=settings, start=str(start), questions=questions)
    assert f"reusing the trained candidate in {out / 'candidate'}" in caplog.text and judged.pairs.get("reused")
    assert judged.kept and judged.reasons[0].startswith("your 1 question's MRR@10")


def test_bad_setup_fails_before_any_work(start, folder, general, tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="--overwrite"):
        adapt(folder, out, config=config(general), start=str(start))
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    with pytest.raises(GeneralDataError, match="stsb.dev.tsv"):
        find_general_data(tmp_path)
    on_gpu = config(general)
    on_gpu.training.device, on_gpu.gate.quantize = "cuda", "int8"  # int8 is for CPUs: said before any work
    with pytest.raises(ValueError, match="gate.quantize: quantize='int8' runs on a CPU only"):
        adapt(folder, tmp_path / "gpu", config=on_gpu, start=str(start))
    assert not (tmp_path / "gpu").exists()


def scores(per_query: dict[str, float], sts: float | None = 0.80, **extra) -> GateScores:
    mean = sum(per_query.values()) / len(per_query)
    return GateScores(mean, mean, sts, per_query=per_query, **extra)


def test_decide_needs_a_clear_gain_on_questions_and_headings_and_a_steady_sts():
    gate = AdaptGate(evidence=HELD_OUT)
    ids = [f"heldout-{i}" for i in range(40)]
    headings = dict.fromkeys(ids, "heading")
    before = scores(dict.fromkeys(ids, 0.5))
    # 30 of 40 rise from rank 3 to rank 1: clear.
    gained = scores({q: 1.0 if i < 30 else 0.5 for i, q in enumerate(ids)}, sts=0.797)
    verdict = decide(before, gained, gate, headings)
    assert verdict.kept and "a clear gain" in verdict.reasons[0] and "(40)" in verdict.reasons[0]
    assert verdict.evidence["items"] == 40 and verdict.evidence["difference"]["mean"] == pytest.approx(0.375)
    assert not verdict.evidence["real_questions_measured"]
    steady_lost = decide(before, scores(gained.per_query, sts=0.79), gate, headings)
    assert not steady_lost.kept and "lost more than 0.005" in steady_lost.reasons[-1]
    # The same gain on crops is not evidence: nothing to judge on.
    crops = decide(before, gained, gate, dict.fromkeys(ids, "crop"))
    assert not crops.kept and crops.reasons[0].startswith("no held-out generated questions and headings")
    # A mean gain the old rule kept (3 up, 2 down by as much): within noise, not kept.
    mixed = {q: 1.0 if i < 3 else 0.0 if i < 5 else 0.5 for i, q in enumerate(ids)}
    noisy = decide(before, scores(mixed), gate, headings)
    assert noisy.evidence["difference"]["mean"] == pytest.approx(0.5 / 40)
    assert not noisy.kept and "no clear gain" in noisy.reasons[0]
    # Four up and none down: the bootstrap's interval clears zero (a resample misses all four about 1 time in 70),
    # the sign test (1/16) does not.
    four = decide(before, scores({q: 1.0 if i < 4 else 0.5 for i, q in enumerate(ids)}), gate, headings)
    assert four.evidence["difference"]["low"] > 0 and four.evidence["difference"]["sign_p"] == 1 / 16
    assert not four.kept and "sign test p above 0.025" in four.reasons[0]
    # Too few items to judge, however clear: not kept unless the floor is lowered.
    # Without general data STS-B is not checked, and says so: the held-out gain alone decides.
    unchecked = decide(scores(before.per_query, sts=None), scores(gained.per_query, sts=None), gate, headings)
    assert unchecked.kept and unchecked.reasons[-1].startswith("STS-B dev not checked")
    few = {q: before.per_query[q] for q in ids[:10]}
    few_gained = {q: 1.0 for q in few}
    assert "too few to judge" in decide(scores(few), scores(few_gained), gate, headings).reasons[0]
    assert decide(scores(few), scores(few_gained), AdaptGate(min_items=10, evidence=HELD_OUT), headings).kept
    # By default the held-out queries are reported, never evidence: the clearest gain is not kept.
    unjudged = decide(before, gained, AdaptGate(), headings)
    assert not unjudged.kept and unjudged.reasons[0].startswith("no questions of yours to judge the variant on")
    assert unjudged.evidence["signal"] == "none" and not unjudged.evidence["real_questions_measured"]


def test_cli_exit_codes(start, folder, general, tmp_path, capsys):
    import yaml

    from c2v_rag.cli.app import main

    settings = config(general, min_gain=1.0).model_dump(mode="json")
    path = tmp_path / "adapt.yaml"
    path.write_text(yaml.safe_dump(settings))
    code = main(["adapt", str(folder), "--out", str(tmp_path / "cli"), "--from", str(start), "--config", str(path)])
    printed = capsys.readouterr().out
    assert code == 1 and "NOT KEPT" in printed
    # The CLI says what the verdict rests on, and that real questions were not measured.
    assert "Evidence: held-out generated questions and headings, ndcg@10" in printed
    assert "Real questions: not measured" in printed
    code = main(
        [
            "adapt",
            str(tmp_path / "missing"),
            "--out",
            str(tmp_path / "cli2"),
            "--from",
            str(start),
            "--config",
            str(path),
        ]
    )
    assert code == 2


def test_other_settings_do_not_reuse_the_candidate(start, folder, general, tmp_path):
    out = tmp_path / "adapted"
    adapt(folder, out, config=config(general, min_gain=1.0), start=str(start))
    changed = config(general, min_gain=1.0)
    changed.training.steps = 4
    with pytest.raises(FileExistsError, match="--overwrite"):
        adapt(folder, out, config=changed, start=str(start))
    changed.overwrite = True
    report = adapt(folder, out, config=changed, start=str(start))
    history = (out / "candidate" / "history.jsonl").read_text().splitlines()
    assert len(history) == 4 and report.pairs.get("reused")


@pytest.mark.parametrize("train_pairs", [300, 30000])
def test_general_share_is_the_share_of_batches_whatever_the_corpus_size(start, general, tmp_path, train_pairs):
    from c2v_rag.training.adapt.general_data import find_general_data
    from c2v_rag.training.adapt.run import train_config
    from c2v_rag.training.data import Example
    from c2v_rag.training.sampling import HomogeneousBatchPlan

    settings = AdaptConfig(start=str(start), training=AdaptTraining(steps=100, batch_size=4, general_share=0.3))
    recipe = train_config(settings, "docs", tmp_path, find_general_data(general), None, train_pairs=train_pairs)
    sizes = {"corpus": train_pairs, "stsb": 40, "nli_0": 20}
    plan = HomogeneousBatchPlan(
        {name: [Example(f"q{i}", f"p{i}") for i in range(n)] for name, n in sizes.items()},
        4,
        seed=0,
        weights={d.display_name: d.weight for d in recipe.datasets},
    )
    assert plan.batches_per_epoch == {"corpus": 70, "stsb": 15, "nli_0": 15}
    alone = train_config(settings, "docs", tmp_path, find_general_data("none"), None, train_pairs=train_pairs)
    assert [d.display_name for d in alone.datasets] == ["corpus"]
    corpus_only = HomogeneousBatchPlan(
        {"corpus": [Example(f"q{i}", f"p{i}") for i in range(train_pairs)]},
        4,
        seed=0,
        weights={d.display_name: d.weight for d in alone.datasets},
    )
    assert corpus_only.batches_per_epoch == {"corpus": 100}  # the run's steps, all of them the documents'


def test_the_users_questions_decide_and_are_checked_before_any_work(start, folder, general, tmp_path, caplog, capsys):
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        json.dumps({"query": make_text(3, 1), "doc_ids": ["page3.md"]})
        + "\n\n"
        + json.dumps({"query": make_text(5, 1), "doc_ids": [str(folder / "page5.md"), "page6.md"]})
        + "\n"
    )
    out = tmp_path / "adapted"
    settings = config(general, min_gain=-1.0, sts_tolerance=1.0, questions=str(questions))
    (folder / "figure.png").write_bytes(b"\x89PNG\r\n")
    with caplog.at_level("WARNING", logger="c2v_rag"):
        report = adapt(
            folder, out, config=config(general, min_gain=-1.0, sts_tolerance=1.0), start=str(start), questions=questions
        )
    # The folder is read once (the questions' check, the pairs and the training each read it before): its
    # skipped file is said once.
    assert caplog.text.count("not read: 1 file of other types (.png (1))") == 1
    # The gate's bars say which model and which data they encode (they said "Encoding" for minutes on end).
    bars = capsys.readouterr().err
    assert "Gate, the start: your questions" in bars and "Gate, the candidate: held-out queries" in bars
    assert report.kept and report.before["mrr@10 your questions (2)"] >= 0
    assert set(report.before) == set(report.after) >= {"mrr@10 your questions (2)", "ndcg@10 your questions (2)"}
    assert report.reasons[0].startswith("your 2 questions' MRR@10, searched among ")
    assert "--questions FILE" not in report.table()
    # Searched among every chunk of the folder, as a search of the collection would; each question's scores in the
    # report, so the verdict can be checked.
    chunks = len(read_pairs(out / "pairs").chunks)
    assert report.evidence["chunks"] == chunks and f"searched among {chunks} chunks" in report.reasons[0]
    assert [q["id"] for q in report.per_question] == ["question-0", "question-1"]
    assert report.per_question[1]["query"] == make_text(5, 1)
    difference = report.evidence["difference"]
    assert sum(q["before"] for q in report.per_question) / 2 == pytest.approx(difference["before"])
    assert sum(q["after"] for q in report.per_question) / 2 == pytest.approx(difference["after"])

    # The gate's data for them: every chunk of each answering document is relevant, and in the corpus.
    from c2v_rag.training.adapt.gate import question_data
    from c2v_rag.training.adapt.questions import read_questions, resolve_doc_ids

    pairs = read_pairs(out / "pairs")
    asked = resolve_doc_ids(read_questions(questions), {c.doc_id for c in pairs.chunks})
    data = question_data(asked, pairs, corpus_size=20, task=None)
    page6 = {c.id for c in pairs.chunks if c.doc_id.endswith("/page6.md")}
    assert page6 and page6 <= set(data.qrels["question-1"]) and page6 <= set(data.corpus)
    assert len(data.corpus) == 20 < len(pairs.chunks)
    whole = question_data(asked, pairs, corpus_size=len(pairs.chunks), task=None)
    assert whole.corpus == {c.id: c.text for c in pairs.chunks}
    # A sample, where the folder has more chunks than questions_corpus_size, is said.
    with caplog.at_level("WARNING", logger="c2v_rag"):
        sampled = adapt(
            folder,
            tmp_path / "sampled",
            config=config(general, min_gain=-1.0, questions_corpus_size=10),
            questions=questions,
            start=str(start),
        )
    assert sampled.evidence["chunks"] == 10
    assert f"searched among 10 of the {chunks} chunks (gate.questions_corpus_size)" in caplog.text

    # A misspelt document, or a malformed line, fails before anything is read or trained.
    for text, words in (
        (json.dumps({"query": "q", "doc_ids": ["page99.md"]}), "'page99.md' (no document)"),
        (json.dumps({"query": "q", "doc_ids": ["md"]}), "documents"),
        ('{"query": "q"}', "questions.jsonl:1: 'doc_ids' must be"),
        ("not json", "questions.jsonl:1 is not valid JSON"),
    ):
        questions.write_text(text + "\n")
        fresh = tmp_path / f"fresh-{len(text)}"
        with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
            adapt(folder, fresh, config=settings, start=str(start))
        assert not (fresh / "pairs").exists()


def test_decide_reads_the_users_questions_when_there_are_any():
    gate = AdaptGate()
    asked = [f"question-{i}" for i in range(12)]
    heldout = {f"heldout-{i}": 0.5 for i in range(40)}
    before = scores(heldout, per_question=dict.fromkeys(asked, 0.5))
    # Better on the pseudo-queries, worse on the questions: not kept.
    worse = scores(dict.fromkeys(heldout, 1.0), per_question={q: 0.5 if i else 0.0 for i, q in enumerate(asked)})
    verdict = decide(before, worse, gate, dict.fromkeys(heldout, "heading"))
    assert not verdict.kept and verdict.reasons[0].startswith("your 12 questions' MRR@10 0.5000 -> 0.4583")
    assert verdict.evidence["signal"] == "your questions" and verdict.evidence["real_questions_measured"]
    # A clear gain on them decides, whatever the pseudo-queries say.
    better = scores(dict.fromkeys(heldout, 0.0), per_question={q: 1.0 if i else 0.5 for i, q in enumerate(asked)})
    verdict = decide(before, better, gate, dict.fromkeys(heldout, "heading"))
    assert verdict.kept and "a clear gain" in verdict.reasons[0] and "95% interval" in verdict.reasons[0]
    # A rise of the mean within noise is not kept (the rule before kept any rise): 2 questions up, 1 down.
    mixed = {q: {0: 1.0, 1: 1.0, 2: 0.0}.get(i, 0.5) for i, q in enumerate(asked)}
    verdict = decide(before, scores(dict(heldout), per_question=mixed), gate, dict.fromkeys(heldout, "heading"))
    assert verdict.evidence["difference"]["mean"] > 0 and not verdict.kept
    assert "no clear gain (the interval must lie above 0)" in verdict.reasons[0]


@pytest.mark.parametrize(("risen", "kept", "why"), [(4, False, "sign test"), (5, False, "sign test"), (6, True, "")])
def test_the_users_questions_are_judged_as_the_held_out_queries(risen, kept, why):
    """Among 40 questions, a few that rise (by half a rank's MRR) and none that fall: the bootstrap interval clears 0
    from 4 on ((36/40)^40 = 0.015 of resamples draw none of them, under 2.5%), and the one-sided sign test from 6
    (p 0.5^6 = 0.016; 0.031 for 5, 0.0625 for 4). Independent of the bootstrap's draws."""
    asked = [f"question-{i}" for i in range(40)]
    heldout = {f"heldout-{i}": 0.5 for i in range(40)}
    before = scores(heldout, per_question=dict.fromkeys(asked, 0.5))
    after = scores(heldout, per_question={q: 1.0 if i < risen else 0.5 for i, q in enumerate(asked)})
    verdict = decide(before, after, AdaptGate(), dict.fromkeys(heldout, "heading"))
    difference = verdict.evidence["difference"]
    assert verdict.kept is kept and difference["low"] > 0 and difference["worse"] == 0
    assert why in verdict.reasons[0]
    rule = "the 95% interval of your questions' MRR@10 gain above 0 and a sign test p at most 0.025"
    assert verdict.evidence["rule"] == rule


def test_exclude_leaves_a_folders_files_out_of_the_pairs(start, folder, general, tmp_path):
    drafts = folder / "drafts"
    drafts.mkdir()
    for i in range(3):
        (drafts / f"draft{i}.md").write_text(f"# Draft {i}\n\nzanzibar {make_text(100 + i, 8)}\n")
    out = tmp_path / "adapted"
    with pytest.raises(ValueError, match="no pattern"):
        adapt(folder, out, config=config(general), start=str(start), exclude=["/"])
    adapt(folder, out, config=config(general, min_gain=1.0), start=str(start), exclude=["drafts/"])
    read = [json.loads(line) for line in (out / "pairs" / "documents.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in read) == sorted((folder / f"page{i}.md").resolve().as_posix() for i in range(16))
    written = " ".join(p.read_text() for p in (out / "pairs").rglob("*.jsonl"))
    assert "page3.md" in written and "zanzibar" not in written


def test_too_few_to_judge_stops_before_training(start, folder, general, tmp_path):
    """Fewer held-out headings and generated questions than the gate needs, and no questions of the user's: the
    verdict is "not kept" whatever a variant would score, so adapt says so without training one."""
    out = tmp_path / "adapted"
    settings = config(general, min_items=30)
    report = adapt(folder, out, config=settings, start=str(start))
    items = sum(p.source in ("heading", "generated") for p in read_pairs(out / "pairs").heldout)
    assert 0 < items < 30 and report.evidence["items"] == items
    assert not report.kept and not report.after and not (out / "candidate").exists()
    assert f"({items}): too few to judge (the gate needs 30)" in report.reasons[0]
    assert "--questions FILE" in report.reasons[0] and "NOT KEPT: no variant was trained" in report.table()
    # 4 chunks held out: no generator could give 30 items, so the advice is to hold out more, not to write more
    held = report.pairs["heldout_chunks"]
    assert f"hold out more chunks (only {held} are" in report.reasons[0] and "--max-generated" not in report.reasons[0]
    assert json.loads((out / "adapt_report.json").read_text())["kept"] is False
    assert "training" not in report.seconds and "pairs" in report.seconds


def test_too_few_to_judge_advises_what_can_help_this_run():
    """The advice follows the pairs' report: a larger --max-generated only where the budget left held-out chunks
    unasked; a generator where none ran; a stronger one where every held-out chunk was asked (more held-out chunks
    where too few are held out: test_too_few_to_judge_stops_before_training). A report without these counts (an
    older pairs folder) gets it all."""
    from c2v_rag.training.adapt.decision import too_few_to_judge

    gate = AdaptGate(evidence=HELD_OUT)  # 30 items of generated questions and headings
    sources = ["generated"] * 12 + ["crop"] * 40
    # No evidence by default: nothing to count, so the candidate is trained for a re-run with questions.
    assert too_few_to_judge(AdaptGate(), sources, {}) is None

    def advice(**report) -> str:
        verdict = too_few_to_judge(gate, sources, report)
        assert verdict is not None and not verdict.kept and verdict.evidence["items"] == 12
        return verdict.reasons[0]

    budget = advice(heldout_chunks=60, heldout_asked=40, generator="local")
    assert "--max-generated N" in budget and "--questions FILE" in budget
    every = advice(heldout_chunks=55, heldout_asked=55, generator="local")
    assert "--max-generated adds none" in every and "(55)" in every and "--max-generated N:" not in every
    assert "--generator local" in advice(heldout_chunks=60, heldout_asked=0, generator="none")
    assert "--max-generated N" in advice() and "more documents" in advice()
    assert too_few_to_judge(gate, ["generated"] * 30, {}) is None


def test_too_few_to_judge_writes_no_question_for_training_chunks(start, folder, general, tmp_path, monkeypatch):
    """With a generator and no questions of the user's, held-out chunks that cannot give the gate its items stop
    adapt before the generator writes for the training chunks (minutes on a CPU), with the same verdict; with the
    user's questions to judge by, every question is written."""
    from c2v_rag.training.pseudo.generation import GENERATORS

    try:
        use_generator(monkeypatch, FirstWords)
        settings = config(general, min_items=30)
        settings.pairs = settings.pairs.model_copy(update={"generator": "local", "max_generated": 12})
        report = adapt(folder, tmp_path / "adapted", config=settings, start=str(start))
        assert FirstWords.calls == []  # 4 held-out chunks could never give 30 items
        assert not report.kept and "too few to judge (the gate needs 30)" in report.reasons[0]
        assert "the questions for the training chunks were not written" in report.table()
        assert "generated" not in report.pairs["by_source"]
        questions = tmp_path / "questions.jsonl"
        questions.write_text(json.dumps({"query": "what is page 3 about?", "doc_ids": ["page3.md"]}) + "\n")
        settings.gate = settings.gate.model_copy(update={"questions": str(questions)})
        asked = adapt(folder, tmp_path / "asked", config=settings, start=str(start))
        assert sum(FirstWords.calls) == 12 and "generation_stopped" not in asked.pairs
    finally:
        GENERATORS.pop("first-words", None)


def test_no_held_out_item_at_all_is_not_kept_before_training_too(start, general, tmp_path):
    """Zero held-out items was an error (exit 2, "no held-out chunk kept a query"), while a few were "not kept"
    (exit 1), as adapt.md says of too few."""
    docs = tmp_path / "two"
    docs.mkdir()
    for i in range(2):
        (docs / f"n{i}.txt").write_text(make_text(70 + i, 12) + "\n")
    out = tmp_path / "adapted"
    settings = config(general)
    settings.pairs.holdout_fraction = 0.0
    report = adapt(docs, out, config=settings, start=str(start))
    assert not read_pairs(out / "pairs").heldout
    assert not report.kept and not (out / "candidate").exists() and "training" not in report.seconds
    assert "(0): too few to judge (the gate needs 1)" in report.reasons[0]


def test_a_rerun_takes_the_scores_it_already_has(start, folder, general, tmp_path, monkeypatch):
    monkeypatch.setenv("C2V_RAG_GATE_CACHE", str(tmp_path / "gate-cache"))
    start_parts = {"the start: held-out queries", "the start: STS-B dev"}
    candidate_parts = {"the candidate: held-out queries", "the candidate: STS-B dev"}
    first = adapt(folder, tmp_path / "first", config=config(general, min_gain=1.0), start=start)
    assert first.reused == [] and not first.kept
    # Other gate settings on the same output: the same two models on the same data, decided again without scoring.
    regated = adapt(folder, tmp_path / "first", config=config(general, min_gain=-1.0, sts_tolerance=1.0), start=start)
    assert set(regated.reused) == start_parts | candidate_parts and regated.kept
    assert (regated.before, regated.after) == (first.before, first.after)
    assert "scores reused from an earlier run" in regated.table()
    # Another training: a new candidate, scored; the start's scores found.
    longer = config(general, min_gain=1.0)
    longer.training.steps = 4
    retrained = adapt(folder, tmp_path / "retrained", config=longer, start=start)
    assert set(retrained.reused) == start_parts and retrained.before == first.before
    # Another folder: other held-out queries, the same STS-B dev.
    (folder / "extra.md").write_text(f"# One more page\n\n{make_text(90, 8)}\n")
    other = adapt(folder, tmp_path / "other", config=config(general, min_gain=1.0), start=start)
    assert other.reused == ["the start: STS-B dev"]
    # A score taken from the cache is the one scoring computes: the same run with the cache off, then with every
    # kept file torn (scored again, and kept anew).
    fresh_gate = config(general, min_gain=1.0)
    fresh_gate.gate.reuse_scores = False
    fresh = adapt(folder, tmp_path / "fresh", config=fresh_gate, start=start)
    assert fresh.reused == [] and fresh.before == other.before
    for kept in (tmp_path / "gate-cache").glob("*.json"):
        kept.write_text("{torn")
    torn = adapt(folder, tmp_path / "other", config=config(general, min_gain=1.0), start=start)
    assert torn.reused == [] and (torn.before, torn.after) == (other.before, other.after)
    assert adapt(folder, tmp_path / "other", config=config(general, min_gain=1.0), start=start).reused


def test_the_gate_embeds_as_an_ingest_into_a_new_collection_does(start, folder, general, tmp_path, monkeypatch):
    """The gate scores the vectors search will use: int8 where ingest's default is int8 ($C2V_RAG_QUANTIZE, which
    the suite sets to none), or as ``gate.quantize`` says."""
    pytest.importorskip("onnxruntime")
    from c2v_rag.core.devices import INT8_METHOD

    float_gate = adapt(folder, tmp_path / "float", config=config(general, min_gain=1.0), start=start)
    assert float_gate.scored_with == {"dtype": "float32", "quantization": "none"}
    assert "the gate embedded in float32, as ingest does here" in float_gate.table()
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "cache"))  # the tiny models' int8 graphs
    monkeypatch.setenv("C2V_RAG_QUANTIZE", "int8")
    int8_gate = adapt(folder, tmp_path / "int8", config=config(general, min_gain=1.0), start=start)
    assert int8_gate.scored_with["quantization"] == INT8_METHOD and int8_gate.reused == []
    assert "the gate embedded in int8, as ingest does here" in int8_gate.table()
    # The same start, its decoder in int8: near its float self.
    before_float, before_int8 = float_gate.before["stsb_dev_spearman"], int8_gate.before["stsb_dev_spearman"]
    assert before_int8 == pytest.approx(before_float, abs=0.1)
    asked = config(general, min_gain=1.0)
    asked.gate.quantize = "none"
    assert adapt(folder, tmp_path / "asked", config=asked, start=start).scored_with["quantization"] == "none"
