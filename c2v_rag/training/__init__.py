"""Fine-tuning Causal2Vec variants (``pip install 'c2v-rag[train]'``).

The paper's recipe by default: LoRA on the decoder (and optionally the encoder), the projector in
full, InfoNCE with tau = 0.05 over in-batch and hard negatives, homogeneous per-dataset batches,
GradCache for large batches, AdamW with warmup and linear decay, bf16, gradient checkpointing,
and multi-process training with negatives gathered across processes. ``objective.kind`` switches
the loss to LLM2Vec's MNTP or SimCSE stages or Anchor's reconstruction stage (``recipes/``).

    from c2v_rag.training import load_config, train
    result = train(load_config("recipes/scifact_nli_cpu.yaml"))
    model = Causal2Vec.from_pretrained(result.output_dir)
"""

from c2v_rag.training.config import DatasetSection, TrainConfig, load_config
from c2v_rag.training.data import Example, LoadedDataset, load_section, write_jsonl
from c2v_rag.training.evaluation import RetrievalEvaluator, STSEvaluator
from c2v_rag.training.gradcache import ContrastiveStep, MultiBatchForward, NonFiniteLossError
from c2v_rag.training.loss import info_nce
from c2v_rag.training.mining import mine_hard_negatives
from c2v_rag.training.objectives.mntp import mntp_loss, mntp_mask
from c2v_rag.training.objectives.reconstruction import reconstruction_loss
from c2v_rag.training.objectives.registry import OBJECTIVES, ObjectiveConfig, build_objective
from c2v_rag.training.objectives.simcse import simcse_pairs
from c2v_rag.training.trainer import Trainer, TrainingDivergedError, TrainResult, build_model, train

__all__ = [
    "TrainConfig",
    "DatasetSection",
    "load_config",
    "Example",
    "LoadedDataset",
    "load_section",
    "write_jsonl",
    "RetrievalEvaluator",
    "STSEvaluator",
    "ContrastiveStep",
    "MultiBatchForward",
    "NonFiniteLossError",
    "info_nce",
    "mine_hard_negatives",
    "OBJECTIVES",
    "ObjectiveConfig",
    "build_objective",
    "mntp_loss",
    "mntp_mask",
    "reconstruction_loss",
    "simcse_pairs",
    "Trainer",
    "TrainResult",
    "TrainingDivergedError",
    "build_model",
    "train",
]
