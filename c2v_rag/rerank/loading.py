"""The decoder a reranker scores with, and its language-model head.

``decoder="base"`` reads the variant's base decoder (``config.decoder``: SmolLM2-135M-Instruct for the preset)
without its adapters: the embedding training tunes the decoder to make vectors, not text, and the base's
likelihoods rank better (``bench/rerank.py``, docs/ingest-and-search.md). ``decoder="variant"`` scores with the
variant's own decoder, adapters merged in (a loaded :class:`~c2v_rag.Causal2Vec`'s ``decoder``), for variants
whose training kept it a language model. Either way the head is the base's output embedding matrix: the input
embeddings where the base ties them (SmolLM2, most small models), else its ``lm_head.weight``.

``quantize`` (:func:`scoring_plan`): the base decoder's linear layers in int8 on a CPU (:mod:`c2v_rag.rerank.int8`),
where new vectors would be int8, or the float decoder in its dtype.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch

from c2v_rag.core.config import Causal2VecConfig, PromptFormat
from c2v_rag.hub.lm_head import lm_head_weight
from c2v_rag.rerank.likelihood import QueryLikelihood
from c2v_rag.rerank.templates import DEFAULT_TEMPLATE, PairBuilder, RerankTemplate, get_template

if TYPE_CHECKING:
    from c2v_rag.hub.sources import ResolvedSource
    from c2v_rag.model.causal2vec import Causal2Vec

logger = logging.getLogger(__name__)

DecoderChoice = Literal["base", "variant"]
QuantizeChoice = Literal["auto", "int8", "none"]
QUANTIZE_CHOICES: tuple[str, ...] = ("auto", "int8", "none")


@dataclass
class ScoringModel:
    """What a reranker needs of a variant: the scorer, the decoder's tokenizer, and its prompt format."""

    likelihood: QueryLikelihood
    tokenizer: Any
    prompt_format: PromptFormat
    config: Causal2VecConfig


@dataclass(frozen=True)
class ScoringPlan:
    """Where and how the reranker's decoder computes: on ``device``, in int8 (:mod:`c2v_rag.rerank.int8`) or in
    the float ``dtype``."""

    device: torch.device
    dtype: torch.dtype
    int8: bool

    @property
    def precision(self) -> str:
        """``"int8"``, else the float dtype's name (``"bfloat16"``, ``"float32"``...)."""
        from c2v_rag.core.devices import dtype_name

        return "int8" if self.int8 else dtype_name(self.dtype)


def scoring_plan(
    config: Causal2VecConfig,
    loaded: Causal2Vec | None,
    decoder: DecoderChoice,
    device: str | torch.device | None,
    dtype: str | torch.dtype | None,
    quantize: str | None,
) -> ScoringPlan:
    """How the reranker of ``config`` (or of the ``loaded`` model) scores.

    ``quantize="int8"``: the base decoder in int8, on a CPU. ``"auto"``: int8 where new vectors would be int8
    (:func:`~c2v_rag.core.devices.default_quantize`: a CPU class where int8 was measured within its quality bound
    and faster than float, with the ``int8`` extra installed; ``$C2V_RAG_QUANTIZE=none`` keeps float), unless
    ``dtype`` was given or the ``variant`` decoder scores. A loaded float model does not keep the base decoder in
    float: its float is for its vectors (a server's and the frameworks' models stay float as sentence-transformers'
    do), and the reranker's precision changes no vector. None or ``"none"``: the float decoder. The float dtype:
    ``dtype``, else a loaded float model's ("auto" would give bf16 on some CPUs to a float32 model), else the
    variant's, resolved.
    """
    from c2v_rag.core.devices import default_quantize, resolve_device, resolve_dtype, resolve_quantize

    if quantize is not None and quantize not in QUANTIZE_CHOICES:
        raise ValueError(f"quantize must be one of {', '.join(QUANTIZE_CHOICES)} or None, got {quantize!r}")
    target = loaded.device if loaded is not None and device is None else resolve_device(device)
    if quantize == "int8":
        if decoder != "base":
            raise ValueError("quantize='int8' scores with the base decoder: pass decoder='base' or quantize=None")
        if target.type != "cpu":
            raise ValueError(
                f"quantize='int8' runs on a CPU only, not on {target}: pass device='cpu', or drop quantize to score "
                "in bf16/fp16 on the GPU"
            )
        return ScoringPlan(target, torch.float32, True)
    if (
        quantize == "auto"
        and decoder == "base"
        and dtype is None
        and target.type == "cpu"
        and resolve_quantize(default_quantize(), target) != "none"
    ):
        return ScoringPlan(target, torch.float32, True)
    if dtype is None and loaded is not None and loaded.quantization == "none":
        return ScoringPlan(target, loaded.dtype, False)
    return ScoringPlan(target, resolve_dtype(dtype if dtype is not None else config.dtype, target), False)


