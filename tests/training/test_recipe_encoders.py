"""Encoder options of the other recipes: bidirectional attention, mean/weighted-mean pooling, Echo,
several Contextual tokens. Each is checked against a computation made without the option's code."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from c2v_rag import Causal2Vec, UnsupportedArchitectureError
from c2v_rag.nn.attention import attention_mode, set_attention_mode

FAMILIES = ["llama", "mistral", "qwen2"]
TEXTS = [
    "Vitamin D deficiency is linked to bone loss.",
    "Cats and dogs are pets.",
    "The stock market fell sharply after the announcement of the new policy.",
]


def _ids(model: Causal2Vec, text: str) -> torch.Tensor:
    return torch.tensor([model.tokenizer(text, add_special_tokens=False)["input_ids"]])


def _states(model: Causal2Vec, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    with torch.no_grad():
        return model.decoder(input_ids=ids, attention_mask=mask).last_hidden_state


@pytest.mark.parametrize("family", FAMILIES)
def test_bidirectional_lets_earlier_tokens_see_later_ones(tiny_model_factory, family):
    model = tiny_model_factory(family, num_contextual_tokens=0, representation="last_token", encoder=None)
    ids = _ids(model, TEXTS[0])
    changed = ids.clone()
    changed[0, -1] = (changed[0, -1] + 7) % model.tokenizer.vocab_size
    causal_a, causal_b = _states(model, ids), _states(model, changed)
    # Causal: the first tokens cannot see the last one.
    torch.testing.assert_close(causal_a[:, :-1], causal_b[:, :-1])
    set_attention_mode(model.decoder, "bidirectional")
    assert attention_mode(model.decoder) == "bidirectional"
    # Kernels that get no mask (flash attention, SDPA without padding) read the module flag.
    flags = [m.is_causal for m in model.decoder.modules() if isinstance(getattr(m, "is_causal", None), bool)]
    assert flags and not any(flags)
    bi_a, bi_b = _states(model, ids), _states(model, changed)
    assert (bi_a[0, 0] - bi_b[0, 0]).abs().max() > 1e-4
    # Independently: a causal-mode forward given an explicit all-visible 4D mask (transformers passes
    # 4D masks through untouched) must equal the switched model.
    set_attention_mode(model.decoder, "causal")
    n = ids.size(1)
    open_mask = torch.zeros(1, 1, n, n)
    torch.testing.assert_close(_states(model, ids, open_mask), bi_a, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
def test_bidirectional_still_masks_padding(tiny_model_factory, family):
    model = tiny_model_factory(
        family, num_contextual_tokens=0, representation="mean", encoder=None, attention="bidirectional"
    )
    batched = model.encode(TEXTS, batch_size=3)
    single = np.stack([model.encode(t) for t in TEXTS])
    np.testing.assert_allclose(batched, single, atol=1e-5, rtol=1e-4)
    # And padding matters at all here: the three texts have different lengths.
    assert len({len(model.tokenizer(t)["input_ids"]) for t in TEXTS}) == 3


def test_bidirectional_in_causal2vec_changes_the_embedding(tiny_model_factory):
    causal = tiny_model_factory("llama")
    bidir = tiny_model_factory("llama", attention="bidirectional")
    a, b = causal.encode(TEXTS), bidir.encode(TEXTS)
    assert np.abs(a - b).max() > 1e-4
    np.testing.assert_allclose(
        bidir.encode(TEXTS, batch_size=3), np.stack([bidir.encode(t) for t in TEXTS]), atol=1e-5, rtol=1e-4
    )


def test_unsupported_architecture_is_named():
    class CustomDecoder(torch.nn.Module):  # builds no mask through transformers.masking_utils
        def __init__(self):
            super().__init__()
            self.config = type("Cfg", (), {})()

    with pytest.raises(UnsupportedArchitectureError, match="CustomDecoder.*attention='causal'"):
        set_attention_mode(CustomDecoder(), "bidirectional")


# ------------------------------------------------------------------------------------------------ pooling


def _manual_hidden(model: Causal2Vec, text: str, instruction: str | None) -> tuple[torch.Tensor, list[int], list[int]]:
    """Last hidden states of the full prompt, and the token ids of the prompt and of the text alone."""
    pieces, _ = model.prepare([text], instruction)
    ids = pieces[0].head + pieces[0].tail
    text_ids = model.tokenizer(text, add_special_tokens=False)["input_ids"]
    return _states(model, torch.tensor([ids]))[0], ids, text_ids


def _find(sequence: list[int], part: list[int], occurrence: int = 0) -> int:
    hits = [i for i in range(len(sequence) - len(part) + 1) if sequence[i : i + len(part)] == part]
    return hits[occurrence]


@pytest.mark.parametrize("representation", ["mean", "weighted_mean"])
def test_mean_pooling_skips_the_instruction(tiny_model_factory, representation):
    model = tiny_model_factory("qwen2", num_contextual_tokens=0, representation=representation, encoder=None)
    instruction = "Retrieve semantically similar text."
    for text in TEXTS:
        got = torch.from_numpy(model.encode(text, instruction=instruction))
        hidden, ids, text_ids = _manual_hidden(model, text, instruction)
        start = _find(ids, text_ids)
        span = hidden[start : start + len(text_ids)]
        if representation == "mean":
            want = span.mean(0)
        else:
            w = torch.arange(1, len(text_ids) + 1, dtype=span.dtype)
            want = (span * w[:, None]).sum(0) / w.sum()
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    # The instruction really is outside the pool: pooling with it gives something else.
    whole = hidden.mean(0)
    assert (whole - want).abs().max() > 1e-4


def test_mean_pooling_batched_equals_single_with_contextual_token(tiny_model_factory):
    model = tiny_model_factory("llama", representation="mean")
    np.testing.assert_allclose(
        model.encode(TEXTS, batch_size=3), np.stack([model.encode(t) for t in TEXTS]), atol=1e-5, rtol=1e-4
    )


def test_config_rejects_mean_with_echo_concat():
    from c2v_rag import Causal2VecConfig

    with pytest.raises(ValueError, match="echo=True"):
        Causal2VecConfig(decoder="x", encoder="y", echo=True, representation="concat")
    with pytest.raises(ValueError, match="exactly twice"):
        Causal2VecConfig(
            decoder="x", encoder=None, num_contextual_tokens=0, representation="mean", echo_template="{text} only once"
        )


# ------------------------------------------------------------------------------------------------ Echo


def test_echo_pools_only_the_second_copy(tiny_model_factory):
    model = tiny_model_factory("llama", num_contextual_tokens=0, representation="mean", encoder=None, echo=True)
    text = TEXTS[1]
    hidden, ids, text_ids = _manual_hidden(model, text, None)
    first, second = _find(ids, text_ids, 0), _find(ids, text_ids, 1)
    assert second > first + len(text_ids)  # two copies, with the template between them
    batch = model.collate(*model.prepare([text], None))
    pooled_positions = batch.pool_mask[0].nonzero().flatten().tolist()
    assert pooled_positions == list(range(second, second + len(text_ids)))
    got = torch.from_numpy(model.encode(text))
    torch.testing.assert_close(got, hidden[second : second + len(text_ids)].mean(0), atol=1e-5, rtol=1e-4)
    # The second copy's states differ from the first copy's: causal attention lets them see the whole text.
    assert (hidden[first : first + len(text_ids)].mean(0) - got).abs().max() > 1e-4


def test_echo_doubles_the_sequence_and_truncates_both_copies_alike(tiny_model_factory):
    plain = tiny_model_factory("llama", num_contextual_tokens=0, representation="mean", encoder=None, max_length=24)
    echo = tiny_model_factory(
        "llama", num_contextual_tokens=0, representation="mean", encoder=None, max_length=48, echo=True
    )
    long_text = TEXTS[2] * 3
    (p,) = echo.prepare([long_text], None)[0]
    assert p.length(0) <= 48 and p.truncated
    start, end = p.text_span
    copy = p.tail[start:end]
    assert _find(p.tail, copy, 0) < start  # the first copy holds the same (truncated) tokens
    short = plain.prepare([TEXTS[1]], None)[0][0]
    doubled = echo.prepare([TEXTS[1]], None)[0][0]
    assert doubled.length(0) > 2 * (short.text_span[1] - short.text_span[0])


# ------------------------------------------------------------------------------------------------ save/load


@pytest.mark.parametrize(
    "fields",
    [
        dict(num_contextual_tokens=0, representation="weighted_mean", encoder=None, attention="bidirectional"),
        dict(num_contextual_tokens=0, representation="mean", encoder=None, echo=True),
        dict(num_contextual_tokens=4, representation="concat", attention="bidirectional"),
    ],
)
def test_recipe_variants_round_trip(tiny_model_factory, tmp_path, fields):
    model = tiny_model_factory("llama", **fields)
    if model.projector is not None:
        with torch.no_grad():  # a projector that is not the seed-0 init, so loading must read the file
            for p in model.projector.parameters():
                p.add_(0.01 * torch.randn_like(p))
    model.save_pretrained(tmp_path / "v")
    loaded = Causal2Vec.from_pretrained(tmp_path / "v", device="cpu", dtype="float32")
    assert loaded.config.attention == model.config.attention
    assert attention_mode(loaded.decoder) == model.config.attention
    np.testing.assert_allclose(loaded.encode(TEXTS), model.encode(TEXTS), atol=1e-6, rtol=1e-5)
