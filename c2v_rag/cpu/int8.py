"""int8 for CPU encoding: ``Causal2Vec.from_pretrained(..., quantize="int8")``.

Not to be confused with :mod:`c2v_rag.encode.precision`, which rounds the *output* vectors
(``encode(precision="int8")``); this module changes how the model *computes* them.

The method, :data:`INT8_METHOD` (``"int8-token-sq"``), chosen by measurement (docs/performance.md,
"int8 on CPU"): the decoder's linear layers run as int8 matmuls in ONNX Runtime, each activation row
(token) with its own scale, after SmoothQuant moved the activations' outlier channels into the weights.

- **Per token.** Each row of a matmul's input is mapped affinely onto uint8 [0, 255] by its own minimum
  and maximum (one ``QuantizeLinear`` with a scale and zero point per row), so a text never shares a scale
  with its batch neighbours (torch's dynamic int8 scales the whole batch at once: its vectors sat at
  vectors far from the float ones, and dependent on the batch). The product runs on ONNX Runtime's U8S8
  ``MatMulInteger`` GEMM; the int32 result is rescaled per row and column.
- **The zero point inside the GEMM.** ``(xq - z) @ wq = xq @ wq - z * colsum(wq)``: the second term is taken
  out in int32 by the GEMM itself, from a few more input columns that hold each row's z (u8) against weight
  rows that sum to ``-colsum(wq)`` (within +-64 each: a few percent more GEMM). Done in float over the output
  instead, it costs a ``Mul`` and an ``Add`` over every [tokens, out] product, and subtracts two large numbers
  in float32.
- **One quantization per input.** Linear layers that read the same tensor (q/k/v after the input norm,
  gate/up after the post-attention norm) share its SmoothQuant factor and its quantized copy; each keeps
  its own GEMM (one wide GEMM and a ``Split`` is slower: the split copies the output).
- **7-bit weights**, int8 per output column in [-64, 64]: AVX2's ``vpmaddubsw`` adds pairs of u8 x s8
  products in saturating int16, which full-range weights overflow.
- **SmoothQuant** (alpha :data:`SMOOTH_ALPHA`): per input channel k, ``s_k = max|x_k|^a / max|W_k|^(1-a)``;
  x is divided by s and W's row k multiplied by s, an identity in exact arithmetic that leaves int8 far
  fewer outliers to straddle. The division is folded into the RMSNorm's weight where the norm feeds only
  those layers (else one ``Mul``; ``o_proj``). ``max|x_k|`` is measured by :func:`input_maxima` on the
  float model over :func:`calibration_texts`, a fixed set of original texts shipped with the package, under
  bf16 autocast where the CPU computes bf16 natively (:func:`calibration_precision`).
- ``down_proj`` too. Its inputs are the extreme ones (per-channel maxima in the thousands), so int8 there
  costs the most quality, still inside the bound, for a clear speed-up (docs/performance.md, "int8 on CPU").
  It relies on the whole int8 path computing each text on its own, bit for bit (the projector row by row):
  otherwise float noise from the batch flips its roundings and a text's vector depends on its batch.
  :data:`KEEP_FLOAT` names layers to leave float.
- The attention runs in float32 as ONNX's ``Attention`` op over causal blocks of queries, so that it does
  about the causal half of the work (:mod:`c2v_rag.cpu.onnx_attention`), where it applies; and the last layer
  runs at the rows the embedding reads only (the same module).

The encoder is not quantized (:func:`encoder_runs_in_bf16`: torch's bf16 where the CPU computes bf16 natively,
else ONNX Runtime's float32, :mod:`c2v_rag.cpu.onnx_encoder`), and the projector, Contextual-token slot write and
readout run in torch float32: int8 in the encoder gained little and cost quality (docs/performance.md). The graph
is built once per model and cached on disk (:mod:`c2v_rag.cpu.onnx_decoder`), keyed by the decoder's weights, the
rest of the model's weights and config, the calibration texts and this recipe; a later load reads the file without
calibrating again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from c2v_rag.core.devices import INT8_METHOD, cpu_has_native_bf16
from c2v_rag.core.files import write_atomically
from c2v_rag.cpu import onnx_decoder as _decoder_files
from c2v_rag.cpu import onnx_encoder as _encoder_files
from c2v_rag.cpu.build_progress import stage
from c2v_rag.cpu.onnx_attention import default_opset, drop_unused_initializers, fuse_attention, last_layer_at_rows
from c2v_rag.cpu.onnx_decoder import cached_onnx, check_exportable, hash_weights, onnx_cache_dir

if TYPE_CHECKING:
    import onnx

logger = logging.getLogger(__name__)

SMOOTH_ALPHA = 0.5
KEEP_FLOAT: tuple[str, ...] = ()
WEIGHT_LEVELS = 64  # 7-bit weights: see the module doc
FOLD_ZERO_POINT = True  # the zero point's share taken out inside the GEMM (module doc)
# Bump when the recipe below changes in a way the constants above do not show.
RECIPE_VERSION = 6  # 2: shared quantization per input, norm folding, QuantizeLinear, fused attention; 3: the
# zero point folded into the GEMM; 4: down_proj in int8 (KEEP_FLOAT was ("down_proj",)); 5: block-causal
# attention (ONNX Attention, opset 23) instead of GroupQueryAttention; 6: the last layer at the readout rows only
# Query instructions the calibration runs with, beside documents without one: instruction tokens reach
# the decoder at inference too, so their activations belong in the maxima.
CALIBRATION_TASKS: tuple[str | None, ...] = (None, "MSMARCO", "STSBenchmark", "EmotionClassification")
_CALIBRATION_FILE = "int8_calibration.json"


def calibration_precision() -> str:
    """What the float model calibrates in (:func:`linear_input_maxima`): ``"bf16"`` (autocast) where the CPU
    multiplies bf16 in hardware, ``"fp32"`` elsewhere. A graph's keys name it, so the graphs differ by CPU class.

    bf16 calibrates about three times as fast there, and the int8 vectors it gives are as close to the float
    model's as float32 calibration's (bench/results/notes/int8-history.md, "Calibration in bf16")."""
    return "bf16" if cpu_has_native_bf16() else "fp32"


@cache
def calibration_texts() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The shipped calibration set: (documents, queries), original texts of many domains and lengths."""
    data = json.loads((resources.files("c2v_rag") / "resources" / _CALIBRATION_FILE).read_text("utf-8"))
    return tuple(data["documents"]), tuple(data["queries"])


