"""Recipes validate; the CLI trains on real SciFact/STS-B files (tiny model) with mining and dev metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from c2v_rag import Causal2Vec
from c2v_rag.cli import main
from c2v_rag.training import TrainConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))


@pytest.mark.parametrize("recipe", RECIPES, ids=[r.stem for r in RECIPES])
def test_recipes_validate(recipe):
    config = load_config(recipe)
    assert config.training.temperature == 0.05


def test_a_recipe_is_named_as_torchtune_names_its_configs(tmp_path, monkeypatch, capsys):
    """`c2v-rag train llm2vec_mntp` said only 'training config llm2vec_mntp does not exist'."""
    monkeypatch.chdir(tmp_path)  # not where the recipes are
    named = load_config("llm2vec_mntp")
    assert named == load_config(ROOT / "recipes" / "llm2vec_mntp.yaml")
    with pytest.raises(FileNotFoundError, match=r"llm2vec_mtnp does not exist; name one of the recipes in .*own_data"):
        load_config("llm2vec_mtnp")
    assert main(["train", "llm2vec_mtnp"]) == 2
    assert "llm2vec_mntp, llm2vec_simcse" in capsys.readouterr().err
    (tmp_path / "mine").write_text("not: a recipe")  # a file of that name is the user's, not a recipe's name
    with pytest.raises(ValueError, match="validation errors for TrainConfig"):
        load_config("mine")


def test_overrides_and_bad_config_errors(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {"model": {"decoder": "d"}, "datasets": [{"format": "jsonl", "path": "x.jsonl"}], "output": {"dir": "o"}}
        )
    )
    config = load_config(recipe, ["training.steps=7", "datasets.0.task=SciFact", "training.mini_batch_size=null"])
    assert config.training.steps == 7 and config.datasets[0].task == "SciFact"
    assert config.training.total_schedule_steps == 14
    with pytest.raises(ValueError, match="not an index"):
        load_config(recipe, ["datasets.3.path=y"])
    with pytest.raises(ValueError, match="either 'variant'"):
        TrainConfig.model_validate(
            {"model": {}, "datasets": [{"format": "jsonl", "path": "x"}], "output": {"dir": "o"}}
        )
    with pytest.raises(ValueError, match=r"model.config \['echo'\] cannot change a variant"):
        load_config(recipe, ["model.decoder=null", "model.variant=runs/v", "model.config.echo=true"])
    continued = load_config(recipe, ["model.decoder=null", "model.variant=runs/v", "model.config={}"])
    assert continued.model.variant == "runs/v" and continued.model.config == {}
    with pytest.raises(ValueError, match="training.precision"):
        TrainConfig.model_validate(
            {
                "model": {"decoder": "d", "config": {"dtype": "bfloat16"}},
                "datasets": [{"format": "jsonl", "path": "x"}],
                "output": {"dir": "o"},
            }
        )
    assert main(["train", str(tmp_path / "missing.yaml")]) == 2
    recipe.write_text("model: {decoder: d}\ndatasets: []\noutput: {dir: o}\n")
    assert main(["train", str(recipe)]) == 2
    with pytest.raises(ValueError, match="retrieval_dataset"):
        TrainConfig.model_validate(
            {
                "model": {"decoder": "d"},
                "datasets": [{"format": "jsonl", "path": "x"}],
                "evaluation": {"retrieval_dataset": "x"},
                "output": {"dir": "o"},
            }
        )


@pytest.mark.skipif(not (DATA / "scifact" / "corpus.jsonl").is_file(), reason="shared SciFact data not present")
def test_cli_trains_on_scifact_with_bm25_mining_and_dev_metrics(tiny_dirs, tmp_path, capsys):
    out = tmp_path / "run"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "model": {"decoder": str(tiny_dirs["qwen2"]), "encoder": str(tiny_dirs["bert"]), "max_length": 48},
                "lora": {"r": 4, "alpha": 8},
                "encoder_lora": {"r": 2, "alpha": 4},
                "datasets": [
                    {
                        "name": "scifact",
                        "format": "beir",
                        "path": str(DATA / "scifact"),
                        "task": "SciFact",
                        "dev_fraction": 0.2,
                        "limit": 64,
                    },
                    {
                        "name": "snli",
                        "format": "triplets_tsv",
                        "path": str(DATA / "nli" / "snli_dev_triplets.tsv"),
                        "task": "NLI",
                        "limit": 64,
                    },
                ],
                "mining": {"method": "bm25", "datasets": ["scifact"], "depth": 10},
                "evaluation": {
                    "sts_path": str(DATA / "stsb" / "stsb.dev.tsv"),
                    "sts_limit": 40,
                    "retrieval_dataset": "scifact",
                    "retrieval_corpus_limit": 30,
                    "retrieval_max_length": 48,
                },
                "training": {
                    "steps": 3,
                    "batch_size": 8,
                    "precision": "fp32",
                    "warmup_steps": 1,
                    "progress_bar": False,
                    "device": "cpu",
                    "gradient_checkpointing": True,
                    "save_every": 2,
                },
                "output": {"dir": str(out), "default_task": "SciFact"},
            }
        )
    )
    assert main(["train", str(recipe)]) == 0
    assert "variant written to" in capsys.readouterr().out
    mined = [json.loads(line) for line in (out / "mined" / "scifact.jsonl").open()]
    assert len(mined) == 64 and all(len(m["negatives"]) == 1 for m in mined)
    assert all(m["negative_keys"][0] not in m["known_positive_keys"] for m in mined)
    metrics = json.loads((out / "metrics.json").read_text())["evaluations"]
    assert [m["step"] for m in metrics] == [0, 3]
    assert {"scifact/ndcg@10", "sts/spearman"} <= set(metrics[0])
    model = Causal2Vec.from_pretrained(out, device="cpu", dtype="float32")
    assert model.config.default_task == "SciFact"
    # Resuming a finished run is a no-op that still writes the variant.
    assert main(["train", str(recipe), "--resume"]) == 0


def test_a_continued_variant_may_change_only_its_readout():
    recipe = Path(__file__).resolve().parents[2] / "recipes" / "default_preset_2_concat.yaml"
    config = load_config(recipe)
    assert config.model.variant and config.model.config == {
        "representation": "concat",
        "normalize_parts": True,
        "encoder_share": 0.5,
    }
    with pytest.raises(ValueError, match="only the readout fields"):
        load_config(recipe, ["model.config.num_contextual_tokens=4"])


def test_labelled_dev_rows_never_reach_training(tmp_path):
    from c2v_rag.evaluation.datasets import holdout, read_labelled
    from c2v_rag.training.config import DatasetSection
    from c2v_rag.training.data import load_labelled

    path = tmp_path / "intents.csv"
    rows = [(f"text number {i} about {label}", label) for i in range(40) for label in ("card", "loan", "fee")]
    path.write_text("text,category\n" + "".join(f"{t},{lab}\n" for t, lab in rows), encoding="utf-8")
    section = DatasetSection(format="labelled", path=str(path), dev_fraction=0.25, dev_seed=3, num_pairs=500)
    seen = {t for e in load_labelled(section).examples for t in (e.query, e.positive, *e.negatives)}
    texts, labels = read_labelled(path)
    _, _, held, _ = holdout(texts, labels, fraction=0.25, seed=3)
    assert len(held) == 30 and not seen & set(held)
    assert len(seen) == 90  # every other row is used
