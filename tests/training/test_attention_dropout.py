"""training.encoder_attention_dropout: the encoder's dropout on attention probabilities while training."""

from __future__ import annotations

import logging

import pytest
import torch

from c2v_rag.training import TrainConfig, build_model
from c2v_rag.training.attention_dropout import attention_dropout_modules, set_attention_dropout


@pytest.fixture(scope="module")
def attention_only_dropout_bert(tiny_dirs, tmp_path_factory):
    """The tiny encoder with dropout on attention probabilities only (0.5), none on hidden states: whatever varies
    between two forward passes in train mode comes from the attention dropout."""
    from transformers import AutoModel, AutoTokenizer, BertConfig

    config = BertConfig.from_pretrained(tiny_dirs["bert"], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.5)
    model = AutoModel.from_pretrained(tiny_dirs["bert"], config=config)
    folder = tmp_path_factory.mktemp("bert_attention_dropout")
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_dirs["bert"]).save_pretrained(folder)
    return folder


def _two_training_passes(model) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The encoder's last hidden states for one batch: twice in train mode (as a step runs it), once in eval."""
    ids = torch.tensor([[2, 11, 12, 13, 14, 3], [2, 15, 16, 3, 0, 0]])
    batch = {"input_ids": ids, "attention_mask": (ids != 0).long()}
    runs = [model.encoder(**batch).last_hidden_state for _ in range(2)]
    model.encoder.eval()
    return runs[0], runs[1], model.encoder(**batch).last_hidden_state


@pytest.mark.parametrize("dropout", [None, 0.0])
def test_the_setting_decides_the_encoders_attention_dropout(tiny_recipe, attention_only_dropout_bert, dropout):
    raw = tiny_recipe(encoder_attention_dropout=dropout)
    raw["model"]["encoder"] = str(attention_only_dropout_bert)
    model = build_model(TrainConfig.model_validate(raw), torch.device("cpu"), "fp32")
    assert model.encoder.training
    first, second, evaluated = _two_training_passes(model)
    if dropout is None:  # the base model's 0.5: each training pass drops other probabilities
        assert not torch.allclose(first, second)
    else:  # nothing random is left: training passes compute what inference does
        torch.testing.assert_close(first, second)
        torch.testing.assert_close(first, evaluated, rtol=1e-5, atol=1e-5)


def test_a_frozen_encoder_is_left_alone(tiny_recipe, attention_only_dropout_bert):
    raw = tiny_recipe(encoder_attention_dropout=0.0)
    raw["model"]["encoder"] = str(attention_only_dropout_bert)
    raw["encoder_lora"]["enabled"] = False
    model = build_model(TrainConfig.model_validate(raw), torch.device("cpu"), "fp32")
    layers = attention_dropout_modules(model.encoder)
    assert layers and all(getattr(sub, name).p == 0.5 for sub, name in layers)


def test_the_kinds_of_attention_dropout_it_knows(tiny_dirs):
    from transformers import AutoModel

    bert = AutoModel.from_pretrained(tiny_dirs["bert"])
    llama = AutoModel.from_pretrained(tiny_dirs["llama"])
    assert set_attention_dropout(bert, 0.25, role="encoder") == bert.config.num_hidden_layers
    assert {getattr(sub, name).p for sub, name in attention_dropout_modules(bert)} == {0.25}
    assert set_attention_dropout(llama, 0.25, role="decoder") == llama.config.num_hidden_layers
    assert {getattr(sub, name) for sub, name in attention_dropout_modules(llama)} == {0.25}


def test_a_backbone_it_does_not_know_keeps_its_own_and_says_so(caplog):
    module = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.1))
    with caplog.at_level(logging.WARNING, logger="c2v_rag.training.attention_dropout"):
        assert set_attention_dropout(module, 0.0, role="encoder") == 0
    assert module[1].p == 0.1
    assert "trains with its own" in caplog.text
