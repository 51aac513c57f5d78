"""The int8 decoder's attention alone: block-causal ONNX ``Attention`` against ``GroupQueryAttention``.

    python bench/attention_blocks.py                          # SmolLM2-135M's heads: 9 query, 3 key/value, 64 values
    python bench/emulate_avx2.py -- bench/attention_blocks.py # the same with AVX2 kernels

One layer's attention, from q/k/v projections' outputs ([B, T, 576] and [B, T, 192], random) to ``o_proj``'s
input, as ONNX Runtime runs it inside the int8 decoder, at batch shapes the token budget makes (a claim
alone, batches of short texts, a few abstracts). Candidates, each a one-layer graph:

- ``gqa``: ONNX Runtime's ``GroupQueryAttention`` with its rotary embedding inside, as recipes v2-v4 ran it;
- ``blocks`` (as shipped, recipe v5): :mod:`c2v_rag.cpu.onnx_attention` itself, ``RotaryEmbedding`` on q and k
  and ONNX ``Attention`` over :data:`~c2v_rag.cpu.onnx_attention.BLOCKS` causal blocks of queries from
  :data:`~c2v_rag.cpu.onnx_attention.MIN_BLOCKED_LENGTH` tokens on, one block below;
- ``one-block``, ``blocks-2``, ``blocks-6``: the same code with those constants changed, to show why they
  are what they are.

Printed: each candidate's speed against ``gqa`` (medians of process CPU seconds over interleaved repeats,
one intra-op thread), its largest difference from ``gqa``'s output, and whether every blocked candidate's
output is bitwise that of ``one-block`` (the property that keeps a text's vector independent of its batch).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from unittest import mock

import numpy as np
from common import speed_flags_note

SHAPES = ((1, 20), (1, 40), (8, 64), (6, 100), (5, 200), (3, 330), (2, 512))


def _rotary(head_dim: int, positions: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    angles = np.arange(positions)[:, None] * (10000.0 ** (-np.arange(0, head_dim, 2) / head_dim))[None]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _session(nodes, initializers, heads: int, kv_heads: int, head_dim: int, opset: int):
    import onnxruntime as ort
    from onnx import TensorProto, helper

    def io(name: str, width: int | None, kind=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, kind, ["b", "t"] + ([width] if width else []))

    graph = helper.make_graph(
        nodes,
        "attention",
        [
            io("q", heads * head_dim),
            io("k", kv_heads * head_dim),
            io("v", kv_heads * head_dim),
            io("attention_mask", None, TensorProto.INT64),
        ],
        [io("out", heads * head_dim)],
        initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    )
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads, options.log_severity_level = 1, 1, 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def gqa(heads: int, kv_heads: int, head_dim: int):
    """Recipes v2-v4's attention: GroupQueryAttention, lengths from the mask, rotary inside."""
    from onnx import TensorProto, helper, numpy_helper

    cos, sin = _rotary(head_dim)
    nodes = [
        helper.make_node("ReduceSum", ["attention_mask", "axis1"], ["lengths"], keepdims=0),
        helper.make_node("Sub", ["lengths", "one"], ["last"]),
        helper.make_node("Cast", ["last"], ["seqlens_k"], to=TensorProto.INT32),
        helper.make_node("Shape", ["attention_mask"], ["total_1"], start=1, end=2),
        helper.make_node("Squeeze", ["total_1"], ["total_i64"]),
        helper.make_node("Cast", ["total_i64"], ["total"], to=TensorProto.INT32),
        helper.make_node(
            "GroupQueryAttention",
            ["q", "k", "v", "", "", "seqlens_k", "total", "cos", "sin"],
            ["out", "present_k", "present_v"],
            domain="com.microsoft",
            num_heads=heads,
            kv_num_heads=kv_heads,
            do_rotary=1,
            rotary_interleaved=0,
            scale=float(1 / np.sqrt(head_dim)),
        ),
    ]
    constants = [
        numpy_helper.from_array(cos, "cos"),
        numpy_helper.from_array(sin, "sin"),
        numpy_helper.from_array(np.array([1], np.int64), "axis1"),
        numpy_helper.from_array(np.array(1, np.int64), "one"),
    ]
    return _session(nodes, constants, heads, kv_heads, head_dim, opset=17)


