"""make_pairs on a folder: chunks as ingest cuts them, a held-out split, a BEIR folder the evaluation reader reads,
reuse when nothing changed, and generated questions kept across runs."""

from __future__ import annotations

import json

import pytest
from rag_helpers import make_text
from train_helpers import FirstWords, Silent, use_generator

from c2v_rag.documents.chunking import TokenChunker
from c2v_rag.evaluation.datasets import read_beir
from c2v_rag.training.pseudo.config import PseudoPairsConfig
from c2v_rag.training.pseudo.generation import GENERATORS, register
from c2v_rag.training.pseudo.make import make_pairs

pytest.importorskip("bm25s")
pytest.importorskip("llama_index.core")


@pytest.fixture
def folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(12):
        sections = "\n\n".join(
            f"## Part {chr(65 + j)} of {i}\n\n{make_text(i * 10 + j, sentences=5)}" for j in range(2)
        )
        (docs / f"page{i}.md").write_text(f"# Page {i} title words\n\n{make_text(i, 4)}\n\n{sections}\n")
    return docs


@pytest.fixture
def chunker(tiny_model_factory):
    return TokenChunker(tiny_model_factory("llama", max_length=256), chunk_size=200, chunk_overlap=16)


def test_pairs_are_written_as_a_beir_folder_with_a_held_out_split(folder, chunker, tmp_path):
    config = PseudoPairsConfig(generator="none", holdout_fraction=0.2, min_words=2, round_trip_k=None)
    pairs = make_pairs(folder, chunker, config, tmp_path / "pairs", show_progress=False)
    assert pairs.train and pairs.heldout
    assert {p.chunk_id for p in pairs.train}.isdisjoint(pairs.heldout_chunks)
    assert all(p.chunk_id in pairs.heldout_chunks for p in pairs.heldout)
    assert len({p.chunk_id for p in pairs.heldout}) == len(pairs.heldout)  # one gate query per held-out chunk
    assert {p.source for p in pairs.train} == {"crop", "heading"}
    # The folder reads as BEIR with the project's own (independent) reader.
    train = read_beir(tmp_path / "pairs", "train")
    assert len(train.qrels) == len(pairs.train) and len(train.corpus) == len(pairs.chunks)
    heldout = read_beir(tmp_path / "pairs", "heldout")
    assert {d for rel in heldout.qrels.values() for d in rel} == {p.chunk_id for p in pairs.heldout}
    report = json.loads((tmp_path / "pairs" / "report.json").read_text())
    assert report["train_pairs"] == len(pairs.train) and report["chunks"] == len(pairs.chunks)
    # Every pair the filters kept is trained on, asked by the gate, or counted as unused.
    kept = sum(counts["kept"] for counts in report["by_source"].values())
    used = report["train_pairs"] + report["heldout_pairs"]
    assert kept == used + report["heldout_unused"] + report["over_max_pairs"]
    assert report["heldout_unused"] > 0  # a held-out chunk with a heading has its crop too: one of them is unused
    assert sum(report["train_by_source"].values()) == len(pairs.train)
    assert sum(report["heldout_by_source"].values()) == len(pairs.heldout)


def test_same_documents_and_settings_reuse_the_folder_and_a_change_remakes_it(folder, chunker, tmp_path):
    config = PseudoPairsConfig(generator="none", min_words=2, round_trip_k=None)
    first = make_pairs(folder, chunker, config, tmp_path / "pairs", show_progress=False)
    stamp = (tmp_path / "pairs" / "queries.jsonl").stat().st_mtime_ns
    again = make_pairs(folder, chunker, config, tmp_path / "pairs", show_progress=False)
    assert again.report.get("reused") and [p.query for p in again.train] == [p.query for p in first.train]
    assert (tmp_path / "pairs" / "queries.jsonl").stat().st_mtime_ns == stamp
    (folder / "page0.md").write_text("# Changed\n\n" + make_text(99, 6))
    changed = make_pairs(folder, chunker, config, tmp_path / "pairs", show_progress=False)
    assert not changed.report.get("reused")


