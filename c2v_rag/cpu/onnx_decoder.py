"""The decoder run by ONNX Runtime on a CPU, in float32 or with int8/int4 weights.

:func:`onnx_decoder` exports a loaded transformers decoder (``Causal2Vec.decoder``) to ONNX once, optionally
quantizes its matmuls with ONNX Runtime's tools, caches the file on disk and returns an :class:`OnnxDecoder`:
an ``nn.Module`` with the forward signature ``Causal2Vec`` calls its decoder with (``inputs_embeds``,
``attention_mask``, ``position_ids``, ``use_cache``) that returns an object with ``last_hidden_state``. The
word embeddings stay in torch (``get_input_embeddings``), so the Contextual token's slot write, batching,
the readout, Matryoshka prefixes, the server and the RAG layer do not change.

Methods (:data:`METHODS`; measured in docs/performance.md, "int8 on CPU"):

- ``"fp32"``: the exported graph as is (ONNX Runtime's graph optimizations only);
- ``"nbits8-b32"`` / ``"nbits8-b128"``: ``MatMulNBits`` with 8-bit weights, one scale per block of 32/128
  input channels, ``accuracy_level=4`` (each activation row quantized to int8 per block on the fly, int8
  dot products): row-local, so a text's vector does not depend on its batch neighbours;
- ``"nbits4-b32"``: the same with 4-bit weights;
- ``"dynamic-qint8"``: ``onnxruntime.quantization.quantize_dynamic`` (``MatMulInteger``, one activation scale
  per tensor, as torch's dynamic int8).

Files live under ``$C2V_RAG_CACHE/onnx`` (else the user cache dir), in a folder named by a sha256 of the
decoder's weights, its config, the attention mode, the method and :data:`FORMAT`; each is written to a
temporary name and renamed into place, so a crash leaves no half file. Only ``.onnx`` files are written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from c2v_rag.core.cache import cache_dir
from c2v_rag.core.extras import require
from c2v_rag.core.files import write_atomically
from c2v_rag.cpu.build_progress import stage
from c2v_rag.cpu.onnx_attention import POSITIONS_FROM_LENGTHS, POSITIONS_KEY, READOUT_INPUT
from c2v_rag.cpu.ort_session import cpu_session
from c2v_rag.nn.backbone import backbone_config, embedding_table, input_embeddings

logger = logging.getLogger(__name__)

# Bump when the export or a quantization recipe changes, so that cached files are rebuilt.
FORMAT = 1
METHODS = ("fp32", "nbits8-b32", "nbits8-b128", "nbits4-b32", "dynamic-qint8")
_INPUTS = ("inputs_embeds", "attention_mask", "position_ids")
OPSET = 17


def onnx_cache_dir() -> Path:
    """Where exported decoders are kept: ``$C2V_RAG_CACHE/onnx``, else ``<user cache dir>/c2v_rag/onnx``."""
    return cache_dir() / "onnx"


# Where the weights were read from, not what they are (the keys hash the weights themselves): a base model
# converted under another cache folder, or a copy moved elsewhere, keeps its graphs.
_LOCATION_FIELDS = ("_name_or_path",)


def config_json(config: Any, **extra: Any) -> bytes:
    """A transformers config (with ``extra`` entries) as canonical JSON, for the cache keys; the fields that
    only say where it was loaded from are left out."""
    values = config.to_dict() if hasattr(config, "to_dict") else dict(vars(config))
    values = {k: v for k, v in values.items() if k not in _LOCATION_FIELDS}
    return json.dumps({**values, **extra}, sort_keys=True, default=str).encode()


def check_exportable(module: nn.Module, role: str) -> None:
    """Refuse what an ONNX export of ``module`` (the ``role``: decoder or encoder) cannot run: unmerged
    adapters, weights off the CPU."""
    if hasattr(module, "peft_config"):
        raise ValueError(f"the ONNX {role} needs merged adapters: load with merge_adapters=True")
    if next(module.parameters()).device.type != "cpu":
        raise ValueError(f"the ONNX {role} runs on a CPU: load with device='cpu'")


def decoder_key(decoder: nn.Module, method: str) -> str:
    """A sha256 (24 hex digits) naming the export of ``decoder``'s current weights with ``method``."""
    digest = hashlib.sha256(f"c2v-onnx-decoder {FORMAT} {method} {OPSET}\n".encode())
    config = backbone_config(decoder)
    digest.update(config_json(config, is_causal=getattr(config, "is_causal", True)))
    # the word embeddings stay in torch and are not in the graph
    hash_weights(digest, decoder, skip=input_embeddings(decoder))
    return digest.hexdigest()[:24]


