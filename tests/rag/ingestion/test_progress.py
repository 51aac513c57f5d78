"""The ingest progress bar as a user reads it: a total known before anything is embedded, a percentage, movement
within a long batch, warnings printed above the bar rather than into it, a chunk rate that agrees with the
summary, and one truncation warning that counts what the encoder cut as well as the decoder."""

from __future__ import annotations

import logging
import random
import re
import sys
import warnings
from collections.abc import Callable
from typing import Any

import pytest

for _module in ("qdrant_client", "llama_index.core", "tenacity"):
    pytest.importorskip(_module)

from rag_helpers import make_text

import c2v_rag
from c2v_rag.cli.errors import one_line_warnings
from c2v_rag.documents.chunking import TokenChunker
from c2v_rag.encode.loop import ENCODER_AHEAD_TEXTS, ENCODER_WORK_SHARE
from c2v_rag.rag.ingestion.pipeline import IngestProgress


def write_files(folder, n: int, sentences: int = 6):
    folder.mkdir()
    for i in range(n):
        (folder / f"doc{i:02d}.md").write_text(f"# Note {i}\n\n{make_text(i, sentences)}\n", encoding="utf-8")
    return folder


def screens(err: str) -> list[str]:
    """What the terminal showed, redraw by redraw: tqdm redraws a line after each carriage return."""
    return [part for line in err.split("\n") for part in line.split("\r") if part.strip()]


def test_the_bar_counts_files_out_of_a_total_known_before_embedding(tmp_path, tiny_variant, ingest_config, capsys):
    folder = write_files(tmp_path / "notes", 7)
    config = ingest_config.model_copy(update={"show_progress": True})
    result = c2v_rag.ingest(folder, path=tmp_path / "qd", collection="files", model=tiny_variant, config=config)
    bars = [s for s in screens(capsys.readouterr().err) if s.startswith("Ingesting into files")]
    # The first draw, before any chunk is embedded, already has the total and a percentage.
    assert "  0%|" in bars[0] and "0/7 files" in bars[0]
    final = bars[-1]
    assert "100%|" in final and "7/7 files" in final
    # The rate is the summary's: the same chunks over the same seconds, printed alike.
    chunks, rate = re.search(r"(\d+) chunks, ([\d.]+) chunks/s\]", final).groups()
    assert int(chunks) == result.chunks and f"({rate} chunks/s)" in result.summary()


@pytest.mark.parametrize("run", ["ingest", "embed"])
def test_the_runs_seconds_start_once_the_model_is_loaded(tmp_path, tiny_variant, ingest_config, monkeypatch, run):
    """A first load may build int8 graphs for half a minute: the summary's seconds and chunk rate are the
    embedding's, in ingest and embed alike, not the load's."""
    import time

    from c2v_rag.rag import embedding

    real_load, load_seconds = embedding.load_model, 2.0

    def slow_load(*args: Any, **kwargs: Any):
        model = real_load(*args, **kwargs)
        time.sleep(load_seconds)
        return model

    monkeypatch.setattr(embedding, "load_model", slow_load)
    folder = write_files(tmp_path / "notes", 3)
    started = time.perf_counter()
    if run == "ingest":
        result = c2v_rag.ingest(folder, path=tmp_path / "qd", collection="c", model=tiny_variant, config=ingest_config)
    else:
        pytest.importorskip("pyarrow.parquet")  # embed's Parquet files
        result = c2v_rag.embed(folder, tmp_path / "vectors", model=str(tiny_variant), config=ingest_config)
    whole = time.perf_counter() - started
    assert result.chunks > 0 and whole > load_seconds
    assert result.seconds < whole - load_seconds


def test_a_list_of_texts_is_counted_in_documents(tmp_path, tiny_variant, corpus, ingest_config, capsys):
    config = ingest_config.model_copy(update={"show_progress": True})
    c2v_rag.ingest(corpus, path=tmp_path, collection="docs", model=tiny_variant, config=config)
    final = [s for s in screens(capsys.readouterr().err) if s.startswith("Ingesting into docs")][-1]
    assert "100%|" in final and "6/6 docs" in final


def recorded_bar(monkeypatch, entry: Callable[[Any, float, int], Any]) -> list[Any]:
    """``entry(bar, inputs, chunks)`` for everything the ingest bar is asked to show, in order, once drawn (the bar
    still draws it)."""
    calls: list[Any] = []
    real_show = IngestProgress._show

    def show(self, inputs, chunks, seconds=None):
        real_show(self, inputs, chunks, seconds)
        calls.append(entry(self.bar, inputs, chunks))

    monkeypatch.setattr(IngestProgress, "_show", show)
    return calls


