"""ONNX decoder graphs side by side, the decoder alone: CPU time and h_EOS agreement.

    python bench/onnx_decoder_graphs.py --data ../shared/data ~/.cache/c2v_rag/onnx/*/decoder-fp32.onnx \\
        ~/.cache/c2v_rag/onnx/*/decoder-int8-token-sq.onnx /tmp/variant.onnx

For comparing graph rewrites (``c2v_rag.cpu.int8``, ``c2v_rag.cpu.onnx_attention``) without the rest of the
model: the preset (float32) encodes ``--docs`` SciFact abstracts and ``--claims`` claims, shuffled together,
and the decoder inputs it builds (``inputs_embeds`` with the Contextual token written in, the mask, the
positions; batches as the encode loop plans them) are captured once. Then each graph runs every batch in an
ONNX Runtime session (one intra-op thread), ``--repeats`` times, in alternating order; reported per graph:
the median process CPU seconds and its speed relative to the first graph, and at each text's last token
(h_EOS, before the readout's normalization): the worst and mean cosine to the first graph, the worst
cosine between a text alone and in its batch, and the worst cosine after a relative 1e-6 perturbation of
the inputs (how far float rounding noise upstream, such as another batch shape in the encoder, can move
it through the int8 roundings). Give the float32 export first.

``--openvino`` adds OpenVINO runs of the first graph (``pip install openvino nncf``; the decoder's backend
is ONNX Runtime, these are the measured alternative): ``f32`` and ``bf16`` (the CPU plugin's inference
precision), ``int8-static`` (NNCF's post-training quantization with SmoothQuant, ``ModelType.TRANSFORMER``,
activation scales calibrated on the first 4 batches and then fixed, so batch-free) and ``w8-bf16`` (NNCF's
int8 weight compression, per-channel asymmetric, computed in bf16). Every shape is run once before the
clock, since OpenVINO prepares kernels per input shape.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import mixed_texts, speed_flags_note  # noqa: E402

Batch = tuple[np.ndarray, np.ndarray, np.ndarray]


def capture(data: Path, docs: int, claims: int) -> list[Batch]:
    import torch

    from c2v_rag import Causal2Vec

    model = Causal2Vec.from_pretrained(None, device="cpu", dtype="float32")
    batches: list[Batch] = []
    forward = model.decoder.forward

    def record(*args, **kwargs):
        batches.append(
            (
                kwargs["inputs_embeds"].detach().float().numpy().copy(),
                kwargs["attention_mask"].numpy().astype(np.int64),
                kwargs["position_ids"].numpy().astype(np.int64),
            )
        )
        return forward(*args, **kwargs)

    model.decoder.forward = record
    with torch.no_grad():
        model.encode_documents(mixed_texts(data, docs, claims, seed=1), show_progress_bar=False)
    return batches


def last_states(sess, batch: Batch) -> np.ndarray:
    embeds, mask, positions = batch
    hidden = sess.run(
        ["last_hidden_state"], {"inputs_embeds": embeds, "attention_mask": mask, "position_ids": positions}
    )[0]
    return hidden[np.arange(len(mask)), mask.sum(1) - 1]


class OpenVinoRun:
    """An OpenVINO compiled model behind ONNX Runtime's ``run(names, feeds)``."""

    def __init__(self, compiled) -> None:
        self.compiled = compiled

    def run(self, names: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [self.compiled(feeds)[self.compiled.output(0)]]


def openvino_runs(fp32_graph: Path, kinds: list[str], calibration: list[Batch]) -> dict[str, OpenVinoRun]:
    import nncf
    import openvino as ov

    core = ov.Core()

    def compiled(model, precision: str) -> OpenVinoRun:
        return OpenVinoRun(
            core.compile_model(
                model,
                "CPU",
                {
                    "INFERENCE_NUM_THREADS": 1,
                    "NUM_STREAMS": 1,
                    "PERFORMANCE_HINT": "LATENCY",
                    "INFERENCE_PRECISION_HINT": precision,
                },
            )
        )

    runs = {}
    for kind in kinds:
        model = ov.convert_model(str(fp32_graph))
        if kind in ("f32", "bf16"):
            runs[f"openvino-{kind}"] = compiled(model, kind)
        elif kind == "int8-static":
            feeds = [{"inputs_embeds": e, "attention_mask": m, "position_ids": p} for e, m, p in calibration[:4]]
            quantized = nncf.quantize(
                model, nncf.Dataset(feeds), model_type=nncf.ModelType.TRANSFORMER, subset_size=len(feeds)
            )
            runs["openvino-int8-static"] = compiled(quantized, "f32")
        elif kind == "w8-bf16":
            runs["openvino-w8-bf16"] = compiled(
                nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM), "bf16"
            )
        else:
            raise SystemExit(f"unknown --openvino kind {kind!r}: f32, bf16, int8-static, w8-bf16")
    return runs


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("graphs", nargs="+", type=Path)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=24)
    parser.add_argument("--claims", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--openvino", nargs="*", default=[], help="f32 bf16 int8-static w8-bf16 (see above)")
    args = parser.parse_args()
    batches = capture(args.data, args.docs, args.claims)
    print(f"{len(batches)} batches, shapes {[b[0].shape[:2] for b in batches]}; {speed_flags_note()}")
    from c2v_rag.cpu.ort_session import cpu_session

    sessions = {str(path): cpu_session(path, threads=1) for path in args.graphs}  # as the library runs them
    sessions.update(openvino_runs(args.graphs[0], args.openvino, batches) if args.openvino else {})
    names = list(sessions)
    states = {name: [last_states(s, b) for b in batches] for name, s in sessions.items()}  # also the warm-up
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(args.repeats):
        for path in names if repeat % 2 == 0 else names[::-1]:
            start = time.process_time()
            for batch in batches:
                sessions[path].run(
                    ["last_hidden_state"],
                    {"inputs_embeds": batch[0], "attention_mask": batch[1], "position_ids": batch[2]},
                )
            seconds[path].append(time.process_time() - start)
    reference = names[0]
    rng = np.random.default_rng(0)
    for path in names:
        sess = sessions[path]
        to_first = np.concatenate([cosine(a, b) for a, b in zip(states[path], states[reference])])
        alone = [
            cosine(last_states(sess, (e[r : r + 1, :n], m[r : r + 1, :n], p[r : r + 1, :n]))[0], state[r])
            for (e, m, p), state in zip(batches, states[path])
            for r, n in enumerate(m.sum(1))
        ]
        noisy = np.concatenate(
            [
                cosine(
                    last_states(sess, ((e * (1 + 1e-6 * rng.standard_normal(e.shape))).astype(np.float32), m, p)), state
                )
                for (e, m, p), state in zip(batches, states[path])
            ]
        )
        median = statistics.median(seconds[path])
        print(
            f"{path}: {median:.2f} CPU s, {statistics.median(seconds[reference]) / median:.2f}x the first; h_EOS "
            f"cosine to the first worst {to_first.min():.5f} mean {to_first.mean():.5f}; alone vs batch worst "
            f"{min(alone):.6f}; perturbed 1e-6 worst {noisy.min():.6f}"
        )


if __name__ == "__main__":
    main()
