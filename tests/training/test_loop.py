"""End-to-end training on tiny models: output variant, resume exactness, NaN stop, CLI."""

from __future__ import annotations

import json
import logging
import shutil

import pytest
import torch

from c2v_rag import Causal2Vec
from c2v_rag.hub.publish import model_card
from c2v_rag.training import TrainConfig, Trainer, TrainingDivergedError, train
from c2v_rag.training.checkpoint import CheckpointError, list_checkpoints


def _trainable(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def test_training_writes_a_loadable_variant(tiny_recipe, tmp_path):
    config = TrainConfig.model_validate(tiny_recipe(steps=6, save_every=3))
    result = train(config)
    out = result.output_dir
    assert (out / "decoder_adapter" / "adapter_model.safetensors").is_file()
    assert (out / "encoder_adapter" / "adapter_model.safetensors").is_file()
    assert (out / "loss.png").stat().st_size > 1000
    assert len(result.history) == 6 and all(h["loss"] > 0 for h in result.history)
    assert {h["dataset"] for h in result.history} == {"nli", "pairs"}
    loaded = Causal2Vec.from_pretrained(out, device="cpu", dtype="float32")
    assert loaded.config.metadata["trained"] is True
    emb = loaded.encode(["a claim about vitamin D"], instruction="Find the evidence")
    assert emb.shape == (1, loaded.embedding_dim)
    # The final variant and the last checkpoint's variant hold the same weights.
    ckpt = list_checkpoints(out / "checkpoints")[-1]
    from_ckpt = Causal2Vec.from_pretrained(ckpt / "variant", device="cpu", dtype="float32")
    torch.testing.assert_close(
        torch.from_numpy(from_ckpt.encode(["x y z"])), torch.from_numpy(loaded.encode(["x y z"]))
    )


def test_resume_continues_exactly(tiny_recipe, tmp_path):
    """test_resume_continues_exactly: 6 steps straight == 3 steps, checkpoint, fresh process state, 3 more."""
    # Dropout and GradCache on: the RNG state must be restored for the steps to match bit for bit.
    raw = tiny_recipe(steps=6, save_every=3, keep_checkpoints=5, mini_batch_size=3)
    raw["lora"]["dropout"] = 0.2
    raw["encoder_lora"]["dropout"] = 0.2
    straight = Trainer(TrainConfig.model_validate(raw))
    straight.setup()
    straight.fit()
    expected = _trainable(straight.model)

    resumed_dir = tmp_path / "resumed"
    shutil.copytree(straight.output_dir, resumed_dir)
    for later in list_checkpoints(resumed_dir / "checkpoints")[1:]:
        shutil.rmtree(later)
    torch.manual_seed(12345)  # whatever state the new process starts in
    raw["output"]["dir"] = str(resumed_dir)
    resumed = Trainer(TrainConfig.model_validate(raw))
    resumed.setup(resume=True)
    assert resumed.step == 3
    resumed.fit()
    got = _trainable(resumed.model)
    assert got.keys() == expected.keys()
    for name in expected:
        assert torch.equal(got[name], expected[name]), name
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in straight.history]
    assert resumed.optimizer.state_dict()["state"][0]["step"] == straight.optimizer.state_dict()["state"][0]["step"]


def test_resume_in_a_new_process_continues_exactly(tiny_recipe, tmp_path):
    """The CLI, as a user resumes: a new interpreter (another hash seed, fresh RNGs) goes on bit for bit."""
    import json
    import os
    import subprocess
    import sys

    import yaml
    from safetensors.torch import load_file

    raw = tiny_recipe(steps=4, save_every=2, keep_checkpoints=5, mini_batch_size=3)
    raw["lora"]["dropout"] = 0.2
    raw["mining"] = {"method": "bm25", "datasets": ["pairs"], "depth": 10}

    def run(directory, *extra, hash_seed):
        raw["output"]["dir"] = str(directory)
        recipe = tmp_path / "recipe.yaml"
        recipe.write_text(yaml.safe_dump(raw))
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "OMP_NUM_THREADS": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "c2v_rag.cli", "train", str(recipe), *extra],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return [json.loads(line)["loss"] for line in (directory / "history.jsonl").open()]

    straight = run(tmp_path / "straight", hash_seed="1")
    resumed_dir = tmp_path / "resumed"
    shutil.copytree(tmp_path / "straight", resumed_dir)
    shutil.rmtree(resumed_dir / "checkpoints" / "step-000004")
    resumed = run(resumed_dir, "--resume", hash_seed="2")
    assert len(straight) == 4 and resumed == straight
    last = "checkpoints/step-000004/trainable.safetensors"
    expected, got = load_file(str(tmp_path / "straight" / last)), load_file(str(resumed_dir / last))
    assert expected.keys() == got.keys()
    assert all(torch.equal(got[name], expected[name]) for name in expected)