def calibration_digest(header: str) -> Any:
    """A sha256 (hashlib's) begun with ``header`` and the calibration texts, as every key of an int8 graph or of
    maxima begins: each then adds what else it depends on."""
    digest = hashlib.sha256(header.encode())
    digest.update(json.dumps(calibration_texts()).encode())
    return digest


SHIPPED_MAXIMA_FILE = "int8_calibration.safetensors"
"""A variant folder's calibration for int8, made where it was packaged (:func:`shipped_maxima_key`): a first int8
load that finds it valid for the variant's files skips calibrating, most of building the graphs."""
_KEY_FIELD = "calibration_key"
_BASES_FIELD = "bases"


def shipped_maxima_key(variant: str) -> str:
    """What shipped maxima are valid for: ``variant`` (the variant's weight files, adapters, config and base
    models' contents, as :mod:`c2v_rag.hub.variants` digests them, the same on every machine), the calibration
    texts and tasks, in float32. The recipe's other constants do not change the maxima, which are statistics of
    the float model alone."""
    digest = calibration_digest(f"c2v-int8-maxima fp32 {CALIBRATION_TASKS}\n")
    digest.update(variant.encode())
    return digest.hexdigest()[:24]


@dataclass(frozen=True)
class ShippedMaxima:
    """A shipped calibration (:data:`SHIPPED_MAXIMA_FILE`) found valid: the key it was made for and its file, whose
    maxima (what :func:`input_maxima` would give in float32, by module name) are read when a graph is built, not on
    every load that finds its graphs built already."""

    key: str
    path: Path

    @cached_property
    def maxima(self) -> dict[str, np.ndarray]:
        from safetensors.numpy import load_file

        return load_file(str(self.path))


