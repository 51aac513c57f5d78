"""Training objectives of the other recipes (MNTP, SimCSE, Anchor reconstruction), each checked against
an independent computation with transformers' own causal-LM classes, and the recipes' stage chaining."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from train_helpers import disable_dropout

from c2v_rag import Causal2Vec
from c2v_rag.training.gradcache import make_batch
from c2v_rag.training.lm_head import lm_head_weight
from c2v_rag.training.objectives.mntp import mntp_loss, mntp_mask, single_token_id
from c2v_rag.training.objectives.reconstruction import conditioned_lm_loss, reconstruction_loss, reconstruction_targets
from c2v_rag.training.objectives.simcse import simcse_pairs

TEXTS = [
    "Vitamin D deficiency is linked to bone loss.",
    "Cats and dogs are pets.",
    "The stock market fell sharply after the announcement of the new policy.",
    "Proteins fold.",
]


@pytest.fixture(scope="module")
def causal_lm_dir(tiny_dirs, tmp_path_factory):
    """The tiny Llama saved WITH an untied LM head, so the head must be read from the checkpoint."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(1)
    tok = AutoTokenizer.from_pretrained(tiny_dirs["llama"])
    config = AutoConfig.from_pretrained(tiny_dirs["llama"])
    config.tie_word_embeddings = False
    model = AutoModelForCausalLM.from_config(config).eval()
    path = tmp_path_factory.mktemp("tiny_lm") / "llama_lm"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _pair(causal_lm_dir, **fields):
    from transformers import AutoModelForCausalLM

    fields = {"num_contextual_tokens": 0, "representation": "mean", **fields}
    model = Causal2Vec.from_components(str(causal_lm_dir), None, device="cpu", dtype="float32", **fields)
    reference = AutoModelForCausalLM.from_pretrained(causal_lm_dir, dtype=torch.float32).eval()
    return model, reference


def test_lm_head_is_read_from_the_checkpoint(causal_lm_dir, tiny_dirs):
    model, reference = _pair(causal_lm_dir)
    torch.testing.assert_close(lm_head_weight(model.decoder, str(causal_lm_dir)), reference.lm_head.weight)
    bare = Causal2Vec.from_components(
        str(tiny_dirs["llama"]), None, device="cpu", dtype="float32", num_contextual_tokens=0, representation="mean"
    )
    with pytest.raises(ValueError, match="untied output embeddings"):
        lm_head_weight(bare.decoder, str(tiny_dirs["llama"]))


def test_mntp_masks_only_text_tokens(causal_lm_dir):
    model, _ = _pair(causal_lm_dir)
    batch = make_batch(model, TEXTS * 8, ["Retrieve similar text."] * 32)
    corrupted, chosen = mntp_mask(
        batch, probability=0.5, strategy="bert", mask_id=7, vocab_size=50, generator=torch.Generator().manual_seed(0)
    )
    assert chosen.any()
    assert not (chosen & (batch.pool_mask == 0)).any()  # never the instruction, template or padding
    assert torch.equal(corrupted[~chosen], batch.input_ids[~chosen])
    replaced = (corrupted[chosen] == 7).float().mean()
    assert 0.65 < replaced < 0.95  # BERT's 80% share of mask tokens
    roberta, chosen_r = mntp_mask(
        batch, probability=0.5, strategy="roberta", mask_id=7, vocab_size=50, generator=torch.Generator().manual_seed(0)
    )
    assert (roberta[chosen_r] == 7).all()


@pytest.mark.parametrize("attention", ["bidirectional", "causal"])
def test_mntp_loss_matches_hand_computed_cross_entropy(causal_lm_dir, attention):
    model, reference = _pair(causal_lm_dir, attention=attention)
    batch = make_batch(model, TEXTS, [None] * len(TEXTS))
    corrupted, chosen = mntp_mask(
        batch, probability=0.3, strategy="bert", mask_id=9, vocab_size=100, generator=torch.Generator().manual_seed(3)
    )
    head = lm_head_weight(model.decoder, str(causal_lm_dir))
    with torch.no_grad():
        got = mntp_loss(model, batch, corrupted, chosen, head)
    # By hand: transformers' own causal-LM, one unpadded row at a time (bidirectional: an explicit
    # all-visible 4D mask), and -log softmax of the original token read off the previous position.
    terms = []
    for row in range(len(TEXTS)):
        n = int(batch.attention_mask[row].sum())
        ids = corrupted[row, :n][None]
        mask = torch.zeros(1, 1, n, n) if attention == "bidirectional" else None
        with torch.no_grad():
            logits = reference(input_ids=ids, attention_mask=mask).logits[0]
        for col in chosen[row].nonzero().flatten().tolist():
            terms.append(-torch.log_softmax(logits[col - 1], -1)[batch.input_ids[row, col]])
    torch.testing.assert_close(got, torch.stack(terms).mean(), atol=1e-5, rtol=1e-5)