def test_resume_refuses_a_different_recipe(tiny_recipe):
    raw = tiny_recipe(steps=2, save_every=1)
    train(TrainConfig.model_validate(raw))
    raw["training"]["lr"] = 0.5
    trainer = Trainer(TrainConfig.model_validate(raw))
    with pytest.raises(Exception, match="different model, data or optimisation"):
        trainer.setup(resume=True)
    raw["training"]["lr"] = 1e-3
    # More steps keep the schedule the run started with (2 x 2 steps), so up to its end only
    raw["training"]["steps"] = 4
    trainer = Trainer(TrainConfig.model_validate(raw))
    trainer.setup(resume=True)
    assert trainer.scheduler.lr_lambdas[0].total == 4 and trainer.step == 2
    raw["training"]["steps"] = 5
    with pytest.raises(CheckpointError, match=r"training.steps=5 goes past .* \(step 4\).*training.steps <= 4"):
        Trainer(TrainConfig.model_validate(raw)).setup(resume=True)
    with pytest.raises(FileExistsError, match="--resume"):
        Trainer(TrainConfig.model_validate(raw)).setup()


def test_resume_may_change_how_a_step_trades_memory(tiny_recipe, tmp_path):
    """A run that ran out of memory goes on with smaller GradCache chunks and gradient checkpointing: the same
    loss and gradients computed in other pieces (tests/training/test_gradcache.py checks that; here the tiny
    encoder's own dropout draws its masks per chunk, so the resumed steps are not the straight run's)."""
    raw = tiny_recipe(steps=4, save_every=2, keep_checkpoints=5, mini_batch_size=4)
    straight = Trainer(TrainConfig.model_validate(raw))
    straight.setup()
    straight.fit()

    resumed_dir = tmp_path / "resumed"
    shutil.copytree(straight.output_dir, resumed_dir)
    shutil.rmtree(list_checkpoints(resumed_dir / "checkpoints")[-1])
    raw["output"]["dir"] = str(resumed_dir)
    raw["training"].update(mini_batch_size=1, gradient_checkpointing=True)
    resumed = Trainer(TrainConfig.model_validate(raw))
    resumed.setup(resume=True)
    assert resumed.step == 2 and resumed.stepper.mini_batch_size == 1
    resumed.fit()
    assert [h["step"] for h in resumed.history][-2:] == [3, 4]
    assert all(0 < h["loss"] < 10 for h in resumed.history)
    # what a step computes still may not change
    raw["training"]["lr"] = 0.5
    with pytest.raises(CheckpointError, match="different model, data or optimisation"):
        Trainer(TrainConfig.model_validate(raw)).setup(resume=True)


def test_a_checkpoint_from_before_resumes_under_its_own_settings(tiny_recipe):
    """Checkpoints written before the memory options were left out of the fingerprint hashed them: they resume
    under the settings they were written with, and refuse others as they did."""
    import json

    from c2v_rag.training.checkpoint import STATE_FILE
    from c2v_rag.training.trainer import _RESUMABLE_TRAINING_BEFORE, _config_fingerprint

    raw = tiny_recipe(steps=4, save_every=2, mini_batch_size=2)
    config = TrainConfig.model_validate(raw)
    trainer = Trainer(config)
    trainer.setup()
    trainer.fit()
    checkpoint = list_checkpoints(trainer.output_dir / "checkpoints")[-1]
    state = json.loads((checkpoint / STATE_FILE).read_text())
    state["fingerprint"] = _config_fingerprint(config, _RESUMABLE_TRAINING_BEFORE)  # as the release before wrote it
    (checkpoint / STATE_FILE).write_text(json.dumps(state))
    assert state["fingerprint"] != trainer.fingerprint
    raw["training"]["steps"] = 4
    again = Trainer(TrainConfig.model_validate(raw))
    again.setup(resume=True)
    assert again.step == 4
    raw["training"]["mini_batch_size"] = 1  # that release refused this, so its checkpoint still does
    with pytest.raises(CheckpointError, match="different model, data or optimisation"):
        Trainer(TrainConfig.model_validate(raw)).setup(resume=True)