def scoring_layout(
    config: Causal2VecConfig, loaded: Causal2Vec | None, template: RerankTemplate | None = None
) -> tuple[ResolvedSource, Any, PromptFormat, PairBuilder]:
    """The base decoder's source, the tokenizer, the prompt format and the pairs' layout a reranker of ``config``
    scores with (``template``, else the default one's)."""
    from c2v_rag.encode.prompting import detect_prompt_format
    from c2v_rag.hub.fast_tokenizer import load_fast_tokenizer
    from c2v_rag.hub.sources import resolve_reference

    source = resolve_reference(config.decoder, config.decoder_revision)
    # The loaded model's tokenizer, or the same kind (tokenizers alone, transformers where that differs).
    tokenizer = loaded.tokenizer if loaded is not None else load_fast_tokenizer(source)
    # A config read from disk may still say "auto": the chat format then comes from the tokenizer, as a model's does.
    prompt_format = (
        config.prompt_format if isinstance(config.prompt_format, PromptFormat) else detect_prompt_format(tokenizer)
    )
    # The pairs' layout: what an int8 decoder is calibrated on, and the pad id of every batch.
    pairs = PairBuilder(tokenizer, prompt_format, template or get_template(DEFAULT_TEMPLATE), config.max_length)
    return source, tokenizer, prompt_format, pairs


def int8_reranker_built(config: Causal2VecConfig) -> bool:
    """Whether the int8 base decoder a reranker of ``config`` scores with (the default template) is in this machine's
    cache already; nothing is loaded or built."""
    from c2v_rag.rerank.int8 import cached_int8_graph

    source, _, _, pairs = scoring_layout(config, None)
    return cached_int8_graph(source, pairs) is not None


def write_rerank_calibration(model: str | Path | None = None, folder: Path | None = None) -> Path:
    """Calibrate the int8 reranker of ``model``'s base decoder (a preset name or variant directory; None: the default
    preset) in float32, for the default template, and save the maxima in ``folder`` (default: the package's
    :func:`~c2v_rag.rerank.int8.shipped_folder`, what the package ships), named by the base. Every variant on that base
    then builds its first int8 reranker without calibrating. Returns the file's path."""
    from c2v_rag.core.config import read_config
    from c2v_rag.hub.presets import resolve_variant_path
    from c2v_rag.rerank.int8 import shipped_folder, write_shipped_maxima

    config = read_config(resolve_variant_path(model))
    source, _, _, pairs = scoring_layout(config, None)
    target = folder or shipped_folder()
    target.mkdir(parents=True, exist_ok=True)
    path = target / (re.sub(r"[^A-Za-z0-9._-]+", "-", str(config.decoder)).strip("-")[-80:] + ".safetensors")
    write_shipped_maxima(config, source, pairs, path)
    return path


def load_scoring_model(
    model: str | Path | Causal2Vec | None,
    decoder: DecoderChoice,
    device: str | torch.device | None,
    dtype: str | torch.dtype | None,
    quantize: str | None = "auto",
    template: RerankTemplate | None = None,
) -> ScoringModel:
    """The scorer for ``model`` (a preset name, a variant directory, None for the default preset, or a loaded
    :class:`~c2v_rag.Causal2Vec`); ``quantize`` as :func:`scoring_plan` takes it, ``template`` the layout an int8
    decoder is calibrated on (the default template's when None)."""
    from c2v_rag.core.config import read_config
    from c2v_rag.core.memory import keep_freed_memory
    from c2v_rag.hub.presets import resolve_variant_path
    from c2v_rag.model.causal2vec import Causal2Vec

    if decoder not in ("base", "variant"):
        raise ValueError(f"decoder must be 'base' or 'variant', got {decoder!r}")
    loaded = model if isinstance(model, Causal2Vec) else None
    named = None if isinstance(model, Causal2Vec) else model
    if named is not None and not isinstance(named, (str, Path)):
        raise TypeError(f"model must be a preset name, a variant directory or a Causal2Vec, got {type(model).__name__}")
    config = loaded.config if loaded is not None else read_config(resolve_variant_path(named))
    plan = scoring_plan(config, loaded, decoder, device, dtype, quantize)
    if plan.device.type == "cpu":
        keep_freed_memory()
    source, tokenizer, prompt_format, pairs = scoring_layout(config, loaded, template)
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
        head = lm_head_weight(backbone, config.decoder, config.decoder_revision)
    else:
        backbone, head = _base_scorer(config, source, pairs, plan, quantize)
    likelihood = QueryLikelihood(backbone, head.detach(), pairs.pad_id)
    return ScoringModel(likelihood, tokenizer, prompt_format, config)


def _base_scorer(
    config: Causal2VecConfig, source: ResolvedSource, pairs: PairBuilder, plan: ScoringPlan, quantize: str | None
) -> tuple[torch.nn.Module, torch.Tensor]:
    """The base decoder as ``plan`` says and its head. Under ``quantize="auto"`` an int8 graph that cannot be built
    (an export or ONNX Runtime failure on an unusual decoder) leaves the float decoder, with a warning, since int8 is
    an optimization; asked for by name, the failure is the caller's."""
    from c2v_rag.core.devices import resolve_dtype
    from c2v_rag.rerank.int8 import int8_scoring_decoder

    device, dtype = plan.device, plan.dtype
    backbone: torch.nn.Module | None = None
    if plan.int8:
        try:
            backbone = int8_scoring_decoder(config, source, pairs, lambda: _load_base(source, torch.float32, device))
        except Exception as err:  # torch.onnx and ONNX Runtime raise many kinds
            if quantize != "auto":
                raise
            logger.warning("the int8 reranker could not be built (%s), so it scores with the float decoder", err)
            dtype = resolve_dtype(config.dtype, device)
    if backbone is None:
        backbone = _load_base(source, dtype, device)
    # an int8 decoder keeps the float word embeddings, and so the head of a tied decoder
    return backbone, lm_head_weight(backbone, config.decoder, config.decoder_revision)


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
