"""int8 weights for CPU encoding (issue 26): ``Causal2Vec.from_pretrained(..., quantize="int8")``.

Not to be confused with :mod:`c2v_rag.quantization`, which rounds the *output* vectors
(``encode(precision="int8")``); this module changes how the model *computes* them.

The chosen method is PyTorch's dynamic int8 quantization of the ``nn.Linear`` layers
(``torch.ao.quantization.quantize_dynamic``): weights are stored in int8 per output channel, and
each matmul quantizes its input on the fly and runs fbgemm's int8 GEMM (AVX2/AVX-512 VNNI). It
needs no calibration data, no export, no extra package, and keeps the model an ordinary
``nn.Module`` (the same encode loop, batching and readout).

It misses the quality bound on the default preset: one activation scale per batch tensor leaves
SmolLM2's outlier-heavy activations few int8 levels, so vectors sit at cosine 0.78 (worst) to the
float ones, and a text's vector depends on its batch (docs/performance.md, "int8 on CPU"). That is
why ``quantize="auto"`` picks it on no CPU and loading it logs a warning. ONNX Runtime's decoder
(:mod:`c2v_rag.onnx_decoder`) was measured as the alternative: its per-block 8-bit weights meet the quality
bound but run slower than float32 on an AVX2 CPU without VNNI, so it is a bench candidate, not this
option's method. torchao's per-token scales and OpenVINO are not measured yet.
"""

from __future__ import annotations

import logging
import warnings

import torch
from torch import nn

logger = logging.getLogger(__name__)


def quantize_linear_int8(module: nn.Module) -> nn.Module:
    """Replace ``module``'s ``nn.Linear`` layers by dynamic int8 ones, in place; returns ``module``.

    The module must be float32 (dynamic int8 takes float32 activations) and in eval mode.
    """
    dtype = next(module.parameters()).dtype
    if dtype != torch.float32:
        raise ValueError(f"int8 quantization starts from float32 weights, got {dtype}: load with dtype='float32'")
    from torch.ao.quantization import quantize_dynamic

    logger.warning("int8 (dynamic, per-tensor activation scales) gave vectors at cosine 0.78-0.9 to the float ones "
                   "on the default preset, and batch-dependent ones; use it only where that was measured harmless "
                   "(docs/performance.md, 'int8 on CPU')")

    with warnings.catch_warnings():
        # torch 2.13 marks torch.ao.quantization deprecated in favour of torchao; the warning tells a
        # user loading a model nothing they could act on (the quality warning above does).
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*torch.ao.quantization.*")
        return quantize_dynamic(module, {nn.Linear}, dtype=torch.qint8, inplace=True)
