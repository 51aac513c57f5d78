"""sentence-transformers' trainer on our model: its losses give our contrastive gradients, and it trains.

The measured comparison on a real recipe is experiments/st_trainer_comparison.py
(bench/results/notes/training-experiments.md, "Our trainer vs SentenceTransformerTrainer").
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("sentence_transformers")
datasets = pytest.importorskip("datasets")
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments  # noqa: E402, I001 (ruff 0.15 and 0.17 wrap it differently)
from sentence_transformers.base.sampler import MultiDatasetBatchSamplers  # noqa: E402
from sentence_transformers.sentence_transformer.losses import (  # noqa: E402
    CachedMultipleNegativesRankingLoss,
    MultipleNegativesRankingLoss,
)
from tiny_corpus import CORPUS  # noqa: E402
from train_helpers import disable_dropout  # noqa: E402

from c2v_rag import Causal2Vec  # noqa: E402
from c2v_rag.model.st_module import Causal2VecModule  # noqa: E402
from c2v_rag.training import TrainConfig, build_model, info_nce  # noqa: E402
from c2v_rag.training.gradcache import ContrastiveStep, MultiBatchForward  # noqa: E402

INSTRUCTION = "Given a claim, retrieve documents"
TEMPERATURE = 0.05
ANCHORS = [f"claim {i}: " + CORPUS[i % 7][: 15 + 4 * i] for i in range(6)]
POSITIVES = [f"evidence {i} " + CORPUS[(i + 3) % 7][i:] for i in range(6)]
NEGATIVES = [f"unrelated {i} " + CORPUS[(i + 5) % 7][: 25 + i] for i in range(6)]
PROMPTS = {"anchor": INSTRUCTION, "positive": "", "negative": ""}


def _model(tiny_recipe):
    torch.manual_seed(0)
    model = disable_dropout(build_model(TrainConfig.model_validate(tiny_recipe()), torch.device("cpu"), "fp32"))
    with torch.no_grad():  # peft starts lora_B at zero, which would zero every lora_A gradient
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)
    return model


def _grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def _st_trainer(model, tmp_path, loss_factory, **args) -> SentenceTransformerTrainer:
    st_model = SentenceTransformer(modules=[Causal2VecModule(model)], device="cpu")
    table = datasets.Dataset.from_dict({"anchor": ANCHORS, "positive": POSITIVES, "negative": NEGATIVES})
    settings = dict(
        output_dir=str(tmp_path / "st"),
        use_cpu=True,
        report_to="none",
        prompts=PROMPTS,
        per_device_train_batch_size=len(ANCHORS),
        disable_tqdm=True,
        save_strategy="no",
    )
    settings.update(args)
    return SentenceTransformerTrainer(
        model=st_model,
        args=SentenceTransformerTrainingArguments(**settings),
        train_dataset=table,
        loss=loss_factory(st_model),
    )


@pytest.mark.parametrize("loss_class", [MultipleNegativesRankingLoss, CachedMultipleNegativesRankingLoss])
def test_st_ranking_losses_give_our_contrastive_gradients(tiny_recipe, tmp_path, loss_class):
    model = _model(tiny_recipe)
    n = len(ANCHORS)
    targets = torch.arange(n)
    # Ours: queries carry the instruction in the decoder template, passages none; InfoNCE at tau = 0.05.
    loss = ContrastiveStep(model, MultiBatchForward(model)).run(
        ANCHORS,
        [INSTRUCTION] * n,
        POSITIVES + NEGATIVES,
        [None] * (2 * n),
        lambda q, p: info_nce(q, p, targets, temperature=TEMPERATURE),
    )
    ours = _grads(model)
    model.zero_grad(set_to_none=True)
    # sentence-transformers: its collator (the prompt reaches the module as the instruction), its column
    # split and its loss at scale = 1 / tau; the cached loss embeds in mini-batches of 4 (GradCache).
    options = {"mini_batch_size": 4} if loss_class is CachedMultipleNegativesRankingLoss else {}
    trainer = _st_trainer(model, tmp_path, lambda m: loss_class(m, scale=1 / TEMPERATURE, **options))
    rows = [{"anchor": a, "positive": p, "negative": g} for a, p, g in zip(ANCHORS, POSITIVES, NEGATIVES)]
    st_loss = trainer.compute_loss(trainer.model, trainer.data_collator(rows))
    st_loss.backward()
    theirs = _grads(model)
    assert float(st_loss.detach()) == pytest.approx(loss, rel=1e-5)
    assert set(theirs) == set(ours) and len(ours) > 10
    largest = max(float(g.abs().max()) for g in ours.values())
    assert largest > 1e-3
    for name, grad in ours.items():
        torch.testing.assert_close(theirs[name], grad, atol=1e-5 * largest, rtol=1e-4, msg=name)


def test_st_trainer_trains_a_variant_that_reloads(tiny_recipe, tmp_path):
    """Two datasets through ST's multi-dataset sampler, two steps, then save and reload both ways."""
    model = _model(tiny_recipe)
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    st_model = SentenceTransformer(modules=[Causal2VecModule(model)], device="cpu")
    tables = {
        "claims": datasets.Dataset.from_dict({"anchor": ANCHORS, "positive": POSITIVES, "negative": NEGATIVES}),
        "pairs": datasets.Dataset.from_dict({"anchor": NEGATIVES, "positive": POSITIVES[::-1]}),
    }
    prompts = {"claims": PROMPTS, "pairs": {"anchor": "Retrieve semantically similar text"}}
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path / "st"),
        use_cpu=True,
        report_to="none",
        prompts=prompts,
        max_steps=2,
        per_device_train_batch_size=3,
        learning_rate=1e-3,
        disable_tqdm=True,
        save_strategy="no",
        multi_dataset_batch_sampler=MultiDatasetBatchSamplers.PROPORTIONAL,
    )
    trainer = SentenceTransformerTrainer(
        model=st_model,
        args=args,
        train_dataset=tables,
        loss=MultipleNegativesRankingLoss(st_model, scale=1 / TEMPERATURE),
    )
    trainer.train()
    assert trainer.state.global_step == 2
    changed = [n for n, p in model.named_parameters() if p.requires_grad and not torch.equal(p, before[n])]
    assert any("lora_" in n for n in changed) and any("projector" in n for n in changed)
    model.eval()
    st_model.save(str(tmp_path / "variant"))
    texts = CORPUS[:4]
    trained = st_model.encode_query(texts, prompt=INSTRUCTION, convert_to_tensor=True)
    reloaded = SentenceTransformer(
        str(tmp_path / "variant"), device="cpu", trust_remote_code=True, model_kwargs={"dtype": torch.float32}
    )
    native = Causal2Vec.from_pretrained(tmp_path / "variant", device="cpu", dtype="float32")
    torch.testing.assert_close(
        reloaded.encode(texts, prompt=INSTRUCTION, convert_to_tensor=True), trained, atol=1e-5, rtol=0
    )
    torch.testing.assert_close(
        native.encode(texts, instruction=INSTRUCTION, convert_to_tensor=True), trained, atol=1e-5, rtol=0
    )
