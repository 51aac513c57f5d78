"""Loading a backbone into the plain-torch forward of :mod:`c2v_rag.nn.plain`, where that forward is exact.

:func:`load_plain_backbone` reads a local Hugging Face folder (``config.json`` and safetensors: a base model, or
an entry of the merged-backbone cache) straight into :class:`~c2v_rag.nn.plain.PlainLlama` or
:class:`~c2v_rag.nn.plain.PlainBert`, without importing transformers. It returns None, and the caller loads the
transformers model as before, whenever the config asks for anything those modules do not compute exactly as
transformers does: another architecture, rope scaling, an activation other than the one they implement, extra
or missing weights. So the embedding never depends on which path loaded the model.

``C2V_RAG_PLAIN_FORWARD=0`` turns the plain forward off.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from c2v_rag.core.cache import switched_off
from c2v_rag.nn.plain import PlainBackbone, PlainBert, PlainLlama

logger = logging.getLogger(__name__)

ENV_SWITCH = "C2V_RAG_PLAIN_FORWARD"

# Checkpoint entries transformers' LlamaModel/BertModel load without using them at inference: a causal LM's
# head (tied to the embeddings when absent), BERT's pooler and its saved position ids (a buffer rebuilt as
# arange). Any other unknown entry means another model than these modules compute, and so no plain forward.
_IGNORED = ("lm_head.weight", "pooler.dense.weight", "pooler.dense.bias", "embeddings.position_ids")
# The names older BERT checkpoints give a LayerNorm's parameters, which transformers renames as it loads them; some
# transformers versions (5.2) write them back under these names when they save a model.
_LEGACY_NAMES = {"LayerNorm.gamma": "LayerNorm.weight", "LayerNorm.beta": "LayerNorm.bias"}


def plain_forward_enabled() -> bool:
    """False when ``$C2V_RAG_PLAIN_FORWARD`` turns the plain forward off (``0``, ``off``, ``false``, ``no``)."""
    return not switched_off(ENV_SWITCH)


def load_plain_backbone(location: str | Path, *, dtype: torch.dtype) -> PlainBackbone | None:
    """The backbone in ``location`` as a plain-torch module in ``dtype`` (eval mode), or None where it has none.

    None means "load it with transformers": the folder is not local safetensors, or its config asks for
    something the plain forward does not reproduce exactly (the reason goes to the debug log).
    """
    root = Path(location)
    try:
        raw = json.loads((root / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        logger.debug("no plain forward for %s: config.json unreadable (%s)", root, err)
        return None
    files = _weight_files(root)
    if files is None:
        logger.debug("no plain forward for %s: no model.safetensors or safetensors index", root)
        return None
    model_type = raw.get("model_type")
    config, reason = (
        _llama_config(raw) if model_type == "llama" else _bert_config(raw) if model_type == "bert" else (None, "")
    )
    if config is None:
        logger.debug("no plain forward for %s (%s): %s", root, model_type, reason or "another architecture")
        return None
    module: PlainBackbone = PlainLlama(config, str(root)) if model_type == "llama" else PlainBert(config, str(root))
    if not _load_weights(module, files, dtype, prefix="model." if model_type == "llama" else "bert."):
        return None
    return module.eval()


def _weight_files(root: Path) -> list[Path] | None:
    # transformers' choice with use_safetensors=True: the single file, else the files the index names
    single = root / "model.safetensors"
    if single.is_file():
        return [single]
    index = root / "model.safetensors.index.json"
    if not index.is_file():
        return None
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    except (OSError, ValueError, KeyError):
        return None
    return [root / name for name in sorted(set(weight_map.values()))]


def _llama_config(raw: dict[str, Any]) -> tuple[SimpleNamespace | None, str]:
    """LlamaConfig's fields and defaults, or the reason the plain forward does not apply."""
    rope = raw.get("rope_parameters") or {}
    if not rope:  # a config written before rope_parameters: rope_theta, and rope_scaling that must be empty
        if raw.get("rope_scaling"):
            return None, f"rope scaling {raw['rope_scaling']!r}"
        rope = {"rope_type": "default", "rope_theta": raw.get("rope_theta", 10000.0)}
    if rope.get("rope_type", "default") != "default" or set(rope) - {"rope_type", "rope_theta"}:
        return None, f"rope parameters {rope!r}"
    if raw.get("hidden_act", "silu") != "silu":
        return None, f"activation {raw.get('hidden_act')!r}"
    if raw.get("pretraining_tp", 1) != 1:
        return None, "pretraining_tp != 1"
    if raw.get("is_causal") is False:
        return None, "bidirectional attention"
    heads = raw.get("num_attention_heads", 32)
    hidden = raw.get("hidden_size", 4096)
    c = SimpleNamespace(
        model_type="llama",
        vocab_size=raw.get("vocab_size", 32000),
        hidden_size=hidden,
        intermediate_size=raw.get("intermediate_size", 11008),
        num_hidden_layers=raw.get("num_hidden_layers", 32),
        num_attention_heads=heads,
        num_key_value_heads=raw.get("num_key_value_heads") or heads,
        head_dim=raw.get("head_dim") or hidden // heads,
        rms_norm_eps=raw.get("rms_norm_eps", 1e-6),
        rope_theta=rope["rope_theta"],
        attention_bias=bool(raw.get("attention_bias", False)),
        mlp_bias=bool(raw.get("mlp_bias", False)),
        max_position_embeddings=raw.get("max_position_embeddings", 2048),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),  # LlamaConfig's default
    )
    return c, ""