def write_shipped_maxima(
    path: Path, maxima: dict[str, np.ndarray], key: str, bases: dict[str, str] | None = None
) -> None:
    """Save ``maxima`` (float32, by module name) for the variant ``key`` names (:func:`shipped_maxima_key`), with
    the content digests of the base models they were made on (``bases``, by role; :func:`shipped_bases`)."""
    from safetensors.numpy import save_file

    tensors = {name: np.ascontiguousarray(value, dtype=np.float32) for name, value in maxima.items()}
    save_file(tensors, str(path), metadata={_KEY_FIELD: key, _BASES_FIELD: json.dumps(bases or {}, sort_keys=True)})


def shipped_bases(path: Path) -> dict[str, str]:
    """The base models' content digests a shipped calibration was made on: where a machine's differ (another release
    of a base package, or of the library that converts it), the calibration does not apply there."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as handle:
        return dict(json.loads((handle.metadata() or {}).get(_BASES_FIELD) or "{}"))


def read_shipped_maxima(path: Path, key: str) -> ShippedMaxima | None:
    """The maxima at ``path`` when they were made for ``key``; None when there are none, or they were made for
    other weights (a retrained or edited variant: a debug line, and the load calibrates instead)."""
    if not path.is_file():
        return None
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as handle:
            made_for = (handle.metadata() or {}).get(_KEY_FIELD)
            if made_for != key:
                logger.debug("%s was made for other weights (%s, not %s); calibrating instead", path, made_for, key)
                return None
            return ShippedMaxima(key, path)
    except (OSError, SafetensorError) as err:
        logger.warning("could not read %s (%s); calibrating instead", path, err)
        return None


def maxima_source(shipped: str | None) -> str:
    """Where a graph's maxima come from, as the keys name it."""
    return f"maxima shipped {shipped}" if shipped else f"calibrated in {calibration_precision()}"


def recipe_key(model: Any, shipped: str | None = None) -> str:
    """sha256 of what the calibration depends on besides the decoder's graph weights: the calibration texts,
    the recipe's constants, the model's config, and the weights that make the decoder's inputs (the
    encoder's and projector's, which make the Contextual token, and the decoder's word embeddings, which
    :func:`~c2v_rag.cpu.onnx_decoder.decoder_key` leaves out because they are not in the graph). ``shipped``: the
    key of the variant's shipped maxima when they stand in for a calibration here (:class:`ShippedMaxima`)."""
    digest = calibration_digest(
        f"{INT8_METHOD} v{RECIPE_VERSION} {SMOOTH_ALPHA} {KEEP_FLOAT} {WEIGHT_LEVELS} {FOLD_ZERO_POINT} "
        f"{CALIBRATION_TASKS} {maxima_source(shipped)}\n"
    )
    digest.update(model.config.key_json().encode())
    hash_weights(digest, model.decoder.get_input_embeddings(), "decoder.embeddings.")
    for role in ("encoder", "projector"):
        module = getattr(model, role, None)
        if module is not None:
            hash_weights(digest, module, f"{role}.")
    return digest.hexdigest()[:24]


