"""The settings of ``c2v-rag adapt``: what to start from, how pairs are made, how long to train, and the gate."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from c2v_rag.documents.files import FileSelection
from c2v_rag.training.pseudo.config import PseudoPairsConfig

DEFAULT_START = "c2v-smollm2-135m-minilm"


class AdaptTraining(BaseModel):
    """How the variant is trained. ``parts``: ``encoder`` trains LoRA on the encoder against the encoder's part of
    the embedding alone (no decoder pass: the CPU default); ``decoder`` LoRA on the decoder against the whole
    vector; ``both``."""

    model_config = ConfigDict(extra="forbid")

    parts: Literal["encoder", "decoder", "both"] = "encoder"
    steps: int = Field(150, ge=1)
    batch_size: int = Field(16, ge=2)
    lr: float = Field(1e-4, gt=0)
    lora_r: int = Field(16, ge=1)
    lora_alpha: float = Field(32.0, gt=0)
    general_share: float = Field(
        0.3, ge=0, lt=1, description="share of the batches drawn from the general data (STS-B, NLI), against drift"
    )
    hard_negatives: int = Field(1, ge=0)
    margin: float | None = Field(0.05, ge=0, description="mining: drop candidates scored within this of the positive")
    precision: Literal["auto", "fp32", "bf16", "bf16-autocast"] = "auto"
    encoder_attention_dropout: float | None = Field(
        0.0,
        ge=0,
        lt=1,
        description="the encoder's dropout on attention probabilities while training; None keeps the start's (0.1 "
        "for MiniLM). At 0 a CPU step runs PyTorch's fused attention: less time and memory, the same scores on real "
        "questions in our tests (docs/adapt.md, 'What it costs')",
    )
    seed: int = 0
    device: str | None = None


GateSource = Literal["crop", "heading", "generated"]


class AdaptGate(BaseModel):
    """What the variant must show to be kept, and STS-B dev within ``sts_tolerance`` of its start.

    Your ``questions`` decide: a clear gain of their MRR@10, searched among ``questions_corpus_size`` chunks (all of
    them, up to that), by a paired bootstrap over the questions: the ``confidence`` interval of the difference must
    lie above ``min_gain``, and a one-sided sign test over the questions that moved must reach the interval's level
    ((1 - confidence) / 2). Anything less is not kept.

    Without them, no variant is kept unless ``evidence`` names held-out pseudo-query sources (the LLM's questions,
    headings), which then decide by the same test on their nDCG@10, over at least ``min_items`` queries. That is
    off by default: variants those queries favoured clearly lost on real questions (bench/results/adapt/README.md,
    "Both ways on the man pages", and the runs after it). The held-out scores are reported either way."""

    model_config = ConfigDict(extra="forbid")

    sts_tolerance: float = Field(0.005, ge=0)
    min_gain: float = Field(
        0.0,
        description="the gain the variant must show: the lower end of the evidence's interval above this (the "
        "held-out queries' nDCG@10, or your questions' MRR@10). Below 0 it is a tolerated loss, and the sign test "
        "is off",
    )
    evidence: list[GateSource] = Field(
        default_factory=list,
        description="held-out pseudo-query sources whose nDCG@10 may keep a variant when you give no questions, "
        "e.g. [generated, heading]; none by default, so that without your questions nothing is kept: on the man "
        "pages, variants kept on the LLM's questions and headings lost on real questions (docs/adapt.md, 'How the "
        "gate decides'). Crops rose most for a SciFact variant that lost on real claims",
    )
    confidence: float = Field(0.95, gt=0.5, lt=1, description="coverage of the paired bootstrap interval")
    min_items: int = Field(
        30, ge=1, description="held-out queries of the evidence sources needed to judge at all: fewer is not kept"
    )
    resamples: int = Field(10_000, ge=100, description="bootstrap resamples of the evidence's queries")
    corpus_size: int = Field(
        500,
        ge=10,
        description="chunks the held-out queries are scored against: their own, each query's BM25 top 10, then "
        "random ones (each costs an encoding per model)",
    )
    questions_corpus_size: int = Field(
        5_000,
        ge=10,
        description="chunks your questions (``questions``) are searched among: every chunk of your documents when "
        "they have at most this many, as your searches of the collection will, else every chunk of the documents "
        "that answer them, each question's BM25 top 10, then random ones. Each chunk costs an encoding per model; "
        "a smaller set ranks fewer chunks above an answer and hides gains and losses",
    )
    sts_limit: int | None = Field(None, ge=10, description="STS-B dev pairs scored (default: all 1,500)")
    quantize: Literal["auto", "none", "int8"] | None = Field(
        None,
        description="how the gate embeds both models: None as an ingest into a new collection embeds its chunks "
        "(int8 on the CPUs where that is the default, with the int8 extra; $C2V_RAG_QUANTIZE), so that it scores "
        "the vectors search will use; 'none' float, 'int8', 'auto'",
    )
    reuse_scores: bool = Field(
        True,
        description="take a model's scores from an earlier run that scored it on the same data (kept under "
        "$C2V_RAG_CACHE/adapt-gate, or $C2V_RAG_GATE_CACHE) instead of scoring it again: the start's STS-B dev "
        "score on every run after the first, and both models' scores on a re-run with other settings",
    )
    questions: str | None = Field(
        None,
        description="a JSONL file of your own questions, each {'query': ..., 'doc_ids': [...]} naming the documents "
        "that answer it: the gate then decides on their MRR@10 (searched among questions_corpus_size chunks) "
        "instead of the held-out pseudo-queries "
        "(c2v_rag.training.adapt.questions)",
    )

    @property
    def heldout_decides(self) -> bool:
        """Whether the held-out pseudo-queries decide: ``evidence`` names their sources and no ``questions`` do."""
        return self.questions is None and bool(self.evidence)


class AdaptConfig(FileSelection):
    """Everything ``adapt`` does, as configuration (``c2v-rag adapt --config FILE`` reads it from YAML)."""

    model_config = ConfigDict(extra="forbid")

    start: str = Field(DEFAULT_START, description="the variant or preset to adapt (--from)")
    task: str | None = Field(None, description="the query task (instruction); default: the start's default task")
    pairs: PseudoPairsConfig = Field(default_factory=PseudoPairsConfig)
    training: AdaptTraining = Field(default_factory=AdaptTraining)
    gate: AdaptGate = Field(default_factory=AdaptGate)
    general_data: str | None = Field(
        None,
        description="a folder with STS-B (and NLI) to mix in and check at the gate; None: $C2V_RAG_GENERAL_DATA, else "
        "the hub; 'none': no general data (every batch the documents', no STS-B check)",
    )
    overwrite: bool = False
