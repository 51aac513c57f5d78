"""What encode reports as truncated: texts cut by the decoder or by the encoder, never one that fits exactly."""

from __future__ import annotations

import logging

import pytest

from c2v_rag.encode.loop import Truncation, prepare_texts


@pytest.fixture
def model(tiny_model_factory):
    # max_length is roomy for the decoder; the tiny encoder reads 64 tokens, [CLS] and [SEP] included.
    return tiny_model_factory("llama", max_length=128)


def dotted(n: int) -> str:
    """A text of ``n`` encoder tokens between [CLS] and [SEP] ("a", ".", "b", ... one token each)."""
    return " ".join(["a", ".", "b", "."] * (n // 4) + ["a", ".", "b"][: n % 4])


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_text_that_fills_the_encoders_limit_exactly_is_not_cut(model):
    limit = model.encoder_max_length
    fits, over = dotted(limit - 2), dotted(limit - 1)
    assert len(model.encoder_tokenizer(fits)["input_ids"]) == limit  # the premise
    prepared = prepare_texts(model, [fits, over], None)
    assert prepared.encoder_truncated == [False, True]
    assert prepared.decoder_truncated == [False, False]


def test_only_what_was_cut_is_warned_of(model, caplog):
    limit = model.encoder_max_length
    with caplog.at_level(logging.DEBUG, logger="c2v_rag"):
        model.encode([dotted(limit - 2), "short"])
        assert warnings_of(caplog) == []  # nothing cut: no warning at all
        model.encode([dotted(limit + 2), "short", dotted(limit + 6)])
    assert warnings_of(caplog) == [
        f"2 of 3 texts exceeded the encoder's limit of {limit} tokens and were truncated for the encoder."
    ]


def test_the_message_names_each_side_that_cut():
    both = Truncation(texts=10, decoder=1, encoder=3, max_length=512, encoder_max_length=256)
    assert both.message("chunks") == (
        "1 of 10 chunks exceeded max_length=512 decoder tokens and were truncated (the instruction and EOS are "
        "kept); 3 of 10 chunks exceeded the encoder's limit of 256 tokens and were truncated for the encoder."
    )
    assert Truncation(texts=4, max_length=512, encoder_max_length=256).message() is None
    summed = Truncation(2, 0, 1, 512, 256) + Truncation(3, 1, 0, 512, 256)
    assert (summed.texts, summed.decoder, summed.encoder) == (5, 1, 1)
