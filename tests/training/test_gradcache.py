"""GradCache gives the full-batch gradients; the loss matches an independent computation."""

from __future__ import annotations

import math

import pytest
import torch
from train_helpers import disable_dropout

from c2v_rag.training import TrainConfig, build_model, info_nce
from c2v_rag.training.gradcache import ContrastiveStep, MultiBatchForward, make_batch

QUERIES = [f"query number {i} about vitamin D and bone" + " loss" * (i % 4) for i in range(6)]
PASSAGES = [f"passage {i}: " + "cats and dogs are pets. " * (1 + i % 3) for i in range(12)]
Q_INSTR = ["Given a claim, retrieve documents"] * 6
P_INSTR = [None] * 12
TARGETS = torch.arange(6)


def _model(tiny_recipe, **overrides):
    raw = tiny_recipe()
    for section, values in overrides.items():
        raw[section].update(values)
    config = TrainConfig.model_validate(raw)
    torch.manual_seed(0)
    model = build_model(config, torch.device("cpu"), "fp32")
    with torch.no_grad():  # peft starts lora_B at zero, which would zero every lora_A gradient
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)
    return model if overrides else disable_dropout(model)


def _grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def _loss_fn(q, p):
    return info_nce(q, p, TARGETS, temperature=0.05)


def test_info_nce_matches_a_direct_computation():
    torch.manual_seed(1)
    q, p = torch.randn(3, 5), torch.randn(7, 5)
    targets = torch.tensor([2, 0, 5])
    exclude = torch.zeros(3, 7, dtype=torch.bool)
    exclude[1, 4] = True
    expected = 0.0
    for i in range(3):
        cos = [float(q[i] @ p[j] / (q[i].norm() * p[j].norm())) for j in range(7)]
        denom = sum(math.exp(c / 0.05) for j, c in enumerate(cos) if not exclude[i, j])
        expected += -(cos[targets[i]] / 0.05 - math.log(denom))
    got = info_nce(q, p, targets, temperature=0.05, exclude=exclude)
    assert got.item() == pytest.approx(expected / 3, rel=1e-5)
    with pytest.raises(ValueError, match="own positive"):
        info_nce(q, p, targets, exclude=torch.ones(3, 7, dtype=torch.bool))


def test_gradcache_gives_the_full_batch_gradients(tiny_recipe):
    """test_gradcache_gives_the_full_batch_gradients: cached mini-batches == one full-batch step."""
    model = _model(tiny_recipe)
    batch = make_batch(model, QUERIES, Q_INSTR)
    torch.testing.assert_close(model(batch), model(batch))  # deterministic: no dropout
    # The reference: one plain forward over all texts, the loss, one backward.
    q = model(make_batch(model, QUERIES, Q_INSTR))
    p = model(make_batch(model, PASSAGES, P_INSTR))
    reference_loss = _loss_fn(q, p)
    reference_loss.backward()
    reference = _grads(model)
    assert all(g.abs().sum() > 0 for g in reference.values())
    for mini_batch in (1, 4, 5):
        model.zero_grad(set_to_none=True)
        step = ContrastiveStep(model, MultiBatchForward(model), mini_batch_size=mini_batch)
        loss = step.run(QUERIES, Q_INSTR, PASSAGES, P_INSTR, _loss_fn)
        assert loss == pytest.approx(reference_loss.item(), rel=1e-5)
        for name, grad in _grads(model).items():
            torch.testing.assert_close(
                grad, reference[name], rtol=1e-4, atol=1e-6, msg=f"{name} (mini_batch={mini_batch})"
            )
    model.zero_grad(set_to_none=True)
    whole = ContrastiveStep(model, MultiBatchForward(model), mini_batch_size=None)
    assert whole.run(QUERIES, Q_INSTR, PASSAGES, P_INSTR, _loss_fn) == pytest.approx(reference_loss.item(), rel=1e-5)
    for name, grad in _grads(model).items():
        torch.testing.assert_close(grad, reference[name], rtol=1e-4, atol=1e-6)


def test_gradcache_replays_dropout_masks(tiny_recipe):
    model = _model(tiny_recipe, lora={"dropout": 0.3}, encoder_lora={"dropout": 0.3})
    step = ContrastiveStep(model, MultiBatchForward(model), mini_batch_size=4)
    step.run(QUERIES, Q_INSTR, PASSAGES, P_INSTR, _loss_fn)
    # The graph pass re-created exactly the embeddings the loss was computed on.
    assert step.last_replay_error == 0.0


def test_gradient_checkpointing_keeps_gradients(tiny_recipe):
    grads = []
    for checkpointing in (False, True):
        raw = tiny_recipe(gradient_checkpointing=checkpointing)
        torch.manual_seed(0)
        model = disable_dropout(build_model(TrainConfig.model_validate(raw), torch.device("cpu"), "fp32"))
        ContrastiveStep(model, MultiBatchForward(model), mini_batch_size=4).run(
            QUERIES, Q_INSTR, PASSAGES, P_INSTR, _loss_fn
        )
        grads.append(_grads(model))
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], rtol=1e-4, atol=1e-6)


def test_bf16_step_stays_close_to_fp32(tiny_recipe):
    from c2v_rag.training.trainer import autocast_factory

    losses = {}
    for precision in ("fp32", "bf16"):
        torch.manual_seed(0)
        model = disable_dropout(build_model(TrainConfig.model_validate(tiny_recipe()), torch.device("cpu"), precision))
        if precision == "bf16":
            assert model.decoder.base_model.model.layers[0].self_attn.q_proj.base_layer.weight.dtype == torch.bfloat16
            assert all(p.dtype == torch.float32 for p in model.parameters() if p.requires_grad)
        step = ContrastiveStep(
            model,
            MultiBatchForward(model),
            mini_batch_size=4,
            autocast=autocast_factory(precision, torch.device("cpu")),
        )
        losses[precision] = step.run(QUERIES, Q_INSTR, PASSAGES, P_INSTR, _loss_fn)
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=0.05)


def test_gradcache_chunks_count_in_context_examples_in_the_length(tiny_recipe):
    # Four queries of one length; two carry a long in-context example. Sorted by the text alone they would
    # interleave (ties keep input order); counting the examples puts the two long inputs in one mini-batch,
    # so the short ones are not padded to the examples' length. The padding is read off the batches.
    from c2v_rag.core.instructions import InContextPrompt

    model = _model(tiny_recipe)
    long = InContextPrompt("Given a claim, retrieve documents", (("an example claim " * 20, "its abstract " * 30),))
    instructions = [long, "Given a claim, retrieve documents", long, "Given a claim, retrieve documents"]
    texts = ["the same length query"] * 4
    step = ContrastiveStep(model, MultiBatchForward(model), mini_batch_size=2)
    chunks = step._chunks(texts, instructions, offset=0)
    assert sorted(sorted(c.rows) for c in chunks) == [[0, 2], [1, 3]]
    padded = sum(int((c.batch.attention_mask == 0).sum()) for c in chunks)
    interleaved = [
        make_batch(model, [texts[i] for i in rows], [instructions[i] for i in rows]) for rows in ([0, 1], [2, 3])
    ]
    assert padded < sum(int((b.attention_mask == 0).sum()) for b in interleaved)