def test_resume_refuses_base_weights_changed_under_the_same_path(tiny_recipe, tiny_dirs, tmp_path):
    from safetensors.torch import load_file, save_file

    decoder = tmp_path / "decoder"
    shutil.copytree(tiny_dirs["llama"], decoder)
    raw = tiny_recipe(steps=2, save_every=1)
    raw["model"]["decoder"] = str(decoder)
    train(TrainConfig.model_validate(raw))
    trainer = Trainer(TrainConfig.model_validate(raw))
    trainer.setup(resume=True)  # the same weights: resumes
    assert trainer.step == 2
    # Another model saved to the same path: the checkpoint holds only the adapters, so resuming would mix them.
    weights = decoder / "model.safetensors"
    tensors = load_file(str(weights))
    name = next(n for n in tensors if "layers.0.mlp" in n)
    tensors[name] = tensors[name] * 1.5
    save_file(tensors, str(weights), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=f"other base weights than {decoder} and "):
        Trainer(TrainConfig.model_validate(raw)).setup(resume=True)


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tiny_recipe):
    config = TrainConfig.model_validate(tiny_recipe(steps=8, save_every=2))

    def poison(trainer, step):
        if step == 3:
            with torch.no_grad():
                trainer.model.projector.fc1.weight[0, 0] = float("nan")

    trainer = Trainer(config, callbacks=[poison])
    trainer.setup()
    with pytest.raises(TrainingDivergedError, match=r"step 4: the loss is nan.*step-000002") as info:
        trainer.fit()
    assert "Lower training.lr" in str(info.value)
    checkpoints = list_checkpoints(trainer.checkpoint_root)
    assert [c.name for c in checkpoints] == ["step-000002"]
    assert (trainer.output_dir / "loss.png").is_file()
    good = Causal2Vec.from_pretrained(checkpoints[0] / "variant", device="cpu", dtype="float32")
    assert torch.isfinite(good.projector.fc1.weight).all()
    assert len(trainer.history) == 3
    # The poisoned step did not touch the optimizer: three updates so far.
    assert int(trainer.optimizer.state_dict()["state"][0]["step"]) == 3


def test_continue_training_a_variant_keeps_its_weights(tiny_recipe, tmp_path):
    first = train(TrainConfig.model_validate(tiny_recipe(steps=2)))
    # As the preset's config does: the scores measured on these weights, and the variants they were souped from.
    config_file = first.output_dir / "causal2vec_config.json"
    recorded = json.loads(config_file.read_text())
    recorded["metadata"].update(dev_scores={"stsb-dev": 0.88}, soup_of=["a", "b"], name="first")
    config_file.write_text(json.dumps(recorded))
    trained = Causal2Vec.from_pretrained(first.output_dir, device="cpu", dtype="float32")
    raw = tiny_recipe(steps=1)
    raw["model"] = {"variant": str(first.output_dir)}
    raw["output"]["dir"] = str(tmp_path / "second")
    trainer = Trainer(TrainConfig.model_validate(raw))
    trainer.setup()
    # Before any step, the model under training embeds like the saved variant (adapters unmerged, trainable).
    assert any("lora_" in n for n, p in trainer.model.named_parameters() if p.requires_grad)
    assert (
        trainer.model.projector.fc1.weight.dtype == torch.float32 and trainer.model.projector.fc1.weight.requires_grad
    )
    texts = ["vitamin D and bone loss", "cats and dogs"]
    torch.testing.assert_close(
        torch.from_numpy(trainer.model.encode(texts)), torch.from_numpy(trained.encode(texts)), rtol=1e-4, atol=1e-5
    )
    trainer.fit()
    # They described the first variant's weights: the second's config, and its model card, carried them as its own.
    metadata = Causal2Vec.from_pretrained(tmp_path / "second", device="cpu", dtype="float32").config.metadata
    assert metadata["trained"] and metadata["training"]["steps"] == 1
    assert "dev_scores" not in metadata and "soup_of" not in metadata
    assert metadata["continued_from"] == first.output_dir.name and metadata["name"] == "first"
    assert "model-index" not in model_card(tmp_path / "second", "me/second")
    assert "model-index" in model_card(first.output_dir, "me/first")


