"""The ``icl_examples`` dataset option: bge-en-icl's 0..k in-context examples per training query."""

from __future__ import annotations

import random

import pytest

from c2v_rag.core.instructions import InContextPrompt, shorten_example
from c2v_rag.training import TrainConfig
from c2v_rag.training.data import Example
from c2v_rag.training.sampling import add_icl_examples
from c2v_rag.training.step_texts import StepTexts

POOL = [
    Example(f"query {i} " + "word " * (i % 3) * 40, f"positive {i}", dataset="d", query_instruction="Find it")
    for i in range(30)
]


def _texts(local, instructions):
    return StepTexts(
        "d",
        [e.query for e in local],
        list(instructions),
        [e.positive for e in local],
        [None] * len(local),
        list(range(len(local))),
        [[False] * len(local)] * len(local),
        0,
    )


def test_each_query_draws_zero_to_k_examples_of_its_own_dataset():
    local = POOL[:8]
    texts = _texts(local, ["Find it"] * 7 + [None])
    out = add_icl_examples(texts, local, POOL, max_examples=3, seed=1, step=5)
    counts = []
    for example, prompt in zip(local[:7], out.query_instructions[:7]):
        if isinstance(prompt, InContextPrompt):
            assert prompt.instruction == "Find it" and 1 <= len(prompt.examples) <= 3
            for q, r in prompt.examples:
                # Drawn from the pool, shortened, and never the query's own pair.
                source = next(e for e in POOL if shorten_example(e.query) == q)
                assert r == shorten_example(source.positive) and source.query != example.query
                assert len(q.split()) <= 65
            counts.append(len(prompt.examples))
        else:
            assert prompt == "Find it"
            counts.append(0)
    assert out.query_instructions[7] is None  # no instruction: no examples either
    assert out.passages == texts.passages and out.passage_instructions == texts.passage_instructions
    # The count is uniform over 0..k; the same seed and step draw the same, another step draws otherwise.
    assert add_icl_examples(texts, local, POOL, max_examples=3, seed=1, step=5) == out
    many = [add_icl_examples(texts, local, POOL, max_examples=3, seed=1, step=s) for s in range(40)]
    seen = {len(p.examples) if isinstance(p, InContextPrompt) else 0 for o in many for p in o.query_instructions[:7]}
    assert seen == {0, 1, 2, 3}
    assert add_icl_examples(texts, local, POOL, max_examples=0, seed=1, step=5) is texts


def test_training_with_icl_examples_reaches_the_decoder(tiny_recipe):
    from c2v_rag.training import train

    plain = tiny_recipe(steps=2)
    with_icl = tiny_recipe(steps=2)
    with_icl["output"]["dir"] += "-icl"
    for section in with_icl["datasets"]:
        section["icl_examples"] = 2
    losses = [[h["loss"] for h in train(TrainConfig.model_validate(raw)).history] for raw in (plain, with_icl)]
    # Same seed, same batches: only the examples in the query prompts differ, and the loss follows them.
    assert losses[0] != losses[1]
    with pytest.raises(ValueError, match="icl_examples"):
        TrainConfig.model_validate({**with_icl, "datasets": [{**with_icl["datasets"][0], "icl_examples": -1}]})


def test_rng_is_not_global():
    state = random.getstate()
    add_icl_examples(_texts(POOL[:4], ["Find it"] * 4), POOL[:4], POOL, max_examples=2, seed=0, step=0)
    assert random.getstate() == state


def test_a_draw_that_does_not_fit_is_shortened_not_an_error():
    # The trainer's rule (examples within half of max_length) in the small: a prompt "fits" while its examples'
    # words, counted independently here, stay within a budget. Every draw must pass it, and the shortening
    # must keep the first drawn examples (it drops from the end), so it is the plain draw cut short.
    texts = _texts(POOL[:4], ["Find it"] * 4)
    plain = add_icl_examples(texts, POOL[:4], POOL, max_examples=3, seed=1, step=5)

    def fits(prompt) -> bool:
        return sum(len(q.split()) + len(r.split()) for q, r in getattr(prompt, "examples", ())) <= 12

    cut = add_icl_examples(texts, POOL[:4], POOL, max_examples=3, seed=1, step=5, fits=fits)
    assert all(fits(p) for p in cut.query_instructions)
    shortened = 0
    for before, after in zip(plain.query_instructions, cut.query_instructions):
        kept = getattr(after, "examples", ())
        assert tuple(getattr(before, "examples", ()))[: len(kept)] == tuple(kept)
        shortened += len(kept) < len(getattr(before, "examples", ()))
    assert shortened, "the budget was meant to cut at least one draw; the test data no longer exercises it"
