"""Setting a backbone's dropout on attention probabilities for a training run.

PyTorch's fused attention kernels on CPU compute without dropout on the attention probabilities. A BERT-style
encoder trains with 0.1 there, so every attention layer falls back to the plain computation, which holds each
layer's [batch, heads, T, T] probabilities and their dropout mask for the backward pass. At 0 the fused kernel
runs, in a fraction of the memory and time (docs/adapt.md, "What it costs").
"""

from __future__ import annotations

import logging

import torch

logger = logging.getLogger(__name__)


def attention_dropout_modules(module: torch.nn.Module) -> list[tuple[torch.nn.Module, str]]:
    """(attention module, the attribute that holds its dropout on the probabilities) for each attention layer of
    ``module``: an ``nn.Dropout`` named ``dropout`` (BERT, RoBERTa, MPNet, DistilBERT and their copies) or a
    float ``attention_dropout`` (ModernBERT, Llama and most decoders)."""
    found = []
    for sub in module.modules():
        if not type(sub).__name__.endswith("Attention"):
            continue
        if isinstance(getattr(sub, "attention_dropout", None), float):
            found.append((sub, "attention_dropout"))
        elif isinstance(getattr(sub, "dropout", None), torch.nn.Dropout):
            found.append((sub, "dropout"))
    return found


def set_attention_dropout(module: torch.nn.Module, p: float, *, role: str) -> int:
    """Set the dropout on attention probabilities of every attention layer in ``module`` to ``p``; returns how many
    layers were set. Only this run's modules change: a saved variant keeps its base model's config, and inference
    runs without dropout anyway. A backbone whose attention this does not recognise keeps its own, said once."""
    layers = attention_dropout_modules(module)
    if not layers:
        logger.warning(
            "the %s's attention layers hold no dropout this run knows how to set; it trains with its own", role
        )
        return 0
    before = set()
    for sub, name in layers:
        value = getattr(sub, name)
        if isinstance(value, torch.nn.Dropout):
            before.add(value.p)
            value.p = p
        else:
            before.add(value)
            setattr(sub, name, p)
    logger.info(
        "the %s's dropout on attention probabilities: %s -> %g in %d layers",
        role,
        "/".join(f"{v:g}" for v in sorted(before)),
        p,
        len(layers),
    )
    return len(layers)
