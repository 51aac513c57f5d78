"""The ``distill`` objective: a student learns a teacher variant's vectors (typically its own start, before its decoder
was cut), checked against the teacher's own encode and against numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from c2v_rag import Causal2Vec
from c2v_rag.training import TrainConfig, train
from c2v_rag.training.objectives.distill import cosine_distance, relation_error

HELD_OUT = [
    "Which vitamins keep bones strong?",
    "The tide rises twice a day because the moon pulls the sea.",
    "A compiler turns source code into machine code.",
    "short",
]
KEPT = [0, 2, 3]


@pytest.fixture(scope="module")
def deep_llama(tiny_dirs, tmp_path_factory):
    """A 5-layer tiny llama, so that a student can run 3 of its layers."""
    torch.manual_seed(7)
    config = AutoModel.from_pretrained(tiny_dirs["llama"]).config
    config.num_hidden_layers = 5
    root = tmp_path_factory.mktemp("deep") / "llama5"
    AutoModel.from_config(config).eval().save_pretrained(root)
    AutoTokenizer.from_pretrained(tiny_dirs["llama"]).save_pretrained(root)
    return root


@pytest.fixture
def teacher(deep_llama, tiny_dirs, tiny_train_data, tmp_path):
    """A whole variant trained a few steps (its adapters non-zero), saved: the teacher."""
    tsv = tiny_train_data["triplets"]
    raw = _recipe(tsv, tmp_path / "teacher", steps=3)
    raw["model"] = {"decoder": str(deep_llama), "encoder": str(tiny_dirs["bert"])}
    return train(TrainConfig.model_validate(raw)).output_dir, tsv


def _recipe(tsv, out, **training):
    return {
        "lora": {"r": 4, "alpha": 8, "dropout": 0.0},
        "encoder_lora": {"enabled": False},
        "datasets": [{"name": "nli", "format": "triplets_tsv", "path": str(tsv), "task": "NLI"}],
        "training": {
            "steps": 4,
            "batch_size": 6,
            "lr": 1e-3,
            "warmup_steps": 0,
            "precision": "fp32",
            "gradient_checkpointing": False,
            "save_every": 0,
            "progress_bar": False,
            "device": "cpu",
            "seed": 3,
            **training,
        },
        "output": {"dir": str(out)},
    }


def _distance(model: Causal2Vec, reference: np.ndarray, view: slice) -> float:
    got = model.encode(HELD_OUT, task="NLI")[:, view]
    want = reference[:, view]
    return float(np.mean(1 - (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)))


def test_the_losses_are_what_numpy_computes():
    rng = np.random.default_rng(0)
    s, t = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    cos = (s * t).sum(1) / np.linalg.norm(s, axis=1) / np.linalg.norm(t, axis=1)
    torch.testing.assert_close(
        cosine_distance(torch.tensor(s), torch.tensor(t * 3)).double(), torch.tensor(1 - cos).mean()
    )
    q, p, qt, pt = (rng.normal(size=shape) for shape in ((3, 8), (4, 8), (3, 8), (4, 8)))

    def cosines(a, b):
        return (a / np.linalg.norm(a, axis=1, keepdims=True)) @ (b / np.linalg.norm(b, axis=1, keepdims=True)).T

    expected = ((cosines(q, p) - cosines(qt, pt)) ** 2).mean()
    got = relation_error(*(torch.tensor(x) for x in (q, p, qt, pt)))
    assert got.item() == pytest.approx(expected, rel=1e-6)


def test_a_student_that_is_its_teacher_has_nothing_to_learn(teacher, tmp_path):
    """Same weights, same tokens: every row's vector equals its teacher's row, whatever order the step sorts them
    into, so the first step's loss is zero (a misaligned row would not be)."""
    folder, tsv = teacher
    raw = _recipe(tsv, tmp_path / "same", steps=1, lr=1e-9)
    raw["model"] = {"variant": str(folder)}
    raw["objective"] = {"kind": "distill", "teacher": str(folder), "parts": {"full": 1.0}, "relations": 1.0}
    history = train(TrainConfig.model_validate(raw)).history
    assert len(history) == 1 and abs(history[0]["loss"]) < 1e-5


def test_a_cut_decoder_distilled_from_its_whole_self_comes_closer_to_it(teacher, tmp_path):
    folder, tsv = teacher
    whole = Causal2Vec.from_pretrained(folder, device="cpu", dtype="float32")
    reference = whole.encode(HELD_OUT, task="NLI")
    decoder_parts = slice(whole.config.parts["encoder"].stop, None) if "encoder" in whole.config.parts else slice(None)
    raw = _recipe(tsv, tmp_path / "cut", steps=1, lr=1e-9)
    raw["model"] = {"variant": str(folder), "config": {"decoder_layers": KEPT}}
    raw["objective"] = {"kind": "distill", "teacher": str(folder), "parts": {"full": 1.0}}
    untrained = Causal2Vec.from_pretrained(
        train(TrainConfig.model_validate(raw)).output_dir, device="cpu", dtype="float32"
    )
    raw = _recipe(tsv, tmp_path / "distilled", steps=30, lr=3e-3)
    raw["model"] = {"variant": str(folder), "config": {"decoder_layers": KEPT}}
    raw["objective"] = {"kind": "distill", "teacher": str(folder), "parts": {"full": 1.0}, "relations": 1.0}
    distilled = Causal2Vec.from_pretrained(
        train(TrainConfig.model_validate(raw)).output_dir, device="cpu", dtype="float32"
    )
    assert distilled.config.decoder_layers == KEPT
    before, after = _distance(untrained, reference, decoder_parts), _distance(distilled, reference, decoder_parts)
    assert before > 0.01  # the cut moved the vectors, on texts no step read
    assert after < 0.5 * before


def test_a_teacher_of_another_layout_is_refused_before_any_step(teacher, tiny_dirs, tmp_path):
    folder, tsv = teacher
    raw = _recipe(tsv, tmp_path / "other", steps=1)
    raw["model"] = {
        "decoder": str(tiny_dirs["llama"]),
        "encoder": str(tiny_dirs["bert"]),
        "config": {"representation": "last_token"},
    }
    raw["objective"] = {"kind": "distill", "teacher": str(folder)}
    with pytest.raises(ValueError, match=r"objective.teacher=.* cannot teach this model: its vectors have \d+ values"):
        train(TrainConfig.model_validate(raw))
    assert not (tmp_path / "other").exists()  # refused before the output folder was made: nothing to clean up
