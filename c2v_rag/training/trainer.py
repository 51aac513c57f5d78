"""The training loop: model setup (LoRA, projector, precision), data, steps, checkpoints, output.

Use :func:`train` with a :class:`~c2v_rag.training.config.TrainConfig`, or the CLI
``c2v-rag train recipe.yaml``. The result is a variant directory that
``Causal2Vec.from_pretrained(output.dir)`` loads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import random
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
import torch

from c2v_rag.core.devices import cpu_has_native_bf16, resolve_device
from c2v_rag.core.extras import require
from c2v_rag.core.instructions import Instruction
from c2v_rag.core.interrupts import remembered_interrupts
from c2v_rag.core.progress_bar import unsized_terminal
from c2v_rag.documents.chunking import TokenChunker
from c2v_rag.model.causal2vec import Causal2Vec
from c2v_rag.nn.projector import match_word_embedding_norm
from c2v_rag.training.attention_dropout import set_attention_dropout
from c2v_rag.training.checkpoint import (
    CheckpointError,
    checkpoint_name,
    frozen_weights_digest,
    list_checkpoints,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
)
from c2v_rag.training.config import DECODER_LORA_TARGETS, ENCODER_LORA_TARGETS, DatasetSection, LoraSection, TrainConfig
from c2v_rag.training.data import (
    LoadedDataset,
    dump_examples,
    group_by_dataset,
    load_corpus,
    load_section,
    read_examples,
)
from c2v_rag.training.ddp import DistributedContext, all_reduce_mean, barrier, init_distributed
from c2v_rag.training.evaluation import Evaluator, RetrievalEvaluator, STSEvaluator, run_evaluators
from c2v_rag.training.gradcache import ContrastiveStep, MultiBatchForward, NonFiniteLossError
from c2v_rag.training.mining import mine_hard_negatives
from c2v_rag.training.objectives.base import EmbeddingViewsConfig, ObjectiveContext, loss_views
from c2v_rag.training.objectives.registry import build_objective
from c2v_rag.training.plotting import plot_loss_curve
from c2v_rag.training.prefetch import StepInputs, StepPrefetcher, resolve_workers
from c2v_rag.training.pseudo.config import PseudoPairsConfig
from c2v_rag.training.sampling import HomogeneousBatchPlan, add_icl_examples, layout_step
from c2v_rag.training.step_texts import StepTexts

if TYPE_CHECKING:
    from peft import LoraConfig, PeftModel
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

CHECKPOINTS_DIR = "checkpoints"
HISTORY_FILE = "history.jsonl"
LOSS_PLOT = "loss.png"
METRICS_FILE = "metrics.json"
CONFIG_COPY = "train_config.yaml"


def check_training_packages(config: TrainConfig) -> None:
    """Import what training needs beyond the core install (the ``train`` extra), or raise the error that names
    ``pip install 'c2v-rag[train]'``: matplotlib for the loss plot, and bm25s where a dataset mines with BM25."""
    require("matplotlib", "training (the loss plot)", "train")
    if config.mining.method == "bm25":
        require("bm25s", "BM25 mining of hard negatives", "train")


class WarmupThenLinear:
    """The learning-rate factor of step k (0-based): linear warmup that starts above zero, ``(k + 1) / (warmup +
    1)``, so that the first step already trains, then linear decay to zero at ``total``."""

    def __init__(self, warmup: int, total: int) -> None:
        self.warmup, self.total = warmup, total

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / (self.warmup + 1)
        return max(0.0, (self.total - step) / max(1, self.total - self.warmup))


class TrainingDivergedError(RuntimeError):
    """The loss or the gradients became NaN or infinite; the run stopped without saving them."""


# ------------------------------------------------------------------------------------------------ precision


def resolve_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> ``bf16`` where bf16 is native (CUDA with bf16, CPUs with avx512_bf16/AMX), else ``fp32``."""
    if precision != "auto":
        if precision.startswith("bf16") and device.type == "cpu" and not cpu_has_native_bf16():
            logger.warning("precision=%s on a CPU without native bf16 is emulated and slower than fp32", precision)
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if device.type == "cpu" and cpu_has_native_bf16() else "fp32"


def autocast_factory(precision: str, device: torch.device) -> Callable[[], contextlib.AbstractContextManager]:
    if precision == "fp32":
        return contextlib.nullcontext
    return lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)


# ------------------------------------------------------------------------------------------------ model setup