def input_maxima(
    model: Any,
    documents: Sequence[str] | None = None,
    queries: Sequence[str] | None = None,
    *,
    batch_size: int = 8,
    precision: str | None = None,
) -> dict[str, np.ndarray]:
    """``max |x_k|`` per input channel of each linear layer in ``model.decoder``, by module name, over
    every position the decoder sees while ``model`` (float) encodes the calibration texts (the packaged
    ones unless given): documents plain, queries under each of :data:`CALIBRATION_TASKS`. ``precision``: as
    :func:`linear_input_maxima`'s."""
    if documents is None or queries is None:
        documents, queries = calibration_texts()

    def encode() -> None:
        # The long calibration passages would trip encode's once-per-model truncation warning, which is about
        # the user's texts, not these.
        warned, model.truncation_warned = model.truncation_warned, True
        try:
            with stage("calibrating", steps=1 + len(CALIBRATION_TASKS)) as progress:
                model.encode_documents(list(documents), batch_size=batch_size, show_progress_bar=False)
                progress.step()
                for task in CALIBRATION_TASKS:
                    model.encode_queries(list(queries), task=task, batch_size=batch_size, show_progress_bar=False)
                    progress.step()
        finally:
            model.truncation_warned = warned

    return linear_input_maxima(model.decoder, encode, precision=precision)


def linear_input_maxima(
    module: nn.Module, run: Callable[[], object], *, precision: str | None = None
) -> dict[str, np.ndarray]:
    """``max |x_k|`` per input channel of each linear layer in ``module`` (``nn.Linear``, or the plain forward's
    :class:`~c2v_rag.nn.plain.Linear`, whose names are transformers'), by module name, over every row that ``run()``
    feeds them: what SmoothQuant's factors are computed from. ``run`` runs under bf16 autocast where ``precision``
    (default :func:`calibration_precision`) is ``"bf16"``."""
    from c2v_rag.nn.plain import Linear as PlainLinear

    precision = precision or calibration_precision()
    amax: dict[str, torch.Tensor] = {}

    def hook(name: str):
        def record(module, inputs, output):
            x = inputs[0].detach().reshape(-1, inputs[0].shape[-1]).abs().amax(0).float()
            amax[name] = torch.maximum(amax[name], x) if name in amax else x

        return record

    linears = [(n, m) for n, m in module.named_modules() if isinstance(m, (nn.Linear, PlainLinear))]
    if not linears:  # maxima of nothing would build an int8 graph with no SmoothQuant factor at all
        raise ValueError(f"{type(module).__name__} has no linear layer to calibrate")
    handles = [m.register_forward_hook(hook(n)) for n, m in linears]
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            run()
    finally:
        for handle in handles:
            handle.remove()
    return {name: value.cpu().numpy() for name, value in amax.items()}


def _module_name(node_name: str) -> str:
    # The legacy exporter names a linear layer's MatMul "/layers.0/self_attn/q_proj/MatMul" (sometimes
    # under "/decoder/"); the module is "layers.0.self_attn.q_proj".
    return node_name.strip("/").removeprefix("decoder/").removesuffix("/MatMul").replace("/", ".")


def _foldable_scale(graph: onnx.GraphProto, x: str, group: list[Any], inits: dict[str, Any]) -> str | None:
    """The name of the per-channel weight initializer of the ``Mul`` that makes ``x`` (an RMSNorm's gamma),
    when dividing it by SmoothQuant's ``s`` changes nothing but ``group``'s input: the initializer is used
    by that ``Mul`` alone and ``x`` feeds only ``group`` and ``Shape`` nodes. Else None."""
    from onnx import numpy_helper

    source = next((n for n in graph.node if x in n.output), None)
    if source is None or source.op_type != "Mul":
        return None
    users = [n for n in graph.node if x in n.input and n.op_type != "Shape"]
    if {id(n) for n in users} != {id(n) for n in group}:
        return None
    for name in source.input:
        if (
            name in inits
            and numpy_helper.to_array(inits[name]).ndim == 1
            and sum(name in n.input for n in graph.node) == 1
        ):
            return name
    return None


