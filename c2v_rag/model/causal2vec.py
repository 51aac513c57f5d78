"""The Causal2Vec model: encoder -> projector -> Contextual token -> causal decoder -> embedding.

Follow one batch through :meth:`Causal2Vec.forward`:

1. the bidirectional encoder reads the text; the projector turns its states into C [B, n, d];
2. the decoder's word embeddings of ``head + slot + tail`` are looked up, and C is written into
   the slot by position: ``[instruction; C; text; EOS]``;
3. the decoder runs with no KV cache, causally unless ``config.attention="bidirectional"``;
4. the embedding is read off its last hidden states (``concat`` = [h_C; h_EOS]).
"""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from torch import nn

from c2v_rag.core.config import READOUT_FIELDS, Causal2VecConfig
from c2v_rag.core.devices import resolve_compute_dtype, resolve_device
from c2v_rag.core.instructions import InContextPrompt, query_prompt, resolve_instruction
from c2v_rag.encode.batching import Causal2VecBatch, collate, pad_right
from c2v_rag.encode.prompting import DecoderPieces, PromptBuilder, detect_prompt_format
from c2v_rag.hub.fast_tokenizer import load_fast_tokenizer, transformers_tokenizer
from c2v_rag.hub.plain_weights import load_plain_backbone
from c2v_rag.hub.sources import ResolvedSource, content_digests, encoder_length_limit, load_backbone, resolve_reference
from c2v_rag.nn.attention import set_attention_mode
from c2v_rag.nn.backbone import input_embeddings
from c2v_rag.nn.depth import keep_layers, narrowing, transformer_layers
from c2v_rag.nn.plain import PlainBackbone
from c2v_rag.nn.pooling import encoder_part, mean_pool, mix_encoder_vector, split_parts, weigh_parts
from c2v_rag.nn.projector import ContextualProjector
from c2v_rag.nn.readout import REPRESENTATIONS, Representation

if TYPE_CHECKING:
    from c2v_rag.cpu.int8 import Int8Graphs, ShippedMaxima

logger = logging.getLogger(__name__)

# The encoder loads, merges its adapter and trains in float32, and the projector computes in float32 always: C
# enters every decoder position, and the decoder amplifies a change of C. A loaded variant then runs the encoder
# in the decoder's bf16 or fp16 (Causal2Vec.encoder_to_decoder_dtype): it reads every token of a chunk where the
# decoder reads the first ones, so in float32 it cost a CPU with bf16 tiles as much as the decoder (docs/
# performance.md, "AMX"), while its states reach the pooling and the projector in float32 either way.
ENCODER_DTYPE = torch.float32