def _lora_config(section: LoraSection, defaults: list[str], module: torch.nn.Module):
    from peft import LoraConfig

    targets = section.target_modules
    if targets is None:
        names = {name.rsplit(".", 1)[-1] for name, _ in module.named_modules()}
        leaves = {d.rsplit(".", 1)[-1] for d in defaults}
        # Known layer names where the family uses them; peft's "all-linear" elsewhere (GPT-2...).
        targets = defaults if leaves & names else "all-linear"
    return LoraConfig(
        r=section.r,
        # peft annotates an int, but only divides by it (the scale alpha / r): a fractional alpha holds.
        lora_alpha=section.alpha,  # type: ignore[arg-type]
        lora_dropout=section.dropout,
        target_modules=targets,
    )


def build_model(config: TrainConfig, device: torch.device, precision: str) -> Causal2Vec:
    """The model ready for training: LoRA where configured, the projector in float32, the rest frozen.

    Frozen backbone weights are bf16 under ``precision="bf16"``; trainable weights stay float32
    (peft keeps adapters in float32), so the optimizer updates full-precision values.
    """
    weight_dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    section = config.model
    if section.variant is not None:
        model = Causal2Vec.from_pretrained(section.variant, device=device, dtype=weight_dtype, merge_adapters=False)
        _reload_projector_fp32(model, section.variant)
        readout = section.readout_changes()
        if section.kept_decoder_layers is not None:  # a shallower variant, healed by this run
            model.keep_decoder_layers(section.kept_decoder_layers)
        if readout:  # readout fields only (checked by ModelSection): a stage may read h_C, the next concat
            model.set_readout(**readout)
    else:
        assert section.decoder is not None  # ModelSection sets either variant or decoder
        model = Causal2Vec.from_components(
            section.decoder,
            section.encoder,
            device=device,
            dtype=weight_dtype,
            seed=section.projector_seed,
            **section.config,
        )
        if section.projector_scale == "word_embeddings" and model.projector is not None:
            factor = match_word_embedding_norm(model)
            logger.info("projector output rescaled by %.2f to the word embeddings' norm", factor)
    if section.max_length is not None:
        # Only the training-time bound: the saved variant keeps its own max_length for inference.
        model.max_seq_length = section.max_length
    for param in model.parameters():
        param.requires_grad_(False)
    if config.lora.enabled:
        if hasattr(model.decoder, "peft_config"):
            _warn_kept_adapter("decoder", model.decoder, config.lora)
            _unfreeze_lora(model.decoder)
        else:
            model.decoder = _add_lora(model.decoder, _lora_config(config.lora, DECODER_LORA_TARGETS, model.decoder))
    train_encoder = bool(model.config.num_contextual_tokens and config.encoder_lora.enabled)
    if model.encoder is not None and train_encoder:
        if hasattr(model.encoder, "peft_config"):
            _warn_kept_adapter("encoder", model.encoder, config.encoder_lora)
            _unfreeze_lora(model.encoder)
        else:
            model.encoder = _add_lora(
                model.encoder, _lora_config(config.encoder_lora, ENCODER_LORA_TARGETS, model.encoder)
            )
    if model.projector is not None:
        model.projector.float()
        for param in model.projector.parameters():
            param.requires_grad_(config.train_projector)
    model.train()
    if model.encoder is not None and not train_encoder:
        model.encoder.eval()  # a frozen encoder should not add dropout noise to C
    if train_encoder and model.encoder is not None and config.training.encoder_attention_dropout is not None:
        set_attention_dropout(model.encoder, config.training.encoder_attention_dropout, role="encoder")
    if config.training.gradient_checkpointing:
        _enable_checkpointing(model.decoder)
        if train_encoder and model.encoder is not None:
            _enable_checkpointing(model.encoder)
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise ValueError("nothing to train: enable lora, encoder_lora or train_projector")
    model.weights_digest = model.adapters_digest = None  # training changes the weights; saving takes new digests
    return model


def _add_lora(module: torch.nn.Module, lora_config: Any) -> torch.nn.Module:
    """``module`` wrapped in a new LoRA adapter (peft)."""
    from peft import get_peft_model

    with warnings.catch_warnings():
        # peft reads transformers 5's deprecated `is_gradient_checkpointing` when it wraps a model; the
        # FutureWarning is theirs to fix and tells a user training nothing they could act on (as for loading a
        # variant's adapter, c2v_rag.hub.variants). Only that message is silenced, only here.
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        return get_peft_model(module, lora_config)


