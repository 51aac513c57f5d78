"""Per-token int8 decoder graphs for ONNX Runtime on an AVX2 CPU (issue 26): the candidates that use the fast
U8S8 ``MatMulInteger`` GEMM with activation scales per row, so a text does not share a scale with its batch.

    python experiments/int8_rowwise_onnx.py --data ../shared/data --out /tmp/rowint8-sq50.onnx --smooth 0.5
    python bench/int8.py --data ../shared/data --docs 12 --claims 4 --repeats 2 --single 6 \\
        --candidates ort-file:/tmp/rowint8-sq50.onnx

Starts from the float32 export that ``c2v_rag.onnx_decoder`` caches (method ``fp32``; made here if missing) and
replaces each of the decoder's 210 linear ``MatMul`` nodes (``--keep-float`` names kept float, e.g. ``down_proj``)
by: each input row mapped affinely onto uint8 [0, 255] (its own min and max, zero included), weights int8 per
output column in 7 bits ([-64, 64]: AVX2's ``vpmaddubsw`` saturates int16 pair sums of u8 x s8 above that), the
int32 product rescaled per row and column, and the row minimum times the weights' column sums added back.

``--smooth ALPHA`` first migrates activation outliers into the weights (SmoothQuant): per input channel k,
``s_k = max|x_k|^ALPHA / max|W_k|^(1-ALPHA)``, x divided by s (one ``Mul``), W's row k multiplied by s. The
maxima come from the preset's own decoder inputs on calibration texts the bench does not encode (SciFact
abstracts 100..131 and claims 100..115; bench/int8.py encodes abstracts and claims from 0).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from c2v_rag import Causal2Vec
from c2v_rag.onnx_decoder import cached_onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from common import load_scifact_docs, load_scifact_queries  # noqa: E402


def input_maxima(model: Causal2Vec, texts: list[str]) -> dict[str, np.ndarray]:
    """max |x_k| over every token of ``texts`` at the input of each decoder ``nn.Linear``, by module name."""
    amax: dict[str, torch.Tensor] = {}

    def hook(name):
        def record(module, inputs, output):
            x = inputs[0].detach().reshape(-1, inputs[0].shape[-1]).abs().amax(0)
            amax[name] = torch.maximum(amax[name], x) if name in amax else x
        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in model.decoder.named_modules()
               if isinstance(m, torch.nn.Linear)]
    try:
        model.encode(texts)
    finally:
        for handle in handles:
            handle.remove()
    return {k: v.numpy() for k, v in amax.items()}


def rewrite(graph: onnx.GraphProto, amax: dict[str, np.ndarray] | None, alpha: float, keep_float: list[str]) -> int:
    """Replace the linear MatMuls of ``graph`` in place (see the module doc); returns how many."""
    inits = {i.name: i for i in graph.initializer}
    nodes: list[onnx.NodeProto] = []
    added: list[onnx.TensorProto] = []

    def const(name, value):
        added.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    const("rq_zero", np.array(0.0, np.float32))
    const("rq_255", np.array(255.0, np.float32))
    const("rq_eps", np.array(1e-8, np.float32))
    count = 0
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in inits or any(k in node.name for k in keep_float):
            nodes.append(node)
            continue
        w = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)  # [K, M]
        k_in, m_out = w.shape
        p = node.name.replace("/", "_") + "_rq"
        x, y = node.input[0], node.output[0]

        def op(kind, inputs, output, **attrs):
            nodes.append(helper.make_node(kind, inputs, [p + output], name=p + output, **attrs))
            return p + output

        if amax is not None:
            key = node.name.strip("/").removeprefix("decoder/").removesuffix("/MatMul").replace("/", ".")
            a = np.maximum(amax[key].astype(np.float32), 1e-5)
            s = np.clip(a ** alpha / np.maximum(np.abs(w).max(1), 1e-5) ** (1 - alpha), 1e-5, None).astype(np.float32)
            w = w * s[:, None]
            x = op("Mul", [x, const(p + "_inv", (1.0 / s).astype(np.float32))], "_xs")
        scale_w = (np.maximum(np.abs(w).max(0), 1e-12) / 64.0).astype(np.float32)
        wq = np.clip(np.round(w / scale_w), -64, 64).astype(np.int8)
        colsum = (wq.astype(np.float32) * scale_w).sum(0).astype(np.float32)
        rows = op("Reshape", [x, const(p + "_2d", np.array([-1, k_in], np.int64))], "_x2")
        low = op("Min", [op("ReduceMin", [rows], "_mn0", axes=[1], keepdims=1), "rq_zero"], "_mn")
        high = op("Max", [op("ReduceMax", [rows], "_mx0", axes=[1], keepdims=1), "rq_zero"], "_mx")
        scale = op("Max", [op("Div", [op("Sub", [high, low], "_rg"), "rq_255"], "_sc0"), "rq_eps"], "_sc")
        level = op("Round", [op("Div", [op("Sub", [rows, low], "_sh"), scale], "_dv")], "_rd")
        xq = op("Cast", [op("Clip", [level, "rq_zero", "rq_255"], "_cl")], "_xq", to=TensorProto.UINT8)
        acc = op("Cast", [op("MatMulInteger", [xq, const(p + "_W", wq)], "_yi")], "_yf", to=TensorProto.FLOAT)
        both = op("Mul", [scale, const(p + "_ws", scale_w.reshape(1, m_out))], "_s2")
        out = op("Add", [op("Mul", [acc, both], "_y1"),
                         op("Mul", [low, const(p + "_cs", colsum.reshape(1, m_out))], "_off")], "_y2")
        lead = op("Slice", [op("Shape", [node.input[0]], "_shp"), const(p + "_0", np.array([0], np.int64)),
                            const(p + "_m1", np.array([-1], np.int64))], "_lead")
        shape = op("Concat", [lead, const(p + "_M", np.array([m_out], np.int64))], "_osh", axis=0)
        nodes.append(helper.make_node("Reshape", [out, shape], [y], name=p + "_out"))
        count += 1
    used = {i for n in nodes for i in n.input}
    kept = [i for i in graph.initializer if i.name in used] + [i for i in added if i.name in used]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--smooth", type=float, default=None, metavar="ALPHA", help="SmoothQuant strength (0.5)")
    parser.add_argument("--keep-float", nargs="*", default=[], help="node-name parts kept float (down_proj)")
    parser.add_argument("--onnx-cache", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = Causal2Vec.from_pretrained(None, device="cpu", dtype="float32")
    source = cached_onnx(model.decoder, "fp32", args.onnx_cache)
    amax = None
    if args.smooth is not None:
        texts = (load_scifact_docs(args.data, 132)[100:] + load_scifact_queries(args.data, 116)[100:])
        amax = input_maxima(model, texts)
    proto = onnx.load(str(source))
    count = rewrite(proto.graph, amax, args.smooth or 0.0, args.keep_float)
    onnx.save_model(proto, str(args.out))
    print(f"{count} MatMuls as per-token int8 -> {args.out}")


if __name__ == "__main__":
    main()