def _bert_config(raw: dict[str, Any]) -> tuple[SimpleNamespace | None, str]:
    """BertConfig's fields and defaults, or the reason the plain forward does not apply."""
    if raw.get("position_embedding_type", "absolute") != "absolute":
        return None, f"position embeddings {raw.get('position_embedding_type')!r}"
    if raw.get("hidden_act", "gelu") != "gelu":
        return None, f"activation {raw.get('hidden_act')!r}"
    if raw.get("is_decoder") or raw.get("add_cross_attention"):
        return None, "a BERT decoder"
    if raw.get("chunk_size_feed_forward", 0):
        return None, "chunked feed-forward"
    hidden, heads = raw.get("hidden_size", 768), raw.get("num_attention_heads", 12)
    if hidden % heads:
        return None, f"hidden size {hidden} not a multiple of {heads} heads"
    c = SimpleNamespace(
        model_type="bert",
        vocab_size=raw.get("vocab_size", 30522),
        hidden_size=hidden,
        num_hidden_layers=raw.get("num_hidden_layers", 12),
        num_attention_heads=heads,
        intermediate_size=raw.get("intermediate_size", 3072),
        max_position_embeddings=raw.get("max_position_embeddings", 512),
        type_vocab_size=raw.get("type_vocab_size", 2),
        layer_norm_eps=raw.get("layer_norm_eps", 1e-12),
    )
    return c, ""


def _load_weights(module: PlainBackbone, files: list[Path], dtype: torch.dtype, *, prefix: str) -> bool:
    """Fill ``module`` from the safetensors ``files`` cast to ``dtype``; False unless every parameter is in them and
    nothing else is (a causal LM's ``model.`` prefix, BERT's ``bert.`` one, and :data:`_IGNORED` aside)."""
    from safetensors.torch import load_file

    state: dict[str, torch.Tensor] = {}
    for file in files:
        try:
            tensors = load_file(str(file))
        except Exception as err:  # safetensors raises several types for a truncated or garbled file
            logger.debug("no plain forward: %s unreadable (%s)", file, err)
            return False
        for name, tensor in tensors.items():
            state[_current_name(name[len(prefix) :] if name.startswith(prefix) else name)] = tensor
    for name in _IGNORED:
        state.pop(name, None)
    expected = module.state_dict()
    if set(state) != set(expected):
        logger.debug(
            "no plain forward for %s: weights missing %s, unexpected %s",
            module.source,
            sorted(set(expected) - set(state))[:5],
            sorted(set(state) - set(expected))[:5],
        )
        return False
    for name, tensor in state.items():
        if tensor.shape != expected[name].shape:
            logger.debug("no plain forward for %s: %s has shape %s", module.source, name, tuple(tensor.shape))
            return False
    # The same cast as transformers' loading (a plain .to), so bf16 weights round the same way
    module.load_state_dict({name: tensor.to(dtype) for name, tensor in state.items()}, assign=True)
    # assign=True keeps the loaded tensors; the rotary frequencies stay the float32 buffer built in __init__
    return True


def _current_name(name: str) -> str:
    """``name`` as transformers names the parameter once loaded (``LayerNorm.gamma`` is ``LayerNorm.weight``)."""
    for legacy, current in _LEGACY_NAMES.items():
        if name.endswith(legacy):
            return name[: -len(legacy)] + current
    return name
