"""Switching a decoder between causal and bidirectional attention, through transformers' own hooks.

transformers 5 builds every decoder mask in ``masking_utils``: ``create_causal_mask`` (and its
sliding-window sibling) return a bidirectional mask, padding still applied, when the model config
says ``is_causal = False``. Attention kernels that get no mask (SDPA without padding, flash
attention) read ``is_causal`` off each attention module instead. Setting both is the whole
switch: no model class is copied or patched, so any transformers 5 release keeps working.
"""

from __future__ import annotations

import sys
from typing import Any, cast

from torch import nn

from c2v_rag.core.config import AttentionMode
from c2v_rag.core.errors import UnsupportedArchitectureError
from c2v_rag.nn.backbone import backbone_config

# The mask builders that honour ``config.is_causal``; a model whose module imports neither
# builds its mask some other way, and flipping the flag would silently do nothing.
_MASK_BUILDERS = ("create_causal_mask", "create_sliding_window_causal_mask")


def base_model(decoder: nn.Module) -> nn.Module:
    """The transformers model inside ``decoder``, unwrapping a peft adapter if there is one."""
    # peft wraps the backbone: PeftModel.base_model (LoraModel).model is the transformers model.
    inner = getattr(getattr(decoder, "base_model", None), "model", None)
    return inner if isinstance(inner, nn.Module) and hasattr(inner, "config") else decoder


def _attention_modules(decoder: nn.Module) -> list[nn.Module]:
    return [m for m in decoder.modules() if m is not decoder and isinstance(getattr(m, "is_causal", None), bool)]


def check_bidirectional_support(decoder: nn.Module) -> None:
    """Raise :class:`UnsupportedArchitectureError` when the mask switch would not reach ``decoder``."""
    model = base_model(decoder)
    module = sys.modules.get(type(model).__module__)
    uses_masking_utils = module is not None and any(
        getattr(getattr(module, name, None), "__module__", "") == "transformers.masking_utils"
        for name in _MASK_BUILDERS
    )
    name = type(model).__name__
    if not uses_masking_utils or not _attention_modules(model):
        raise UnsupportedArchitectureError(
            f"attention='bidirectional' is not supported for {name}: its modeling code does not build its mask "
            "with transformers.masking_utils.create_causal_mask or its attention layers have no 'is_causal' flag. "
            "Use attention='causal', or a Llama/Mistral/Qwen2/Qwen3/Gemma-family decoder."
        )


def set_attention_mode(decoder: nn.Module, mode: AttentionMode) -> None:
    """Make ``decoder`` (a transformers backbone, possibly peft-wrapped) attend causally or both ways."""
    if mode not in ("causal", "bidirectional"):
        raise ValueError(f"attention must be 'causal' or 'bidirectional', got {mode!r}")
    model = base_model(decoder)
    if mode == "bidirectional":
        check_bidirectional_support(model)
    causal = mode == "causal"
    backbone_config(model).is_causal = causal
    for module in _attention_modules(model):
        cast(Any, module).is_causal = causal


def attention_mode(decoder: nn.Module) -> AttentionMode:
    """The mode ``decoder`` currently runs in."""
    return "causal" if getattr(base_model(decoder).config, "is_causal", True) else "bidirectional"


def set_attention_dropout(decoder: nn.Module, probability: float) -> int:
    """Set the attention-probability dropout of every attention layer; return how many were set.

    Llama-family decoders have no hidden-state dropout, only ``attention_dropout`` (0 by default),
    which each attention module copied from the config at construction: the module attribute is
    the one the forward pass reads.
    """
    count = 0
    for module in base_model(decoder).modules():
        if isinstance(getattr(module, "attention_dropout", None), float):
            cast(Any, module).attention_dropout = float(probability)
            count += 1
    if count == 0:
        raise UnsupportedArchitectureError(
            f"{type(base_model(decoder)).__name__} has no 'attention_dropout' to set; SimCSE needs dropout in the "
            "decoder. Use a Llama/Mistral/Qwen2-family decoder."
        )
    return count
