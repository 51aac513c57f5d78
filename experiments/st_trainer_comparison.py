"""Our trainer vs sentence-transformers' SentenceTransformerTrainer, on one real recipe (issue 15, item 7).

    taskset -c 1 nice -n 8 env OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 \\
      python experiments/st_trainer_comparison.py --recipe recipes/scifact_nli_cpu.yaml \\
        [--batch-size 8] [--max-length 64] [--steps 4] [--warmup 1] [--train-steps 6] [--set key=value ...]

The recipe's model (Causal2Vec with LoRA on the decoder and the encoder, the projector trained in full)
is built by ``c2v_rag.training.build_model`` and wrapped as a SentenceTransformer through
``c2v_rag.model.st_module.Causal2VecModule``; its data sections are loaded (and mined) by our trainer's setup,
then handed to sentence-transformers as one ``datasets.Dataset`` per section with columns
``anchor, positive, negative_1..k`` and the sections' instructions as per-dataset, per-column prompts.
Everything runs in float32 on the CPU. Five parts:

1. **gradients**: one batch of the recipe (the first step of our batch plan), one backward through
   our loss path (``ContrastiveObjective``: InfoNCE at the recipe's temperature, whole batch and
   GradCache) and one through sentence-transformers' ``MultipleNegativesRankingLoss`` and
   ``CachedMultipleNegativesRankingLoss`` (scale = 1 / temperature) fed by its own data collator;
   max |grad diff| and the relative difference over every trainable parameter. Dropout is off
   (eval mode) so both paths compute the same function, and lora_B is moved off its zero
   initialisation so that lora_A gets a gradient at all.
2. **step time**: our ``Trainer._train_step`` and ``SentenceTransformerTrainer``'s step on the same
   batches in the same order (our batch plan plugged in as ST's multi-dataset batch sampler), one
   step of each in turn, on two copies of the model; the ratio of the medians after the warm-up.
3. **train**: a short ``SentenceTransformerTrainer.train()`` on the recipe's data with ST's own
   ``ProportionalBatchSampler`` and ``NoDuplicatesBatchSampler`` and the cached (GradCache) loss,
   a checkpoint half way, a resume from that checkpoint, then ``save`` and a reload both through
   ``SentenceTransformer`` and ``Causal2Vec.from_pretrained``.
4. **lines**: ``c2v_rag/training`` per module, and what sentence-transformers would replace.
5. **exclusions**: how many batches of a recipe hold a known positive of another query (same
   document, same label), which our loss masks and ST's MNRL would treat as a negative.

Results are printed and written to ``<out>/results.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from c2v_rag.training import load_config
from c2v_rag.training.gradcache import ContrastiveStep, MultiBatchForward
from c2v_rag.training.objectives.contrastive import ContrastiveObjective
from c2v_rag.training.sampling import HomogeneousBatchPlan, layout_step
from c2v_rag.training.trainer import Trainer, build_model

logger = logging.getLogger("st_trainer_comparison")

ROOT = Path(__file__).resolve().parents[1]

# What sentence-transformers (with transformers' Trainer and accelerate under it) would take over, per
# module of c2v_rag/training, and what stays ours. "partly": the line count splits as noted.
MODULE_ROLES: dict[str, tuple[str, str]] = {
    "trainer.py": (
        "partly",
        "loop, optimizer/scheduler, precision, logging, divergence stop -> HF Trainer; "
        "build_model (LoRA + projector), prepare_data (mining cache), _finish (variant "
        "metadata) stay",
    ),
    "gradcache.py": (
        "replaced",
        "ContrastiveStep / GradCache -> MultipleNegativesRankingLoss / "
        "CachedMultipleNegativesRankingLoss; make_batch -> Causal2VecModule.preprocess",
    ),
    "loss.py": ("replaced", "info_nce -> MNRL (scale = 1/temperature); ST has no per-query exclusion mask"),
    "distributed.py": ("replaced", "process group, gather_with_grad -> accelerate, MNRL(gather_across_devices=True)"),
    "checkpoint.py": ("replaced", "optimizer/scheduler/RNG checkpoints and resume -> HF Trainer checkpoints"),
    "sampling.py": (
        "partly",
        "homogeneous batches -> ProportionalBatchSampler (no per-dataset weight); "
        "layout_step's exclusion of known positives has no ST counterpart "
        "(NO_DUPLICATES drops instead)",
    ),
    "evaluation.py": (
        "replaced",
        "STS / retrieval dev scores -> EmbeddingSimilarityEvaluator, InformationRetrievalEvaluator",
    ),
    "plotting.py": ("replaced", "loss curve -> report_to (tensorboard, wandb...) / trainer_state.json"),
    "config.py": (
        "partly",
        "the recipe format stays; its training section maps onto SentenceTransformerTrainingArguments",
    ),
    "data.py": ("ours", "formats (BEIR, TSV, labelled, scored pairs), passage keys, dev splits"),
    "mining.py": ("ours", "BM25 mining (ST's mine_hard_negatives is embedding-based only)"),
    "objectives.py": (
        "ours",
        "MNTP, reconstruction (token-level LM losses); SimCSE = MNRL on (s, s) with attention dropout",
    ),
    "lm_head.py": ("ours", "the decoder's LM head for MNTP and reconstruction"),
    "__init__.py": ("ours", "exports"),
}


# ------------------------------------------------------------------------------------------------ setup


def recipe_config(args: argparse.Namespace, output_dir: Path):
    """The recipe with the comparison's settings: small batch, fp32, no evaluation, nothing saved."""
    overrides = [
        f"training.batch_size={args.batch_size}",
        f"model.max_length={args.max_length}",
        "training.precision=fp32",
        "training.gradient_checkpointing=false",
        "training.save_every=0",
        "training.progress_bar=false",
        "training.device=cpu",
        "training.steps=100000",
        "evaluation.sts_path=null",
        "evaluation.retrieval_dataset=null",
        f"output.dir={output_dir}",
        *args.set,
    ]
    return load_config(args.recipe, overrides)