def _enable_checkpointing(module: torch.nn.Module) -> None:
    # Non-reentrant checkpointing: inputs need not require grad (frozen embeddings), and it
    # replays the RNG state, so dropout matches between the forward and the recompute.
    kwargs = {"use_reentrant": False}
    model = cast("PreTrainedModel", module)  # or a peft wrapper of one, which forwards both methods to it
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x's name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def _warn_kept_adapter(role: str, module: torch.nn.Module, section: LoraSection) -> None:
    """A continued variant's adapter trains as it was saved; say so when the recipe asks for another shape."""
    adapter = cast("LoraConfig", cast("PeftModel", module).peft_config["default"])  # the adapters trained are LoRA
    kept = {"r": adapter.r, "alpha": float(adapter.lora_alpha), "dropout": adapter.lora_dropout}
    asked = {name: getattr(section, name) for name in kept if name in section.model_fields_set}
    differ = {name: value for name, value in asked.items() if value != kept[name]}
    if differ:
        logger.warning(
            "the variant's %s adapter keeps training as it was saved (%s); the recipe's %s apply only to a new "
            "adapter, made when training starts from base models",
            role,
            ", ".join(f"{k}={v:g}" for k, v in kept.items()),
            ", ".join(f"{'encoder_lora' if role == 'encoder' else 'lora'}.{k}={v:g}" for k, v in differ.items()),
        )


def _unfreeze_lora(module: torch.nn.Module) -> None:
    for name, param in module.named_parameters():
        if "lora_" in name:
            param.requires_grad_(True)


def _reload_projector_fp32(model: Causal2Vec, variant: str) -> None:
    """Reload the saved float32 projector: from_pretrained cast it to the compute dtype."""
    from safetensors.torch import load_file

    from c2v_rag.hub.presets import resolve_variant_path
    from c2v_rag.hub.variants import PROJECTOR_FILE

    if model.projector is None:
        return
    model.projector.float()
    path = resolve_variant_path(variant) / PROJECTOR_FILE
    model.projector.load_state_dict(load_file(str(path)))


def count_parameters(model: torch.nn.Module) -> tuple[int, int]:
    total = sum(p.numel() for p in model.parameters())
    return sum(p.numel() for p in model.parameters() if p.requires_grad), total


# ------------------------------------------------------------------------------------------------ data


def prepare_data(
    config: TrainConfig, model: Causal2Vec, output_dir: Path, ctx: DistributedContext
) -> tuple[dict[str, list], list[LoadedDataset]]:
    """Load every dataset, mine hard negatives where configured, and group examples by dataset.

    Mined examples are cached under ``output_dir/mined``: a resumed run (and every process of a
    multi-process run) trains on exactly the negatives mined at the start.
    """
    loaded = [load_dataset(s, model, output_dir, ctx) for s in config.datasets]
    groups = group_by_dataset(loaded)
    mining = config.mining
    if mining.method == "none":
        return groups, loaded
    cache = output_dir / "mined"
    targets = mining.datasets or [n for n, ex in groups.items() if not all(e.negatives for e in ex)]
    unknown = set(targets) - set(groups)
    if unknown:
        raise ValueError(f"mining.datasets names unknown dataset(s) {sorted(unknown)}; known: {sorted(groups)}")
    corpora = {d.name: d.corpus for d in loaded if d.corpus is not None}
    for name in targets:
        path = cache / f"{name}.jsonl"
        if ctx.is_main and not path.is_file():
            logger.info("mining %d hard negatives per query for %s with %s", mining.num_negatives, name, mining.method)
            was_training = model.training
            mined = mine_hard_negatives(
                groups[name],
                method=mining.method,
                num_negatives=mining.num_negatives,
                depth=mining.depth,
                skip_top=mining.skip_top,
                corpus=corpora.get(name),
                model=model,
                seed=mining.seed,
                margin=mining.margin,
                truncate_dim=loss_reach(config, model),
            )
            model.train(was_training)
            dump_examples(mined, path)
        barrier()
        groups[name] = read_examples(path)
    return groups, loaded