def test_mask_token_must_be_one_token(causal_lm_dir):
    model, _ = _pair(causal_lm_dir)
    assert isinstance(single_token_id(model.tokenizer, "_"), int)
    with pytest.raises(ValueError, match="single token"):
        single_token_id(model.tokenizer, "Vitamin deficiency")


def test_reconstruction_loss_matches_manual_teacher_forcing(causal_lm_dir):
    model, reference = _pair(causal_lm_dir, representation="last_token")
    queries, documents = TEXTS[:2], TEXTS[2:]
    q_batch = make_batch(model, queries, ["Find the evidence"] * 2)
    d_batch = make_batch(model, documents, [None] * 2)
    head = lm_head_weight(model.decoder, str(causal_lm_dir))
    with torch.no_grad():
        total, q2d, d2q = reconstruction_loss(
            model, q_batch, d_batch, queries, documents, alpha=0.2, head=head, max_length=64
        )
        e_q, e_d = model(q_batch), model(d_batch)

    def by_hand(prefixes, texts):
        nll, count = 0.0, 0
        for e, text in zip(prefixes, texts):
            target = model.tokenizer(text, add_special_tokens=False)["input_ids"] + [model.tokenizer.eos_token_id]
            words = reference.get_input_embeddings()(torch.tensor([target[:-1]]))
            inputs = torch.cat([e[None, None], words], dim=1)
            with torch.no_grad():
                logp = torch.log_softmax(reference(inputs_embeds=inputs).logits[0], -1)
            nll -= sum(float(logp[k, t]) for k, t in enumerate(target))
            count += len(target)
        return nll / count

    assert float(q2d) == pytest.approx(by_hand(e_q, documents), rel=1e-5)
    assert float(d2q) == pytest.approx(by_hand(e_d, queries), rel=1e-5)
    assert float(total) == pytest.approx(0.2 * float(q2d) + 0.8 * float(d2q), rel=1e-6)


def test_reconstruction_targets_are_cut_to_fit(causal_lm_dir):
    model, _ = _pair(causal_lm_dir)
    (target,) = reconstruction_targets(model, [TEXTS[2] * 5], max_length=16)
    assert len(target) == 15 and target[-1] == model.tokenizer.eos_token_id
    # The embedding plus 14 inputs: the whole decoder input stays within max_length.
    with torch.no_grad():
        loss = conditioned_lm_loss(
            model,
            torch.zeros(1, model.config.decoder_hidden_size),
            [target],
            lm_head_weight(model.decoder, str(causal_lm_dir)),
        )
    assert torch.isfinite(loss)


def test_simcse_positive_is_the_same_text_and_duplicates_are_not_negatives():
    queries, positives, targets, exclude = simcse_pairs(["a b", "c d", "a b"])
    assert [positives[t] for t in targets] == queries
    assert exclude == [[False, False, True], [False, False, False], [True, False, False]]


def test_simcse_step_uses_two_dropout_draws(tiny_recipe, tmp_path):
    from c2v_rag.training import Trainer
    from c2v_rag.training.config import TrainConfig
    from c2v_rag.training.loss import info_nce
    from c2v_rag.training.step_texts import StepTexts

    raw = tiny_recipe()
    raw["model"]["config"] = {"num_contextual_tokens": 0, "representation": "mean"}
    raw["model"]["encoder"] = None
    raw["objective"] = {"kind": "simcse", "dropout": 0.3}
    raw["training"]["hard_negatives"] = 0
    trainer = Trainer(TrainConfig.model_validate(raw))
    trainer.setup()
    model = trainer.model
    drops = {
        m.attention_dropout for m in model.decoder.modules() if isinstance(getattr(m, "attention_dropout", None), float)
    }
    assert drops == {0.3}
    batch = make_batch(model, TEXTS, [None] * 4)
    with torch.no_grad():
        a, b = model(batch), model(batch)
    assert (a - b).abs().max() > 1e-4  # two passes, two dropout masks: the positive is not a copy
    disable_dropout(model)
    model.zero_grad()
    texts = StepTexts("nli", TEXTS, ["ignored"] * 4, ["other"] * 4, [None] * 4, [0, 1, 2, 3], [[False] * 4] * 4, 0)
    loss = trainer.objective.backward(texts, 0)
    with torch.no_grad():
        e = model(make_batch(model, TEXTS, [None] * 4))  # no instruction, as LLM2Vec's SimCSE
    assert loss == pytest.approx(float(info_nce(e, e, torch.arange(4), temperature=0.05)), rel=1e-5)


# ------------------------------------------------------------------------------------------------ trainer runs


def _recipe(tiny_recipe, decoder, tmp_path, name, objective, **model_config):
    raw = tiny_recipe(steps=2, hard_negatives=0)
    raw["model"] = {"decoder": str(decoder), "encoder": raw["model"]["encoder"], "config": model_config}
    raw["objective"] = objective
    raw["output"]["dir"] = str(tmp_path / name)
    return raw