class Causal2Vec(nn.Module):
    """A decoder-only LLM turned into a text embedder with a Contextual token (Causal2Vec).

    Build one from a saved variant or preset with :meth:`from_pretrained`, or from base models
    with :meth:`from_components`; then call :meth:`encode_queries`, :meth:`encode_documents` or
    :meth:`encode`, which follow sentence-transformers' ``encode`` conventions.
    """

    def __init__(
        self,
        config: Causal2VecConfig,
        decoder: nn.Module,
        tokenizer,
        encoder: nn.Module | None = None,
        encoder_tokenizer=None,
        projector: ContextualProjector | None = None,
    ) -> None:
        super().__init__()
        n = config.num_contextual_tokens
        if n and (encoder is None or encoder_tokenizer is None or projector is None):
            raise ValueError("num_contextual_tokens > 0 needs an encoder, its tokenizer and a projector")
        self.config = config
        self.decoder = decoder
        # What the encode path tokenizes with: a FastTokenizer (the tokenizers library alone, same ids) when
        # from_config loaded it from files, else the tokenizer given; :attr:`tokenizer` is transformers' own.
        self.fast_tokenizer = tokenizer
        self.encoder = encoder
        self.fast_encoder_tokenizer = encoder_tokenizer
        self.projector = projector
        if isinstance(config.prompt_format, str):
            config.prompt_format = detect_prompt_format(tokenizer)
        self.prompt_builder = PromptBuilder(
            tokenizer,
            config.prompt_format,
            instruction_template=config.instruction_template,
            placement=config.placement,
            num_contextual_tokens=n,
            max_length=config.max_length,
            echo_template=config.echo_template if config.echo else None,
            keep_text=_reads_text(config),
            example_template=config.example_template,
            example_separator=config.example_separator,
        )
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.prompt_builder.eos_id
        self.encoder_max_length = config.encoder_max_length
        # Whether encode has reported truncated texts at WARNING yet: it does once per model, then at
        # DEBUG, so that an ingestion loop calling encode per batch does not flood the log (encoding.py).
        self.truncation_warned = False
        # Adapter folders this model was loaded with, by role; save_pretrained copies them when merged.
        self.adapter_sources: dict[str, Path] = {}
        # sha256 of the variant's own weight files when loaded from or saved to a directory
        # (hub.variants.weights_digest); None for base models and for weights changed since.
        self.weights_digest: str | None = None
        # and of what its adapter configs say of how their weights apply (hub.variants.adapters_digest)
        self.adapters_digest: str | None = None
        # of the base models' files it was built from, by role (hub.sources.content_digests): collections record it
        self.bases_digests: dict[str, str] | None = None
        # "none" or "int8-token-sq" (apply_quantization); collections record it.
        self.quantization: str = "none"
        if config.attention != "causal":
            set_attention_mode(decoder, config.attention)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_components(
        cls,
        decoder: str = "smollm2-135m-instruct",
        encoder: str | None = "all-minilm-l6-v2",
        *,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        quantize: str | None = None,
        seed: int = 0,
        **config_fields: Any,
    ) -> Causal2Vec:
        """Assemble an untrained variant from base models, with a freshly initialised projector.

        ``decoder``/``encoder`` are packaged aliases, local directories or hub ids. Extra keyword
        arguments are :class:`Causal2VecConfig` fields (``representation``, ``placement``,
        ``max_length``...). ``seed`` makes the projector's initialisation reproducible.
        """
        config = Causal2VecConfig(decoder=decoder, encoder=encoder, **config_fields)
        return cls.from_config(config, device=device, dtype=dtype, quantize=quantize, seed=seed)

    @classmethod
    def from_config(
        cls,
        config: Causal2VecConfig,
        *,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        quantize: str | None = None,
        seed: int = 0,
        backbones: Mapping[str, Path] | None = None,
        plain: Collection[str] = (),
    ) -> Causal2Vec:
        """Load the base models named by ``config`` and build a model with a fresh projector.

        ``quantize`` is :meth:`from_pretrained`'s. ``backbones`` maps ``"decoder"``/``"encoder"`` to a
        directory to read that backbone's weights from instead of its base model's (a copy with its adapter
        merged in, :mod:`c2v_rag.hub.merged`); the tokenizers and the config's references stay the base's.
        ``plain`` names the roles (``"decoder"``, ``"encoder"``) that may run the plain-torch inference forward
        (:mod:`c2v_rag.nn.plain`) where it computes exactly what transformers would; ``from_pretrained`` asks for
        it, for the weights it does not change after loading.
        """
        config = config.model_copy(deep=True)
        target = resolve_device(device)
        torch_dtype = resolve_compute_dtype(dtype if dtype is not None else config.dtype, target, quantize)
        attn = config.attn_implementation or _default_attention(target)
        weights = {role: ResolvedSource(str(path)) for role, path in (backbones or {}).items()}
        plain = plain if _plain_applies(config, target, attn, quantize) else ()

        dec_source = resolve_reference(config.decoder, config.decoder_revision)
        tokenizer = load_fast_tokenizer(dec_source, trust_remote_code=config.trust_remote_code)
        decoder = _load_backbone(
            weights.get("decoder", dec_source),
            dtype=torch_dtype,
            attn_implementation=attn,
            trust_remote_code=config.trust_remote_code,
            plain="decoder" in plain,
        )
        _run_decoder_layers(decoder, config, cut_already="decoder" in weights)
        d = _hidden_size(decoder.config)
        _check_size("decoder", config.decoder, config.decoder_hidden_size, d)
        config.decoder_hidden_size = d

        encoder = enc_tokenizer = projector = enc_source = None
        if config.num_contextual_tokens:
            if config.encoder is None:
                raise ValueError("num_contextual_tokens > 0 needs an encoder: set config.encoder")
            enc_source = resolve_reference(config.encoder, config.encoder_revision)
            enc_tokenizer = load_fast_tokenizer(enc_source, trust_remote_code=config.trust_remote_code)
            encoder = _load_backbone(
                weights.get("encoder", enc_source),
                dtype=ENCODER_DTYPE,
                trust_remote_code=config.trust_remote_code,
                plain="encoder" in plain,
            )
            k = _hidden_size(encoder.config)
            _check_size("encoder", config.encoder, config.encoder_hidden_size, k)
            config.encoder_hidden_size = k
            if config.encoder_max_length is None:
                limit = encoder_length_limit(enc_source, encoder.config)
                model_max = getattr(enc_tokenizer, "model_max_length", None) or limit
                config.encoder_max_length = int(min(limit, model_max))
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                projector = ContextualProjector(k, d, config.num_contextual_tokens)
            projector = projector.to(dtype=ENCODER_DTYPE).eval()

        model = cls(config, decoder, tokenizer, encoder, enc_tokenizer, projector)
        # Taken now: the files read are what this model computes, whatever replaces them later.
        model.bases_digests = content_digests({"decoder": dec_source, "encoder": enc_source})
        model = model.to(target).eval()
        return model.apply_quantization(quantize)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | Path | None = None,
        *,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        quantize: str | None = None,
        merge_adapters: bool = True,
    ) -> Causal2Vec:
        """Load a saved variant directory or a named preset (the default preset when None or ``"default"``).

        Only safetensors are read. A missing or corrupt file raises
        :class:`~c2v_rag.core.errors.VariantLoadError` naming it. ``merge_adapters=False`` keeps LoRA
        adapters separate (for further training).

        ``quantize="int8"`` encodes on a CPU with the decoder's linear layers in int8 (:mod:`c2v_rag.cpu.int8`:
        per-token int8 with SmoothQuant, run by ONNX Runtime; ``pip install 'c2v-rag[int8]'``), and the encoder in
        torch's bf16 where the CPU computes bf16 natively, else in ONNX Runtime's float32. The first load of a
        model calibrates and exports it (1-2 minutes), later loads read the cached graphs. Its speed-up and its vectors' agreement with the float ones, per CPU class, are
        in docs/performance.md ("int8 on CPU"). It
        computes in float32 around the int8 matmuls, so ``dtype`` must be ``auto`` or ``float32``. ``"auto"`` applies int8 on CPU classes where it was
        measured within the quality bound and faster (AVX2, AVX-512 VNNI, avx512_bf16 without AMX) when the
        int8 extra is installed; ``None``/``"none"`` keeps the float weights. A quantized model is for
        inference only. Collections record the choice (their fingerprint's ``quantize``); float and int8
        vectors of one model may share a collection (measured harmless), the removed torch int8 may not.
        """  # noqa: E501
        from c2v_rag.hub.variants import load_variant

        return load_variant(
            cls, name_or_path, device=device, dtype=dtype, quantize=quantize, merge_adapters=merge_adapters
        )

    def apply_quantization(
        self, quantize: str | None, *, cache_dir: Path | None = None, shipped: ShippedMaxima | None = None
    ) -> Causal2Vec:
        """Apply ``quantize`` (see :meth:`from_pretrained`) to this loaded float model, in place; returns it.

        Sets :attr:`quantization` to what was applied (``"none"`` or ``"int8-token-sq"``): int8 replaces
        the decoder by an ONNX Runtime one (:func:`c2v_rag.cpu.int8.int8_decoder_file`), built on first use from this
        model's weights and cached on disk. The encoder runs in bf16 where the CPU computes bf16 natively
        (:func:`c2v_rag.cpu.int8.encoder_runs_in_bf16`), else in ONNX Runtime, in float32
        (:func:`c2v_rag.cpu.onnx_encoder.onnx_encoder`: the same states, in less CPU time). ``cache_dir`` is
        where the ONNX files are kept (default: ``$C2V_RAG_CACHE/onnx``, else ``~/.cache/c2v_rag/onnx``).
        ``shipped``: the calibration the variant's folder ships for these weights, used instead of calibrating
        (``from_pretrained`` finds it; :func:`c2v_rag.model.int8_calibration.write_int8_calibration` makes it).
        """
        from c2v_rag.core.devices import resolve_quantize

        applied = resolve_quantize(quantize, self.device)
        if applied == self.quantization:
            return self
        if self.quantization != "none":
            raise ValueError(f"this model is already quantized ({self.quantization}); load it again to change that")
        if any(hasattr(m, "peft_config") for m in (self.decoder, self.encoder)):
            raise ValueError("quantize='int8' needs merged adapters: load with merge_adapters=True")
        if self.training:
            raise ValueError("quantize='int8' is for inference: call model.eval() first")
        if self.dtype != torch.float32:
            raise ValueError(
                f"int8 quantization starts from float32 weights, got {self.dtype}: load with dtype='float32'"
            )
        self.use_transformers_backbones()  # the ONNX export traces transformers' modules
        from c2v_rag.cpu.build_progress import building
        from c2v_rag.cpu.int8 import Int8Graphs, encoder_runs_in_bf16, int8_decoder_file
        from c2v_rag.cpu.onnx_encoder import onnx_encoder_file

        # The bar shows only on a first load, while the graphs are built; they are cached for later loads.
        with building("Building the int8 model (once; cached for later loads)"):
            decoder = int8_decoder_file(self, cache_dir=cache_dir, shipped=shipped)  # calibrates unless shipped
            encoder = None
            if self.encoder is not None and not encoder_runs_in_bf16():
                encoder = onnx_encoder_file(self.encoder, cache_dir=cache_dir)
        return self.use_int8_graphs(Int8Graphs(decoder, encoder))

    def use_int8_graphs(self, graphs: Int8Graphs) -> Causal2Vec:
        """Run this float model's decoder and encoder on ``graphs`` (:class:`c2v_rag.cpu.int8.Int8Graphs`),
        built by :meth:`apply_quantization` for these same weights; returns this model, now int8.

        Nothing checks that the graphs were built from these weights: :meth:`apply_quantization` does (by
        hashing them), and a load from a variant's files finds its graphs by the variant's digest. Any backbone
        serves (transformers' or plain torch): the graphs replace its layers; its word embeddings stay. Where the
        encoder runs in bf16 (:func:`c2v_rag.cpu.int8.encoder_runs_in_bf16`), ``graphs.encoder`` is not read.
        """
        from c2v_rag.core.devices import INT8_METHOD
        from c2v_rag.cpu.int8 import encoder_runs_in_bf16
        from c2v_rag.cpu.onnx_decoder import OnnxDecoder
        from c2v_rag.cpu.onnx_encoder import OnnxEncoder

        in_bf16 = self.encoder is not None and encoder_runs_in_bf16()
        if not in_bf16 and (graphs.encoder is None) != (self.encoder is None):
            raise ValueError(f"int8 graphs {graphs} do not match this model's encoder ({type(self.encoder).__name__})")
        self.decoder = OnnxDecoder(self.decoder, graphs.decoder, INT8_METHOD)
        if in_bf16:
            assert self.encoder is not None  # in_bf16 checked it
            # its states are pooled and projected in float32 all the same (_encoder_states)
            self.encoder = self.encoder.to(dtype=torch.bfloat16)
        elif self.encoder is not None and graphs.encoder is not None:  # both or neither (checked above)
            self.encoder = OnnxEncoder(self.encoder, graphs.encoder)
        if self.projector is not None:
            # ONNX Runtime's encoder and int8 decoder compute each row on its own; so C must, or a text's
            # vector would depend on its batch (ContextualProjector.row_by_row). A bf16 encoder's rounding is
            # then the only batch dependence left (docs/performance.md, "int8 on CPU").
            self.projector.row_by_row = True
        self.quantization = INT8_METHOD
        return self

    def encoder_to_decoder_dtype(self) -> Causal2Vec:
        """Run the encoder in the decoder's dtype where that is bf16 or fp16; returns this model.

        A loaded variant does this once its adapters are merged (``from_pretrained``): it is for inference, where
        the encoder reads every token of a chunk, and in float32 cost as much as the decoder on a CPU with AMX. Its
        states are pooled and projected in float32 all the same. A text's vector then moves with its batch by bf16
        rounding, as the decoder's part already did, within a cosine of 0.999 (docs/performance.md, "The same text
        alone or in a batch"). Training keeps the encoder's weights in float32.
        """
        if self.encoder is None or self.quantization != "none" or self.dtype not in (torch.bfloat16, torch.float16):
            return self
        self.encoder = self.encoder.to(dtype=self.dtype)
        return self

    def use_transformers_backbones(self) -> Causal2Vec:
        """Replace a plain-torch backbone (:mod:`c2v_rag.nn.plain`) by the transformers model of the same weights,
        on the same device and in the same dtype; returns this model. Training, adapters and the ONNX export
        need transformers' modules; :meth:`train` and int8 quantization call this, so callers rarely need to."""
        for role in ("decoder", "encoder"):
            module = getattr(self, role)
            if isinstance(module, PlainBackbone):
                parameter = next(module.parameters())
                replacement = load_backbone(
                    ResolvedSource(module.source),
                    dtype=parameter.dtype,
                    # the decoder's plain forward stands in for sdpa only (_plain_applies); the encoder loads
                    # with transformers' default, as from_config loads it
                    attn_implementation="sdpa" if role == "decoder" else None,
                )
                if role == "decoder":
                    # the plain module read the base's layers (cut since) or a merged copy (cut when saved)
                    cut = len(transformer_layers(replacement)) == len(transformer_layers(module))
                    _run_decoder_layers(replacement, self.config, cut_already=cut)
                setattr(self, role, replacement.to(parameter.device).train(module.training))
        return self

    def keep_decoder_layers(self, layers: Sequence[int]) -> None:
        """Run only the base decoder's ``layers`` (indices in the base model, increasing) from now on: a shallower
        variant, to train (it saves and loads as ``config.decoder_layers``). It can only drop layers: each named
        one must still run. Adapters attached to the decoder stay on the layers kept."""
        if self.quantization != "none" or "decoder" in self.adapter_sources:
            raise ValueError(
                "keep_decoder_layers cuts the decoder and its adapter together: load the variant with "
                "merge_adapters=False and no quantize (as training does), then cut it"
            )
        wanted = list(layers)
        # validated before anything is cut
        changed = Causal2VecConfig.model_validate(
            {**self.config.model_dump(), "decoder_layers": wanted, "metadata": self.config.unmeasured_metadata()}
        )
        count = len(transformer_layers(self.decoder))
        keep_layers(self.decoder, narrowing(self.config.decoder_layers, wanted, count))
        self.config = changed
        self.weights_digest = self.adapters_digest = None  # no longer the model its files describe

    def train(self, mode: bool = True) -> Causal2Vec:
        """Set training mode (``nn.Module.train``); a plain-torch backbone, inference-only, is replaced by its
        transformers model first (:meth:`use_transformers_backbones`), which applies dropout as training expects."""
        if mode:
            self.use_transformers_backbones()
        return super().train(mode)

    def save_pretrained(self, path: str | Path) -> Path:
        """Write this variant (config, projector, adapters) to ``path``; base weights stay referenced."""
        from c2v_rag.hub.variants import save_variant

        return save_variant(self, Path(path))

    def push_to_hub(
        self, repo_id: str, *, token: str | None = None, private: bool = False, license: str = "apache-2.0"
    ) -> str:
        """Save this variant and upload it to the Hub model repo ``repo_id`` with a generated model card
        (:func:`c2v_rag.hub.publish.push_to_hub`); returns the commit URL."""
        import tempfile

        from c2v_rag.hub.publish import push_to_hub

        with tempfile.TemporaryDirectory(prefix="c2v-variant-") as tmp:
            return push_to_hub(
                self.save_pretrained(Path(tmp) / "variant"), repo_id, token=token, private=private, license=license
            )

    def set_readout(self, **fields: Any) -> None:
        """Change how the embedding is read off the decoder (``representation``, ``normalize_parts``, ``encoder_share``,
        ``part_weights``).

        The weights stay as they are; the config is re-validated and the decoder input follows (a
        ``contextual`` readout skips the text tokens, which cannot change h_C under causal attention).
        A changed readout has another layout, so of the trained Matryoshka sizes (``matryoshka_dims``) it keeps
        those that end where a part ends, every part before it a unit vector of its own (the encoder's part,
        and the decoder's parts under ``normalize_parts``): such a prefix is a mix of whole parts.
        ``encoder_share`` and ``part_weights`` are alternatives: naming one alone sets the other aside.
        """  # noqa: E501
        self.config = readout_config(self.config, **fields)
        self.prompt_builder.keep_text = _reads_text(self.config)

    # ------------------------------------------------------------------ properties

    @property
    def tokenizer(self) -> Any:
        """The decoder's tokenizer: transformers' own, loaded on first use where the model was loaded with a
        :class:`~c2v_rag.hub.fast_tokenizer.FastTokenizer` (the encode path needs only that one)."""
        return transformers_tokenizer(self.fast_tokenizer)

    @tokenizer.setter
    def tokenizer(self, value: Any) -> None:
        self.fast_tokenizer = value

    @property
    def encoder_tokenizer(self) -> Any:
        """The encoder's tokenizer (None without an encoder), as :attr:`tokenizer` is the decoder's."""
        return transformers_tokenizer(self.fast_encoder_tokenizer)

    @encoder_tokenizer.setter
    def encoder_tokenizer(self, value: Any) -> None:
        self.fast_encoder_tokenizer = value

    @property
    def prompts(self) -> dict[str, str]:
        """The prompts by name, as sentence-transformers' ``SentenceTransformer.prompts`` holds them (the same dict
        a saved variant's ``config_sentence_transformers.json`` carries): ``"query"``, ``"document"`` and each
        registered task's query instruction; ``encode(prompt_name=...)`` takes their names. A copy: the variant's
        instructions are its config's (``query_instruction``, ``default_task``)."""
        from c2v_rag.hub.st_files import st_prompts

        return st_prompts(self.config)

    @property
    def max_seq_length(self) -> int:
        """The bound on the decoder sequence (instruction, contextual token, text, EOS); texts beyond it are cut.

        Settable, as in sentence-transformers: ``model.max_seq_length = 256`` trades recall on long
        documents for speed.
        """
        return self.prompt_builder.max_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        if not isinstance(value, int) or value < 4:
            raise ValueError(f"max_seq_length must be an int of at least 4 tokens, got {value!r}")
        positions = getattr(getattr(self.decoder, "config", None), "max_position_embeddings", None)
        if isinstance(positions, int) and value > positions:
            import warnings

            # Not refused: a decoder with rotary positions runs past them (and a user may have scaled them), but
            # what it gives there was not trained; a silent 100,000 read 9,000 words as if it were in range.
            warnings.warn(
                f"max_seq_length={value} is beyond the decoder's {positions} positions: texts longer than those "
                f"are read at positions it was not trained on; {positions} or less keeps them in range",
                UserWarning,
                stacklevel=2,
            )
        self.prompt_builder.max_length = value

    @property
    def readout(self) -> Representation:
        """The registered :class:`~c2v_rag.nn.readout.Representation` named by ``config.representation``."""
        return REPRESENTATIONS[self.config.representation]

    @property
    def device(self) -> torch.device:
        return next(self.decoder.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.decoder.parameters()).dtype

    @property
    def embedding_dim(self) -> int:
        return self.config.embedding_dim

    def get_sentence_embedding_dimension(self) -> int:
        """The embedding size (sentence-transformers' name for :attr:`embedding_dim`)."""
        return self.embedding_dim

    # ------------------------------------------------------------------ tensors

    def prepare(
        self,
        texts: Sequence[str],
        instruction: str | InContextPrompt | None,
        *,
        truncate_dim: int | None = None,
        max_length: int | None = None,
    ) -> tuple[list[DecoderPieces], list[list[int]] | None]:
        """Tokenize texts for the decoder (around the slot) and, when used, for the encoder.

        With a ``truncate_dim`` whose prefix does not read the text tokens' decoder states (see
        :meth:`needs_for`), the decoder input leaves the text out. ``max_length`` bounds the decoder
        sequence for this call (None: :attr:`max_seq_length`).
        """
        keep_text = None if self.needs_for(truncate_dim) == "all" else False
        pieces = self.prompt_builder.build(list(texts), instruction, keep_text=keep_text, max_length=max_length)
        enc_ids = None
        if self.config.num_contextual_tokens:
            enc_ids = self.fast_encoder_tokenizer(list(texts), truncation=True, max_length=self.encoder_max_length)[
                "input_ids"
            ]
        return pieces, enc_ids

    def collate(self, pieces: Sequence[DecoderPieces], encoder_ids) -> Causal2VecBatch:
        return collate(
            pieces,
            encoder_ids,
            num_contextual_tokens=self.config.num_contextual_tokens,
            pad_id=self.pad_id,
            encoder_pad_id=self.encoder_pad_id,
        )

    @property
    def encoder_pad_id(self) -> int:
        """The id the encoder's inputs are padded with (masked out; 0 where its tokenizer names none)."""
        pad = self.fast_encoder_tokenizer.pad_token_id if self.fast_encoder_tokenizer is not None else None
        return pad or 0

    def contextual_tokens(
        self, encoder_input_ids: torch.Tensor | None, encoder_attention_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """C [B, n, d] from the encoder and the projector."""
        states, mask = self._encoder_states(encoder_input_ids, encoder_attention_mask)
        return self._projector()(states, mask)

    def encoder_outputs(
        self, encoder_input_ids: torch.Tensor | None, encoder_attention_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """C [B, n, d], and the encoder's own sentence vector [B, k] (its mean-pooled states), from one encoder pass."""
        states, mask = self._encoder_states(encoder_input_ids, encoder_attention_mask)
        return self._projector()(states, mask), mean_pool(states, mask)

    def encoder_pass(self, encoder_ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """C [B, n, d] and the encoder's own sentence vector [B, k] of texts' encoder ids, padded as one batch
        (the encode loop runs the encoder in batches of its own, then the decoder with these)."""
        ids, mask = pad_right(encoder_ids, self.encoder_pad_id)
        return self.encoder_outputs(ids.to(self.device), mask.to(self.device))

    def _encoder_states(
        self, encoder_input_ids: torch.Tensor | None, encoder_attention_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The encoder's last states [B, S, k] and the mask they were computed under [B, S]."""
        if self.encoder is None or encoder_input_ids is None or encoder_attention_mask is None:
            raise ValueError("this model has no Contextual token (num_contextual_tokens=0): it runs no encoder")
        out = self.encoder(input_ids=encoder_input_ids, attention_mask=encoder_attention_mask)
        # pooled and projected in the projector's dtype (float32), whatever the encoder computed in
        return out.last_hidden_state.to(next(self._projector().parameters()).dtype), encoder_attention_mask

    def _projector(self) -> ContextualProjector:
        if self.projector is None:
            raise ValueError("this model has no Contextual token (num_contextual_tokens=0): it has no projector")
        return self.projector

    def decoder_inputs(self, batch: Causal2VecBatch, contextual: torch.Tensor | None) -> torch.Tensor:
        """Word embeddings of the batch with C written into its slots, by position."""
        embedding = input_embeddings(self.decoder)
        embeds = embedding(batch.input_ids)
        if contextual is None:
            return embeds
        # Models that scale inside the embedding module (Gemma 3) would leave C unscaled; C is
        # defined in the raw table space, so it gets the same scale as the words beside it.
        scale = getattr(embedding, "embed_scale", None)
        if scale is not None:
            contextual = contextual * torch.as_tensor(scale, dtype=contextual.dtype, device=contextual.device)
        n = contextual.size(1)
        rows = torch.arange(embeds.size(0), device=embeds.device)[:, None]
        cols = batch.context_positions[:, None] + torch.arange(n, device=embeds.device)
        return embeds.index_put((rows, cols), contextual.to(embeds.dtype))

    def decoder_states(
        self, batch: Causal2VecBatch, input_ids: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The decoder's last hidden states [B, L, d] for a batch, and the Contextual tokens C.

        ``input_ids`` replaces the batch's ids (same shape): MNTP feeds a corrupted copy.
        """
        hidden, contextual, _ = self._states(batch, input_ids)
        return hidden, contextual

    def _states(
        self, batch: Causal2VecBatch, input_ids: torch.Tensor | None = None, *, readout_only: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        # readout_only: the hidden states need to be right only where the readout reads them; a decoder that
        # can compute its last layer at those rows alone (the int8 graph) then does, the other rows NaN
        rows = None
        if readout_only and getattr(self.decoder, "rows_only", False):
            rows = self.readout.positions(
                batch.context_positions, batch.last_positions, self.config.num_contextual_tokens
            )
        contextual = sentence = None
        if batch.contextual is not None:  # computed ahead by the encode loop (encoder_pass)
            contextual = batch.contextual
            sentence = batch.sentence if self.config.uses_encoder_vector else None
        elif self.config.num_contextual_tokens and self.config.uses_encoder_vector:
            contextual, sentence = self.encoder_outputs(batch.encoder_input_ids, batch.encoder_attention_mask)
        elif self.config.num_contextual_tokens:
            contextual = self.contextual_tokens(batch.encoder_input_ids, batch.encoder_attention_mask)
        if input_ids is not None:
            batch = copy.copy(batch)
            batch.input_ids = input_ids
        outputs = self.decoder(
            inputs_embeds=self.decoder_inputs(batch, contextual),
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
            use_cache=False,
            **({} if rows is None else {"readout_positions": rows}),
        )
        return outputs.last_hidden_state, contextual, sentence

    @property
    def batch_workers(self) -> int:
        """How many batches the encode loop runs at once: 1 (torch splits each op across its threads), or
        the ONNX Runtime decoder's :attr:`~c2v_rag.cpu.onnx_decoder.OnnxDecoder.batch_workers` under int8, whose
        sessions compute a batch on one core."""
        return getattr(self.decoder, "batch_workers", 1)

    @property
    def encoder_workers(self) -> int:
        """How many batches the encode loop runs at once where the encoder runs alone (ahead of the decoder, or a
        prefix inside its part): :attr:`batch_workers` for the ONNX Runtime encoder, whose sessions compute a batch on
        one core as the int8 decoder's do; 1 for a torch encoder (bf16 under int8 where the CPU computes bf16),
        which splits each op across torch's threads."""
        return self.batch_workers if getattr(self.encoder, "one_core_per_call", False) else 1

    def needs_for(self, truncate_dim: int | None) -> Literal["encoder", "contextual", "all"]:
        """What a prefix of ``truncate_dim`` values is computed from.

        The layout is ``[encoder; h_C; h_EOS]`` (:attr:`Causal2VecConfig.parts`). A prefix inside the
        encoder's part needs no decoder at all; one inside ``[encoder; h_C]`` needs the decoder only up to
        C, since under causal attention nothing after C changes h_C. Either gives the same numbers as
        cutting the full vector, at a fraction of its cost.
        """
        if truncate_dim is None:
            return "all"
        inside = {name for name, part in self.config.parts.items() if name != "full" and part.start < truncate_dim}
        if inside <= {"encoder"}:
            return "encoder"
        if inside <= {"encoder", "contextual"} and self.config.attention == "causal" and not self.config.echo:
            return "contextual"
        return "all"

    def forward(self, batch: Causal2VecBatch, truncate_dim: int | None = None) -> torch.Tensor:
        """Embeddings [B, embedding_dim] of a collated batch (differentiable; used by training).

        ``truncate_dim`` returns the first that many values only, computed from what they need (a batch
        prepared with the same ``truncate_dim``); see :meth:`needs_for`.
        """
        if self.needs_for(truncate_dim) == "encoder":
            states, mask = self._encoder_states(batch.encoder_input_ids, batch.encoder_attention_mask)
            return encoder_part(mean_pool(states, mask), self.config.encoder_weight)[:, :truncate_dim]
        hidden, contextual, sentence = self._states(batch, readout_only=True)
        vector = self.readout.read(
            hidden,
            batch.context_positions,
            batch.last_positions,
            self.config.num_contextual_tokens,
            contextual,
            batch.pool_mask,
            normalize_parts=self.config.normalize_parts,
        )
        if self.config.part_weights is not None:
            pieces = split_parts(vector, self.readout.parts(self.config.decoder_hidden_size or vector.size(-1)))
            if sentence is not None:
                pieces["encoder"] = sentence
            vector = weigh_parts(pieces, self.config.part_weights)
        elif self.config.encoder_share:
            assert sentence is not None, "encoder_share mixes in the encoder's vector, which _states computed"
            vector = mix_encoder_vector(vector, sentence, self.config.encoder_share)
        return vector if truncate_dim is None else vector[:, :truncate_dim]

    # ------------------------------------------------------------------ encode API

    def encode(
        self,
        sentences: str | Sequence[str],
        *,
        instruction: str | None = None,
        task: str | None = None,
        is_query: bool = True,
        examples: Sequence[tuple[str, str]] | None = None,
        **kwargs: Any,
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """Embed texts, all with the same instruction (symmetric tasks: STS, classification...).

        ``examples`` are in-context ``(query, response)`` pairs placed before the instruction (Causal2Vec
        "w/ ICL", bge-en-icl's layout: ``config.example_template``); None uses the task's registered ones
        (``register_task(..., examples=...)``), ``[]`` none. Only inputs that get an instruction get them.
        They are never truncated; ``max_length`` cuts the text only.

        ``max_length`` bounds each input's decoder sequence for this call (instruction, Contextual token,
        text, EOS), as :attr:`max_seq_length` does for every call; None uses :attr:`max_seq_length`. A
        per-call option rather than a second model object: callers sharing one loaded model can each
        truncate at their own length without changing the model the others use.

        ``task`` names a registered task (its instruction applies to every input when the task is
        symmetric); ``instruction`` is a literal string. Keyword arguments follow
        sentence-transformers: ``prompt`` (the instruction, as ``instruction=``) or ``prompt_name`` (one of the
        variant's prompts: ``"query"``, ``"document"``, ``"SciFact-query"``...), ``batch_size``,
        ``max_tokens_per_batch``, ``show_progress_bar``, ``normalize_embeddings``, ``precision``,
        ``convert_to_numpy``, ``convert_to_tensor``.
        A single string returns a 1-D vector; a list returns ``(len, embedding_dim)``.

        ``long_texts`` says what happens to a text longer than the model reads: ``"truncate"``
        (the default: the first :attr:`max_seq_length` decoder tokens and ``encoder_max_length``
        encoder tokens count) or ``"chunk"`` (overlapping windows that each fit, embedded apart
        and mean-pooled into one vector; ``LongTexts(mode="chunk", pooling="max", overlap=...,
        window=...)`` sets the details). See :mod:`c2v_rag.encode.long_texts` for the trade-off.

        ``truncate_dim`` (sentence-transformers' name) keeps the first that many values, one of the sizes
        the variant was trained for (``config.matryoshka_dims``; any other is refused). The default
        preset's 384 is MiniLM's part and needs no decoder; its 960 adds h_C, which needs the decoder only
        up to the Contextual token; both cost a fraction of the whole vector.
        """
        from c2v_rag.encode.loop import encode_texts

        instruction = self._st_prompt(kwargs, task, instruction)
        _check_keywords("encode", kwargs, encode_texts)
        resolved = resolve_instruction(task=task, instruction=instruction, is_query=is_query, examples=examples)
        return encode_texts(self, sentences, resolved, **kwargs)

    def _st_prompt(self, kwargs: dict[str, Any], task: str | None, instruction: str | None) -> str | None:
        """``instruction``, or the one sentence-transformers' ``prompt=`` (the text itself) or ``prompt_name=`` (a
        key of the variant's :attr:`prompts`: ``"query"``, ``"document"``,
        ``"SciFact-query"``...) gives, popped from ``kwargs``: what ``SentenceTransformer`` on the variant's folder
        embeds with the same keyword."""
        prompt, name = kwargs.pop("prompt", None), kwargs.pop("prompt_name", None)
        if prompt is None and name is None:
            return instruction
        if prompt is not None and name is not None:
            raise ValueError("pass prompt= (the instruction itself) or prompt_name= (one of its names), not both")
        if task is not None or instruction is not None:
            given = "task=" if task is not None else "instruction="
            raise ValueError(
                f"prompt= and prompt_name= (sentence-transformers' names) set the instruction, as {given} does: "
                "pass one of them"
            )
        if prompt is not None:
            if not isinstance(prompt, str):
                raise TypeError(f"prompt= takes the instruction as a string, got {type(prompt).__name__}")
            return prompt
        prompts = self.prompts
        if name not in prompts:
            import difflib

            close = difflib.get_close_matches(str(name), list(prompts), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(
                f"prompt_name={name!r} is not one of this variant's prompts: {hint}'query', 'document', "
                f"'<task>-query', '<task>-document' or a symmetric task's name ({len(prompts)} in all, "
                "model.prompts lists them); or pass prompt='<instruction>'"
            )
        return prompts[name]

    def long_text_windows(
        self,
        texts: Sequence[str],
        *,
        instruction: str | None = None,
        long_texts: Any = "chunk",
        max_length: int | None = None,
    ) -> Any:
        """The texts that ``long_texts="chunk"`` embeds: each text that fits whole, and overlapping windows
        of each longer one (a :class:`~c2v_rag.encode.long_texts.Windows`; ``owners`` maps them back).
        ``max_length`` is :meth:`encode`'s."""
        from c2v_rag.encode.loop import check_texts, long_text_windows

        return long_text_windows(self, check_texts(list(texts))[0], instruction, long_texts, max_length=max_length)

    def encode_queries(
        self,
        queries: str | Sequence[str],
        *,
        task: str | None = None,
        instruction: str | None = None,
        examples: Sequence[tuple[str, str]] | None = None,
        **kwargs: Any,
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """Embed search queries with the task's instruction, else the variant's default one, else MS MARCO's
        (:func:`~c2v_rag.core.instructions.query_prompt`, the policy of every entry point).

        ``examples=[(query, response), ...]`` puts in-context examples before the instruction (Causal2Vec
        "w/ ICL"); None uses the task's registered examples, ``[]`` none. See :meth:`encode`.
        """
        if kwargs.get("prompt") is None and kwargs.get("prompt_name") is None:  # those name the instruction themselves
            task, instruction = query_prompt(self.config, task=task, instruction=instruction)
        return self.encode(queries, task=task, instruction=instruction, is_query=True, examples=examples, **kwargs)

    def encode_documents(
        self,
        documents: str | Sequence[str],
        *,
        task: str | None = None,
        instruction: str | None = None,
        examples: Sequence[tuple[str, str]] | None = None,
        **kwargs: Any,
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """Embed documents: no instruction for asymmetric tasks (paper, A.3), the task's own for symmetric ones.

        In-context examples follow the instruction: documents of an asymmetric task get none (passing
        ``examples`` for them is an error); every input of a symmetric task gets them, as bge-en-icl does.
        """
        return self.encode(documents, task=task, instruction=instruction, is_query=False, examples=examples, **kwargs)

    # sentence-transformers >= 5 spells these in the singular.
    encode_query = encode_queries
    encode_document = encode_documents

    # sentence-transformers' name of what similarity computes (its SimilarityFunction.COSINE).
    similarity_fn_name = "cosine"

    def similarity(self, a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Cosine similarity matrix [len(a), len(b)] between two sets of embeddings (1-D inputs count as one row)."""
        a_t, b_t = _embedding_rows(a, b, "similarity")
        return nn.functional.normalize(a_t, dim=-1) @ nn.functional.normalize(b_t, dim=-1).T

    def similarity_pairwise(self, a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Cosine similarity of each row of ``a`` with the same row of ``b`` [len(a)] (sentence-transformers')."""
        a_t, b_t = _embedding_rows(a, b, "similarity_pairwise")
        if len(a_t) != len(b_t):
            raise ValueError(f"similarity_pairwise pairs rows: got {len(a_t)} and {len(b_t)} embeddings")
        return (nn.functional.normalize(a_t, dim=-1) * nn.functional.normalize(b_t, dim=-1)).sum(-1)

    def get_max_seq_length(self) -> int:
        """:attr:`max_seq_length` (sentence-transformers' getter)."""
        return self.max_seq_length


def _embedding_rows(
    a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor, method: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``a`` and ``b`` as float32 rows on the CPU, refused by name when they are texts or of different sizes (a
    mismatch was torch's 'mat1 and mat2 shapes cannot be multiplied', texts 'too many dimensions 'str'')."""
    rows = []
    for value in (a, b):
        if isinstance(value, str) or (isinstance(value, (list, tuple)) and value and isinstance(value[0], str)):
            raise TypeError(f"{method} takes embeddings, not texts: encode them first (model.encode(texts))")
        rows.append(torch.atleast_2d(torch.as_tensor(value).detach().to("cpu", torch.float32)))
    if rows[0].shape[-1] != rows[1].shape[-1]:
        raise ValueError(
            f"{method} compares embeddings of one size, got {rows[0].shape[-1]} and {rows[1].shape[-1]} values: "
            "embed both at the same truncate_dim"
        )
    return rows[0], rows[1]


def _check_keywords(method: str, given: dict[str, Any], target: Any) -> None:
    """Refuse a keyword ``target`` (the function ``method`` hands ``given`` to) does not take, under ``method``'s
    name: Python's own error named the inner function (``encode_texts() got an unexpected keyword``)."""
    takes = _keyword_only(target)
    unknown = [name for name in given if name not in takes]
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], takes, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TypeError(
            f"{method}() got an unexpected keyword argument {unknown[0]!r}{hint}. It takes task, instruction, "
            f"prompt, prompt_name, examples and {', '.join(takes)}"
        )


@functools.cache
def _keyword_only(target: Any) -> tuple[str, ...]:
    """``target``'s keyword-only parameters, read once: :meth:`Causal2Vec.encode` checks every call's against them."""
    import inspect

    return tuple(name for name, p in inspect.signature(target).parameters.items() if p.kind is p.KEYWORD_ONLY)


def readout_config(config: Causal2VecConfig, **fields: Any) -> Causal2VecConfig:
    """``config`` read another way (:meth:`Causal2Vec.set_readout`, which documents the fields): re-validated, with
    the trained Matryoshka sizes that still end where a part ends."""
    unknown = set(fields) - set(READOUT_FIELDS)
    if unknown:
        raise ValueError(f"set_readout takes {list(READOUT_FIELDS)}, not {sorted(unknown)}")
    # encoder_share and part_weights are two ways to weigh the parts: naming one alone replaces the other.
    if fields.get("part_weights") is not None:
        fields.setdefault("encoder_share", 0.0)
    elif "encoder_share" in fields:
        fields.setdefault("part_weights", None)
    current = config.model_dump()
    if any(current[name] != value for name, value in fields.items()):
        changed = Causal2VecConfig.model_validate({**current, **fields, "matryoshka_dims": []})
        # A prefix of whole parts, each a unit vector of its own, is still a weighted mix of parts in the new
        # layout; any other trained size cut a part that the new readout weighs otherwise.
        fields["matryoshka_dims"] = [n for n in current["matryoshka_dims"] if n in _whole_part_prefixes(changed)]
        fields["metadata"] = config.unmeasured_metadata()  # scores measured at the old readout
    return Causal2VecConfig.model_validate({**current, **fields})


def _whole_part_prefixes(config: Causal2VecConfig) -> set[int]:
    """The prefix sizes of ``config``'s layout that end where a part ends, every part before it normalized alone."""
    sizes, unit = set(), True
    for name, part in config.parts.items():
        if name == "full":
            continue
        unit = unit and (name == "encoder" or config.normalize_parts or config.part_weights is not None)
        if unit and part.stop < config.embedding_dim:
            sizes.add(part.stop)
    return sizes


def _reads_text(config: Causal2VecConfig) -> bool:
    """Whether the embedding depends on the text tokens after C: where its representation reads them, or where
    attention is bidirectional and so even h_C sees them."""
    return REPRESENTATIONS[config.representation].reads_text or config.attention != "causal"


def _plain_applies(config: Causal2VecConfig, device: torch.device, attn: str, quantize: str | None) -> bool:
    """Whether the plain-torch forward may stand in for transformers' here: what it reproduces exactly is
    inference on a CPU, with sdpa attention, causal, on float weights (int8 exports transformers' modules)."""
    from c2v_rag.core.devices import resolve_quantize

    return (
        device.type == "cpu"
        and attn == "sdpa"
        and config.attention == "causal"
        and not config.echo
        and not config.trust_remote_code
        and resolve_quantize(quantize, device) == "none"
    )


def _load_backbone(
    source: ResolvedSource,
    *,
    dtype: torch.dtype,
    attn_implementation: str | None = None,
    trust_remote_code: bool = False,
    plain: bool = False,
) -> nn.Module:
    """The backbone at ``source``: its plain-torch forward when ``plain`` and it has an exact one (a local Llama or
    BERT folder; see :func:`~c2v_rag.hub.plain_weights.load_plain_backbone`), else transformers' model."""
    if plain and source.is_local:
        module = load_plain_backbone(source.location, dtype=dtype)
        if module is not None:
            return module
    return load_backbone(
        source, dtype=dtype, attn_implementation=attn_implementation, trust_remote_code=trust_remote_code
    )


def _run_decoder_layers(decoder: nn.Module, config: Causal2VecConfig, *, cut_already: bool) -> None:
    """Cut ``decoder`` to ``config.decoder_layers``, unless it was read already cut (a merged copy saved after the
    cut), whose layer count is then checked."""
    layers = config.decoder_layers
    if layers is None:
        return
    count = len(transformer_layers(decoder))
    if cut_already:
        if count != len(layers):
            raise ValueError(
                f"the decoder weights read for {config.decoder!r} have {count} layers, but the variant runs "
                f"{len(layers)} ({layers}); delete the cached copy (c2v_rag cache, 'merged') and load again"
            )
        return
    keep_layers(decoder, narrowing(None, layers, count))


def _default_attention(device: torch.device) -> str:
    if device.type == "cuda":
        from transformers.utils import is_flash_attn_2_available

        if is_flash_attn_2_available():
            return "flash_attention_2"
    return "sdpa"


def _hidden_size(model_config) -> int:
    for name in ("hidden_size", "n_embd", "d_model", "dim"):
        value = getattr(model_config, name, None)
        if isinstance(value, int):
            return value
    text_config = getattr(model_config, "text_config", None)
    if text_config is not None:
        return _hidden_size(text_config)
    raise ValueError(f"cannot tell the hidden size of {type(model_config).__name__}")


def _check_size(role: str, reference: str, expected: int | None, actual: int) -> None:
    if expected is not None and expected != actual:
        raise ValueError(
            f"the {role} {reference!r} has hidden size {actual}, but the variant was built for "
            f"{expected}: it references a different base model than it was trained on"
        )
