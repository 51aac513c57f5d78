"""Vocabulary logits for objectives that predict tokens (MNTP, Anchor reconstruction), from the decoder's
language-modelling head (:func:`c2v_rag.hub.lm_head.lm_head_weight`). The head stays frozen: LoRA adapts the
layers below it, as in LLM2Vec.
"""

from __future__ import annotations

import torch

from c2v_rag.hub.lm_head import lm_head_weight

__all__ = ["lm_head_weight", "token_logits"]


def token_logits(hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Vocabulary logits of hidden states [..., d], in float32 for a stable cross-entropy."""
    return hidden.float() @ weight.float().T