def test_llm2vec_stages_chain_and_carry_the_lora(causal_lm_dir, tiny_recipe, tmp_path):
    from c2v_rag.training import Trainer, train
    from c2v_rag.training.config import TrainConfig

    plain = dict(num_contextual_tokens=0, representation="mean", attention="bidirectional")
    mntp = _recipe(tiny_recipe, causal_lm_dir, tmp_path, "mntp", {"kind": "mntp"}, **plain)
    mntp["model"]["encoder"] = None
    result = train(TrainConfig.model_validate(mntp))
    assert len(result.history) == 2 and all(np.isfinite(r["loss"]) for r in result.history)
    stage1 = Causal2Vec.from_pretrained(result.output_dir, device="cpu", dtype="float32")
    assert stage1.config.attention == "bidirectional" and stage1.config.decoder_adapter == "decoder_adapter"

    simcse = _recipe(tiny_recipe, causal_lm_dir, tmp_path, "simcse", {"kind": "simcse"})
    simcse["model"] = {"variant": str(result.output_dir)}
    trainer = Trainer(TrainConfig.model_validate(simcse))
    trainer.setup()
    # Stage 2 starts from stage 1's LoRA: before any step it embeds exactly as the saved stage 1.
    trainer.model.eval()
    np.testing.assert_allclose(trainer.model.encode(TEXTS), stage1.encode(TEXTS), atol=1e-5, rtol=1e-4)
    trainer.model.train()
    out = trainer.fit()
    supervised = _recipe(tiny_recipe, causal_lm_dir, tmp_path, "sup", {"kind": "contrastive"})
    supervised["model"] = {"variant": str(out.output_dir)}
    final = train(TrainConfig.model_validate(supervised))
    loaded = Causal2Vec.from_pretrained(final.output_dir, device="cpu", dtype="float32")
    assert loaded.config.attention == "bidirectional" and loaded.config.representation == "mean"
    assert loaded.encode(TEXTS).shape == (4, loaded.embedding_dim)


def test_anchor_stage_one_then_contrastive(causal_lm_dir, tiny_recipe, tmp_path):
    from c2v_rag.training import train
    from c2v_rag.training.config import TrainConfig

    stage1 = _recipe(
        tiny_recipe,
        causal_lm_dir,
        tmp_path,
        "anchor1",
        {"kind": "reconstruction", "alpha": 0.2},
        num_contextual_tokens=0,
        representation="last_token",
    )
    stage1["model"]["encoder"] = None
    first = train(TrainConfig.model_validate(stage1))
    assert all(np.isfinite(r["loss"]) for r in first.history)
    stage2 = _recipe(tiny_recipe, causal_lm_dir, tmp_path, "anchor2", {"kind": "contrastive"})
    stage2["model"] = {"variant": str(first.output_dir)}
    second = train(TrainConfig.model_validate(stage2))
    assert Causal2Vec.from_pretrained(second.output_dir, device="cpu").encode(TEXTS).shape[0] == 4


def test_reconstruction_refuses_a_wide_or_bidirectional_embedding(causal_lm_dir, tiny_recipe, tiny_dirs, tmp_path):
    from c2v_rag.training import Trainer
    from c2v_rag.training.config import TrainConfig

    wide = _recipe(tiny_recipe, causal_lm_dir, tmp_path, "wide", {"kind": "reconstruction"})
    wide["model"]["encoder"] = str(tiny_dirs["bert"])
    with pytest.raises(ValueError, match="decoder's width"):
        Trainer(TrainConfig.model_validate(wide)).setup()
    bidir = _recipe(
        tiny_recipe,
        causal_lm_dir,
        tmp_path,
        "bidir",
        {"kind": "reconstruction"},
        num_contextual_tokens=0,
        representation="last_token",
        attention="bidirectional",
    )
    bidir["model"]["encoder"] = None
    with pytest.raises(ValueError, match="causal attention"):
        Trainer(TrainConfig.model_validate(bidir)).setup()


def test_several_contextual_tokens_train_save_and_load(tiny_recipe, tiny_dirs, tmp_path):
    from c2v_rag.training import Trainer
    from c2v_rag.training.config import TrainConfig

    raw = _recipe(
        tiny_recipe,
        tiny_dirs["llama"],
        tmp_path,
        "multi",
        {"kind": "contrastive"},
        num_contextual_tokens=4,
        attention="bidirectional",
    )
    trainer = Trainer(TrainConfig.model_validate(raw))
    trainer.setup()
    queries_before = trainer.model.projector.queries.detach().clone()
    result = trainer.fit()
    assert not torch.equal(queries_before, trainer.model.projector.queries.detach())  # the queries learn
    loaded = Causal2Vec.from_pretrained(result.output_dir, device="cpu", dtype="float32")
    assert loaded.config.num_contextual_tokens == 4 and loaded.config.attention == "bidirectional"
    trainer.model.eval()
    np.testing.assert_allclose(loaded.encode(TEXTS), trainer.model.encode(TEXTS), atol=1e-5, rtol=1e-4)
