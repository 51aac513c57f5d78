"""Where the Contextual token sits in the decoder input, checked against independent tokenization."""

from __future__ import annotations

import pytest
import torch
from decoder_probe import captured_inputs

INSTRUCTION = "Given a scientific claim, retrieve documents that support or refute the claim"
TEXT = "Vitamin D deficiency is linked to bone loss."


@pytest.mark.parametrize("instructed", [True, False], ids=["instructed", "uninstructed"])
@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_contextual_token_sits_right_after_the_instruction(tiny_model_factory, family, instructed):
    model = tiny_model_factory(family)
    tok = model.tokenizer
    fmt = model.config.prompt_format
    instruction = INSTRUCTION if instructed else None

    # Independent expectation: the fixture's llama tokenizer prepends BOS, the qwen2 one does not.
    bos = [tok.bos_token_id] if family == "llama" else []
    expected_head = (
        bos + tok(fmt.prefix + (INSTRUCTION + "\n" if instructed else ""), add_special_tokens=False)["input_ids"]
    )
    c_pos = len(expected_head)

    seen, batch, contextual = captured_inputs(model, [TEXT], instruction)
    embeds = seen["embeds"][0]
    table = model.decoder.get_input_embeddings().weight

    assert int(batch.context_positions[0]) == c_pos
    # The C row is the projector output, not any word embedding.
    torch.testing.assert_close(embeds[c_pos], contextual[0, 0], rtol=0, atol=0)
    # Everything before C is the prefix + instruction; everything after is text + suffix + EOS.
    head_ids = batch.input_ids[0, :c_pos].tolist()
    tail_ids = batch.input_ids[0, c_pos + 1 : int(batch.last_positions[0]) + 1].tolist()
    torch.testing.assert_close(embeds[:c_pos], table[head_ids], rtol=0, atol=0)
    assert head_ids == expected_head
    assert tok.decode(head_ids, skip_special_tokens=False).removeprefix(tok.bos_token) == fmt.prefix + (
        INSTRUCTION + "\n" if instructed else ""
    )
    assert tok.decode(tail_ids, skip_special_tokens=False) == TEXT + fmt.suffix + (
        "" if fmt.suffix.endswith(tok.eos_token) else tok.eos_token
    )
    assert tail_ids[-1] == tok.eos_token_id
    assert seen["position_ids"][0].tolist() == list(range(batch.input_ids.size(1)))


def test_chatml_format_is_detected_and_eos_not_doubled(tiny_model_factory):
    model = tiny_model_factory("qwen2")
    assert model.config.prompt_format.name == "chatml"
    pieces, _ = model.prepare([TEXT], None)
    tail = pieces[0].tail
    assert tail[-1] == model.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert tail[-2] != tail[-1], "the ChatML suffix already ends in EOS; it must not be appended twice"


def test_placement_before_instruction(tiny_model_factory):
    model = tiny_model_factory("llama", placement="before_instruction")
    pieces, _ = model.prepare([TEXT], INSTRUCTION)
    tok = model.tokenizer
    assert pieces[0].head == [tok.bos_token_id]
    assert tok.decode(pieces[0].tail) == INSTRUCTION + "\n" + TEXT + tok.eos_token


def test_gpt2_without_bos_or_template(tiny_model_factory):
    model = tiny_model_factory("gpt2")
    pieces, _ = model.prepare([TEXT], None)
    assert pieces[0].head == []  # C is the very first token
    assert pieces[0].tail[-1] == model.tokenizer.eos_token_id