def rewrite_per_token_int8(
    graph: onnx.GraphProto,
    maxima: dict[str, np.ndarray] | None,
    *,
    alpha: float = SMOOTH_ALPHA,
    keep_float: tuple[str, ...] = KEEP_FLOAT,
    levels: int = WEIGHT_LEVELS,
    fold_zero_point: bool = FOLD_ZERO_POINT,
    opset: int = 17,
) -> int:
    """Replace, in place, every ``MatMul`` of ``graph`` whose second input is a weight initializer (the
    linear layers; not the attention's activation x activation matmuls), except names containing one of
    ``keep_float``, by the per-token int8 subgraph of the module doc. ``maxima`` (from
    :func:`input_maxima`) turns SmoothQuant on; None leaves the activations unscaled. Returns how many
    were replaced.

    Linear layers that read the same tensor (q/k/v, gate/up) share one SmoothQuant factor (from the
    largest of their weights' rows) and one quantized copy of it, each then with its own int8 GEMM
    (one GEMM and a ``Split`` is slower: the split copies the output). Where that tensor is an
    RMSNorm's output read by nothing else, ``1/s`` is folded into the norm's weight instead of a ``Mul``.

    ``fold_zero_point`` takes the zero point's share out inside the GEMM (:func:`_zero_point_rows`) instead
    of in two float passes over the output. ``opset``: the model's ONNX opset (from 18 on, reductions take
    their axes as an input).
    """
    from onnx import TensorProto, helper, numpy_helper

    inits = {i.name: i for i in graph.initializer}
    groups: dict[str, list[Any]] = {}
    for node in graph.node:
        if node.op_type == "MatMul" and node.input[1] in inits and not any(k in node.name for k in keep_float):
            groups.setdefault(node.input[0], []).append(node)
    first = {id(g[0]): g for g in groups.values()}
    replaced = {id(n) for g in groups.values() for n in g}
    folded: dict[str, np.ndarray] = {}
    nodes: list[Any] = []
    added: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        added.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    zero, top, eps = (
        const("i8_zero", np.array(0.0, np.float32)),
        const("i8_255", np.array(255.0, np.float32)),
        const("i8_eps", np.array(1e-8, np.float32)),
    )
    flat = const("i8_flat", np.array([-1], np.int64))
    # each row's own range: the reductions over axis 1, written as the model's opset has it
    axis_input = [const("i8_axis1", np.array([1], np.int64))] if opset >= 18 else []
    axis_attribute = {} if opset >= 18 else {"axes": [1]}
    for node in graph.node:
        if id(node) not in replaced:
            nodes.append(node)
            continue
        if id(node) not in first:
            continue  # emitted with the first member of its group, which reads the same input
        group = first[id(node)]
        weights = [numpy_helper.to_array(inits[n.input[1]]).astype(np.float32) for n in group]  # [K in, M out]
        w = np.concatenate(weights, axis=1)
        k_in = w.shape[0]
        prefix = group[0].name.strip("/").replace("/", "_") + "_i8"
        x = group[0].input[0]

        def op(kind: str, inputs: list[str], suffix: str, **attrs) -> str:
            nodes.append(helper.make_node(kind, inputs, [prefix + suffix], name=prefix + suffix, **attrs))  # noqa: B023
            return prefix + suffix  # noqa: B023

        if maxima is not None:
            keys = [_module_name(n.name) for n in group]
            missing = [(n.name, k) for n, k in zip(group, keys) if k not in maxima]
            if missing:
                raise ValueError(
                    f"no calibration maxima for the ONNX node {missing[0][0]!r} (module {missing[0][1]!r}): "
                    "the export's node names do not follow the decoder's module names"
                )
            a = np.maximum(np.max([maxima[k] for k in keys], axis=0).astype(np.float32), 1e-5)
            s = np.clip(a**alpha / np.maximum(np.abs(w).max(1), 1e-5) ** (1 - alpha), 1e-5, None).astype(np.float32)
            w = w * s[:, None]
            inv_s = (1.0 / s).astype(np.float32)
            gamma = _foldable_scale(graph, x, group, inits)
            if gamma is not None:
                folded[gamma] = numpy_helper.to_array(inits[gamma]).astype(np.float32) * inv_s
            else:
                x = op("Mul", [x, const(prefix + "_inv_s", inv_s)], "_xs")
        w_scale = (np.maximum(np.abs(w).max(0), 1e-12) / levels).astype(np.float32)
        wq = np.clip(np.round(w / w_scale), -levels, levels).astype(np.int8)
        # Each row onto uint8 by its own range: scale = (max - min) / 255, zero point = round(-min / scale);
        # QuantizeLinear does the rounding pass in one kernel.
        rows = op("Reshape", [x, const(prefix + "_2d", np.array([-1, k_in], np.int64))], "_rows")
        low = op("Min", [op("ReduceMin", [rows, *axis_input], "_min0", **axis_attribute, keepdims=1), zero], "_min")
        high = op("Max", [op("ReduceMax", [rows, *axis_input], "_max0", **axis_attribute, keepdims=1), zero], "_max")
        scale = op("Max", [op("Div", [op("Sub", [high, low], "_range"), top], "_scale0"), eps], "_scale")
        zero_point = op("Round", [op("Div", [op("Neg", [low], "_neg"), scale], "_zp0")], "_zp")
        zero_point_u8 = op("Cast", [op("Clip", [zero_point, zero, top], "_zp_clip")], "_zp_u8", to=TensorProto.UINT8)
        xq = op(
            "QuantizeLinear",
            [rows, op("Reshape", [scale, flat], "_scale_1d"), op("Reshape", [zero_point_u8, flat], "_zp_1d")],
            "_xq",
            axis=0,
        )
        # x ~ (xq - zero_point) * scale: the zero point's share of the product, per row and output column
        if fold_zero_point:
            # each row's zero point repeated in `extra` more input columns, against weight rows that sum to
            # minus each column's sum: the GEMM subtracts zero_point x colsum exactly, in int32
            extra = _zero_point_width(wq, levels)
            xq = op(
                "Concat",
                [
                    xq,
                    op(
                        "Expand",
                        [zero_point_u8, const(prefix + "_zp_cols", np.array([1, extra], np.int64))],
                        "_zp_wide",
                    ),
                ],
                "_xq_zp",
                axis=1,
            )
        else:
            offset = op("Mul", [op("Neg", [zero_point], "_nzp"), scale], "_low")
            colsum = (wq.astype(np.float32) * w_scale).sum(0).astype(np.float32)
        lead = op(
            "Slice",
            [
                op("Shape", [group[0].input[0]], "_shape"),
                const(prefix + "_0", np.array([0], np.int64)),
                const(prefix + "_end", np.array([-1], np.int64)),
            ],
            "_lead",
        )
        start = 0
        for j, member in enumerate(group):
            width = weights[j].shape[1]
            cols = slice(start, start + width)
            start += width
            tag = f"_{j}"
            w_int = (
                np.concatenate([wq[:, cols], _zero_point_rows(wq[:, cols], extra, levels)])
                if fold_zero_point
                else wq[:, cols]
            )
            acc = op(
                "Cast",
                [op("MatMulInteger", [xq, const(prefix + tag + "_wq", w_int)], tag + "_acc_i32")],
                tag + "_acc",
                to=TensorProto.FLOAT,
            )
            both = op("Mul", [scale, const(prefix + tag + "_w_scale", w_scale[cols].reshape(1, width))], tag + "_both")
            out = op("Mul", [acc, both], tag + "_y")
            if not fold_zero_point:
                out = op(
                    "Add",
                    [
                        out,
                        op(
                            "Mul",
                            [offset, const(prefix + tag + "_colsum", colsum[cols].reshape(1, width))],
                            tag + "_offset",
                        ),
                    ],
                    tag + "_y2",
                )
            shape = op(
                "Concat",
                [lead, const(prefix + tag + "_width", np.array([width], np.int64))],
                tag + "_out_shape",
                axis=0,
            )
            nodes.append(helper.make_node("Reshape", [out, shape], [member.output[0]], name=prefix + tag + "_out"))
    del graph.node[:]
    graph.node.extend(nodes)
    initializers = [
        numpy_helper.from_array(folded[i.name], i.name) if i.name in folded else i for i in graph.initializer
    ] + added
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    drop_unused_initializers(graph)
    return len(replaced)


