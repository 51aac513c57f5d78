"""The exported decoder's attention as ONNX Runtime's fused ``GroupQueryAttention`` (issue 26).

The legacy exporter writes each layer's attention out op by op: rotary embedding, ``repeat_kv`` (an
``Expand`` that copies K and V once per query head), the additive causal and padding mask over
[B, heads, T, T], softmax, two batched matmuls and the transposes between them. :func:`fuse_attention`
replaces that chain, layer by layer, with one ``com.microsoft.GroupQueryAttention`` node (CPU kernel:
rotary inside, K/V shared by their query heads, causal mask per sequence from its length), and removes
what no longer feeds the output. Measured on the int8 decoder: 10% less decoder time, vectors as close
to float as before (docs/performance.md, "int8 on CPU").

It applies where it is exact: a decoder whose q/k/v projections have no bias, heads of a multiple of 16
values (the kernel's requirement), with the default rotary
embedding (its cos/sin tables are taken from the model's own ``rotary_emb``), and inputs as ``collate``
writes them: right padding and positions ``0..T-1`` per row (``GroupQueryAttention`` derives positions
and the padding from each row's length; ``position_ids`` is no longer read). Elsewhere the graph is left
as exported.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np
import torch
from torch import nn

logger = logging.getLogger(__name__)

# Stored in the model's metadata: OnnxDecoder then checks that the positions it is given are 0..T-1.
POSITIONS_KEY = "c2v_positions"
POSITIONS_FROM_LENGTHS = "arange"
_PROJECTION = re.compile(r"layers\.(\d+)/self_attn/([qkvo])_proj/MatMul$")


def rotary_tables(decoder: nn.Module) -> tuple[np.ndarray, np.ndarray] | None:
    """cos and sin [max positions, head_dim / 2] of ``decoder``'s rotary embedding (rotate-half layout),
    or None where its tables are not a function of the position alone (dynamic or per-length scaling)."""
    config = decoder.config
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if rope.get("rope_type", rope.get("type", "default")) not in ("default", "linear", "llama3"):
        return None
    rotary = getattr(decoder, "rotary_emb", None)
    positions = int(getattr(config, "max_position_embeddings", 0) or 0)
    if rotary is None or positions < 1:
        return None
    with torch.no_grad():
        cos, sin = rotary(torch.zeros(1, dtype=torch.float32), torch.arange(positions)[None])
    cos, sin = cos[0].float().numpy(), sin[0].float().numpy()
    half = cos.shape[-1] // 2
    if not (np.array_equal(cos[:, :half], cos[:, half:]) and np.array_equal(sin[:, :half], sin[:, half:])):
        return None  # not the rotate-half layout GroupQueryAttention computes
    return np.ascontiguousarray(cos[:, :half]), np.ascontiguousarray(sin[:, :half])


def fuse_attention(model: Any, decoder: nn.Module) -> int:
    """Rewrite ``model`` (an ``onnx.ModelProto`` of :func:`~c2v_rag.onnx_decoder.export_decoder`) in place so
    that every layer's attention is one ``GroupQueryAttention`` node; returns how many layers were fused,
    0 where the decoder or the graph is not one this applies to (see the module doc)."""
    from onnx import TensorProto, helper, numpy_helper

    graph, config = model.graph, decoder.config
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    tables = rotary_tables(decoder)
    # ONNX Runtime's CPU kernel takes head sizes in multiples of 16
    if tables is None or getattr(config, "attention_bias", False) or head_dim % 16:
        logger.info("attention left as exported: no plain rotary embedding, biased projections, or a head size "
                    "(%d) that is not a multiple of 16", head_dim)
        return 0
    layers: dict[int, dict[str, Any]] = {}
    for node in graph.node:
        match = _PROJECTION.search(node.name)
        if node.op_type == "MatMul" and match:
            layers.setdefault(int(match.group(1)), {})[match.group(2)] = node
    if not layers or any(set(parts) != set("qkvo") for parts in layers.values()):
        logger.info("attention left as exported: the graph's projections are not named as expected")
        return 0
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    for parts in layers.values():  # a bias Add after a projection would be skipped by reading its MatMul
        if any(n.op_type not in ("Reshape", "Shape") for p in "qkv" for n in consumers[parts[p].output[0]]):
            logger.info("attention left as exported: a q/k/v projection feeds more than the attention")
            return 0

    cos, sin = tables
    new = [
        helper.make_node("ReduceSum", ["attention_mask", "gqa_axis1"], ["gqa_lengths"], name="gqa_lengths", keepdims=0),
        helper.make_node("Sub", ["gqa_lengths", "gqa_one"], ["gqa_last"], name="gqa_last"),
        helper.make_node("Cast", ["gqa_last"], ["gqa_seqlens_k"], name="gqa_seqlens_k", to=TensorProto.INT32),
        helper.make_node("Shape", ["attention_mask"], ["gqa_mask_shape"], name="gqa_mask_shape"),
        helper.make_node("Gather", ["gqa_mask_shape", "gqa_one"], ["gqa_total_i64"], name="gqa_total_i64", axis=0),
        helper.make_node("Cast", ["gqa_total_i64"], ["gqa_total"], name="gqa_total", to=TensorProto.INT32),
    ]
    constants = [numpy_helper.from_array(cos, "gqa_cos"), numpy_helper.from_array(sin, "gqa_sin"),
                 numpy_helper.from_array(np.array([1], np.int64), "gqa_axis1"),
                 numpy_helper.from_array(np.array(1, np.int64), "gqa_one")]
    # each layer's attention output (o_proj's input) now comes from one node; the old chain goes dead
    fused = {}
    for index, parts in layers.items():
        output = parts["o"].input[0]
        fused[output] = helper.make_node(
            "GroupQueryAttention",
            [parts["q"].output[0], parts["k"].output[0], parts["v"].output[0], "", "", "gqa_seqlens_k", "gqa_total",
             "gqa_cos", "gqa_sin"],
            [output, f"gqa_present_key_{index}", f"gqa_present_value_{index}"], name=f"gqa_layer_{index}",
            domain="com.microsoft", num_heads=heads, kv_num_heads=kv_heads, do_rotary=1, rotary_interleaved=0,
            scale=float(1.0 / np.sqrt(head_dim)))
    for node in graph.node:
        hit = next((name for name in node.output if name in fused), None)
        new.append(fused.pop(hit) if hit is not None else node)
    _keep_live(graph, new)
    graph.initializer.extend(constants)
    drop_unused_initializers(graph)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    helper.set_model_props(model, {**{p.key: p.value for p in model.metadata_props},
                                   POSITIONS_KEY: POSITIONS_FROM_LENGTHS})
    return len(layers)


def _keep_live(graph: Any, nodes: list[Any]) -> None:
    """Set ``graph``'s nodes to those of ``nodes`` (in order) that the graph's outputs depend on."""
    producer = {name: node for node in nodes for name in node.output}
    live: set[int] = set()
    stack = [o.name for o in graph.output]
    while stack:
        node = producer.get(stack.pop())
        if node is not None and id(node) not in live:
            live.add(id(node))
            stack.extend(name for name in node.input if name)
    kept = [node for node in nodes if id(node) in live]
    del graph.node[:]
    graph.node.extend(kept)


def drop_unused_initializers(graph: Any) -> None:
    """Remove, in place, the initializers of ``graph`` that no node reads (after a rewrite)."""
    used = {name for node in graph.node for name in node.input}
    kept = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