def st_wrap(model):
    """Our model as a SentenceTransformer: the same module object, no copy."""
    from sentence_transformers import SentenceTransformer

    from c2v_rag.model.st_module import Causal2VecModule

    return SentenceTransformer(modules=[Causal2VecModule(model)], device=str(model.device))


def st_datasets(trainer: Trainer) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """One HF Dataset per data section (rows in our plan's order) and the prompts of its columns.

    ``negative_1..k`` are the first k hard negatives of each example; our step draws k of them at
    random, which is the same set when an example has exactly k (checked).
    """
    from datasets import Dataset

    tables, prompts = {}, {}
    for name, examples in sorted(trainer.groups.items()):
        k = trainer.negatives[name]
        if any(len(e.negatives) != k for e in examples):
            raise ValueError(
                f"dataset {name}: examples carry more than {k} negatives, so the two trainers "
                "would draw different ones; mine or keep exactly k"
            )
        q_instr = {e.query_instruction for e in examples}
        p_instr = {e.passage_instruction for e in examples}
        if len(q_instr) != 1 or len(p_instr) != 1:
            raise ValueError(f"dataset {name}: instructions vary per example; ST prompts are per column")
        columns = {"anchor": [e.query for e in examples], "positive": [e.positive for e in examples]}
        for j in range(k):
            columns[f"negative_{j + 1}"] = [e.negatives[j] for e in examples]
        tables[name] = Dataset.from_dict(columns)
        query, passage = q_instr.pop() or "", p_instr.pop() or ""
        prompts[name] = {column: (query if column == "anchor" else passage) for column in columns}
    return tables, prompts


def plan_batch_sampler(plan: HomogeneousBatchPlan, names: list[str], steps: int):
    """Our batch plan as a sentence-transformers multi-dataset batch sampler (same batches, same order)."""
    from sentence_transformers.base.sampler import MultiDatasetDefaultBatchSampler

    class PlanBatchSampler(MultiDatasetDefaultBatchSampler):
        def __iter__(self):
            offsets, running = {}, 0
            for name, dataset in zip(names, self.dataset.datasets):
                offsets[name] = running
                running += len(dataset)
            for step in range(steps):
                epoch, position = divmod(step, plan.epoch_length)
                name, indices = plan._epoch_plan(epoch)[position]
                yield [offsets[name] + i for i in indices]

        def __len__(self):
            return steps

    return PlanBatchSampler


def trainable(model) -> dict[str, torch.nn.Parameter]:
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in trainable(model).items()}