def test_generated_questions_are_cached_and_asked_for_only_once(folder, chunker, tmp_path, monkeypatch):
    register(FirstWords)
    try:
        monkeypatch.setattr(
            "c2v_rag.training.pseudo.make.generator_options", lambda config: {"kind": "first-words", "batch_size": 4}
        )
        FirstWords.calls.clear()
        cache = tmp_path / "generated.jsonl"
        config = PseudoPairsConfig(
            generator="local", max_generated=10, min_words=2, round_trip_k=None, min_logprob=None
        )
        pairs = make_pairs(folder, chunker, config, tmp_path / "a", show_progress=False, generation_cache=cache)
        generated = [p for p in pairs.train + pairs.heldout if p.source == "generated"]
        assert sum(FirstWords.calls) == 10 and generated
        assert all(p.query.startswith("Which ") and p.mean_logprob == -0.5 for p in generated)
        # Other filters, another folder, the same generator: nothing is generated again.
        other = config.model_copy(update={"crops_per_chunk": 0})
        make_pairs(folder, chunker, other, tmp_path / "b", show_progress=False, generation_cache=cache)
        assert sum(FirstWords.calls) == 10
        assert make_pairs(folder, chunker, config, tmp_path / "a", show_progress=False).report.get("reused")
        # The same settings, a generator that begins its replies otherwise: its own questions, and pairs made again.
        monkeypatch.setattr(
            "c2v_rag.training.pseudo.make.generator_options",
            lambda config: {"kind": "first-words", "batch_size": 4, "reply_start": "What"},
        )
        again = make_pairs(folder, chunker, config, tmp_path / "a", show_progress=False, generation_cache=cache)
        assert sum(FirstWords.calls) == 20 and not again.report.get("reused")
        assert all(p.query.startswith("What ") for p in again.train + again.heldout if p.source == "generated")
    finally:
        GENERATORS.pop("first-words", None)


def _evidence(pairs, sources) -> int:
    return sum(p.source in sources for p in pairs.heldout)


def test_questions_for_training_chunks_are_written_only_when_the_gate_could_judge(
    folder, chunker, tmp_path, monkeypatch
):
    """With a need (adapt's gate without the user's questions), held-out chunks get their questions first; the
    training chunks' questions follow only while the held-out queries can still give the gate enough items, so a
    run stops only where the run without the need would have had too few."""
    from c2v_rag.training.pseudo.make import HeldoutNeed

    sources = frozenset({"generated", "heading"})
    config = PseudoPairsConfig(
        generator="local", max_generated=12, holdout_fraction=0.25, min_words=2, round_trip_k=None, min_logprob=None
    )
    try:
        use_generator(monkeypatch, FirstWords)
        full = make_pairs(folder, chunker, config, tmp_path / "full", show_progress=False)
        assert sum(FirstWords.calls) == 12
        items = _evidence(full, sources)
        assert items > 0
        # Exactly what the full run's gate has: the same pairs, every question written.
        FirstWords.calls.clear()
        met = make_pairs(
            folder, chunker, config, tmp_path / "met", show_progress=False, need=HeldoutNeed(sources, items)
        )
        assert sum(FirstWords.calls) == 12 and "generation_stopped" not in met.report
        assert [(p.query, p.chunk_id) for p in met.train] == [(p.query, p.chunk_id) for p in full.train]
        assert [(p.query, p.chunk_id) for p in met.heldout] == [(p.query, p.chunk_id) for p in full.heldout]
        # More than the held-out chunks could ever give: no question at all.
        FirstWords.calls.clear()
        over = HeldoutNeed(sources, len(full.heldout_chunks) + 1)
        stopped = make_pairs(folder, chunker, config, tmp_path / "over", show_progress=False, need=over)
        assert FirstWords.calls == [] and not any(p.source == "generated" for p in stopped.train + stopped.heldout)
        assert f"at most {len(full.heldout_chunks)} of the {over.items}" in stopped.report["generation_stopped"]
        assert stopped.train and _evidence(stopped, sources) < over.items
        # Pairs made so are never taken for a finished run's.
        FirstWords.calls.clear()
        again = make_pairs(folder, chunker, config, tmp_path / "over", show_progress=False)
        assert not again.report.get("reused") and any(p.source == "generated" for p in again.train)
    finally:
        GENERATORS.pop("first-words", None)


