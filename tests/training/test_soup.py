"""experiments/soup.py: the soup of two variants trained from one start loads as a variant whose decoder update is
the mean of theirs, as peft computes it, and whose projector is the mean of theirs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from script_loading import load_script

from c2v_rag import Causal2Vec
from c2v_rag.training import TrainConfig, train

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "soup.py"


def _soup_main(argv: list[str]) -> int:
    return load_script(SCRIPT, "experiments_soup").main(argv)


def test_soup_of_two_seeds_is_their_mean_update(tiny_recipe, tmp_path):
    runs = []
    for seed in (3, 4):
        raw = tiny_recipe(steps=3, seed=seed)
        raw["output"]["dir"] = str(tmp_path / f"seed{seed}")
        runs.append(train(TrainConfig.model_validate(raw)).output_dir)
    out = tmp_path / "soup"
    assert _soup_main([str(runs[0]), str(runs[1]), "--out", str(out)]) == 0

    inputs = [Causal2Vec.from_pretrained(run, device="cpu", dtype="float32") for run in runs]
    soup = Causal2Vec.from_pretrained(out, device="cpu", dtype="float32")
    config = json.loads((out / "decoder_adapter" / "adapter_config.json").read_text())
    rank = json.loads((runs[0] / "decoder_adapter" / "adapter_config.json").read_text())["r"]
    assert config["r"] == 2 * rank

    # Loading merges each adapter into its base weights (W0 + update), so the mean of two updates is the mean of
    # the two merged models' weights; the weights LoRA touched must differ between the seeds
    for part in ("decoder", "encoder", "projector"):
        named = [dict(getattr(m, part).named_parameters()) for m in (*inputs, soup)]
        assert named[2].keys() == named[0].keys()
        moved = [name for name in named[0] if not torch.equal(named[0][name], named[1][name])]
        assert moved, part
        for name in named[0]:
            torch.testing.assert_close(
                named[2][name], (named[0][name] + named[1][name]) / 2, rtol=1e-5, atol=1e-6, msg=f"{part} {name}"
            )
    vectors = [m.encode(["a claim about vitamin D"]) for m in (*inputs, soup)]
    assert vectors[2].shape == vectors[0].shape
    assert not (vectors[2] == vectors[0]).all() and not (vectors[2] == vectors[1]).all()


def test_soup_refuses_variants_of_different_models(tiny_recipe, tmp_path, capsys):
    raw = tiny_recipe(steps=1)
    run = train(TrainConfig.model_validate(raw)).output_dir
    other = tmp_path / "other"
    other.mkdir()
    config = json.loads((run / "causal2vec_config.json").read_text())
    config["decoder"] = "another-decoder"
    (other / "causal2vec_config.json").write_text(json.dumps(config))
    with pytest.raises(SystemExit):
        _soup_main([str(run), str(other), "--out", str(tmp_path / "soup")])
    assert "the variants differ in decoder" in capsys.readouterr().err
    assert not (tmp_path / "soup").exists()