def compare(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> dict[str, float]:
    """max |a - b| over all parameters, and ||a - b|| / ||a|| over the concatenation."""
    diff = max(float((a[n] - b[n]).abs().max()) for n in a)
    num = math.sqrt(sum(float((a[n] - b[n]).pow(2).sum()) for n in a))
    den = math.sqrt(sum(float(a[n].pow(2).sum()) for n in a))
    largest = max(float(a[n].abs().max()) for n in a)
    return {"max_abs_diff": diff, "relative_l2": num / den, "max_abs_grad": largest}


# ------------------------------------------------------------------------------------------------ 1. gradients


def part_gradients(trainer: Trainer, args) -> dict[str, Any]:
    from sentence_transformers.sentence_transformer.data_collator import SentenceTransformerDataCollator
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )

    model, cfg = trainer.model, trainer.config.training
    model.eval()  # dropout off: both paths compute the same function
    with torch.no_grad():
        generator = torch.Generator().manual_seed(0)
        for name, param in model.named_parameters():
            if "lora_B" in name:  # peft starts B at zero, which leaves every lora_A gradient at zero
                param.copy_(torch.randn(param.shape, generator=generator) * 0.01)
    # The first step of our plan whose batch needs no exclusion (ST has no exclusion mask).
    step, texts = None, None
    skipped = []
    for candidate in range(50):
        batch = trainer.plan.batch(candidate)
        laid = layout_step(
            batch, num_negatives=trainer.negatives[batch.dataset], seed=cfg.seed, step=candidate, world_size=1
        )
        if not any(any(row) for row in laid.exclude):
            step, texts = candidate, laid
            break
        skipped.append(candidate)
    if texts is None:
        raise RuntimeError("every one of the first 50 batches masks a known positive")
    k = trainer.negatives[texts.dataset]
    n = len(texts.queries)
    out: dict[str, Any] = {
        "step": step,
        "dataset": texts.dataset,
        "queries": n,
        "hard_negatives": k,
        "skipped_batches_with_exclusions": skipped,
        "temperature": cfg.temperature,
    }

    def ours(mini_batch_size):
        model.zero_grad(set_to_none=True)
        stepper = ContrastiveStep(model, MultiBatchForward(model), mini_batch_size=mini_batch_size)
        loss = ContrastiveObjective(stepper, cfg.temperature, model.device).backward(texts, step)
        return loss, grads(model)

    loss_ours, g_ours = ours(None)
    loss_ours_gc, g_ours_gc = ours(args.mini_batch_size)

    # sentence-transformers: its collator tokenizes with the prompts, its losses embed and backprop.
    st_model = st_wrap(model)
    _, prompts = st_datasets(trainer)
    collator = SentenceTransformerDataCollator(preprocess_fn=st_model.preprocess, prompts=prompts)
    rows = [
        {
            "dataset_name": texts.dataset,
            "anchor": texts.queries[i],
            "positive": texts.passages[i],
            **{f"negative_{j + 1}": texts.passages[n + i * k + j] for j in range(k)},
        }
        for i in range(n)
    ]
    features = collator(rows)
    columns = ["anchor", "positive"] + [f"negative_{j + 1}" for j in range(k)]
    sentence_features = [
        {key[len(c) + 1 :]: value for key, value in features.items() if key.startswith(c + "_")} for c in columns
    ]

    def st(loss_module):
        model.zero_grad(set_to_none=True)
        loss = loss_module(sentence_features, None)
        loss.backward()
        return float(loss.detach()), grads(model)

    scale = 1.0 / cfg.temperature
    loss_mnrl, g_mnrl = st(MultipleNegativesRankingLoss(st_model, scale=scale))
    loss_cmnrl, g_cmnrl = st(
        CachedMultipleNegativesRankingLoss(st_model, scale=scale, mini_batch_size=args.mini_batch_size)
    )
    model.zero_grad(set_to_none=True)
    out["losses"] = {
        "ours": loss_ours,
        "ours_gradcache": loss_ours_gc,
        "st_mnrl": loss_mnrl,
        "st_cached_mnrl": loss_cmnrl,
    }
    out["grad_vs_ours"] = {
        "ours_gradcache": compare(g_ours, g_ours_gc),
        "st_mnrl": compare(g_ours, g_mnrl),
        "st_cached_mnrl": compare(g_ours, g_cmnrl),
    }
    out["trainable_tensors"] = len(g_ours)
    out["trainable_parameters"] = sum(g.numel() for g in g_ours.values())
    out["mini_batch_size"] = args.mini_batch_size
    model.train()
    return out


# ------------------------------------------------------------------------------------------------ 2. step time