def test_held_out_questions_that_come_to_nothing_stop_the_rest(folder, chunker, tmp_path, monkeypatch):
    """The held-out chunks could meet the need if each got a question, so the generator writes theirs; it writes
    none, and the training chunks' are not asked for."""
    from c2v_rag.training.pseudo.make import HeldoutNeed

    config = PseudoPairsConfig(
        generator="local", max_generated=12, holdout_fraction=0.25, min_words=2, round_trip_k=None, min_logprob=None
    )
    try:
        use_generator(monkeypatch, Silent)
        pairs = make_pairs(
            folder, chunker, config, tmp_path / "p", show_progress=False, need=HeldoutNeed(frozenset({"generated"}), 1)
        )
        held = min(len(pairs.heldout_chunks), 12 // 2)  # generation_targets: held-out first, up to half the budget
        assert 0 < held < 12 and sum(FirstWords.calls) == held
        assert "at most 0 of the 1 generated queries" in pairs.report["generation_stopped"]
    finally:
        GENERATORS.pop("silent", None)


def test_reading_the_corpus_weighs_files_by_their_bytes_as_ingest_does(tmp_path, chunker, bar_shares, capsys):
    import c2v_rag.training.pseudo.make as make

    docs = tmp_path / "mixed"
    docs.mkdir()
    for i, sentences in enumerate([2, 2, 200, 2]):  # c.md is most of the bytes
        (docs / f"{'abcd'[i]}.md").write_text(f"# Page {i}\n\n{make_text(i, sentences)}\n")
    recorded = bar_shares(make)
    make.read_corpus(docs, chunker, show_progress=True)
    # independent of the bar: each file's bytes and 1 KiB, in the order read; a file of one document is done once
    # its document is handed on, while the count says the files read before it
    weights = [f.stat().st_size + 1024 for f in sorted(docs.iterdir())]
    for count, fraction in recorded:
        assert fraction == pytest.approx(sum(weights[: count + 1]) / sum(weights)), (count, fraction)
    assert recorded[-1] == (4, pytest.approx(1.0)) and any(fraction > 0.8 for count, fraction in recorded if count == 3)
    assert "4/4 files" in capsys.readouterr().err


def test_the_bar_moves_within_a_file_of_many_documents(tmp_path, chunker, bar_shares, capsys):
    """A JSONL file of documents (a BEIR corpus; adapt's documents.jsonl, read again to chunk) moves the bar by its
    records' bytes, as ingest's bar does, and counts its documents rather than standing at "0/1 files" until the
    whole file is read."""
    import json

    import c2v_rag.training.pseudo.make as make

    corpus = tmp_path / "corpus.jsonl"
    lines = [json.dumps({"id": f"d{i}", "text": make_text(i, 1 + i % 3)}) + "\n" for i in range(40)]
    corpus.write_text("".join(lines))
    recorded = bar_shares(make)
    make.read_corpus(corpus, chunker, show_progress=True)
    # independent of the bar: where each line ends in the file, as a share of its bytes, after that many documents
    ends = [sum(len(line.encode()) for line in lines[: i + 1]) for i in range(len(lines))]
    assert [count for count, _ in recorded[: len(lines)]] == list(range(1, len(lines) + 1))
    size = corpus.stat().st_size
    assert [fraction for _, fraction in recorded[: len(lines)]] == pytest.approx([end / size for end in ends])
    assert recorded[-1] == (40, pytest.approx(1.0))
    shown = capsys.readouterr().err
    assert "40 documents" in shown and "files" not in shown


def test_reading_says_which_files_it_left_unread_and_text_suffixes_read_them(tmp_path, caplog, capsys):
    """Files of types adapt does not read are said in a warning, counted by suffix, as ingest's summary counts
    them; ``text_suffixes`` reads them (files without a suffix here), with a bar over the files read."""
    import logging
    from pathlib import Path

    from c2v_rag.documents.reading import ReadOptions
    from c2v_rag.training.pseudo.make import read_documents

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(f"# Guide\n\n{make_text(1)}\n")
    (docs / "INTRO").write_text(make_text(2))
    (docs / "RBASH").write_text(make_text(3))
    (docs / "fix.sed").write_text("s/colour/color/g\n")
    with caplog.at_level(logging.WARNING):
        read = list(read_documents(docs, desc="Reading", show_progress=False))
    assert [Path(d.doc_id).name for d in read] == ["guide.md"]
    assert "not read: 3 files of other types (no suffix (2), .sed (1))" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        options = ReadOptions(text_suffixes=("",))
        read = list(read_documents(docs, desc="Reading the documents", options=options))
    assert sorted(Path(d.doc_id).name for d in read) == ["INTRO", "RBASH", "guide.md"]
    assert "not read: 1 file of other types (.sed (1))" in caplog.text
    err = capsys.readouterr().err
    assert "Reading the documents: 100%" in err and "3/3 files" in err
