"""The exported decoder's attention as ONNX's ``Attention`` op, computed causally in blocks.

The legacy exporter writes each layer's attention out op by op: rotary embedding, ``repeat_kv`` (an
``Expand`` that copies K and V once per query head), the additive causal and padding mask over
[B, heads, T, T], softmax, two batched matmuls and the transposes between them. :func:`fuse_attention`
replaces that chain, layer by layer, with ONNX Runtime's ``RotaryEmbedding`` on q and k and the ONNX
``Attention`` op (opset 23; K/V shared by their query heads without copies), and removes what no longer
feeds the output.

**Causal work only.** ONNX Runtime's CPU attention kernels (``Attention``, ``GroupQueryAttention``) compute
the full [T, T] scores and probabilities x V and mask the upper triangle after: twice the causal work.
So a sequence of :data:`MIN_BLOCKED_LENGTH` tokens or more is cut into :data:`BLOCKS` blocks of queries,
and block i attends to the keys up to its own end only, under a causal mask of [block, end] (5/8 of
the square for 4 blocks). Shorter sequences run as one block, where the blocks' extra nodes cost more
than they save (an ``If`` per layer picks). Each query's scores, softmax and weighted sum are computed
over the same keys either way, with the masked ones contributing exact zeros: the output is bitwise the
same however the sequence is cut (tested), so a text's vector still does not depend on its batch. The
speed against ``GroupQueryAttention`` is in docs/performance.md ("int8 on CPU", with ``bench/attention_blocks.py``).

**No padding mask.** Rows are right-padded (``collate``), and with causal attention a real token only
sees positions before it, all real: the padding never reaches a real token's state, in any layer. So
the blocks need only the causal mask, the same for every row and head; the padding positions' own
states are meaningless (as in any padded batch) and nothing reads them.

**The last layer at the readout rows only** (:func:`last_layer_at_rows`). The embedding reads
the last layer's states at a few positions (the Contextual token and EOS). Under causal attention every
layer but the last is needed at every position (its keys and values feed the next), but in the last one
only the rows read need a query, ``o_proj`` and the MLP: the graph takes those positions as the input
:data:`READOUT_INPUT` [B, R] and returns [B, R, d]. Each row is computed on its own (per-row norms and
quantization, exact int32 GEMMs, the same keys summed), so the rows are bitwise the rows of the whole
computation from R = 2 on (tested; with one row ONNX Runtime's attention takes another path and they differ
by float rounding), and a text's vector still does not depend on its batch. It saves most of one layer of L.

It applies where this is exact: a causal decoder (not LLM2Vec's bidirectional one) whose q/k/v projections
have no bias, with the default rotary
embedding (its cos/sin tables are taken from the model's own ``rotary_emb``), and inputs as ``collate``
writes them: right padding and positions ``0..T-1`` per row (``position_ids`` is no longer read;
:class:`~c2v_rag.cpu.onnx_decoder.OnnxDecoder` refuses other positions). Elsewhere the graph is left as
exported. The ``Attention`` op needs opset 23: the rewritten model is converted to it with ONNX's version
converter (the exporter writes opset 17).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np
import torch
from torch import nn

from c2v_rag.nn.backbone import backbone_config

logger = logging.getLogger(__name__)

# Stored in the model's metadata: OnnxDecoder then checks that the positions it is given are 0..T-1.
POSITIONS_KEY = "c2v_positions"
POSITIONS_FROM_LENGTHS = "arange"
ATTENTION_OPSET = 23  # the first opset with the Attention op
# The block count and the length from which blocks pay were chosen with bench/attention_blocks.py
# (docs/performance.md, "int8 on CPU"): more blocks save more of the square but add nodes per layer.
BLOCKS = 4
MIN_BLOCKED_LENGTH = 64
READOUT_INPUT = "readout_positions"  # [B, R] int64: the positions whose last-layer states the graph returns
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
        return None  # not the rotate-half layout ONNX Runtime's RotaryEmbedding computes
    return np.ascontiguousarray(cos[:, :half]), np.ascontiguousarray(sin[:, :half])


def fuse_attention(model: Any, decoder: nn.Module) -> int:
    """Rewrite ``model`` (an ``onnx.ModelProto`` of :func:`~c2v_rag.cpu.onnx_decoder.export_decoder`) in place so
    that every layer's attention is the block-causal ``Attention`` of the module doc, at opset 23; returns
    how many layers were rewritten, 0 where the decoder or the graph is not one this applies to (then the
    model is left as it was)."""
    from onnx import helper

    graph, config = model.graph, backbone_config(decoder)
    # c2v_rag.nn.attention's switch writes config.is_causal (read here: that module sits above this one);
    # LLM2Vec's recipe turns it off: every token sees the whole row, the padding masked
    if not getattr(config, "is_causal", True):
        logger.info("attention left as exported: the decoder attends both ways")
        return 0
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    tables = rotary_tables(decoder)
    if tables is None or getattr(config, "attention_bias", False):
        logger.info("attention left as exported: no plain rotary embedding, or biased projections")
        return 0
    layers = _projections(graph)
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

    _raise_opset(model, ATTENTION_OPSET)  # in place: graph is still model.graph
    blocks = _Blocks(heads, kv_heads, head_dim)
    fused = {parts["o"].input[0]: blocks.layer(index, parts) for index, parts in layers.items()}
    new = list(blocks.prelude(tables))
    for node in graph.node:
        hit = next((name for name in node.output if name in fused), None)
        new.extend(fused.pop(hit) if hit is not None else [node])
    _keep_live(graph, new)
    graph.initializer.extend(blocks.constants)
    drop_unused_initializers(graph)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    helper.set_model_props(
        model, {**{p.key: p.value for p in model.metadata_props}, POSITIONS_KEY: POSITIONS_FROM_LENGTHS}
    )
    return len(layers)


def _projections(graph: Any) -> dict[int, dict[str, Any]]:
    """Each layer's q/k/v/o projection ``MatMul`` nodes by layer index and letter, found by the exporter's names."""
    layers: dict[int, dict[str, Any]] = {}
    for node in graph.node:
        match = _PROJECTION.search(node.name)
        if node.op_type == "MatMul" and match:
            layers.setdefault(int(match.group(1)), {})[match.group(2)] = node
    return layers


def last_layer_at_rows(model: Any) -> bool:
    """Rewrite ``model`` (after :func:`fuse_attention`) in place so that its last layer computes only the rows
    named by a new input :data:`READOUT_INPUT` [B, R] (positions, int64) and the output is their states
    [B, R, d] (module doc). Keys and values stay computed at every position, and so do the queries' projection
    (shared with them); from the rotary embedding on, only the R rows: each attends to the keys up to its own
    position. Returns False, leaving ``model`` as it was, where the graph is not one this knows (attention
    not fused, or the last ``o_proj`` not followed by the residual ``Add`` alone)."""
    from onnx import TensorProto, helper

    graph = model.graph
    layers = _projections(graph)
    if not layers:
        return False
    last = max(layers)
    parts, tag = layers[last], f"attn_layer_{last}"
    by_name = {node.name: node for node in graph.node}
    attention, rotary_q, rotary_k = by_name.get(tag), by_name.get(tag + "_q"), by_name.get(tag + "_k")
    if attention is None or attention.op_type != "If" or rotary_q is None or rotary_k is None:
        return False
    o_out = parts["o"].output[0]
    readers = [node for node in graph.node if o_out in node.input]
    if len(readers) != 1 or readers[0].op_type != "Add" or len(readers[0].input) != 2:
        return False
    residual_add = readers[0]
    branch = next(a.g for a in attention.attribute if a.name == "then_branch")
    whole = next(n for n in branch.node if n.op_type == "Attention")

    def node(op: str, inputs: list[str], suffix: str, **attrs: Any) -> Any:
        return helper.make_node(op, inputs, [tag + suffix], name=tag + suffix, **attrs)

    attrs = {a.name: helper.get_attribute_value(a) for a in whole.attribute}
    width = branch.output[0].type.tensor_type.shape.dim[2].dim_value  # q heads x head size
    axes, v_shape = f"{tag}_rows_axes", f"{tag}_rows_v_shape"
    graph.initializer.extend(
        [
            helper.make_tensor(axes, TensorProto.INT64, [2], [1, 3]),
            helper.make_tensor(
                v_shape, TensorProto.INT64, [3], [0, 0, width * attrs["kv_num_heads"] // attrs["q_num_heads"]]
            ),
        ]
    )
    rotary_attrs = {a.name: helper.get_attribute_value(a) for a in rotary_q.attribute}
    new = [
        node("Unsqueeze", [READOUT_INPUT, "attn_minus1"], "_rows_nd"),  # [B, R, 1]: GatherND's indices
        node("GatherND", [rotary_q.input[0], tag + "_rows_nd"], "_rows_q", batch_dims=1),
        node(
            "RotaryEmbedding",
            [tag + "_rows_q", READOUT_INPUT, "attn_cos", "attn_sin"],
            "_rows_q_rot",
            domain="com.microsoft",
            **rotary_attrs,
        ),
        # [B, 1, R, T]: row r sees the keys at positions <= its own
        node("Unsqueeze", [READOUT_INPUT, axes], "_rows_4d"),
        node("LessOrEqual", ["attn_positions", tag + "_rows_4d"], "_rows_mask"),
        # V's width stated (a no-op Reshape): ONNX's shape inference makes the Attention's output width 0 where
        # V's is unknown (as after the int8 rewrite), and ONNX Runtime then refuses the o_proj Mul after it
        node("Reshape", [parts["v"].output[0], v_shape], "_rows_v"),
        helper.make_node(
            "Attention",
            [tag + "_rows_q_rot", rotary_k.output[0], tag + "_rows_v", tag + "_rows_mask"],
            list(attention.output),
            name=tag + "_rows",
            **attrs,
        ),
    ]
    residual = next(name for name in residual_add.input if name != o_out)
    new.append(node("GatherND", [residual, tag + "_rows_nd"], "_rows_residual", batch_dims=1))
    residual_add.input[list(residual_add.input).index(residual)] = tag + "_rows_residual"
    nodes = []
    for existing in graph.node:
        nodes.extend(new if existing is attention else [existing])
    _keep_live(graph, nodes)  # the layer's whole-sequence query rotation is no longer read
    graph.input.append(helper.make_tensor_value_info(READOUT_INPUT, TensorProto.INT64, ["batch", "rows"]))
    # the shapes written by the exporter downstream of here say T rows where there are now R: ONNX Runtime
    # infers them again
    del graph.value_info[:]
    graph.output[0].type.tensor_type.shape.dim[1].dim_param = "rows"
    return True


class _Blocks:
    """The nodes of the block-causal attention: a prelude shared by every layer (the length T, the
    positions, each block's bounds and causal mask) and, per layer, q/k rotated and one ``If`` that runs
    the attention as one block or as :data:`BLOCKS`."""

    def __init__(self, heads: int, kv_heads: int, head_dim: int) -> None:
        self.attrs: dict[str, Any] = {
            "q_num_heads": heads,
            "kv_num_heads": kv_heads,
            "scale": float(1.0 / np.sqrt(head_dim)),
        }
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.constants: list[Any] = []

    def _const(self, name: str, value: Any) -> str:
        from onnx import numpy_helper

        self.constants.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def prelude(self, tables: tuple[np.ndarray, np.ndarray]) -> list[Any]:
        from onnx import helper

        cos, sin = tables
        self._const("attn_cos", cos), self._const("attn_sin", sin)
        # attn_0 .. attn_<BLOCKS>: [i], the block multiples (attn_0 and attn_1 also serve as axes and offsets)
        for name, value in (
            ("0s", 0),
            ("1s", 1),
            ("minus1", [-1]),
            ("blocks", [BLOCKS]),
            ("round_up", [BLOCKS - 1]),
            ("min_blocked", [MIN_BLOCKED_LENGTH]),
            *((str(i), [i]) for i in range(BLOCKS + 1)),
        ):
            self._const(f"attn_{name}", np.array(value, np.int64))

        def node(op: str, inputs: list[str], output: str, **attrs: Any) -> Any:
            return helper.make_node(op, inputs, [output], name=output, **attrs)

        nodes = [
            node("Shape", ["attention_mask"], "attn_T", start=1, end=2),  # [1]
            node("Squeeze", ["attn_T"], "attn_T_scalar"),
            node("Range", ["attn_0s", "attn_T_scalar", "attn_1s"], "attn_positions"),
            node("Less", ["attn_T", "attn_min_blocked"], "attn_one_block_1"),
            node("Squeeze", ["attn_one_block_1"], "attn_one_block"),
            # blocks of ceil(T / BLOCKS) queries; the last may be shorter
            node("Add", ["attn_T", "attn_round_up"], "attn_T_up"),
            node("Div", ["attn_T_up", "attn_blocks"], "attn_block"),
            *self._mask("attn_whole", "attn_0", "attn_T"),
        ]
        for i in range(BLOCKS):
            nodes += [
                node("Mul", ["attn_block", f"attn_{i}"], f"attn_start_{i}"),
                node("Mul", ["attn_block", f"attn_{i + 1}"], f"attn_end_{i}_"),
                node("Min", [f"attn_end_{i}_", "attn_T"], f"attn_end_{i}"),
                *self._mask(f"attn_block_{i}", f"attn_start_{i}", f"attn_end_{i}"),
            ]
        return nodes

    def _mask(self, name: str, start: str, end: str) -> list[Any]:
        """[end - start, end] bool, true where key position <= query position (queries start..end-1)."""
        from onnx import helper

        zero, axis_last = "attn_0", "attn_minus1"
        return [
            helper.make_node("Slice", ["attn_positions", start, end, zero], [name + "_q"], name=name + "_q"),
            helper.make_node("Unsqueeze", [name + "_q", axis_last], [name + "_q2"], name=name + "_q2"),
            helper.make_node("Slice", ["attn_positions", zero, end, zero], [name + "_k"], name=name + "_k"),
            helper.make_node("LessOrEqual", [name + "_k", name + "_q2"], [name + "_mask"], name=name + "_mask"),
        ]

    def layer(self, index: int, parts: dict[str, Any]) -> list[Any]:
        """Layer ``index``'s attention, from its q/k/v projections' outputs to ``o_proj``'s input."""
        from onnx import TensorProto, helper

        q, k, v = (parts[p].output[0] for p in "qkv")
        output = parts["o"].input[0]
        tag = f"attn_layer_{index}"
        rotary: dict[str, Any] = {"domain": "com.microsoft", "interleaved": 0}
        nodes = [
            helper.make_node(
                "RotaryEmbedding",
                [q, "attn_0", "attn_cos", "attn_sin"],
                [tag + "_q"],
                name=tag + "_q",
                num_heads=self.heads,
                **rotary,
            ),
            helper.make_node(
                "RotaryEmbedding",
                [k, "attn_0", "attn_cos", "attn_sin"],
                [tag + "_k"],
                name=tag + "_k",
                num_heads=self.kv_heads,
                **rotary,
            ),
        ]
        q, k = tag + "_q", tag + "_k"
        whole = [
            helper.make_node(
                "Attention", [q, k, v, "attn_whole_mask"], [tag + "_whole"], name=tag + "_whole", **self.attrs
            )
        ]
        cut, pieces = [], []
        for i in range(BLOCKS):
            piece, end = f"{tag}_block_{i}", f"attn_end_{i}"
            cut += [
                helper.make_node("Slice", [q, f"attn_start_{i}", end, "attn_1"], [piece + "_q"], name=piece + "_q"),
                helper.make_node("Slice", [k, "attn_0", end, "attn_1"], [piece + "_k"], name=piece + "_k"),
                helper.make_node("Slice", [v, "attn_0", end, "attn_1"], [piece + "_v"], name=piece + "_v"),
                helper.make_node(
                    "Attention",
                    [piece + "_q", piece + "_k", piece + "_v", f"attn_block_{i}_mask"],
                    [piece],
                    name=piece,
                    **self.attrs,
                ),
            ]
            pieces.append(piece)
        cut.append(helper.make_node("Concat", pieces, [tag + "_blocks"], name=tag + "_blocks", axis=1))

        # ONNX's shape inference gives Attention's 3-D output a last dimension of 0 where V's is unknown (a
        # Slice's output), and ONNX Runtime then warns at load that the real one differs: widths declared
        widths = {
            "q": self.heads * self.head_dim,
            "k": self.kv_heads * self.head_dim,
            "v": self.kv_heads * self.head_dim,
        }

        def declared(name: str, width: int) -> Any:
            return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", None, width])

        def branch(name: str, body: list[Any], result: str) -> Any:
            inner = [declared(n.output[0], widths[n.output[0][-1]]) for n in body if n.op_type == "Slice"]
            return helper.make_graph(body, name, [], [declared(result, widths["q"])], value_info=inner)

        nodes.append(
            helper.make_node(
                "If",
                ["attn_one_block"],
                [output],
                name=tag,
                then_branch=branch(tag + "_one", whole, tag + "_whole"),
                else_branch=branch(tag + "_cut", cut, tag + "_blocks"),
            )
        )
        return nodes


def default_opset(model: Any) -> int | None:
    """The version of the default ONNX domain that ``model`` imports (None if it imports none)."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def _raise_opset(model: Any, version: int) -> None:
    """Convert ``model`` in place to ``version`` of the default ONNX domain (ONNX's version converter: it
    rewrites the ops whose inputs changed, such as the reductions' axes), where it is below that."""
    from onnx import ModelProto, helper, version_converter

    current = default_opset(model)
    if current is None or current >= version:
        return
    # The converter copies its model several times over and reads no weight here: it gets the graph without
    # them (540 MB for SmolLM2-135M), graph inputs of their type and shape standing in. With the weights in,
    # the preset's first int8 load peaked 1.6 GB higher (bench/results/notes/int8-history.md).
    skeleton = ModelProto(ir_version=model.ir_version, opset_import=model.opset_import)
    graph = skeleton.graph
    graph.name = model.graph.name
    for field in ("node", "input", "output", "value_info"):
        getattr(graph, field).extend(getattr(model.graph, field))
    graph.input.extend(
        helper.make_tensor_value_info(w.name, w.data_type, list(w.dims)) for w in model.graph.initializer
    )
    converted = version_converter.convert_version(skeleton, version)
    for field in ("node", "value_info"):
        model.graph.ClearField(field)
        getattr(model.graph, field).extend(getattr(converted.graph, field))
    model.graph.initializer.extend(converted.graph.initializer)  # any the converter added (none seen)
    del model.opset_import[:]
    model.opset_import.extend(converted.opset_import)
    model.ir_version = converted.ir_version


def _reads(node: Any) -> set[str]:
    """The names ``node`` reads: its inputs, and the outer names its subgraphs (``If`` branches) read."""
    names = {name for name in node.input if name}
    for attribute in node.attribute:
        for graph in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
            made = {name for inner in graph.node for name in inner.output} | {i.name for i in graph.initializer}
            names |= {name for inner in graph.node for name in _reads(inner)} - made
    return names


def _keep_live(graph: Any, nodes: list[Any]) -> None:
    """Set ``graph``'s nodes to those of ``nodes`` (in order) that the graph's outputs depend on."""
    producer = {name: node for node in nodes for name in node.output}
    live: set[int] = set()
    stack = [o.name for o in graph.output]
    while stack:
        node = producer.get(stack.pop())
        if node is not None and id(node) not in live:
            live.add(id(node))
            stack.extend(_reads(node))
    kept = [node for node in nodes if id(node) in live]
    del graph.node[:]
    graph.node.extend(kept)


def drop_unused_initializers(graph: Any) -> None:
    """Remove, in place, the initializers of ``graph`` that no node reads (after a rewrite); names read inside
    a node's subgraphs count as read."""
    used = {name for node in graph.node for name in _reads(node)}
    for index in reversed(range(len(graph.initializer))):  # in place: re-adding the kept ones would copy them
        if graph.initializer[index].name not in used:
            del graph.initializer[index]