def part_step_time(trainer: Trainer, args, workdir: Path) -> dict[str, Any]:
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import TrainerCallback

    cfg = trainer.config.training
    total = args.warmup + args.steps
    torch.manual_seed(cfg.seed)
    st_model = st_wrap(build_model(trainer.config, torch.device("cpu"), "fp32"))
    tables, prompts = st_datasets(trainer)
    names = sorted(tables)
    ours_times: list[float] = []
    st_times: list[float] = []
    ours_losses: list[float] = []
    ours_norms: list[float] = []
    ours_cpu: list[float] = []
    st_cpu: list[float] = []
    clock: dict[str, Any] = {"last": None}

    def now() -> tuple[float, float]:
        # Wall time, and this process's CPU time: on a shared core the second counts only our own work.
        return time.perf_counter(), time.process_time()

    class Interleave(TrainerCallback):
        """After each ST step, time it, then run and time our step of the same batch."""

        def on_step_begin(self, args_, state, control, **kwargs):
            if clock["last"] is None:
                clock["last"] = now()

        def on_step_end(self, args_, state, control, **kwargs):
            wall, cpu = now()
            st_times.append(wall - clock["last"][0])
            st_cpu.append(cpu - clock["last"][1])
            start = now()
            record = trainer._train_step(len(ours_times))
            end = now()
            ours_times.append(end[0] - start[0])
            ours_cpu.append(end[1] - start[1])
            ours_losses.append(record["loss"])
            ours_norms.append(record["grad_norm"])
            clock["last"] = now()  # ST's next step: data, collate, forward, backward, optimizer

    training_args = SentenceTransformerTrainingArguments(
        output_dir=str(workdir / "st-timing"),
        max_steps=total,
        per_device_train_batch_size=cfg.batch_size,
        learning_rate=cfg.lr,
        warmup_steps=cfg.warmup_steps,
        weight_decay=cfg.weight_decay,
        adam_beta1=cfg.betas[0],
        adam_beta2=cfg.betas[1],
        adam_epsilon=cfg.eps,
        max_grad_norm=cfg.max_grad_norm or 1e30,  # ours always computes the norm; clipping at 1e30 does too
        seed=cfg.seed,
        use_cpu=True,
        dataloader_num_workers=0,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        prompts=prompts,
        multi_dataset_batch_sampler=plan_batch_sampler(trainer.plan, names, total),
    )
    st_trainer = SentenceTransformerTrainer(
        model=st_model,
        args=training_args,
        train_dataset={name: tables[name] for name in names},
        loss=MultipleNegativesRankingLoss(st_model, scale=1.0 / cfg.temperature),
        callbacks=[Interleave()],
    )
    st_trainer.train()
    st_losses = [entry["loss"] for entry in st_trainer.state.log_history if "loss" in entry]
    st_norms = [entry["grad_norm"] for entry in st_trainer.state.log_history if "grad_norm" in entry]
    w = args.warmup
    ours_median, st_median = statistics.median(ours_times[w:]), statistics.median(st_times[w:])
    ours_cpu_median, st_cpu_median = statistics.median(ours_cpu[w:]), statistics.median(st_cpu[w:])
    pair_ratios = [s / o for s, o in zip(st_cpu[w:], ours_cpu[w:])]
    return {
        "batch_size": cfg.batch_size,
        "max_length": trainer.model.max_seq_length,
        "warmup": args.warmup,
        "steps": args.steps,
        "ours_s": ours_times,
        "st_s": st_times,
        "ours_median_s": ours_median,
        "st_median_s": st_median,
        "st_over_ours": st_median / ours_median,
        "ours_cpu_s": ours_cpu,
        "st_cpu_s": st_cpu,
        "ours_cpu_median_s": ours_cpu_median,
        "st_cpu_median_s": st_cpu_median,
        "st_over_ours_cpu": st_cpu_median / ours_cpu_median,
        "st_over_ours_cpu_per_step": pair_ratios,
        "ours_losses": ours_losses,
        "st_losses": st_losses,
        "ours_grad_norms": ours_norms,
        "st_grad_norms": st_norms,
        "datasets": [trainer.plan.global_batch(s)[0] for s in range(total)],
    }


# ------------------------------------------------------------------------------------------------ 3. train


