"""The decoder's language-modelling head, for what predicts tokens: reranking by query likelihood, MNTP and
Anchor reconstruction in training.

Variants load the bare backbone (``AutoModel``), without its head: embedding never needs it. The head's weight
is either the input embedding table (tied, as in SmolLM2, Qwen2-0.5B, Gemma) or the ``lm_head.weight`` tensor of
the base checkpoint, read from its safetensors files.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from c2v_rag.core.errors import LMHeadNotFoundError
from c2v_rag.hub.sources import resolve_reference
from c2v_rag.nn.attention import base_model
from c2v_rag.nn.backbone import embedding_table

_HEAD_KEYS = ("lm_head.weight", "model.lm_head.weight", "output.weight")


def _from_checkpoint(directory: Path) -> torch.Tensor | None:
    from safetensors import safe_open

    index = directory / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        files = {weight_map[k] for k in _HEAD_KEYS if k in weight_map}
    else:
        files = {p.name for p in directory.glob("*.safetensors")}
    for name in sorted(files):
        with safe_open(str(directory / name), framework="pt") as handle:
            for key in _HEAD_KEYS:
                if key in handle.keys():
                    return handle.get_tensor(key)
    return None


def lm_head_weight(decoder: nn.Module, reference: str, revision: str | None = None) -> torch.Tensor:
    """The frozen output-projection weight [vocab, d] of ``decoder`` (base model ``reference``)."""
    base = base_model(decoder)
    embedding = embedding_table(base)
    if getattr(base.config, "tie_word_embeddings", False):
        return embedding.detach()
    source = resolve_reference(reference, revision)
    weight = _from_checkpoint(Path(source.location)) if source.is_local else None
    if weight is None:
        where = source.location if source.is_local else f"hub id {reference!r}"
        raise LMHeadNotFoundError(
            f"the decoder {reference!r} has untied output embeddings and no lm_head.weight was found in {where}. "
            "Reranking, MNTP and Anchor reconstruction need the LM head: pass a local checkpoint directory saved "
            "with its head (AutoModelForCausalLM.save_pretrained)."
        )
    if weight.shape != embedding.shape:
        raise ValueError(
            f"lm_head.weight of {reference!r} has shape {tuple(weight.shape)}, expected {tuple(embedding.shape)}"
        )
    return weight.to(device=embedding.device, dtype=embedding.dtype)