def blocks(heads: int, kv_heads: int, head_dim: int, **constants):
    """The library's block-causal attention (``c2v_rag.cpu.onnx_attention``), its constants overridden by ``constants``."""  # noqa: E501
    from onnx import helper

    from c2v_rag.cpu import onnx_attention

    constants = {"BLOCKS": onnx_attention.BLOCKS, **constants}  # patch.multiple needs one at least
    with mock.patch.multiple(onnx_attention, **constants):
        builder = onnx_attention._Blocks(heads, kv_heads, head_dim)
        # the projections' nodes as fuse_attention finds them: q/k/v by their outputs, o by its input
        parts = {p: helper.make_node("Identity", [p], [p]) for p in "qkv"}
        parts["o"] = helper.make_node("Identity", ["out"], ["o"])
        nodes = builder.prelude(_rotary(head_dim)) + builder.layer(0, parts)
    return _session(nodes, builder.constants, heads, kv_heads, head_dim, opset=onnx_attention.ATTENTION_OPSET)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heads", type=int, default=9)
    parser.add_argument("--kv-heads", type=int, default=3)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20, help="runs per timed repeat")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    dims = (args.heads, args.kv_heads, args.head_dim)
    candidates = {
        "gqa": gqa(*dims),
        "blocks": blocks(*dims),
        "one-block": blocks(*dims, MIN_BLOCKED_LENGTH=10**9),
        "blocks-2": blocks(*dims, BLOCKS=2),
        "blocks-6": blocks(*dims, BLOCKS=6),
    }
    print(
        f"CPU flags: {speed_flags_note()}; heads {dims}; one thread; speed vs gqa (medians of {args.repeats} "
        f"repeats x {args.calls} calls)"
    )
    rng = np.random.default_rng(0)
    report = []
    for batch, length in SHAPES:
        feeds = {
            "q": rng.standard_normal((batch, length, args.heads * args.head_dim), np.float32),
            "k": rng.standard_normal((batch, length, args.kv_heads * args.head_dim), np.float32),
            "v": rng.standard_normal((batch, length, args.kv_heads * args.head_dim), np.float32),
            "attention_mask": np.ones((batch, length), np.int64),
        }
        outputs = {name: session.run(["out"], feeds)[0] for name, session in candidates.items()}
        seconds: dict[str, list[float]] = {name: [] for name in candidates}
        for _ in range(args.repeats):
            for name, session in candidates.items():  # interleaved: background load falls on all alike
                start = time.process_time()
                for _ in range(args.calls):
                    session.run(["out"], feeds)
                seconds[name].append(time.process_time() - start)
        base = statistics.median(seconds["gqa"])
        row = {
            "batch": batch,
            "length": length,
            "speed_vs_gqa": {n: round(base / statistics.median(s), 3) for n, s in seconds.items()},
            "max_abs_diff_to_gqa": {n: float(np.abs(o - outputs["gqa"]).max()) for n, o in outputs.items()},
            "bitwise_as_one_block": {
                n: bool(np.array_equal(o, outputs["one-block"])) for n, o in outputs.items() if n.startswith("blocks")
            },
        }
        report.append(row)
        print(
            f"B {batch} x T {length}: "
            + ", ".join(f"{n} {v:.2f}x" for n, v in row["speed_vs_gqa"].items())
            + f"; max |diff| to gqa {max(row['max_abs_diff_to_gqa'].values()):.1e}; blocked bitwise as one block: "
            + str(all(row["bitwise_as_one_block"].values())),
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps({"flags": speed_flags_note(), "heads": dims, "shapes": report}, indent=2))


if __name__ == "__main__":
    main()