@pytest.fixture
def shown(monkeypatch) -> list[tuple[int, int]]:
    """Every (inputs, chunks) the bar is asked to show, in order."""
    return recorded_bar(monkeypatch, lambda bar, inputs, chunks: (inputs, chunks))


def test_the_bar_moves_within_one_batch(tmp_path, tiny_variant, ingest_config, shown):
    # One batch holds every chunk; small forward passes make many updates inside it.
    folder = write_files(tmp_path / "notes", 12)
    config = ingest_config.model_copy(update={"batch_size": 10_000, "max_tokens_per_batch": 64})
    result = c2v_rag.ingest(folder, path=tmp_path / "qd", collection="one", model=tiny_variant, config=config)
    assert shown[-1] == (12, result.chunks)
    within = [s for s in shown if 0 < s[1] < result.chunks]
    assert len(within) >= 3, shown  # updates before the batch is through
    assert any(0 < files < 12 for files, _ in within), shown  # ...that move the file count too
    assert shown == sorted(shown)  # never backwards


@pytest.fixture
def bar_shares(monkeypatch) -> list[tuple[int, float]]:
    """Every (chunks, share of the bar) the bar shows, in order."""
    return recorded_bar(monkeypatch, lambda bar, inputs, chunks: (chunks, bar.n / bar.total))


def test_the_bar_follows_the_work_not_the_chunks(tmp_path, tiny_variant, ingest_config, bar_shares):
    # Six long files and six of one word, one chunk each, in one batch: the long chunks go first and hold nearly
    # all the work, so once they are embedded the bar must be near its end, not at half (6 of 12 chunks).
    folder = tmp_path / "notes"
    folder.mkdir()
    texts = {f"long{i}.md": make_text(i, 2) for i in range(6)} | {f"short{i}.md": "Ok." for i in range(6)}
    for name, text in texts.items():
        (folder / name).write_text(text + "\n", encoding="utf-8")
    config = ingest_config.model_copy(
        update={"chunk_size": 100, "batch_size": 10_000, "max_tokens_per_batch": 64, "show_progress": True}
    )
    result = c2v_rag.ingest(folder, path=tmp_path / "qd", collection="work", model=tiny_variant, config=config)
    assert result.chunks == 12 and bar_shares[-1] == (12, pytest.approx(1.0))
    # independent of the bar: the share of the characters, so of the work, in the six long files
    long_share = sum(len(t) for n, t in texts.items() if n.startswith("long")) / sum(len(t) for t in texts.values())
    assert long_share > 0.9
    at_half = [share for chunks, share in bar_shares if chunks == 6]
    assert at_half and min(at_half) >= long_share - 0.1, bar_shares
    assert bar_shares == sorted(bar_shares)  # never backwards


def test_a_batch_that_opens_with_a_small_file_moves_the_bar_by_its_bytes(
    tmp_path, tiny_variant, ingest_config, bar_shares
):
    # A one-word note sorts first, then three long pages of equal chunks, all in one batch: the bar sat in the note's
    # sliver of it while the pages were embedded (Python's library docs: 10 hours of ETA at the first update).
    folder = tmp_path / "pages"
    folder.mkdir()
    (folder / "a-note.md").write_text("Ok.\n", encoding="utf-8")
    for i in range(3):
        (folder / f"page{i}.md").write_text(make_text(i, 150) + "\n", encoding="utf-8")
    config = ingest_config.model_copy(update={"batch_size": 10_000, "max_tokens_per_batch": 64, "show_progress": True})
    result = c2v_rag.ingest(folder, path=tmp_path / "qd", collection="pages", model=tiny_variant, config=config)
    within = [(chunks, share) for chunks, share in bar_shares if 0 < chunks < result.chunks]
    assert len(within) >= 5, bar_shares
    # independent of the bar: the pages' chunks are about equally long, so the chunks embedded are about the share
    # of the bytes done (the note is one chunk of a few bytes); the bar may lead them by the encoder's pass over one
    # slice, which it credits before the decoder embeds those chunks
    lead = ENCODER_WORK_SHARE * min(ENCODER_AHEAD_TEXTS, result.chunks) / result.chunks
    for chunks, share in within:
        assert -0.1 < share - chunks / result.chunks < 0.1 + lead, (chunks, result.chunks, share)


