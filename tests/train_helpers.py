"""Helpers shared by the training tests."""

from __future__ import annotations

import torch


def disable_dropout(model: torch.nn.Module) -> torch.nn.Module:
    """Zero every dropout (BERT keeps 0.1 in train mode) so gradient comparisons are deterministic."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if hasattr(module, "dropout_prob"):
            module.dropout_prob = 0.0
        if hasattr(module, "attention_dropout") and isinstance(module.attention_dropout, float):
            module.attention_dropout = 0.0
    return model


def no_dropout_callback(trainer, step: int) -> None:
    disable_dropout(trainer.model)