def hash_weights(digest: Any, module: nn.Module, prefix: str = "", skip: nn.Module | None = None) -> None:
    """Feed every tensor of ``module``'s state dict (name, shape, dtype and bytes) into ``digest`` (a hashlib
    hash), except ``skip``'s parameters; ``prefix`` tells modules of the same layout apart."""
    skipped = {id(p) for p in skip.parameters()} if skip is not None else set()
    for name, tensor in module.state_dict(keep_vars=True).items():
        if id(tensor) in skipped:
            continue
        data = tensor.detach().cpu().contiguous()
        digest.update(f"{prefix}{name} {tuple(data.shape)} {data.dtype}\n".encode())
        digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())


class _LastHidden(nn.Module):
    """``model`` called with ``names`` (in order) and ``fixed``, returning its last hidden state: the one output
    the exported graphs keep. ``model`` sits under the attribute ``role``, which names the graph's nodes
    (``/decoder/layers.0/...``)."""

    def __init__(self, model: nn.Module, role: str, names: tuple[str, ...], **fixed: Any) -> None:
        super().__init__()
        self.add_module(role, model)
        self.role, self.names, self.fixed = role, names, fixed

    def forward(self, *args):
        return getattr(self, self.role)(**dict(zip(self.names, args)), **self.fixed).last_hidden_state


@contextlib.contextmanager
def eager_attention(model: nn.Module):
    """Trace with transformers' eager attention (an explicit additive mask); the weights are the same."""
    config = backbone_config(model)
    previous = config._attn_implementation
    config._attn_implementation = "eager"
    try:
        yield
    finally:
        config._attn_implementation = previous


EXAMPLE_SHAPE = (2, 12)  # the traced example's [B, T]; both are free in the graph


def example_mask() -> torch.Tensor:
    """The traced example's attention mask: its first row right-padded after 7 tokens, as collate writes it."""
    mask = torch.ones(*EXAMPLE_SHAPE, dtype=torch.long)
    mask[0, 7:] = 0
    return mask


def export_last_hidden(
    model: nn.Module, role: str, names: tuple[str, ...], args: tuple[torch.Tensor, ...], path: Path, **fixed: Any
) -> Path:
    """Trace ``model`` (the ``role``: decoder or encoder; float32, eval) on the example ``args``, given as
    ``names``, into an ONNX graph at ``path`` whose one output is ``last_hidden_state``; B and T free."""
    require("onnx", f"exporting the {role} to ONNX", "int8")
    dtype = next(model.parameters()).dtype
    if dtype != torch.float32:
        raise ValueError(f"the ONNX export starts from float32 weights, got {dtype}: load with dtype='float32'")
    with eager_attention(model), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation and the tracer's notes
        torch.onnx.export(
            _LastHidden(model, role, names, **fixed).eval(),
            args,
            str(path),
            dynamo=False,
            opset_version=OPSET,
            input_names=list(names),
            output_names=["last_hidden_state"],
            dynamic_axes={name: {0: "batch", 1: "length"} for name in (*names, "last_hidden_state")},
        )
    return path


def export_decoder(decoder: nn.Module, path: Path) -> Path:
    """Export ``decoder`` (float32, eval) to ONNX at ``path``: inputs ``inputs_embeds`` [B, T, d] float32,
    ``attention_mask`` and ``position_ids`` [B, T] int64, output ``last_hidden_state`` [B, T, d]; B and T free."""
    d = embedding_table(decoder).shape[1]
    batch, length = EXAMPLE_SHAPE
    generator = torch.Generator().manual_seed(0)  # leaves the caller's random state alone
    args = (
        torch.randn(batch, length, d, generator=generator),
        example_mask(),
        torch.arange(length).expand(batch, length).contiguous(),
    )
    return export_last_hidden(decoder, "decoder", _INPUTS, args, path, use_cache=False)