def test_one_long_file_moves_the_bar_through_itself(tmp_path, tiny_variant, ingest_config, shown, capsys):
    # One file of many chunks, batches of 3: the bar used to sit at 0/1 with no ETA until the last batch.
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / "long.md").write_text(make_text(7, 120) + "\n", encoding="utf-8")
    config = ingest_config.model_copy(update={"batch_size": 3, "show_progress": True})
    result = c2v_rag.ingest(folder, path=tmp_path / "qd", collection="long", model=tiny_variant, config=config)
    assert result.chunks > 20 and shown[-1] == (1, result.chunks)
    assert shown == sorted(shown)  # never backwards
    within = [(files, chunks) for files, chunks in shown if 0 < chunks < result.chunks]
    assert len({files for files, _ in within}) > 10  # many distinct positions inside the one file
    # Independent of the bar: the chunks are about equally long, so the share of the file done is about the
    # share of the chunks done (a batch's forward passes move it by work, within one batch of 3 chunks).
    for files, chunks in within:
        assert abs(files - chunks / result.chunks) <= 3 / result.chunks + 0.05, (files, chunks)
    bars = [b for b in screens(capsys.readouterr().err) if b.startswith("Ingesting into long")]
    middle = [b for b in bars if "0/1 files" in b and "  0%|" not in b]
    assert middle, bars  # a percentage before the file is done, and the count still of whole files
    assert any(re.search(r"<\d\d:\d\d", b) for b in middle), middle  # an ETA, not "?"
    assert "100%|" in bars[-1] and "1/1 files" in bars[-1]


@pytest.fixture
def weighed(monkeypatch) -> Callable[..., list[tuple[float, float]]]:
    """Ingest ``docs`` with the bar on, and check it against ``ends`` (where each input ends, as a share of all of
    them, computed by the test): inside input k (k done whole) the bar's share done lies inside input k's. Returns
    every (inputs, share of the bar) it showed."""

    def ingest(docs: Any, ends: list[float], tmp_path: Any, tiny_variant: Any, ingest_config: Any, name: str):
        fractions = recorded_bar(monkeypatch, lambda bar, inputs, chunks: (inputs, bar.n / bar.total))
        config = ingest_config.model_copy(update={"batch_size": 3, "show_progress": True})
        c2v_rag.ingest(docs, path=tmp_path / "qd", collection=name, model=tiny_variant, config=config)
        assert fractions[-1] == (len(ends), pytest.approx(1.0))
        for inputs, fraction in fractions:
            k = int(inputs + 1e-6)
            start, end = (ends[k - 1] if k else 0.0), (ends[k] if k < len(ends) else 1.0)
            assert start - 1e-9 <= fraction <= end + 1e-9, (inputs, fraction, ends)
        return fractions

    return ingest


def test_files_weigh_their_bytes_on_the_bar(tmp_path, tiny_variant, ingest_config, weighed, capsys):
    # Six notes of a sentence or two and one long page between them: the page is most of the bytes, and so of the
    # run's time. The bar's share done follows the bytes (the notes before the page are a sliver of it, the page
    # done is most of it), while the count it shows stays of files.
    folder = tmp_path / "mixed"
    folder.mkdir()
    names = ["a.md", "b.md", "c.md", "m.md", "x.md", "y.md", "z.md"]
    for i, name in enumerate(names):
        (folder / name).write_text(make_text(i, 300 if name == "m.md" else 1) + "\n", encoding="utf-8")
    # independent of the bar: where each file ends in the folder's bytes (each file also weighs 1 KiB)
    weights = [(folder / name).stat().st_size + 1024 for name in names]
    ends = [sum(weights[: i + 1]) / sum(weights) for i in range(len(names))]
    assert ends[3] - ends[2] > 0.6  # the long page is most of the bytes
    fractions = weighed(folder, ends, tmp_path, tiny_variant, ingest_config, "mixed")
    # through the page, the bar goes from under a quarter to most of its length (by files: from 3/7 to 4/7)
    assert min(f for inputs, f in fractions if 3 <= inputs < 4) < 0.25
    assert max(f for inputs, f in fractions if inputs < 4) > 0.75
    bars = [b for b in screens(capsys.readouterr().err) if b.startswith("Ingesting into mixed")]
    assert "0/7 files" in bars[0] and "100%|" in bars[-1] and "7/7 files" in bars[-1]


