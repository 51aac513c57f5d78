"""The norms of h_C and h_EOS, and how much each decides the concat cosine (issue 12; paper, Appendix C.1).

    python experiments/part_norms.py --data ../shared/data --variants default runs/preset/stage2-concat/variant

For each variant, on the first 100 SciFact abstracts (no instruction, as documents are embedded): the L2
norms of the decoder's last states at the Contextual token (h_C) and at EOS (h_EOS), the dimensions with
the largest mean magnitude (massive activations), the mean pairwise cosine of each half, and the share of
the concat dot product that h_C contributes, unnormalized: near 1 means h_C decides the cosine.
"""

from __future__ import annotations

import argparse
import itertools
import json

import torch

from c2v_rag import Causal2Vec
from c2v_rag.evaluation.datasets import read_beir_corpus


def part_states(model: Causal2Vec, texts: list[str], batch_size: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    """h_C and h_EOS [n, d] in float32, read at the positions the model pools."""
    pieces, encoder_ids = model.prepare(texts, None)
    h_c, h_eos = [], []
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            batch = model.collate(
                pieces[start : start + batch_size], encoder_ids[start : start + batch_size] if encoder_ids else None
            )
            hidden, _ = model.decoder_states(batch)
            rows = torch.arange(hidden.size(0))
            h_c.append(hidden[rows, batch.context_positions].float())
            h_eos.append(hidden[rows, batch.last_positions].float())
    return torch.cat(h_c), torch.cat(h_eos)


def describe(x: torch.Tensor) -> dict:
    norms = x.norm(dim=-1)
    unit = torch.nn.functional.normalize(x, dim=-1)
    off_diagonal = ~torch.eye(len(x), dtype=torch.bool)
    top = x.abs().mean(0).topk(3)
    return {
        "norm_mean": norms.mean().item(),
        "norm_min": norms.min().item(),
        "norm_max": norms.max().item(),
        "top_dims": top.indices.tolist(),
        "top_dim_mean_abs": [round(v, 2) for v in top.values.tolist()],
        "pairwise_cos_mean": (unit @ unit.T)[off_diagonal].mean().item(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the shared data folder (holds scifact/)")
    parser.add_argument("--variants", nargs="+", default=["default"], help="variant directories or presets")
    parser.add_argument("--n", type=int, default=100, help="how many abstracts")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--json", help="also write the numbers here")
    args = parser.parse_args(argv)

    texts = list(itertools.islice(read_beir_corpus(f"{args.data}/scifact").values(), args.n))
    results = {}
    for name in args.variants:
        model = Causal2Vec.from_pretrained(None if name == "default" else name, dtype=args.dtype)
        model.set_readout(representation="concat", normalize_parts=False)  # the text in, whatever the readout
        h_c, h_eos = part_states(model, texts)
        off_diagonal = ~torch.eye(len(texts), dtype=torch.bool)
        c_dot, eos_dot = (h_c @ h_c.T)[off_diagonal], (h_eos @ h_eos.T)[off_diagonal]
        results[name] = {
            "h_C": describe(h_c),
            "h_EOS": describe(h_eos),
            "h_C_share_of_concat_dot": (c_dot / (c_dot + eos_dot)).mean().item(),
        }
        r = results[name]
        print(
            f"{name}: |h_C| {r['h_C']['norm_mean']:.1f} ({r['h_C']['norm_min']:.1f}-{r['h_C']['norm_max']:.1f}), "
            f"|h_EOS| {r['h_EOS']['norm_mean']:.1f} ({r['h_EOS']['norm_min']:.1f}-{r['h_EOS']['norm_max']:.1f}); "
            f"h_C's top dims {r['h_C']['top_dims']} at {r['h_C']['top_dim_mean_abs']}; pairwise cos h_C "
            f"{r['h_C']['pairwise_cos_mean']:.3f}, h_EOS {r['h_EOS']['pairwise_cos_mean']:.3f}; h_C's share of "
            f"the unnormalized concat dot product {r['h_C_share_of_concat_dot']:.2f}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
