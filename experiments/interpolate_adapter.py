"""Move a variant's LoRA adapter part of the way back to its base weights (WiSE-FT, Wortsman et al. 2022).

A LoRA adapter adds ``(alpha / r) * B @ A`` to each weight it targets; the weights at ``t`` of the way from the base
model to the fine-tuned one are ``W0 + t * (alpha / r) * B @ A``, which is the same adapter with ``lora_alpha``
multiplied by ``t``. The copy keeps every other file, so everything else (the other adapter, the projector, the
readout) is the variant's as trained. ``t=1`` is the variant, ``t=0`` drops the adapter's update.

    python experiments/interpolate_adapter.py c2v_rag/presets/c2v-smollm2-135m-minilm --adapter encoder \
        --weight 0.5 --out runs/preset-encoder-half
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

ADAPTER_CONFIG = "adapter_config.json"


def interpolate(variant: Path, adapter: str, weight: float, out: Path) -> float:
    """Copy ``variant`` to ``out`` with its ``{adapter}_adapter`` at ``weight`` of its update; returns the new
    ``lora_alpha``."""
    if not 0.0 <= weight <= 1.0:
        raise SystemExit(f"--weight must be in [0, 1] (0: the base weights, 1: the variant), got {weight}")
    config_path = variant / f"{adapter}_adapter" / ADAPTER_CONFIG
    if not config_path.is_file():
        raise SystemExit(f"{variant} has no {adapter} adapter ({config_path} is missing)")
    if out.exists():
        raise SystemExit(f"{out} exists: pick a new --out")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if config.get("use_dora") or config.get("peft_type", "LORA") != "LORA":
        raise SystemExit(f"{config_path}: only plain LoRA adapters scale by lora_alpha")
    shutil.copytree(variant, out)
    config["lora_alpha"] = float(config["lora_alpha"]) * weight
    (out / f"{adapter}_adapter" / ADAPTER_CONFIG).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return config["lora_alpha"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variant", type=Path)
    parser.add_argument("--adapter", choices=["encoder", "decoder"], required=True)
    parser.add_argument("--weight", type=float, required=True, help="the share of the adapter's update kept, 0 to 1")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    alpha = interpolate(args.variant, args.adapter, args.weight, args.out)
    print(f"{args.out}: {args.adapter} adapter at {args.weight} of its update (lora_alpha {alpha:g})")


if __name__ == "__main__":
    main()
