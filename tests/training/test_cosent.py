"""CoSENT on scored pairs: the loss against a loop over pairs, and a training run that uses it."""

from __future__ import annotations

import itertools
import math

import torch

from c2v_rag.training import TrainConfig, train
from c2v_rag.training.loss import cosent


def _cosent_by_loop(first, second, scores, temperature):
    cos = [float(torch.nn.functional.cosine_similarity(a, b, dim=0)) / temperature for a, b in zip(first, second)]
    terms = [math.exp(cos[j] - cos[i]) for i, j in itertools.permutations(range(len(cos)), 2) if scores[i] > scores[j]]
    return math.log(1 + sum(terms))


def test_cosent_matches_a_loop_over_ordered_pairs():
    torch.manual_seed(0)
    first, second = torch.randn(6, 5), torch.randn(6, 5)
    scores = torch.tensor([4.5, 1.0, 3.0, 3.0, 0.2, 5.0])  # a tie: neither order is penalized
    got = cosent(first, second, scores, temperature=0.1)
    assert math.isclose(float(got), _cosent_by_loop(first, second, scores, 0.1), rel_tol=1e-5)


def test_cosent_falls_as_cosines_follow_the_scores():
    scores = torch.tensor([0.0, 2.5, 5.0])
    first = torch.tensor([[1.0, 0.0]] * 3)
    ordered = torch.tensor([[-1.0, 0.2], [0.3, 1.0], [1.0, 0.1]])  # cosines rise with the scores
    reversed_ = ordered.flip(0)
    assert cosent(first, ordered, scores) < 0.01 < cosent(first, reversed_, scores)


def test_a_recipe_trains_on_scored_pairs_with_cosent(tiny_recipe, tmp_path):
    sts = tmp_path / "sts.tsv"
    rows = [
        f"news\tx\t{i % 6}.0\tsentence {i} about topic {i % 3}\tanother sentence {i} on topic {i % 2}"
        for i in range(16)
    ]
    sts.write_text("genre\tsubset\tscore\tsentence1\tsentence2\n" + "\n".join(rows) + "\n")
    raw = tiny_recipe(steps=4)
    raw["datasets"] = [
        {"name": "sts", "format": "scored_pairs", "path": str(sts), "loss": "cosent", "task": "STSBenchmark"}
    ]
    result = train(TrainConfig.model_validate(raw))
    losses = [r["loss"] for r in result.history if "loss" in r]
    assert len(losses) == 4 and all(math.isfinite(x) and x > 0 for x in losses)
