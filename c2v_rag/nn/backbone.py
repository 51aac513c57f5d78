"""What every backbone has besides its forward: a ``config`` and its word embeddings.

A backbone is a transformers model, a peft wrapper of one (which forwards both), the plain-torch forward of
:mod:`c2v_rag.nn.plain` or the ONNX decoder of :mod:`c2v_rag.cpu.onnx_decoder`. torch declares neither, so a
module's undeclared attribute reads as a tensor or a submodule; these say what they are.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedConfig


def backbone_config(backbone: nn.Module) -> PreTrainedConfig | SimpleNamespace:
    """``backbone.config``: a transformers config, or the plain forward's namespace of the same fields."""
    return cast("PreTrainedConfig | SimpleNamespace", backbone.config)


def input_embeddings(backbone: nn.Module) -> nn.Module:
    """``backbone.get_input_embeddings()``: the module that maps token ids to word embeddings."""
    return cast(Any, backbone).get_input_embeddings()


def embedding_table(backbone: nn.Module) -> torch.Tensor:
    """The word-embedding matrix [vocab, d] of ``backbone``."""
    return cast(torch.Tensor, input_embeddings(backbone).weight)