def part_train(trainer: Trainer, args, workdir: Path, out_dir: Path) -> dict[str, Any]:
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.base.sampler import BatchSamplers, MultiDatasetBatchSamplers
    from sentence_transformers.sentence_transformer.losses import CachedMultipleNegativesRankingLoss

    from c2v_rag import Causal2Vec

    cfg = trainer.config.training
    steps = args.train_steps
    half = max(1, steps // 2)
    tables, prompts = st_datasets(trainer)
    checkpoints = workdir / "st-train"

    def run(resume: str | None):
        torch.manual_seed(cfg.seed)
        st_model = st_wrap(build_model(trainer.config, torch.device("cpu"), "fp32"))
        training_args = SentenceTransformerTrainingArguments(
            output_dir=str(checkpoints),
            max_steps=steps,
            per_device_train_batch_size=cfg.batch_size,
            learning_rate=cfg.lr,
            warmup_steps=cfg.warmup_steps,
            max_grad_norm=cfg.max_grad_norm or 1e30,
            seed=cfg.seed,
            use_cpu=True,
            dataloader_num_workers=0,
            report_to="none",
            save_strategy="steps",
            save_steps=half,
            logging_steps=1,
            disable_tqdm=True,
            prompts=prompts,
            batch_sampler=BatchSamplers.NO_DUPLICATES,
            multi_dataset_batch_sampler=MultiDatasetBatchSamplers.PROPORTIONAL,
        )
        st_trainer = SentenceTransformerTrainer(
            model=st_model,
            args=training_args,
            train_dataset=tables,
            loss=CachedMultipleNegativesRankingLoss(
                st_model, scale=1.0 / cfg.temperature, mini_batch_size=args.mini_batch_size
            ),
        )
        start = time.perf_counter()
        st_trainer.train(resume_from_checkpoint=resume)
        seconds = time.perf_counter() - start
        losses = [(e["step"], e["loss"]) for e in st_trainer.state.log_history if "loss" in e]
        return st_model, losses, seconds

    result: dict[str, Any] = {"steps": steps, "checkpoint_every": half, "mini_batch_size": args.mini_batch_size}
    st_model, losses, seconds = run(None)
    result.update(losses=losses, seconds=seconds)
    st_model.eval()
    st_model.save(str(out_dir))
    probe = [t for table in tables.values() for t in table["anchor"][:3]]
    mine = st_model.encode(probe, convert_to_tensor=True)
    reloaded = SentenceTransformer(
        str(out_dir), device="cpu", trust_remote_code=True, model_kwargs={"dtype": torch.float32}
    )
    native = Causal2Vec.from_pretrained(out_dir, device="cpu", dtype="float32")
    # The training-time bound (model.max_length) is saved in the ST module's settings only; the variant
    # keeps its own max_length for inference, as our trainer's output does.
    result["max_seq_length"] = {"trained_and_st_reload": reloaded.max_seq_length, "variant": native.max_seq_length}
    native.max_seq_length = reloaded.max_seq_length
    result["saved_to"] = str(out_dir)
    result["reload_max_abs_diff"] = {
        "sentence_transformers": float((reloaded.encode(probe, convert_to_tensor=True) - mine).abs().max()),
        "causal2vec": float((native.encode(probe, convert_to_tensor=True) - mine).abs().max()),
    }
    # Resume from the half-way checkpoint: transformers' Trainer reloads the model through
    # SentenceTransformer and copies its state dict into the model being trained.
    checkpoint = checkpoints / f"checkpoint-{half}"
    # What a transformers checkpoint holds (optimizer.pt, scheduler.pt, rng_state.pth, training_args.bin
    # are torch.save pickles; ours are safetensors + JSON).
    result["checkpoint_files"] = sorted(p.name for p in checkpoint.iterdir())
    try:
        _, resumed, _ = run(str(checkpoint))
        result["resume"] = {"ok": True, "losses": resumed}
    except Exception as err:  # noqa: BLE001 - the finding is what fails and how
        result["resume"] = {
            "ok": False,
            "error": f"{type(err).__name__}: {str(err)[:600]}",
            "where": traceback.format_exc().strip().splitlines()[-3:],
        }
    return result


# ------------------------------------------------------------------------------------------------ 4. lines


def part_lines() -> dict[str, Any]:
    rows = []
    for path in sorted((ROOT / "c2v_rag" / "training").glob("*.py")):
        role, note = MODULE_ROLES.get(path.name, ("?", ""))
        rows.append(
            {
                "module": path.name,
                "lines": len(path.read_text(encoding="utf-8").splitlines()),
                "role": role,
                "note": note,
            }
        )
    totals: dict[str, int] = {}
    for row in rows:
        totals[row["role"]] = totals.get(row["role"], 0) + row["lines"]
    return {"modules": rows, "totals": totals, "all": sum(r["lines"] for r in rows)}


# ------------------------------------------------------------------------------------------------ 5. exclusions


def part_exclusions(recipes: list[str], steps: int = 500) -> dict[str, Any]:
    """How often a batch holds a known positive of another query, which ST's MNRL would push away.

    Counted over the first ``steps`` batches of each recipe's plan (its batch size and dataset
    weights), on positives only (no negatives, so no mining): a lower bound.
    """
    from c2v_rag.training.data import group_by_dataset, load_section

    out = {}
    for recipe in recipes:
        cfg = load_config(recipe)
        groups = group_by_dataset([load_section(s) for s in cfg.datasets])
        plan = HomogeneousBatchPlan(
            groups,
            cfg.training.batch_size,
            seed=cfg.training.seed,
            weights={s.display_name: s.weight for s in cfg.datasets},
        )
        stats: dict[str, dict[str, int]] = {}
        for step in range(steps):
            batch = plan.batch(step)
            laid = layout_step(batch, num_negatives=0, seed=cfg.training.seed, step=step, world_size=1)
            masked = sum(sum(row) for row in laid.exclude)
            entry = stats.setdefault(batch.dataset, {"batches": 0, "with_masked": 0, "masked": 0})
            entry["batches"] += 1
            entry["with_masked"] += masked > 0
            entry["masked"] += masked
        out[recipe] = {"batch_size": cfg.training.batch_size, "datasets": stats}
    return out


# ------------------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", default=str(ROOT / "recipes" / "scifact_nli_cpu.yaml"))
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--mini-batch-size", type=int, default=4, help="GradCache mini-batch, both trainers")
    parser.add_argument("--steps", type=int, default=4, help="timed steps of each trainer")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--train-steps", type=int, default=6, help="steps of the end-to-end ST run")
    parser.add_argument(
        "--parts",
        nargs="+",
        default=["gradients", "time", "train", "lines", "exclusions"],
        choices=["gradients", "time", "train", "lines", "exclusions"],
    )
    parser.add_argument(
        "--exclusion-recipes",
        nargs="+",
        default=[
            str(ROOT / "recipes" / "scifact_nli_cpu.yaml"),
            str(ROOT / "recipes" / "default_preset_1_contextual.yaml"),
        ],
    )
    parser.add_argument("--out", default="runs/st-trainer-comparison")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="recipe override")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logger.setLevel(logging.INFO)
    import sentence_transformers
    import transformers

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "recipe": args.recipe,
        "sentence_transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        trainer = None
        if {"gradients", "time", "train"} & set(args.parts):
            config = recipe_config(args, workdir / "ours")
            torch.manual_seed(config.training.seed)
            trainer = Trainer(config)
            trainer.setup()
            results["datasets"] = {name: len(ex) for name, ex in trainer.groups.items()}
            results["hard_negatives"] = trainer.negatives
        # Timing first, on the untouched model: the gradient part perturbs lora_B.
        if "time" in args.parts:
            logger.info("step time: %d warm-up + %d steps of each trainer", args.warmup, args.steps)
            results["step_time"] = part_step_time(trainer, args, workdir)
            print(json.dumps({"step_time": results["step_time"]}, indent=1))
        if "gradients" in args.parts:
            logger.info("gradients: one batch through both loss paths")
            if "time" in args.parts:  # a fresh model: the timed steps have updated this one
                torch.manual_seed(trainer.config.training.seed)
                trainer.model = build_model(trainer.config, torch.device("cpu"), "fp32")
            results["gradients"] = part_gradients(trainer, args)
            print(json.dumps({"gradients": results["gradients"]}, indent=1))
        if "train" in args.parts:
            logger.info("train: %d steps through SentenceTransformerTrainer", args.train_steps)
            results["train"] = part_train(trainer, args, workdir, out / "st-variant")
            print(json.dumps({"train": results["train"]}, indent=1))
    if "lines" in args.parts:
        results["lines"] = part_lines()
        print(json.dumps({"lines": results["lines"]["totals"], "all": results["lines"]["all"]}, indent=1))
    if "exclusions" in args.parts:
        results["exclusions"] = part_exclusions(args.exclusion_recipes)
        print(json.dumps({"exclusions": results["exclusions"]}, indent=1))
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out / 'results.json'}")


if __name__ == "__main__":
    main()
