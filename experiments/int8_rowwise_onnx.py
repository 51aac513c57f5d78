"""Variants of the per-token int8 decoder graph (issue 26), for sweeps beside what ``quantize="int8"`` ships.

    python experiments/int8_rowwise_onnx.py --out /tmp/rowint8-sq75.onnx --smooth 0.75
    python experiments/int8_rowwise_onnx.py --out /tmp/rowint8.onnx --keep-float          # every linear in int8
    python experiments/int8_rowwise_onnx.py --out /tmp/sq50-scifact.onnx --calibration-data ../shared/data
    python bench/int8.py --data ../shared/data --docs 12 --claims 4 --repeats 2 --single 6 \\
        --candidates int8 ort-file:/tmp/rowint8-sq75.onnx

The rewrite and the calibration are the library's (``c2v_rag.cpu.int8.rewrite_per_token_int8`` and
``input_maxima``); this script only changes their settings: the SmoothQuant strength (``--smooth``, none
without it), which linears stay float (``--keep-float``; the shipped recipe keeps ``down_proj``) and the
calibration texts (the packaged ones, or SciFact abstracts 100..131 and claims 100..115 with
``--calibration-data``, texts that ``bench/int8.py`` does not encode: the rows measured before the packaged
set existed). Starts from the float32 export ``c2v_rag.cpu.onnx_decoder`` caches (method ``fp32``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import onnx
import torch

from c2v_rag import Causal2Vec
from c2v_rag.cpu.int8 import input_maxima, rewrite_per_token_int8
from c2v_rag.cpu.onnx_decoder import cached_onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from common import load_scifact_docs, load_scifact_queries  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--smooth", type=float, default=None, metavar="ALPHA", help="SmoothQuant strength (0.5)")
    parser.add_argument("--keep-float", nargs="*", default=[], help="node-name parts kept float (down_proj)")
    parser.add_argument(
        "--calibration-data",
        type=Path,
        default=None,
        help="the shared data folder: calibrate on SciFact instead of the packaged texts",
    )
    parser.add_argument("--onnx-cache", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = Causal2Vec.from_pretrained(None, device="cpu", dtype="float32")
    source = cached_onnx(model.decoder, "fp32", args.onnx_cache)
    maxima = None
    if args.smooth is not None:
        if args.calibration_data is not None:
            maxima = input_maxima(
                model,
                load_scifact_docs(args.calibration_data, 132)[100:],
                load_scifact_queries(args.calibration_data, 116)[100:],
            )
        else:
            maxima = input_maxima(model)
    proto = onnx.load(str(source))
    count = rewrite_per_token_int8(proto.graph, maxima, alpha=args.smooth or 0.0, keep_float=tuple(args.keep_float))
    onnx.save_model(proto, str(args.out))
    print(f"{count} MatMuls as per-token int8 -> {args.out}")


if __name__ == "__main__":
    main()