def test_texts_in_memory_weigh_their_characters_on_the_bar(tmp_path, tiny_variant, ingest_config, weighed):
    # As files weigh their bytes: six short texts and a long one between them, given as a list of strings.
    texts = [make_text(i, 300 if i == 3 else 1) for i in range(7)]
    ends = [sum(len(t) + 1024 for t in texts[: i + 1]) / sum(len(t) + 1024 for t in texts) for i in range(7)]
    assert ends[3] - ends[2] > 0.6  # the long text is most of the characters
    fractions = weighed(texts, ends, tmp_path, tiny_variant, ingest_config, "texts")
    assert max(f for inputs, f in fractions if inputs < 4) > 0.75


def test_records_of_one_jsonl_file_move_the_bar(tmp_path, tiny_variant, ingest_config, shown):
    import json

    folder = tmp_path / "rows"
    folder.mkdir()
    records = [{"id": f"r{i}", "text": make_text(i, 2)} for i in range(20)]
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    (folder / "after.md").write_text(make_text(99, 2) + "\n", encoding="utf-8")
    config = ingest_config.model_copy(update={"batch_size": 2})
    result = c2v_rag.ingest(folder, path=tmp_path / "qd", collection="rows", model=tiny_variant, config=config)
    assert shown[-1] == (2, result.chunks) and shown == sorted(shown)
    # after.md sorts first, then the JSONL's records, each 1/20 of the file: the bar goes through the file
    in_jsonl = sorted({files for files, _ in shown if 1 < files < 2})
    assert len(in_jsonl) >= 5 and in_jsonl[0] < 1.2 and in_jsonl[-1] > 1.8, shown


def test_jsonl_spans_cover_the_file_a_last_line_without_newline_included(tmp_path):
    from c2v_rag.core.jsonl import iter_jsonl_spans

    for text, spans in (
        ("", []),
        ('{"a": 1}\n', [(0, 9)]),
        ('{"a": 1}\n{"b": 2}', [(0, 9), (9, 17)]),
        ('{"a": 1}\n\n{"b": 2}\n', [(0, 9), (10, 19)]),  # a blank line is skipped, its bytes counted
    ):
        (tmp_path / "f.jsonl").write_bytes(text.encode())
        assert [span for _, span, _ in iter_jsonl_spans(tmp_path / "f.jsonl")] == spans, text
        assert not spans or spans[-1][1] == len(text.encode())


def test_warnings_during_ingest_print_above_the_bar(
    tmp_path, tiny_variant, tiny_model, ingest_config, monkeypatch, capsys
):
    handler = logging.StreamHandler(sys.stderr)  # a console handler, as logging.basicConfig (the CLI) adds
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    real_encode = tiny_model.encode_documents

    def encode(texts, *args, **kwargs):
        logging.getLogger("c2v_rag.test").warning("a logged notice mid-run")
        warnings.warn("a Python warning mid-run", UserWarning, stacklevel=1)
        return real_encode(texts, *args, **kwargs)

    monkeypatch.setattr(tiny_model, "encode_documents", encode)
    folder = write_files(tmp_path / "notes", 5)
    config = ingest_config.model_copy(update={"show_progress": True})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            one_line_warnings()  # the CLI's "warning: ..." lines on stderr, undone when the block ends
            c2v_rag.ingest(folder, path=tmp_path / "qd", collection="warn", model=tiny_variant, config=config)
        handler_after = logging.getLogger().handlers[-1]
    finally:
        logging.getLogger().removeHandler(handler)
    err = capsys.readouterr().err
    shown = screens(err)
    logged = [s for s in shown if "a logged notice mid-run" in s]
    warned = [s for s in shown if "a Python warning mid-run" in s]
    assert logged and warned
    # Each starts its own line (the bar was cleared first) and shares it with no bar.
    assert all(s.startswith("WARNING c2v_rag.test:") for s in logged), logged
    assert all(s.startswith("warning: a Python warning") for s in warned), warned
    assert all("Ingesting into" not in s and "files [" not in s for s in logged + warned), shown
    # The bar was drawn again after them, and the console handler is the one the test added again.
    assert shown[-1].startswith("Ingesting into warn") and "5/5 files" in shown[-1]
    assert handler_after is handler


def truncation_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "truncated" in r.getMessage()]


def test_no_truncation_warning_when_nothing_was_cut(tmp_path, tiny_variant, corpus, ingest_config, caplog):
    with caplog.at_level(logging.DEBUG, logger="c2v_rag"):
        c2v_rag.ingest(corpus, path=tmp_path, collection="short", model=tiny_variant, config=ingest_config)
    assert truncation_warnings(caplog) == []


