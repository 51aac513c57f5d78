"""What encode reports as truncated: texts cut by the decoder or by the encoder, never one that fits exactly."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from tiny_corpus import CORPUS

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


def test_max_length_per_call_cuts_as_a_model_built_with_it(model, tiny_model_factory, caplog):
    # The same seed and base weights, so the same model; only its configured max_length differs.
    short = tiny_model_factory("llama", max_length=40)
    texts = [" ".join(CORPUS[:7]), CORPUS[0]]
    np.testing.assert_allclose(model.encode(texts, max_length=40), short.encode(texts), atol=1e-6)
    np.testing.assert_allclose(
        model.encode_queries(texts, task="SciFact", max_length=40),
        short.encode_queries(texts, task="SciFact"),
        atol=1e-6,
    )
    np.testing.assert_allclose(
        model.encode(texts, max_length=40, long_texts="chunk"), short.encode(texts, long_texts="chunk"), atol=1e-6
    )
    # The premise: at its own 128 tokens the model reads more of the long text.
    assert not np.allclose(model.encode(texts[0]), short.encode(texts[0]), atol=1e-3)
    # The cut is the call's: the model's own bound is as it was, and the warning names the call's.
    assert (model.max_seq_length, model.config.max_length, model.prompt_builder.max_length) == (128, 128, 128)
    model.truncation_warned = False
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="c2v_rag"):
        model.encode(texts, max_length=40)
    (warning,) = warnings_of(caplog)
    assert warning.startswith("1 of 2 texts exceeded max_length=40 decoder tokens and were truncated")


@pytest.mark.parametrize("bad", [3, 0, 2.5, True, "64"])
def test_a_max_length_that_leaves_no_sequence_is_refused(model, bad):
    with pytest.raises(ValueError, match="max_length must be an int of at least 4 tokens"):
        model.encode("a text", max_length=bad)