def load_dataset(
    section: DatasetSection, model: Causal2Vec, output_dir: Path, ctx: DistributedContext
) -> LoadedDataset:
    """One dataset section; a ``corpus`` one has its pseudo-pairs made by the main process (chunked with the
    model's tokenizer) while the others wait, then read by all."""
    if section.format != "corpus":
        return load_section(section)
    config = section.pseudo_pairs or PseudoPairsConfig()
    chunker = TokenChunker(model, config.chunk_size, config.chunk_overlap)
    pairs_dir = Path(section.pairs_dir) if section.pairs_dir else output_dir / "pairs" / section.display_name
    if ctx.is_main:
        loaded = load_corpus(section, chunker, pairs_dir)
    barrier()
    if not ctx.is_main:
        loaded = load_corpus(section, chunker, pairs_dir, show_progress=False)
    logger.info("dataset %s: %d pseudo-pairs", loaded.name, len(loaded.examples))
    return loaded


def loss_reach(config: TrainConfig, model: Causal2Vec) -> int | None:
    """The width of the embedding prefix the loss reads, when it reads a prefix only (None: the whole vector)."""
    if not isinstance(config.objective, EmbeddingViewsConfig):
        return None
    stops = [view.stop for view, _ in loss_views(config.objective, model)]
    if any(stop is None for stop in stops):
        return None
    reach = max(stop for stop in stops if stop is not None)
    return reach if reach < model.embedding_dim else None


def negatives_per_dataset(config: TrainConfig, groups: dict[str, list]) -> dict[str, int]:
    """Hard negatives per query for each dataset: as configured, bounded by what every example has."""
    wanted = {s.display_name: s.hard_negatives for s in config.datasets}
    ranked = {s.display_name for s in config.datasets if s.loss == "cosent"}
    out = {}
    for name, examples in groups.items():
        if name in ranked:  # CoSENT compares the batch's pairs with each other
            out[name] = 0
            continue
        k = wanted.get(name)
        k = config.training.hard_negatives if k is None else k
        available = min(len(e.negatives) for e in examples)
        if available < k:
            logger.warning(
                "dataset %s: %d hard negative(s) per query requested, but some examples have only %d; "
                "using %d (set mining.method to mine more)",
                name,
                k,
                available,
                available,
            )
        out[name] = min(k, available)
    return out


def build_evaluators(config: TrainConfig, loaded: Sequence[LoadedDataset]) -> list[Evaluator]:
    from c2v_rag.core.instructions import resolve_instruction

    ev = config.evaluation
    evaluators: list[Evaluator] = []
    if ev.retrieval_dataset is not None:
        dataset = next(d for d in loaded if d.name == ev.retrieval_dataset)
        if dataset.dev is None:
            raise ValueError(
                f"evaluation.retrieval_dataset={ev.retrieval_dataset!r} has no dev queries: its dev_fraction holds "
                "out none of its few judged queries. Raise its dev_fraction, or leave retrieval_dataset unset"
            )
        evaluators.append(
            RetrievalEvaluator(
                dataset.dev,
                name=dataset.name,
                corpus_limit=ev.retrieval_corpus_limit,
                max_length=ev.retrieval_max_length,
                batch_size=ev.batch_size,
            )
        )
    if ev.sts_path is not None:
        instruction = resolve_instruction(task=ev.sts_task, instruction=None, is_query=True)
        evaluators.append(STSEvaluator.from_tsv(ev.sts_path, instruction=instruction, limit=ev.sts_limit))
    return evaluators


# ------------------------------------------------------------------------------------------------ the trainer


@dataclass
class TrainResult:
    output_dir: Path
    steps: int
    history: list[dict[str, Any]]
    evaluations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def final_loss(self) -> float:
        return self.history[-1]["loss"] if self.history else float("nan")


Callback = Callable[["Trainer", int], None]


# Options a resumed run may change: output and logging, and how a step is computed rather than what: where its
# texts are tokenized, and how its memory is traded for time (GradCache's chunks and gradient checkpointing give the
# same gradients), so that a run that ran out of memory can go on with smaller chunks.
_RESUMABLE_TRAINING = {"progress_bar", "log_every", "save_every", "keep_checkpoints", "steps"}
# Checkpoints written before mini_batch_size and gradient_checkpointing joined the set hashed them.
_RESUMABLE_TRAINING_BEFORE = {"prefetch_workers", "prefetch_depth"}
_RESUMABLE_TRAINING_HOW = _RESUMABLE_TRAINING_BEFORE | {"mini_batch_size", "gradient_checkpointing"}