def _zero_point_width(wq: np.ndarray, levels: int) -> int:
    """How many extra input columns carry the zero point: enough that weight rows within +-``levels`` can sum
    to any column's ``-sum(wq)``, rounded up to a multiple of 4 (the K step of the VNNI and AVX2 kernels)."""
    need = int(np.ceil(np.abs(wq.astype(np.int64).sum(0)).max() / levels))
    return max(4, -(-need // 4) * 4)


def _zero_point_rows(wq: np.ndarray, extra: int, levels: int) -> np.ndarray:
    """``extra`` int8 rows, each within +-``levels``, whose column sums are ``-wq.sum(0)`` exactly: against
    ``extra`` input columns that all hold a row's zero point z, they add ``-z * sum_k wq[k, n]``, the
    zero point's share of that row's product. AVX2's ``vpmaddubsw`` adds neighbouring u8 x s8 products in
    int16: 255 x 64 twice stays below its 32,767, as for the weights themselves."""
    target = -wq.astype(np.int64).sum(0)
    base, rest = np.divmod(np.abs(target), extra)
    if (base + (rest > 0)).max(initial=0) > levels:
        raise ValueError(f"{extra} zero-point rows cannot carry a column sum of {np.abs(target).max()}")
    rows = base[None, :] + (np.arange(extra)[:, None] < rest[None, :])
    return (np.sign(target)[None, :] * rows).astype(np.int8)


def write_int8_graph(
    exported: Path, target: Path, decoder: nn.Module, maxima: dict[str, np.ndarray], *, readout_rows_only: bool
) -> Path:
    """The float32 export of ``decoder`` at ``exported`` rewritten by this recipe into ``target``: block-causal
    attention (:func:`~c2v_rag.cpu.onnx_attention.fuse_attention`), the last layer at the rows the embedding reads
    where ``readout_rows_only`` (a reranker needs every row's states), and per-token int8 linear layers with
    SmoothQuant factors from ``maxima``."""
    import onnx

    with stage("writing the int8 decoder"):
        proto = onnx.load(str(exported))
        if fuse_attention(proto, decoder) and readout_rows_only:
            last_layer_at_rows(proto)
        opset = default_opset(proto)
        assert opset is not None  # export_decoder's graph imports the default domain at its OPSET
        rewrite_per_token_int8(proto.graph, maxima, opset=opset)
        onnx.save_model(proto, str(target))
    return target


def int8_decoder_file(model: Any, *, cache_dir: Path | None = None, shipped: ShippedMaxima | None = None) -> Path:
    """The int8 graph of ``model.decoder`` (float32, CPU, merged adapters) with :data:`INT8_METHOD`, for an
    :class:`~c2v_rag.cpu.onnx_decoder.OnnxDecoder`; built only when not cached yet, from ``shipped`` (the maxima
    the variant ships for its own weights) or else by calibrating ``model``."""
    from c2v_rag.core.extras import require

    require("onnx", "quantize='int8'", "int8")
    require("onnxruntime", "quantize='int8'", "int8")
    check_exportable(model.decoder, "decoder")

    def build(source: Path, target: Path) -> Path:
        maxima = shipped.maxima if shipped is not None else input_maxima(model)
        return write_int8_graph(source, target, model.decoder, maxima, readout_rows_only=True)

    key = recipe_key(model, shipped.key if shipped is not None else None)
    return cached_onnx(model.decoder, INT8_METHOD, cache_dir, transform=build, key_extra=key)


def encoder_runs_in_bf16() -> bool:
    """Whether ``quantize="int8"`` runs the encoder in torch, in bf16, rather than in ONNX Runtime's float32: where
    the CPU multiplies bf16 in hardware (:func:`~c2v_rag.core.devices.cpu_has_native_bf16`). There an int8 ingest
    took less CPU time at the same retrieval quality (docs/performance.md, "int8 on CPU"); the encoder's states
    are pooled and projected in float32 either way."""
    return cpu_has_native_bf16()


@dataclass(frozen=True)
class Int8Graphs:
    """The ONNX files an int8 model runs: its int8 decoder and its float32 encoder (None without an encoder, or
    where the encoder runs in torch: :func:`encoder_runs_in_bf16`)."""

    decoder: Path
    encoder: Path | None


def variant_alias(
    weights_digest: str, config_json: str, adapters_digest: str | None, bases: str, shipped: str | None = None
) -> str:
    """A name for the int8 graphs of a variant as saved: its weights' digest, its adapters' (how their weights
    apply: :func:`~c2v_rag.hub.variants.adapters_digest`), its config, its base models' files as they are now
    (``bases``: :meth:`~c2v_rag.hub.sources.ResolvedSource.file_stamps`), and everything else the
    graphs' own keys name (this recipe, the calibration texts, the export formats). The keys hash the backbones'
    tensors, which takes transformers' modules and seconds of a load; a load from the variant's files finds its
    graphs by this name instead (:func:`find_int8_graphs`)."""
    digest = calibration_digest(
        f"c2v-int8-alias {INT8_METHOD} v{RECIPE_VERSION} {SMOOTH_ALPHA} {KEEP_FLOAT} {WEIGHT_LEVELS} "
        f"{FOLD_ZERO_POINT} {CALIBRATION_TASKS} {maxima_source(shipped)} decoder "
        f"{_decoder_files.FORMAT} {_decoder_files.OPSET} encoder {_encoder_files.FORMAT}\n"
    )
    digest.update(config_json.encode())
    digest.update(weights_digest.encode())
    digest.update(f"\nadapters {adapters_digest}\nbases {bases}".encode())
    return digest.hexdigest()[:24]


def _alias_file(alias: str, cache_dir: Path | None) -> Path:
    return (cache_dir or onnx_cache_dir()) / "variants" / f"{alias}.json"


def find_int8_graphs(alias: str, cache_dir: Path | None = None, *, encoder: bool = False) -> Int8Graphs | None:
    """The graphs :func:`record_int8_graphs` noted under ``alias``, if every file is still there; ``encoder``: an
    ONNX encoder is needed too (a model with an encoder, on a CPU where it is not run in bf16), so that a note
    without one, written where it ran in bf16, counts as missing."""
    root = cache_dir or onnx_cache_dir()
    try:
        noted = json.loads(_alias_file(alias, cache_dir).read_text(encoding="utf-8"))
        decoder = root / noted["decoder"]
        encoder_file = root / noted["encoder"] if noted.get("encoder") else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not decoder.is_file() or (encoder_file is not None and not encoder_file.is_file()):
        return None
    if encoder and encoder_file is None:
        return None
    return Int8Graphs(decoder, encoder_file)


def record_int8_graphs(alias: str, graphs: Int8Graphs, cache_dir: Path | None = None) -> None:
    """Note ``graphs`` under ``alias`` (paths relative to the cache, so that a moved cache still finds them)."""
    root = (cache_dir or onnx_cache_dir()).resolve()
    noted = {
        "decoder": str(graphs.decoder.resolve().relative_to(root)),
        "encoder": str(graphs.encoder.resolve().relative_to(root)) if graphs.encoder is not None else None,
    }

    def write(tmp: Path) -> Path:
        path = tmp / "alias.json"
        path.write_text(json.dumps(noted) + "\n", encoding="utf-8")
        return path

    write_atomically(_alias_file(alias, cache_dir), write)
