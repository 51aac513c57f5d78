"""ONNX decoder graphs side by side, the decoder alone: CPU time and h_EOS agreement (issue 26).

    python bench/onnx_decoder_graphs.py --data ../shared/data ~/.cache/c2v_rag/onnx/*/decoder-fp32.onnx \\
        ~/.cache/c2v_rag/onnx/*/decoder-int8-token-sq.onnx /tmp/variant.onnx

For comparing graph rewrites (``c2v_rag.int8``, ``c2v_rag.onnx_attention``) without the rest of the
model: the preset (float32) encodes ``--docs`` SciFact abstracts and ``--claims`` claims, shuffled together,
and the decoder inputs it builds (``inputs_embeds`` with the Contextual token written in, the mask, the
positions; batches as the encode loop plans them) are captured once. Then each graph runs every batch in an
ONNX Runtime session (one intra-op thread), ``--repeats`` times, in alternating order; reported per graph:
the median process CPU seconds and its speed relative to the first graph, and at each text's last token
(h_EOS, before the readout's normalization): the worst and mean cosine to the first graph, the worst
cosine between a text alone and in its batch, and the worst cosine after a relative 1e-6 perturbation of
the inputs (how far float rounding noise upstream, such as another batch shape in the encoder, can move
it through the int8 roundings). Give the float32 export first.
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
        batches.append((kwargs["inputs_embeds"].detach().float().numpy().copy(),
                        kwargs["attention_mask"].numpy().astype(np.int64), kwargs["position_ids"].numpy().astype(np.int64)))
        return forward(*args, **kwargs)

    model.decoder.forward = record
    with torch.no_grad():
        model.encode_documents(mixed_texts(data, docs, claims, seed=1), show_progress_bar=False)
    return batches


def last_states(sess, batch: Batch) -> np.ndarray:
    embeds, mask, positions = batch
    hidden = sess.run(["last_hidden_state"], {"inputs_embeds": embeds, "attention_mask": mask,
                                              "position_ids": positions})[0]
    return hidden[np.arange(len(mask)), mask.sum(1) - 1]


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("graphs", nargs="+", type=Path)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=24)
    parser.add_argument("--claims", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    batches = capture(args.data, args.docs, args.claims)
    print(f"{len(batches)} batches, shapes {[b[0].shape[:2] for b in batches]}; {speed_flags_note()}")
    from c2v_rag.onnx_decoder import cpu_session

    sessions = {path: cpu_session(path, threads=1) for path in args.graphs}  # as the library runs them
    states = {path: [last_states(s, b) for b in batches] for path, s in sessions.items()}
    seconds: dict[Path, list[float]] = {path: [] for path in args.graphs}
    for repeat in range(args.repeats):
        for path in args.graphs if repeat % 2 == 0 else args.graphs[::-1]:
            start = time.process_time()
            for batch in batches:
                sessions[path].run(["last_hidden_state"], {"inputs_embeds": batch[0], "attention_mask": batch[1],
                                                           "position_ids": batch[2]})
            seconds[path].append(time.process_time() - start)
    reference = args.graphs[0]
    rng = np.random.default_rng(0)
    for path in args.graphs:
        sess = sessions[path]
        to_first = np.concatenate([cosine(a, b) for a, b in zip(states[path], states[reference])])
        alone = [cosine(last_states(sess, (e[r:r + 1, :n], m[r:r + 1, :n], p[r:r + 1, :n]))[0], state[r])
                 for (e, m, p), state in zip(batches, states[path]) for r, n in enumerate(m.sum(1))]
        noisy = np.concatenate([
            cosine(last_states(sess, ((e * (1 + 1e-6 * rng.standard_normal(e.shape))).astype(np.float32), m, p)), state)
            for (e, m, p), state in zip(batches, states[path])])
        median = statistics.median(seconds[path])
        print(f"{path}: {median:.2f} CPU s, {statistics.median(seconds[reference]) / median:.2f}x the first; h_EOS "
              f"cosine to the first worst {to_first.min():.5f} mean {to_first.mean():.5f}; alone vs batch worst "
              f"{min(alone):.6f}; perturbed 1e-6 worst {noisy.min():.6f}")


if __name__ == "__main__":
    main()