def _config_fingerprint(config: TrainConfig, how: set[str] = _RESUMABLE_TRAINING_HOW) -> str:
    """What shapes the optimisation, hashed: a checkpoint resumes only under a config with the same."""
    relevant = config.model_dump(exclude={"output": True, "evaluation": True, "training": _RESUMABLE_TRAINING | how})
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Trainer:
    """Fine-tunes a Causal2Vec variant as described by a :class:`TrainConfig`.

    ``evaluators`` add to those built from ``config.evaluation``; ``callbacks`` run before each
    step as ``callback(trainer, step)``.
    """

    def __init__(
        self, config: TrainConfig, *, evaluators: Sequence[Evaluator] = (), callbacks: Sequence[Callback] = ()
    ) -> None:
        self.config = config
        self.extra_evaluators = list(evaluators)
        self.callbacks = list(callbacks)
        self.output_dir = Path(config.output.dir).expanduser()
        self.checkpoint_root = self.output_dir / CHECKPOINTS_DIR
        self.history: list[dict[str, Any]] = []
        self.evaluations: list[dict[str, Any]] = []
        self.step = 0
        self.prefetch_workers = 0  # set by setup(): worker processes that prepare the next steps
        self.prefetcher: StepPrefetcher | None = None

    # -------------------------------------------------------------------------------- setup

    def _check_output(self, resume: bool) -> None:
        existing = list_checkpoints(self.checkpoint_root)
        if resume or not (self.output_dir.exists() and any(self.output_dir.iterdir())):
            return
        if self.config.output.overwrite:
            if self.ctx.is_main:
                shutil.rmtree(self.output_dir)
            barrier()
            return
        what = f"{len(existing)} checkpoint(s)" if existing else "files"
        raise FileExistsError(
            f"output.dir {self.output_dir} already holds {what}. Resume with 'c2v-rag train CONFIG --resume', "
            "pick another output.dir, or set output.overwrite: true"
        )

    def setup(self, resume: bool | str | Path = False) -> None:
        # Every package the run needs, before any work: a missing one found after a step would stop the run.
        check_training_packages(self.config)
        cfg = self.config
        train = cfg.training
        device = resolve_device(train.device)
        self.ctx = init_distributed(device)
        if device.type == "cuda" and self.ctx.enabled:
            device = torch.device("cuda", self.ctx.local_rank)
        self.device = device
        self._check_output(bool(resume))
        self.precision = resolve_precision(train.precision, device)
        random.seed(train.seed)
        np.random.seed(train.seed)
        torch.manual_seed(train.seed)
        self.model = build_model(cfg, device, self.precision)
        trainable, total = count_parameters(self.model)
        logger.info(
            "training %s of %s parameters (%.2f%%), precision %s",
            f"{trainable:,}",
            f"{total:,}",
            100 * trainable / total,
            self.precision,
        )
        self.forward_module = MultiBatchForward(self.model)
        module: torch.nn.Module = self.forward_module
        if self.ctx.enabled:
            from torch.nn.parallel import DistributedDataParallel

            ids = [device.index] if device.type == "cuda" else None
            module = DistributedDataParallel(self.forward_module, device_ids=ids, broadcast_buffers=False)
        self.stepper = ContrastiveStep(
            self.model, module, mini_batch_size=train.mini_batch_size, autocast=autocast_factory(self.precision, device)
        )
        context = ObjectiveContext(
            self.model,
            self.stepper,
            device,
            temperature=train.temperature,
            seed=train.seed,
            distributed=self.ctx.enabled,
        )
        # The objective (a distill teacher, say) is built and checked before the output folder is made and the data
        # prepared: a refused run leaves nothing behind and costs no mining.
        self.objective = build_objective(cfg.objective, context)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        with autocast_factory(self.precision, device)():
            self.groups, self.loaded = prepare_data(cfg, self.model, self.output_dir, self.ctx)
        self.negatives = negatives_per_dataset(cfg, self.groups)
        self.icl_examples = {s.display_name: s.icl_examples for s in cfg.datasets}
        weights = {s.display_name: s.weight for s in cfg.datasets}
        self.plan = HomogeneousBatchPlan(
            self.groups, train.batch_size * self.ctx.world_size, seed=train.seed, weights=weights
        )
        self.evaluators = build_evaluators(cfg, self.loaded) + self.extra_evaluators
        self.prefetch_workers = self._resolve_prefetch()
        self.parameters = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            self.parameters, lr=train.lr, betas=train.betas, eps=train.eps, weight_decay=train.weight_decay
        )
        if train.warmup_steps >= train.steps:
            logger.warning(
                "warmup_steps=%d >= steps=%d: the learning rate never reaches its peak", train.warmup_steps, train.steps
            )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, WarmupThenLinear(train.warmup_steps, train.total_schedule_steps)
        )
        self.fingerprint = _config_fingerprint(cfg)
        self.base_weights = frozen_weights_digest(self.model)
        if resume:
            self._resume(resume)

    def _resume(self, resume: Literal[True] | str | Path) -> None:
        if resume is True or resume == "auto":
            found = list_checkpoints(self.checkpoint_root)
            if not found:
                logger.warning("--resume: no checkpoint under %s; starting from step 0", self.checkpoint_root)
                return
            directory = found[-1]
        else:
            directory = Path(resume)
        state = load_checkpoint(directory, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler)
        fingerprints = {self.fingerprint, _config_fingerprint(self.config, _RESUMABLE_TRAINING_BEFORE)}
        if state.get("fingerprint") not in fingerprints:
            raise CheckpointError(
                f"{directory} was written by a run with different model, data or optimisation settings; "
                "resume with the recipe it was trained with, or start a new output.dir"
            )
        if "base_weights" not in state:
            logger.warning("%s records no digest of the base weights; they are assumed unchanged", directory)
        elif state["base_weights"] != self.base_weights:
            model = self.config.model
            sources = model.variant or " and ".join(str(path) for path in (model.decoder, model.encoder) if path)
            raise CheckpointError(
                f"{directory} was trained on other base weights than {sources} hold now; resume with the weights "
                "the run started from, or start a new output.dir"
            )
        if state.get("world_size") != self.ctx.world_size:
            raise CheckpointError(
                f"{directory} was trained with {state.get('world_size')} process(es), not "
                f"{self.ctx.world_size}: the batches would differ"
            )
        # The schedule is part of the scheduler's state, so it is the one the run started with, whatever
        # training.steps says now; steps past its end would have a learning rate of zero.
        schedule = self.scheduler.lr_lambdas[0]
        if isinstance(schedule, WarmupThenLinear) and self.config.training.steps > schedule.total:
            raise CheckpointError(
                f"training.steps={self.config.training.steps} goes past the end of the learning-rate schedule "
                f"{directory} was trained with (step {schedule.total}): the steps after it would not train. Resume "
                f"with training.steps <= {schedule.total}, or start a new output.dir with a longer schedule"
            )
        self.step = state["step"]
        self.history = state.get("history", [])
        self.evaluations = state.get("evaluations", [])
        logger.info("resumed from %s at step %d", directory, self.step)

    # -------------------------------------------------------------------------------- loop

    def evaluate(self) -> dict[str, float]:
        if not self.evaluators:
            return {}
        metrics = {}
        if self.ctx.is_main:
            # Under the training autocast: bf16 backbones next to float32 trainable weights.
            with self.stepper.autocast():
                metrics = run_evaluators(self.model, self.evaluators)
        barrier()
        if self.ctx.is_main:
            self.evaluations.append({"step": self.step, **metrics})
            logger.info("step %d: %s", self.step, ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
        return metrics

    def _examples_fit(self, prompt: Instruction) -> bool:
        """A training query's in-context examples may take at most half of ``max_length``: the rest is the
        query's (bge-en-icl likewise caps the examples, not the query)."""
        prompts = self.model.prompt_builder
        return len(prompts.example_ids(prompt)) <= prompts.max_length // 2

    def step_texts(self, step: int) -> StepTexts:
        """What this process embeds at ``step`` (0-based): a function of the step alone, so that a prefetch worker
        lays out the same texts as the training process would."""
        cfg = self.config.training
        batch = self.plan.batch(step, self.ctx.rank, self.ctx.world_size)
        texts = layout_step(
            batch, num_negatives=self.negatives[batch.dataset], seed=cfg.seed, step=step, world_size=self.ctx.world_size
        )
        icl = self.icl_examples.get(batch.dataset, 0)
        if icl:
            texts = add_icl_examples(
                texts,
                batch.local,
                self.groups[batch.dataset],
                max_examples=icl,
                seed=cfg.seed,
                step=step,
                fits=self._examples_fit,
            )
        return texts

    def _resolve_prefetch(self) -> int:
        """The prefetch workers this run uses: ``training.prefetch_workers`` where the objective and the platform
        allow them, else 0 (said once in the log)."""
        train = self.config.training
        per_host = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        workers = resolve_workers(train.prefetch_workers, self.device, per_host)
        if not workers:
            return 0
        if not self.objective.prefetch:
            logger.info(
                "objective.kind=%s prepares its steps in the training process: training.prefetch_workers=%s is not "
                "used",
                self.config.objective.kind,
                train.prefetch_workers,
            )
            return 0
        if not StepPrefetcher.available():
            logger.warning("prefetch workers need fork, which this platform lacks: steps are prepared in training")
            return 0
        logger.info("%d worker processes prepare the next steps, %d steps ahead each", workers, train.prefetch_depth)
        return workers

    def _step_inputs(self, step: int) -> StepInputs:
        """The step's texts, with the objective's prepared inputs when prefetch workers made them."""
        if not self.prefetch_workers:
            return StepInputs(step, self.step_texts(step))
        if self.prefetcher is None:  # started on first use: the workers fork the trainer as it is by then
            self.prefetcher = StepPrefetcher(
                self.step_texts,
                lambda texts: self.objective.prepare(texts),
                workers=self.prefetch_workers,
                depth=self.config.training.prefetch_depth,
                pin_memory=self.device.type == "cuda",
                seed=self.config.training.seed,
            )
        return self.prefetcher.get(step, self.config.training.steps)

    def stop_prefetch(self) -> None:
        """Shut the prefetch workers down (:meth:`fit` does at its end; a caller that drives
        :meth:`_train_step` itself should too). The next step starts them again."""
        if self.prefetcher is not None:
            self.prefetcher.close()
            self.prefetcher = None

    def _train_step(self, step: int) -> dict[str, Any]:
        cfg = self.config.training
        start = time.perf_counter()
        inputs = self._step_inputs(step)
        texts = inputs.texts
        waited = time.perf_counter() - start
        self.optimizer.zero_grad(set_to_none=True)
        if inputs.prepared is None:  # prepared inside backward (an objective may not take `prepared` at all)
            loss = self.objective.backward(texts, step)
        else:
            loss = self.objective.backward(texts, step, inputs.prepared)
        norm = torch.nn.utils.clip_grad_norm_(self.parameters, cfg.max_grad_norm or math.inf)
        if not torch.isfinite(norm):
            raise NonFiniteLossError(f"the gradient norm is {float(norm)}")
        lr = self.scheduler.get_last_lr()[0]
        self.optimizer.step()
        self.scheduler.step()
        elapsed = time.perf_counter() - start
        examples = len(texts.queries) * self.ctx.world_size
        return {
            "step": step + 1,
            "loss": all_reduce_mean(loss, self.device),
            "lr": lr,
            "grad_norm": float(norm),
            "dataset": texts.dataset,
            "seconds": elapsed,
            "input_seconds": waited,
            "examples_per_s": examples / elapsed,
            "texts_per_s": (len(texts.queries) + len(texts.passages)) * self.ctx.world_size / elapsed,
        }

    def _save(self) -> Path | None:
        path = None
        if self.ctx.is_main:
            path = save_checkpoint(
                self.checkpoint_root / checkpoint_name(self.step),
                model=self.model,
                optimizer=self.optimizer,
                scheduler=self.scheduler,
                step=self.step,
                extra={
                    "history": self.history,
                    "evaluations": self.evaluations,
                    "fingerprint": self.fingerprint,
                    "base_weights": self.base_weights,
                    "world_size": self.ctx.world_size,
                },
            )
            prune_checkpoints(self.checkpoint_root, self.config.training.keep_checkpoints)
            self._write_logs()
        barrier()
        return path

    def _write_logs(self, directory: Path | None = None) -> None:
        directory = directory or self.output_dir
        with (directory / HISTORY_FILE).open("w", encoding="utf-8") as handle:
            for record in self.history:
                handle.write(json.dumps(record) + "\n")
        if self.history:
            try:
                plot_loss_curve(self.history, directory / LOSS_PLOT, evaluations=self.evaluations)
            except Exception as err:  # the checkpoint and the history are written; a plot is not worth a run
                logger.warning("The loss plot %s was not written: %s: %s", LOSS_PLOT, type(err).__name__, err)

    def fit(self) -> TrainResult:
        """Train to ``training.steps``; return the history. Call :meth:`setup` first."""
        from tqdm.auto import tqdm

        cfg = self.config.training
        if self.step == 0 and not self.evaluations:
            self.evaluate()
        size = unsized_terminal(sys.stderr)  # a terminal that reports no size is not measured again either
        progress = tqdm(
            total=cfg.steps,
            initial=self.step,
            desc="train",
            unit="step",
            disable=not (cfg.progress_bar and self.ctx.is_main),
            dynamic_ncols=not size,
            **size,
        )
        try:
            with remembered_interrupts() as interrupts:
                while self.step < cfg.steps:
                    interrupts.check()  # a Ctrl-C that a finalizer swallowed during the last step
                    for callback in self.callbacks:
                        callback(self, self.step)
                    try:
                        record = self._train_step(self.step)
                    except NonFiniteLossError as err:
                        self._diverged(err)
                    self.step += 1
                    self.history.append(record)
                    if self.step % cfg.log_every == 0 or self.step == cfg.steps:
                        progress.set_postfix(
                            loss=f"{record['loss']:.4f}",
                            lr=f"{record['lr']:.2e}",
                            samples_s=f"{record['examples_per_s']:.1f}",
                        )
                    progress.update(1)
                    if cfg.save_every and self.step % cfg.save_every == 0 and self.step < cfg.steps:
                        self._save()
                    every = self.config.evaluation.every
                    if every and self.step % every == 0 and self.step < cfg.steps:
                        self.evaluate()
        finally:
            progress.close()
            self.stop_prefetch()
        self.evaluate()
        self._save()
        self._finish()
        return TrainResult(self.output_dir, self.step, self.history, self.evaluations)

    def _diverged(self, err: Exception) -> None:
        good = list_checkpoints(self.checkpoint_root)
        if self.ctx.is_main:
            self._write_logs()
        where = f"the last good checkpoint is {good[-1]}" if good else "no checkpoint was saved before it"
        raise TrainingDivergedError(
            f"training diverged at step {self.step + 1}: {err}. Nothing from this step was applied or saved; "
            f"{where}. Lower training.lr, set training.max_grad_norm, or use precision: fp32, then resume "
            "with --resume."
        ) from err

    def _finish(self) -> None:
        """Write the final variant into output.dir, with the training summary in its metadata."""
        if self.ctx.is_main:
            self.save_variant(self.output_dir)
        barrier()

    def save_variant(self, directory: str | Path) -> Path:
        """Write the model as it is now as a variant into ``directory``, with the training summary in its metadata,
        the recipe, the metrics, the history and the loss plot: what :meth:`fit` leaves in output.dir at its end.
        A caller that stops a run on its own terms (a time budget) can write one whenever it likes."""
        directory = Path(directory)
        cfg = self.config
        model = self.model
        original = model.config.model_copy(deep=True)
        if cfg.output.default_task is not None:
            model.config.default_task = cfg.output.default_task
        # The prefix sizes this run trained; sizes a continued variant had but this run did not train are dropped.
        model.config.matryoshka_dims = cfg.objective.prefix_sizes()
        # What the variant this run continued measured or was made of describes those weights, not these: a
        # card would publish its dev scores as this variant's. Its name stays, as where this one came from.
        parent = model.config.unmeasured_metadata()
        parent.pop("soup_of", None)
        if cfg.model.variant is not None:
            parent["continued_from"] = Path(cfg.model.variant).name
        model.config.metadata = {
            **parent,
            "trained": True,
            "training": {
                "steps": self.step,
                "datasets": sorted(self.groups),
                "batch_size": cfg.training.batch_size * self.ctx.world_size,
                "precision": self.precision,
                "final_loss": self.history[-1]["loss"] if self.history else None,
                "evaluations": self.evaluations,
            },
        }
        try:
            model.save_pretrained(directory)
        finally:
            model.config = original
        import yaml

        (directory / CONFIG_COPY).write_text(
            yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False), encoding="utf-8"
        )
        (directory / METRICS_FILE).write_text(
            json.dumps({"evaluations": self.evaluations}, indent=2) + "\n", encoding="utf-8"
        )
        self._write_logs(directory)
        return directory


def train(
    config: TrainConfig,
    *,
    resume: bool | str | Path = False,
    evaluators: Sequence[Evaluator] = (),
    callbacks: Sequence[Callback] = (),
) -> TrainResult:
    """Run a whole training as configured; return its history. See :class:`Trainer`."""
    trainer = Trainer(config, evaluators=evaluators, callbacks=callbacks)
    trainer.setup(resume=resume)
    return trainer.fit()