def test_the_truncation_warning_counts_the_encoders_cuts_once_per_run(
    tmp_path, tiny_variant, tiny_model, ingest_config, caplog
):
    # Chunks of 100 decoder tokens fit the decoder (max_length=128). The tiny encoder (64 tokens) reads
    # words in fewer tokens than the decoder, so prose fits it; "a.b.c." takes as many, so those chunks do not.
    config = ingest_config.model_copy(update={"chunk_size": 100, "chunk_overlap": 0, "batch_size": 3})
    rng = random.Random(0)
    dotted = [" ".join(".".join(rng.sample("abcdefgh", 3)) + "." for _ in range(60)) for _ in range(2)]
    docs = [{"id": f"prose-{i}", "text": make_text(i, 30)} for i in range(2)]
    docs += [{"id": f"dotted-{i}", "text": text} for i, text in enumerate(dotted)]
    chunker = TokenChunker(tiny_model, config.chunk_size, config.chunk_overlap)
    chunks = [c.text for d in docs for c in chunker.chunk(d["text"])]
    limit = tiny_model.encoder_max_length
    cut = sum(len(tiny_model.encoder_tokenizer(t, verbose=False)["input_ids"]) > limit for t in chunks)
    assert 0 < cut < len(chunks) and len(chunks) > config.batch_size  # what this test needs of its input
    with caplog.at_level(logging.DEBUG, logger="c2v_rag"):
        for run in range(2):  # the same model again: every run reports its own cuts
            caplog.clear()
            result = c2v_rag.ingest(
                docs, path=tmp_path / f"qd{run}", collection="long", model=tiny_variant, config=config
            )
            assert result.chunks == len(chunks)
            assert truncation_warnings(caplog) == [
                f"{cut} of {len(chunks)} chunks exceeded the encoder's limit of {limit} tokens and were truncated "
                f"for the encoder. Chunks fit it whole at chunk_size={limit - 2} or less."  # less [CLS] and [SEP]
            ]


def _drain(fd: int) -> str:
    """What a pseudo-terminal shows up to the closed bar's newline. The kernel hands writes to the other end a moment
    later, so one read can return tqdm's first draw alone."""
    import os
    import select
    import time

    drawn, deadline = b"", time.monotonic() + 30
    while b"\n" not in drawn and select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
        drawn += os.read(fd, 1 << 16)
    return drawn.decode()


def test_a_terminal_that_reports_no_size_still_shows_the_bar():
    import io
    import os

    from tqdm import tqdm

    from c2v_rag.core.progress_bar import unsized_terminal

    leader, follower = os.openpty()  # a new pseudo-terminal has 0 columns and 0 rows, like an unsized `script`
    try:
        with os.fdopen(follower, "w", closefd=False) as tty:
            size = unsized_terminal(tty)
            assert size["ncols"] > 0 and size["nrows"] > 0
            with tqdm(total=3, desc="Ingesting into x", file=tty, mininterval=0, **size) as bar:
                bar.update(1)
            tty.flush()
        drawn = _drain(leader)
    finally:
        os.close(leader)
        os.close(follower)
    assert "Ingesting into x:  33%|" in drawn  # at the terminal's own size (0 x 0) tqdm drew nothing
    # Not a terminal: tqdm measures as usual.
    assert unsized_terminal(io.StringIO()) == {}


def test_a_ticking_bar_redraws_its_clock_and_postfix_while_no_update_comes():
    """What a Ray run shows while its actors load the model: the bar is redrawn, its elapsed time and its postfix
    current, though nothing was counted; once the block ends, nothing draws any more."""
    import io
    import threading

    from tqdm import tqdm

    from c2v_rag.core.progress_bar import ticking

    out = io.StringIO()
    bar = tqdm(total=10, desc="Ingesting", file=out, bar_format="{desc} [{postfix}]", mininterval=0)
    bar.set_postfix_str("starting", refresh=False)
    drawn = threading.Event()
    refresh = bar.refresh

    def counted_refresh(*args, **kwargs):
        result = refresh(*args, **kwargs)
        if "waiting" in out.getvalue():
            drawn.set()
        return result

    bar.refresh = counted_refresh
    with ticking(bar, interval=0.01):
        bar.set_postfix_str("waiting", refresh=False)  # no update, no refresh: only the clock can draw it
        assert drawn.wait(timeout=60)
    after = out.getvalue()
    threading.Event().wait(0.05)
    assert out.getvalue() == after  # the clock stopped with the block
    bar.close()
    with ticking(tqdm(total=1, disable=True), interval=0.01):
        pass  # a disabled bar starts no clock
    assert "c2v-rag-bar-clock" not in {t.name for t in threading.enumerate()}
