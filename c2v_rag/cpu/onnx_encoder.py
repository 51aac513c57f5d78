"""The bidirectional encoder (MiniLM and other BERT-style models) run by ONNX Runtime on a CPU, in float32.

``quantize="int8"`` runs the decoder in ONNX Runtime (:mod:`c2v_rag.cpu.int8`); on CPUs without native bf16
(:func:`~c2v_rag.cpu.int8.encoder_runs_in_bf16`) :func:`onnx_encoder` moves the encoder there too, unquantized:
the same float32 arithmetic, so its states and the encoder's part of every vector stay what torch computes (to
float rounding), while ONNX Runtime's fused kernels are faster than torch's float32 (docs/performance.md, "int8 on
CPU"). Where the CPU computes bf16, torch's bf16 is faster still, and the encoder stays in torch. It is not
quantized: per-token int8
with SmoothQuant (the decoder's recipe) cost too much quality in the encoder's own mean-pooled vector, the
strongest part of the embedding.

:class:`OnnxEncoder` is an ``nn.Module`` called as ``Causal2Vec`` calls its encoder (``input_ids``,
``attention_mask``) that returns an object with ``last_hidden_state``; it keeps the encoder's ``config``.
The file is exported once per model into the ONNX cache (:func:`~c2v_rag.cpu.onnx_decoder.onnx_cache_dir`),
in a folder named by a sha256 of the encoder's weights and config.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from c2v_rag.core.extras import require
from c2v_rag.core.files import write_atomically
from c2v_rag.cpu.build_progress import stage
from c2v_rag.cpu.onnx_decoder import (
    EXAMPLE_SHAPE,
    OPSET,
    HiddenStates,
    check_exportable,
    config_json,
    example_mask,
    export_last_hidden,
    hash_weights,
    onnx_cache_dir,
)
from c2v_rag.cpu.ort_session import cpu_session
from c2v_rag.nn.backbone import backbone_config

logger = logging.getLogger(__name__)

# Bump when the export changes, so that cached files are rebuilt.
FORMAT = 1
_INPUTS = ("input_ids", "attention_mask")
_FILE = "encoder-fp32.onnx"


def encoder_key(encoder: nn.Module) -> str:
    """A sha256 (24 hex digits) naming the export of ``encoder``'s current weights."""
    digest = hashlib.sha256(f"c2v-onnx-encoder {FORMAT} {OPSET}\n".encode())
    digest.update(config_json(backbone_config(encoder)))
    hash_weights(digest, encoder)
    return digest.hexdigest()[:24]


def export_encoder(encoder: nn.Module, path: Path) -> Path:
    """Export ``encoder`` (float32, eval) to ONNX at ``path``: inputs ``input_ids`` and ``attention_mask``
    [B, T] int64, output ``last_hidden_state`` [B, T, k]; B and T free (T up to the encoder's positions)."""
    generator = torch.Generator().manual_seed(0)  # leaves the caller's random state alone
    ids = torch.randint(100, min(1000, backbone_config(encoder).vocab_size), EXAMPLE_SHAPE, generator=generator)
    return export_last_hidden(encoder, "encoder", _INPUTS, (ids, example_mask()), path)


class OnnxEncoder(nn.Module):
    """An encoder whose forward runs in an ONNX Runtime session on the CPU (see the module doc). Inference only."""

    # Each session call computes on its caller's thread (ort_session.cpu_session): the encode loop runs batches of
    # the encoder side by side, as it runs the int8 decoder's (Causal2Vec.encoder_workers).
    one_core_per_call = True

    def __init__(self, encoder: nn.Module, path: Path) -> None:
        super().__init__()
        self.config = encoder.config
        self.path = Path(path)
        # one thread per call: the encode loop runs batches side by side (OnnxDecoder.batch_workers)
        self.session = cpu_session(self.path)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: Any
    ) -> HiddenStates:
        if kwargs.get("output_hidden_states") or kwargs.get("output_attentions"):
            raise ValueError("the ONNX encoder returns the last hidden state only")
        if kwargs.get("token_type_ids") is not None or kwargs.get("inputs_embeds") is not None:
            raise ValueError("the ONNX encoder reads input_ids and attention_mask only")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        feeds = {
            "input_ids": np.ascontiguousarray(input_ids.detach().cpu().numpy().astype(np.int64)),
            "attention_mask": np.ascontiguousarray(attention_mask.detach().cpu().numpy().astype(np.int64)),
        }
        (hidden,) = self.session.run(["last_hidden_state"], feeds)
        return HiddenStates(torch.from_numpy(hidden))


def onnx_encoder(encoder: nn.Module, *, cache_dir: Path | None = None) -> OnnxEncoder:
    """``encoder`` (float32, on the CPU, merged adapters) run by ONNX Runtime, exported on first use and then
    read from the cache."""
    return OnnxEncoder(encoder, onnx_encoder_file(encoder, cache_dir=cache_dir))


def onnx_encoder_file(encoder: nn.Module, *, cache_dir: Path | None = None) -> Path:
    """The cached ONNX file of ``encoder`` (see :func:`onnx_encoder`), exported first if missing."""
    require("onnxruntime", "the ONNX encoder", "int8")
    check_exportable(encoder, "encoder")
    target = (cache_dir or onnx_cache_dir()) / encoder_key(encoder) / _FILE
    if not target.is_file():
        logger.info("exporting the encoder to ONNX into %s: once per model", target.parent)
        with stage("exporting the encoder"):
            write_atomically(target, lambda tmp: export_encoder(encoder, tmp / _FILE))
    return target
