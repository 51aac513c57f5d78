"""Average trained variants that share a start (a uniform model soup, Wortsman et al. 2022) into one variant.

LoRA factors are not averaged one by one: the mean of the products B·A is not the product of the means. The
adapters are stacked along the rank instead, A = [A1; ...; An] and B = [B1, ..., Bn] / n, whose product is exactly
the mean of the inputs' updates; ``lora_alpha`` grows with ``r`` so that the scale alpha / r stays the same.
Tensors trained in full (the projector) are averaged. An adapter that is identical in every input (one that was
frozen) is copied as it is.

    python experiments/soup.py runs/broad-docs-api runs/broad-docs-api-s48 --out runs/soup-api
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

ADAPTER_FILE = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
PROJECTOR_FILE = "projector.safetensors"
CONFIG_FILE = "causal2vec_config.json"
# Files of a variant that are the same for every input and go to the soup unchanged.
COPIED = ("causal2vec_st_module.json", "config_sentence_transformers.json", "modules.json", "train_config.yaml")


def stack_lora(adapters: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """One adapter of rank sum(r_i) whose update B·A is the mean of the inputs' updates."""
    if any(set(a) != set(adapters[0]) for a in adapters):
        raise SystemExit("the adapters target different modules: they did not start from the same variant")
    n = len(adapters)
    out = {}
    for name, first in adapters[0].items():
        dtype = first.dtype
        tensors = [a[name].float() for a in adapters]
        if ".lora_A." in name:  # (r, in): stack the rows
            out[name] = torch.cat(tensors, dim=0).to(dtype)
        elif ".lora_B." in name:  # (out, r): stack the columns, each input weighted 1/n
            out[name] = (torch.cat(tensors, dim=1) / n).to(dtype)
        else:
            raise SystemExit(f"{name}: only plain LoRA factors can be stacked")
    return out


def _same(value: object) -> object:
    # peft saves target_modules from a set: the order of the list is not part of the config
    return sorted(value) if isinstance(value, list) else value


def soup_adapter(sources: list[Path], target: Path) -> str:
    """Write the soup of the adapters in ``sources`` to ``target``; returns what was done, for the log."""
    files = [s / ADAPTER_FILE for s in sources]
    target.mkdir(parents=True)
    if all(filecmp.cmp(files[0], f, shallow=False) for f in files[1:]):
        shutil.copytree(sources[0], target, dirs_exist_ok=True)
        return "copied (identical in every input)"
    configs = [json.loads((s / ADAPTER_CONFIG).read_text()) for s in sources]
    config = dict(configs[0])
    for other in configs[1:]:
        differing = {k for k in config if k not in ("r", "lora_alpha") and _same(other.get(k)) != _same(config[k])}
        if differing:
            raise SystemExit(f"{target.name}: the inputs' adapter configs differ in {sorted(differing)}")
    ranks = [c["r"] for c in configs]
    scales = {c["lora_alpha"] / c["r"] for c in configs}
    if len(scales) != 1 or config.get("use_rslora") or config.get("use_dora") or config.get("rank_pattern"):
        raise SystemExit(f"{target.name}: stacking needs plain LoRA with one scale alpha/r in every input")
    config["r"] = sum(ranks)
    config["lora_alpha"] = scales.pop() * config["r"]
    inputs = [load_file(str(f)) for f in files]
    stacked = stack_lora(inputs)
    save_file(stacked, str(target / ADAPTER_FILE), metadata={"format": "pt"})
    (target / ADAPTER_CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    return (
        f"stacked: rank {' + '.join(map(str, ranks))} = {config['r']}, lora_alpha {config['lora_alpha']}; "
        f"largest relative gap to the mean update {mean_update_gap(inputs, stacked):.2e}"
    )


def mean_update_gap(inputs: list[dict[str, torch.Tensor]], soup: dict[str, torch.Tensor]) -> float:
    """The largest gap, over every module, between the soup's update and the mean of the inputs' updates."""
    worst = 0.0
    for name in soup:
        if ".lora_A." not in name:
            continue
        b_name = name.replace(".lora_A.", ".lora_B.")
        mean = torch.stack([i[b_name].double() @ i[name].double() for i in inputs]).mean(dim=0)
        got = soup[b_name].double() @ soup[name].double()
        worst = max(worst, float((got - mean).abs().max() / mean.abs().max().clamp_min(1e-12)))
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variants", nargs="+", type=Path, help="variant directories trained from the same start")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if len(args.variants) < 2:
        parser.error("name at least two variants")
    if args.out.exists():
        parser.error(f"--out {args.out} exists; pick a new directory")
    configs = [json.loads((v / CONFIG_FILE).read_text()) for v in args.variants]
    for key in ("decoder", "encoder", "representation", "decoder_adapter", "encoder_adapter"):
        if len({json.dumps(c.get(key)) for c in configs}) != 1:
            parser.error(f"the variants differ in {key}: they are not the same model trained twice")
    args.out.mkdir(parents=True)
    for name in COPIED:
        if (args.variants[0] / name).is_file():
            shutil.copy2(args.variants[0] / name, args.out / name)
    projectors = [load_file(str(v / PROJECTOR_FILE)) for v in args.variants]
    mean = {
        k: torch.stack([p[k].float() for p in projectors]).mean(dim=0).to(t.dtype) for k, t in projectors[0].items()
    }
    save_file(mean, str(args.out / PROJECTOR_FILE), metadata={"format": "pt"})
    for key in ("decoder_adapter", "encoder_adapter"):
        folder = configs[0].get(key)
        if folder:
            print(f"{folder}: {soup_adapter([v / folder for v in args.variants], args.out / folder)}")
    config = configs[0]
    config.setdefault("metadata", {})["soup_of"] = [v.name for v in args.variants]
    config["metadata"].pop("dev_scores", None)
    (args.out / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    print(f"soup of {len(args.variants)} variants written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