def test_continuing_a_variant_says_when_the_recipe_asks_for_another_adapter(tiny_recipe, tmp_path, caplog):
    first = train(TrainConfig.model_validate(tiny_recipe(steps=1)))
    saved_r = (
        Causal2Vec.from_pretrained(first.output_dir, device="cpu", merge_adapters=False)
        .decoder.peft_config["default"]
        .r
    )
    raw = tiny_recipe(steps=1)
    raw["model"] = {"variant": str(first.output_dir)}
    raw["output"]["dir"] = str(tmp_path / "second")
    raw["lora"] = {k: v for k, v in raw.get("lora", {}).items() if k not in ("r", "alpha")}  # the recipe's defaults
    with caplog.at_level(logging.WARNING, logger="c2v_rag.training.trainer"):
        Trainer(TrainConfig.model_validate(raw)).setup()
    assert "keeps training as it was saved" not in caplog.text  # nothing asked, nothing to say
    raw["lora"]["r"] = saved_r + 4
    with caplog.at_level(logging.WARNING, logger="c2v_rag.training.trainer"):
        trainer = Trainer(TrainConfig.model_validate(raw))
        trainer.setup()
    assert f"decoder adapter keeps training as it was saved (r={saved_r}," in caplog.text
    assert f"lora.r={saved_r + 4} apply only to a new adapter" in caplog.text
    assert trainer.model.decoder.peft_config["default"].r == saved_r  # the saved adapter is what trains


def test_warmup_trains_from_the_first_step(tiny_recipe):
    config = TrainConfig.model_validate(tiny_recipe(steps=4, warmup_steps=1, lr=1e-3))
    result = train(config)
    lrs = [h["lr"] for h in result.history]
    assert lrs[0] > 0, f"the first step trained at lr {lrs[0]}"
    assert lrs[0] < lrs[1] == pytest.approx(1e-3)  # warmup, then the peak, then linear decay
    assert lrs[1] > lrs[2] > lrs[3] > 0


def test_a_missing_training_extra_stops_before_any_step(tiny_recipe, tmp_path):
    """Without matplotlib (the train extra), training refuses at setup, naming the install, and writes nothing."""
    import json
    import subprocess
    import sys

    raw = tiny_recipe(steps=2)
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps(raw))
    code = (
        "import sys, json; sys.modules['matplotlib'] = None\n"
        "from c2v_rag.training import TrainConfig, train\n"
        f"train(TrainConfig.model_validate(json.load(open({str(recipe)!r}))))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode != 0
    assert "pip install 'c2v-rag[train]'" in run.stderr
    out = tmp_path / "run"
    assert not out.exists() or not any(out.iterdir())


def test_a_failing_loss_plot_is_a_warning_not_a_lost_run(tiny_recipe, monkeypatch, caplog):
    from c2v_rag.training import trainer

    def broken_plot(*args, **kwargs):
        raise RuntimeError("no display")

    monkeypatch.setattr(trainer, "plot_loss_curve", broken_plot)
    config = TrainConfig.model_validate(tiny_recipe(steps=2, save_every=1))
    with caplog.at_level("WARNING", logger="c2v_rag.training.trainer"):
        result = train(config)
    assert (result.output_dir / "decoder_adapter" / "adapter_model.safetensors").is_file()
    assert list_checkpoints(result.output_dir / "checkpoints")
    assert any("loss plot" in r.getMessage() for r in caplog.records)
