"""The encoder runs ahead of the decoder, in batches planned by its own lengths and budget: with the decoder reading
a capped number of tokens (an ingest's ``decoder_max_length``), the decoder's batches group texts of one decoder
length whatever their encoder lengths, and the encoder inside them padded much. The vectors stay those of each text
encoded alone with the encoder in the same batch as its decoder."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from rag_helpers import make_text

from c2v_rag.encode.batching import plan_batches
from c2v_rag.encode.loop import ENCODER_AHEAD_TEXTS, ENCODER_WORK_SHARE, embed_prepared, observing, prepare_texts


@pytest.fixture(scope="module")
def model(tiny_model_factory):
    return tiny_model_factory(
        "llama", max_length=128, normalize_parts=True, encoder_share=0.5, matryoshka_dims=[16, 56]
    )


def _encoder_calls(model, run):
    """Run ``run()`` and return the [rows, padded length] of every encoder forward it made."""
    shapes: list[tuple[int, int]] = []
    handle = model.encoder.register_forward_hook(
        lambda _m, _a, kw, _o: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True
    )
    try:
        run()
    finally:
        handle.remove()
    return shapes


def test_the_encoder_pads_by_its_own_lengths_where_the_decoder_cap_ties_them(model):
    # Texts of very different lengths, every one past a 12-token decoder cap: one decoder length for all.
    texts = [make_text(i, sentences=1 + (i * 7) % 9) for i in range(48)]
    prepared = prepare_texts(model, texts, None, max_length=12)
    assert len(set(prepared.lengths)) == 1
    out = np.zeros((len(texts), model.embedding_dim), dtype=np.float32)
    with torch.inference_mode():
        shapes = _encoder_calls(
            model, lambda: embed_prepared(model, prepared, out, max_tokens=96, batch_size=256, encoder_max_tokens=256)
        )
    encoder_lengths = [len(ids) for ids in prepared.encoder_ids]
    assert sum(rows for rows, _ in shapes) == len(texts)  # each text through the encoder once
    assert all(rows * length <= max(256, max(encoder_lengths)) for rows, length in shapes)
    # Inside the decoder's batches (8 texts of 12 tokens, in input order among equals) the encoder would pad more.
    in_decoder_batches = sum(
        len(batch) * max(encoder_lengths[i] for i in batch)
        for batch in plan_batches(prepared.lengths, max_tokens=96, max_batch_size=256)
    )
    assert sum(rows * length for rows, length in shapes) < 0.8 * in_decoder_batches


def test_vectors_equal_each_text_alone_with_its_encoder_in_the_batch(model):
    texts = [make_text(i, sentences=1 + i % 6) for i in range(20)]
    prepared = prepare_texts(model, texts, None, max_length=24)
    out = np.zeros((len(texts), model.embedding_dim), dtype=np.float32)
    with torch.inference_mode():
        embed_prepared(model, prepared, out, max_tokens=128, batch_size=256, encoder_max_tokens=64)
        # the forward as training runs it: the encoder inside the decoder's batch, one text at a time
        alone = np.concatenate(
            [
                model(model.collate([prepared.pieces[i]], [prepared.encoder_ids[i]])).float().numpy()
                for i in range(len(texts))
            ]
        )
    np.testing.assert_allclose(out, alone, atol=1e-5)
    for prefix in (16, 56):  # inside the encoder's part (no decoder), and one that needs the decoder
        cut = model.encode_documents(texts, max_length=24, truncate_dim=prefix, normalize_embeddings=False)
        np.testing.assert_allclose(cut, alone[:, :prefix], atol=1e-5)


def test_progress_comes_after_a_slice_of_encoder_work_not_the_whole_window(model):
    # 700 texts in one window: the encoder runs ahead a slice (ENCODER_AHEAD_TEXTS) at a time, so the first decoder
    # batch reports after one slice's encoder work, and every text still goes through the encoder once.
    texts = [make_text(i, sentences=1 + i % 5) for i in range(700)]
    prepared = prepare_texts(model, texts, None, max_length=24)
    out = np.zeros((len(texts), model.embedding_dim), dtype=np.float32)
    encoded_before_report: list[int] = []
    shapes: list[tuple[int, int]] = []

    def on_batch(_texts: int, _padded: int) -> None:
        encoded_before_report.append(sum(rows for rows, _ in shapes))

    handle = model.encoder.register_forward_hook(
        lambda _m, _a, kw, _o: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True
    )
    try:
        with torch.inference_mode():
            embed_prepared(model, prepared, out, max_tokens=256, batch_size=64, on_batch=on_batch)
    finally:
        handle.remove()
    assert sum(rows for rows, _ in shapes) == len(texts)
    # one slice: ENCODER_AHEAD_TEXTS texts, and at most one decoder batch (64) over
    assert ENCODER_AHEAD_TEXTS <= encoded_before_report[0] < ENCODER_AHEAD_TEXTS + 64
    assert encoded_before_report[-1] == len(texts)
    assert len(set(encoded_before_report)) >= len(texts) // ENCODER_AHEAD_TEXTS  # it ran again between reports


def test_the_work_reported_moves_while_the_encoder_runs_ahead(model, tiny_model_factory):
    """An ingest's bar follows the work its observer is told of. It used to stand still while the encoder ran ahead
    over a slice (seconds per 256 full chunks on a CPU): now each encoder batch credits ENCODER_WORK_SHARE of its
    texts' characters, the decoder the rest, so the work reported never goes back and ends at 1."""
    texts = [make_text(i, sentences=1 + i % 5) for i in range(40)]  # one slice: the encoder runs over all first
    encoder_rows: list[int] = []
    reports: list[tuple[int, float, int]] = []  # (texts done, work, texts the encoder had read by then)

    class Observer:
        def encoded(self, done: int, of: int, work: float) -> None:
            assert of == len(texts)
            reports.append((done, work, sum(encoder_rows)))

        def truncated(self, cut) -> None:
            pass

    handle = model.encoder.register_forward_hook(
        lambda _m, _a, kw, _o: encoder_rows.append(kw["input_ids"].shape[0]), with_kwargs=True
    )
    try:
        with observing(Observer()):
            model.encode(texts, max_tokens_per_batch=128, show_progress_bar=False)
    finally:
        handle.remove()
    ahead = [(work, read) for done, work, read in reports if done == 0]
    assert len(ahead) >= 2, reports  # several encoder batches, each reported before any text is done
    # independent of the loop's bookkeeping: the characters of the texts the encoder had read, from the hook
    total = sum(len(t) for t in texts)
    longest_first = sorted((len(t) for t in texts), reverse=True)
    for work, read in ahead:  # credited by count, the texts' characters taken longest first as the loop sorts them
        assert work == pytest.approx(ENCODER_WORK_SHARE * sum(longest_first[:read]) / total, abs=1e-4)
    assert ahead[-1] == (pytest.approx(ENCODER_WORK_SHARE, abs=1e-4), len(texts))  # the whole pass, no text done
    assert [w for _, w, _ in reports] == sorted(w for _, w, _ in reports)  # never backwards
    assert reports[-1][:2] == (len(texts), pytest.approx(1.0))

    # A model without a Contextual token runs no encoder: the decoder's batches carry all the work.
    plain = tiny_model_factory("llama", max_length=128, num_contextual_tokens=0, representation="last_token")
    reports.clear()
    with observing(Observer()):
        plain.encode(texts, max_tokens_per_batch=128, show_progress_bar=False)
    assert all(done > 0 for done, _, _ in reports) and reports[-1][:2] == (len(texts), pytest.approx(1.0))
