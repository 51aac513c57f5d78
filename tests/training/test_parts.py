"""Every part of the vector trained on its own: the layout, the loss over parts and prefixes, and truncate_dim.

The layout is checked against the model's own internals (encoder mean pool, decoder states at C and EOS);
the loss against a softmax written out with numpy; the trained sizes against encode(truncate_dim=...).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from c2v_rag import Causal2Vec
from c2v_rag.core.config import Causal2VecConfig
from c2v_rag.training import TrainConfig, train
from c2v_rag.training.gradcache import ContrastiveStep, MultiBatchForward, make_batch
from c2v_rag.training.loss import over_views
from c2v_rag.training.objectives.base import loss_views
from c2v_rag.training.objectives.contrastive import ContrastiveObjective
from c2v_rag.training.objectives.registry import objective_config
from c2v_rag.training.step_texts import StepTexts

TEXTS = [
    "a cat sat on the mat",
    "the stock market fell sharply today",
    "tides follow the moon",
    "a kitten rests on a rug",
]


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_parts_are_the_encoder_vector_h_c_and_h_eos(tiny_model_factory):
    model = tiny_model_factory("llama", normalize_parts=True, encoder_share=0.5).eval()
    d, k = model.config.decoder_hidden_size, model.config.encoder_hidden_size
    parts = model.config.parts
    assert parts == {
        "encoder": slice(0, k),
        "contextual": slice(k, k + d),
        "eos": slice(k + d, k + 2 * d),
        "full": slice(0, k + 2 * d),
    }
    batch = make_batch(model, TEXTS, [None] * len(TEXTS))
    with torch.no_grad():
        full = model(batch).numpy()
        hidden, _ = model.decoder_states(batch)
        _, sentence = model.encoder_outputs(batch.encoder_input_ids, batch.encoder_attention_mask)
    rows = np.arange(len(TEXTS))
    expected = {
        "encoder": sentence.numpy(),
        "contextual": hidden.numpy()[rows, batch.context_positions.numpy()],
        "eos": hidden.numpy()[rows, batch.last_positions.numpy()],
    }
    for name, vectors in expected.items():
        np.testing.assert_allclose(_unit(full[:, parts[name]]), _unit(vectors), atol=1e-5, err_msg=name)


def test_layouts_of_the_other_representations():
    base = dict(decoder="d", encoder="e", decoder_hidden_size=8, encoder_hidden_size=4)
    assert Causal2VecConfig(**base).parts == {"contextual": slice(0, 8), "eos": slice(8, 16), "full": slice(0, 16)}
    assert Causal2VecConfig(**base, representation="last_token").parts == {"eos": slice(0, 8), "full": slice(0, 8)}
    assert Causal2VecConfig(**base, representation="eos_projector", encoder_share=0.2).parts == {
        "encoder": slice(0, 4),
        "eos": slice(4, 12),
        "projector": slice(12, 20),
        "full": slice(0, 20),
    }
    assert Causal2VecConfig(**base, representation="mean").parts == {"mean": slice(0, 8), "full": slice(0, 8)}


def _info_nce_numpy(q: np.ndarray, p: np.ndarray, targets: list[int], tau: float) -> float:
    logits = _unit(q) @ _unit(p).T / tau
    logits -= logits.max(axis=1, keepdims=True)
    log_softmax = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return float(-np.mean(log_softmax[np.arange(len(targets)), targets]))


def test_the_objective_sums_info_nce_over_parts_and_prefixes(tiny_model_factory):
    model = tiny_model_factory("llama", normalize_parts=True, encoder_share=0.5).eval()
    section = objective_config(parts={"full": 1.0, "eos": 0.7}, matryoshka={10: 0.3, 40: 0.5})
    views = loss_views(section, model)
    stepper = ContrastiveStep(model, MultiBatchForward(model))
    objective = ContrastiveObjective(stepper, 0.05, torch.device("cpu"), views)
    queries, passages = TEXTS[:2], TEXTS[2:] + ["a dog naps on a carpet"]
    texts = StepTexts(
        "x",
        queries,
        [None, None],
        passages,
        [None] * 3,
        targets=[2, 0],
        exclude=[[False] * 3, [False] * 3],
        num_negatives=0,
    )
    got = objective.backward(texts, step=0)
    with torch.no_grad():
        q = model(make_batch(model, queries, [None, None])).numpy()
        p = model(make_batch(model, passages, [None] * 3)).numpy()
    eos = model.config.parts["eos"]
    expected = (
        1.0 * _info_nce_numpy(q, p, [2, 0], 0.05)
        + 0.7 * _info_nce_numpy(q[:, eos], p[:, eos], [2, 0], 0.05)
        + 0.3 * _info_nce_numpy(q[:, :10], p[:, :10], [2, 0], 0.05)
        + 0.5 * _info_nce_numpy(q[:, :40], p[:, :40], [2, 0], 0.05)
    )
    assert math.isclose(got, expected, rel_tol=1e-4)
    # and the gradient reached the decoder's and the encoder's trainable weights through the parts
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.decoder.parameters())


def test_one_full_view_is_the_plain_loss():
    loss = lambda q, p: (q * p).sum()  # noqa: E731
    assert over_views(loss, [(slice(None), 1.0)]) is loss
    q, p = torch.ones(2, 6), torch.full((2, 6), 2.0)
    assert float(over_views(loss, [(slice(0, 2), 1.0), (slice(2, 6), 0.5)])(q, p)) == 8.0 + 0.5 * 16.0


def test_bad_parts_and_sizes_are_refused_with_the_fix(tiny_model_factory):
    model = tiny_model_factory("llama", normalize_parts=True, encoder_share=0.5)
    with pytest.raises(
        ValueError, match=r"names \['h_eos'\].*its parts are \['contextual', 'encoder', 'eos', 'full'\]"
    ):
        loss_views(objective_config(parts={"h_eos": 1.0}), model)
    with pytest.raises(ValueError, match="not shorter than the embedding"):
        loss_views(objective_config(matryoshka={model.embedding_dim: 1.0}), model)
    with pytest.raises(ValueError, match="weights must be positive"):
        objective_config(parts={"full": 0.0})
    with pytest.raises(ValueError, match="objective.kind='mntp' has none"):
        objective_config(kind="mntp", matryoshka={8: 1.0})


def test_a_run_with_parts_saves_the_trained_sizes_and_encode_takes_only_those(tiny_recipe):
    raw = tiny_recipe(steps=2)
    raw["model"]["config"] = {"representation": "concat", "normalize_parts": True, "encoder_share": 0.5}
    # encoder 24 + h_C 32 + h_EOS 32: one size inside each part
    raw["objective"] = {"parts": {"full": 1.0, "eos": 1.0}, "matryoshka": {16: 0.5, 40: 0.5, 70: 0.5}}
    result = train(TrainConfig.model_validate(raw))
    model = Causal2Vec.from_pretrained(result.output_dir, device="cpu", dtype="float32")
    assert model.config.matryoshka_dims == [16, 40, 70]
    assert [model.needs_for(n) for n in (16, 40, 70, None)] == ["encoder", "contextual", "all", "all"]
    full = model.encode(TEXTS, normalize_embeddings=True)
    for size in (16, 40, 70):
        # computed from the encoder alone, the decoder up to C, and everything: the same as cutting the full vector
        short = model.encode(TEXTS, truncate_dim=size, normalize_embeddings=True)
        assert short.shape == (len(TEXTS), size)
        np.testing.assert_allclose(short, _unit(full[:, :size]), atol=1e-5, err_msg=str(size))
    assert model.encode(TEXTS, truncate_dim=model.embedding_dim).shape == full.shape
    with pytest.raises(ValueError, match=r"truncate_dim=20: this variant was trained for the prefix sizes \[16, 40"):
        model.encode(TEXTS, truncate_dim=20)
    model.set_readout(encoder_share=0.25)  # another readout has other prefixes: the trained sizes no longer hold
    with pytest.raises(ValueError, match="was not trained for shorter vectors"):
        model.encode(TEXTS, truncate_dim=16)


def test_eval_cli_scores_a_trained_size_as_the_evaluator_does(tiny_model_factory, tmp_path, capsys):
    import json

    from tiny_corpus import CORPUS, write_scifact

    from c2v_rag.cli import main
    from c2v_rag.evaluation.datasets import scifact_dev
    from c2v_rag.evaluation.evaluators import evaluate_retrieval

    write_scifact(
        tmp_path / "data",
        {f"d{i}": CORPUS[i % 7][i:] for i in range(12)},
        {f"q{i}": CORPUS[i % 7][:30] for i in range(10)},
        {f"q{i}": f"d{i}" for i in range(10)},
    )
    variant = tmp_path / "variant"
    tiny_model_factory("llama", normalize_parts=True, encoder_share=0.5, matryoshka_dims=[16]).save_pretrained(variant)
    model = Causal2Vec.from_pretrained(variant, device="cpu", dtype="float32")
    out = tmp_path / "scores.json"
    assert (
        main(
            [
                "eval",
                str(variant),
                "--data",
                str(tmp_path / "data"),
                "--sets",
                "scifact-dev",
                "--truncate-dim",
                "16",
                "--dtype",
                "float32",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    ((name, row),) = json.loads(out.read_text()).items()
    expected = evaluate_retrieval(model, scifact_dev(tmp_path / "data"), truncate_dim=16)
    assert name.endswith("(truncate_dim=16)") and row["scifact-dev"]["ndcg@10"] == pytest.approx(expected["ndcg@10"])
    assert (
        main(["eval", str(variant), "--data", str(tmp_path / "data"), "--sets", "scifact-dev", "--truncate-dim", "20"])
        == 2
    )
    assert "--truncate-dim 20: this variant was trained for the prefix sizes [16, 88]" in capsys.readouterr().err