def quantize_onnx(source: Path, target: Path, method: str) -> Path:
    """Write ``source``'s graph with its matmul weights quantized by ``method`` (see the module doc) to ``target``."""
    with _root_logging_kept():
        require("onnxruntime.quantization", f"the ONNX decoder method {method!r}", "int8")
        require(
            "onnxruntime.quantization.matmul_nbits_quantizer",
            f"the ONNX decoder method {method!r}",
            "int8",
            distribution="onnx-ir",
        )
    with _quiet("onnxruntime.quantization", "root"):
        return _quantize(source, target, method)


@contextlib.contextmanager
def _root_logging_kept():
    """onnxruntime.quantization's modules call ``logging.basicConfig(level=INFO)`` when imported; undo that."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@contextlib.contextmanager
def _quiet(*names: str):
    """Hold these loggers at WARNING (the quantizers log every node at INFO)."""
    loggers = [logging.getLogger(None if n == "root" else n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.level, logging.WARNING))
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _quantize(source: Path, target: Path, method: str) -> Path:
    if method == "dynamic-qint8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=False)
        return target
    if not method.startswith("nbits"):
        raise ValueError(f"unknown ONNX decoder method {method!r}: one of {', '.join(METHODS)}")
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    bits, block = (int(x) for x in method.removeprefix("nbits").split("-b"))
    config = DefaultWeightOnlyQuantConfig(block_size=block, is_symmetric=True, accuracy_level=4, bits=bits)
    quantizer = MatMulNBitsQuantizer(onnx.load(str(source)), algo_config=config)
    quantizer.process()
    onnx.save_model(quantizer.model.model, str(target))
    return target


def cached_onnx(
    decoder: nn.Module,
    method: str,
    cache_dir: Path | None = None,
    *,
    transform: Callable[[Path, Path], Path] | None = None,
    key_extra: str = "",
) -> Path:
    """The ONNX file of ``decoder`` with ``method``, exported (and quantized) on first use, then read from disk.

    ``transform(fp32_export, target)`` builds a method this module does not know (``c2v_rag.cpu.int8``'s); then
    ``key_extra`` must name everything it depends on besides the decoder's weights.
    """
    if transform is None and method not in METHODS:
        raise ValueError(f"unknown ONNX decoder method {method!r}: one of {', '.join(METHODS)}")
    folder = (cache_dir or onnx_cache_dir()) / decoder_key(decoder, f"{method} {key_extra}".strip())
    target = folder / f"decoder-{method}.onnx"
    if target.is_file():
        return target
    logger.info("exporting the decoder to ONNX (%s) into %s: once per model and method", method, folder)

    def build(tmp: Path) -> Path:
        with stage("exporting the decoder"):
            exported = export_decoder(decoder, tmp / "decoder-fp32.onnx")
        if transform is not None:
            return transform(exported, tmp / target.name)
        return exported if method == "fp32" else quantize_onnx(exported, tmp / target.name, method)

    return write_atomically(target, build)


@dataclass
class HiddenStates:
    """What ``Causal2Vec`` reads from its decoder's and encoder's outputs."""

    last_hidden_state: torch.Tensor


class OnnxDecoder(nn.Module):
    """A decoder whose transformer layers run in an ONNX Runtime session on the CPU (see the module doc).

    Keeps the torch word embeddings (``get_input_embeddings``; also what ``Causal2Vec.device``/``dtype``
    read) and the decoder's config. Inference only: nothing here has gradients.
    """

    def __init__(self, decoder: nn.Module, path: Path, method: str, threads: int | None = None) -> None:
        """``threads``: how many batches the encode loop runs at once, one core each (None: torch's thread
        count when it runs: ``torch.set_num_threads``, ``OMP_NUM_THREADS``)."""
        super().__init__()
        self.config = backbone_config(decoder)
        self.embed_tokens = input_embeddings(decoder)
        self.method = method
        self.path = Path(path)
        self.threads = threads
        self.session = cpu_session(self.path)
        # a graph with fused attention (c2v_rag.cpu.onnx_attention) derives positions from each row's length
        metadata = self.session.get_modelmeta().custom_metadata_map
        self.positions_from_lengths = metadata.get(POSITIONS_KEY) == POSITIONS_FROM_LENGTHS
        # a graph whose last layer runs at given rows only (c2v_rag.cpu.onnx_attention.last_layer_at_rows)
        self.rows_only = READOUT_INPUT in {i.name for i in self.session.get_inputs()}

    @property
    def batch_workers(self) -> int:
        """How many batches to run at once (:func:`~c2v_rag.encode.loop.embed_prepared`): ``threads``, else
        torch's thread count now. Each session call computes on its caller's thread."""
        return self.threads or torch.get_num_threads()

    def get_input_embeddings(self) -> nn.Module:
        return self.embed_tokens

    def forward(
        self,
        inputs_embeds: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        use_cache: bool = False,
        readout_positions: torch.Tensor | None = None,
        **kwargs,
    ) -> HiddenStates:
        """The last hidden states [B, T, d]. ``readout_positions`` [B, R]: only those rows are needed; where
        :attr:`rows_only`, only they are computed in the last layer and the other rows are NaN (else all are
        computed)."""
        if kwargs.get("output_hidden_states") or kwargs.get("output_attentions") or kwargs.get("past_key_values"):
            raise ValueError("the ONNX decoder returns the last hidden state only")
        batch, length = inputs_embeds.shape[:2]
        if attention_mask is None:
            attention_mask = torch.ones(batch, length, dtype=torch.long)
        if position_ids is None:
            position_ids = torch.arange(length).expand(batch, length)
        elif self.positions_from_lengths and not torch.equal(
            position_ids.cpu(), torch.arange(length).expand(batch, length)
        ):
            raise ValueError(
                f"this ONNX decoder ({self.path.name}) places every row at positions 0..T-1 (right "
                "padding); position_ids other than that need the torch decoder (quantize='none')"
            )
        feeds = {
            "inputs_embeds": np.ascontiguousarray(inputs_embeds.detach().to("cpu", torch.float32).numpy()),
            "attention_mask": np.ascontiguousarray(attention_mask.detach().cpu().numpy().astype(np.int64)),
            "position_ids": np.ascontiguousarray(position_ids.detach().cpu().numpy().astype(np.int64)),
        }
        if not self.rows_only:
            (hidden,) = self.session.run(["last_hidden_state"], feeds)
            return HiddenStates(torch.from_numpy(hidden))
        rows = torch.arange(length).expand(batch, length) if readout_positions is None else readout_positions.cpu()
        feeds[READOUT_INPUT] = np.ascontiguousarray(rows.numpy().astype(np.int64))
        (states,) = self.session.run(["last_hidden_state"], feeds)
        if readout_positions is None:
            return HiddenStates(torch.from_numpy(states))
        hidden = torch.full((batch, length, states.shape[-1]), float("nan"))
        hidden[torch.arange(batch)[:, None], rows] = torch.from_numpy(states)
        return HiddenStates(hidden)


def onnx_decoder(
    decoder: nn.Module,
    method: str = "nbits8-b32",
    *,
    cache_dir: Path | None = None,
    threads: int | None = None,
    transform: Callable[[Path, Path], Path] | None = None,
    key_extra: str = "",
) -> OnnxDecoder:
    """``decoder`` (float32, on the CPU, merged adapters) run by ONNX Runtime with ``method``
    (``transform``/``key_extra``: see :func:`cached_onnx`)."""
    require("onnxruntime", f"the ONNX decoder ({method})", "int8")
    check_exportable(decoder, "decoder")
    path = cached_onnx(decoder, method, cache_dir, transform=transform, key_extra=key_extra)
    return OnnxDecoder(decoder, path, method, threads)
