"""The decoder a reranker scores with, and its language-model head.

``decoder="base"`` reads the variant's base decoder (``config.decoder``: SmolLM2-135M-Instruct for the preset)
without its adapters: the embedding training tunes the decoder to make vectors, not text, and the base's
likelihoods rank better (``bench/rerank.py``, docs/ingest-and-search.md). ``decoder="variant"`` scores with the
variant's own decoder, adapters merged in (a loaded :class:`~c2v_rag.Causal2Vec`'s ``decoder``), for variants
whose training kept it a language model. Either way the head is the base's output embedding matrix: the input
embeddings where the base ties them (SmolLM2, most small models), else its ``lm_head.weight``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch

from c2v_rag.core.config import Causal2VecConfig, PromptFormat
from c2v_rag.hub.lm_head import lm_head_weight
from c2v_rag.rerank.likelihood import QueryLikelihood

if TYPE_CHECKING:
    from c2v_rag.hub.sources import ResolvedSource
    from c2v_rag.model.causal2vec import Causal2Vec

DecoderChoice = Literal["base", "variant"]


@dataclass
class ScoringModel:
    """What a reranker needs of a variant: the scorer, the decoder's tokenizer, and its prompt format."""

    likelihood: QueryLikelihood
    tokenizer: Any
    prompt_format: PromptFormat
    config: Causal2VecConfig


def load_scoring_model(
    model: str | Path | Causal2Vec | None,
    decoder: DecoderChoice,
    device: str | torch.device | None,
    dtype: str | torch.dtype | None,
) -> ScoringModel:
    """The scorer for ``model`` (a preset name, a variant directory, None for the default preset, or a loaded
    :class:`~c2v_rag.Causal2Vec`)."""
    from c2v_rag.core.config import read_config
    from c2v_rag.encode.prompting import detect_prompt_format
    from c2v_rag.hub.fast_tokenizer import load_fast_tokenizer
    from c2v_rag.hub.presets import resolve_variant_path
    from c2v_rag.hub.sources import resolve_reference
    from c2v_rag.model.causal2vec import Causal2Vec

    if decoder not in ("base", "variant"):
        raise ValueError(f"decoder must be 'base' or 'variant', got {decoder!r}")
    loaded = model if isinstance(model, Causal2Vec) else None
    named = None if isinstance(model, Causal2Vec) else model
    if named is not None and not isinstance(named, (str, Path)):
        raise TypeError(f"model must be a preset name, a variant directory or a Causal2Vec, got {type(model).__name__}")
    config = loaded.config if loaded is not None else read_config(resolve_variant_path(named))
    source = resolve_reference(config.decoder, config.decoder_revision)
    # The loaded model's tokenizer, or the same kind (tokenizers alone, transformers where that differs).
    tokenizer = loaded.tokenizer if loaded is not None else load_fast_tokenizer(source)
    # A config read from disk may still say "auto": the chat format then comes from the tokenizer, as a model's does.
    prompt_format = (
        config.prompt_format if isinstance(config.prompt_format, PromptFormat) else detect_prompt_format(tokenizer)
    )
    if decoder == "variant":
        if config.attention != "causal":
            raise ValueError(
                f"this variant's decoder attends {config.attention!r}ly, so it gives no next-token likelihoods: "
                "rerank with decoder='base'"
            )
        if loaded is None:
            loaded = Causal2Vec.from_pretrained(named, device=device, dtype=dtype)
        if loaded.quantization != "none":
            raise ValueError(
                f"the model is quantized ({loaded.quantization}), and its int8 decoder computes no language-model "
                "states: rerank with decoder='base', or pass the model name rather than the loaded int8 model"
            )
        backbone = loaded.decoder
    else:
        target, torch_dtype = base_device_dtype(config, loaded, device, dtype)
        backbone = _load_base(source, torch_dtype, target)
    head = lm_head_weight(backbone, config.decoder, config.decoder_revision)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return ScoringModel(QueryLikelihood(backbone, head.detach(), int(pad_id or 0)), tokenizer, prompt_format, config)


def base_device_dtype(
    config: Causal2VecConfig,
    loaded: Causal2Vec | None,
    device: str | torch.device | None,
    dtype: str | torch.dtype | None,
) -> tuple[torch.device, torch.dtype]:
    """Where and in what the base decoder scores: ``device``, else a loaded model's; ``dtype``, else a loaded
    float model's ("auto" would give bf16 on some CPUs to a float32 model), else the variant's, resolved."""
    from c2v_rag.core.devices import resolve_device, resolve_dtype

    target = loaded.device if loaded is not None and device is None else resolve_device(device)
    if dtype is None and loaded is not None and loaded.quantization == "none":
        return target, loaded.dtype
    return target, resolve_dtype(dtype if dtype is not None else config.dtype, target)


def _load_base(source: ResolvedSource, dtype: torch.dtype, device: torch.device) -> torch.nn.Module:
    """The base decoder: its plain-torch forward on a CPU where it is exact (:mod:`c2v_rag.nn.plain`), else
    transformers' model."""
    from c2v_rag.hub.plain_weights import load_plain_backbone, plain_forward_enabled
    from c2v_rag.hub.sources import load_backbone

    if device.type == "cpu" and source.is_local and plain_forward_enabled():
        plain = load_plain_backbone(source.location, dtype=dtype)
        if plain is not None:
            return plain.to(device)
    return load_backbone(source, dtype=dtype, attn_implementation="sdpa").to(device)
