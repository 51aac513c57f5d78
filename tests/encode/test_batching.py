from __future__ import annotations

import random

import pytest

from c2v_rag.core.instructions import get_task, resolve_instruction
from c2v_rag.encode.batching import pad_right, plan_batches


def test_plan_batches_covers_every_index_within_budget():
    rng = random.Random(0)
    lengths = [rng.randint(1, 300) for _ in range(500)]
    batches = plan_batches(lengths, max_tokens=2048, max_batch_size=64)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(500))
    for batch in batches:
        assert len(batch) <= 64
        assert len(batch) * max(lengths[i] for i in batch) <= 2048
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)


def test_an_input_longer_than_the_budget_gets_its_own_batch():
    assert plan_batches([5000, 3, 2], max_tokens=100, max_batch_size=8) == [[0], [1, 2]]
    with pytest.raises(ValueError):
        plan_batches([1], max_tokens=0, max_batch_size=1)


def test_max_pad_fraction_splits_where_a_text_would_be_padded_too_much():
    lengths = [100, 90, 76, 74, 20, 16, 15]
    assert plan_batches(lengths, max_tokens=10_000, max_batch_size=64) == [list(range(7))]
    # 76 is padded by 24% of 100, 74 by 26%: a new batch starts at 74, and again at 20.
    assert plan_batches(lengths, max_tokens=10_000, max_batch_size=64, max_pad_fraction=0.25) == [
        [0, 1, 2],
        [3],
        [4, 5, 6],
    ]
    assert plan_batches(lengths, max_tokens=10_000, max_batch_size=64, max_pad_fraction=0.0) == [
        [0],
        [1],
        [2],
        [3],
        [4],
        [5],
        [6],
    ]
    with pytest.raises(ValueError):
        plan_batches(lengths, max_tokens=10, max_batch_size=1, max_pad_fraction=1.5)


def test_pad_right():
    ids, mask = pad_right([[1, 2, 3], [4]], pad_value=0)
    assert ids.tolist() == [[1, 2, 3], [4, 0, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_instruction_registry():
    assert get_task("scifact").instruction.startswith("Given a scientific claim")
    assert get_task("STS12").symmetric and not get_task("NQ").symmetric
    assert resolve_instruction(task="NQ", instruction=None, is_query=False) is None
    assert resolve_instruction(task=None, instruction="", is_query=True) is None
    with pytest.raises(ValueError):
        resolve_instruction(task="NQ", instruction="x", is_query=True)


@pytest.mark.parametrize(("dtype", "budget"), [("float32", 1024), ("bfloat16", 2048)])
def test_encode_on_a_cpu_batches_by_its_dtypes_token_budget(tiny_model_factory, dtype, budget):
    import torch
    from rag_helpers import make_text

    model = tiny_model_factory("llama", max_length=128).to(getattr(torch, dtype))
    padded: list[int] = []
    hook = model.decoder.register_forward_hook(
        lambda _module, _args, kwargs, _out: padded.append(
            kwargs["inputs_embeds"].shape[0] * kwargs["inputs_embeds"].shape[1]
        ),
        with_kwargs=True,
    )
    try:
        model.encode_documents([make_text(i, sentences=3) for i in range(300)], batch_size=10**6)
    finally:
        hook.remove()
    # the texts fill batches close to the budget: the largest over half of it, none over it
    assert budget // 2 < max(padded) <= budget, padded
