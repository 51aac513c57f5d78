"""The training configuration: one pydantic model, read from YAML, validated before any weight loads.

Defaults follow the paper's recipe for small (1.3B/1.5B) decoders (Appendix A.1, Table 7): LoRA
rank 64 and alpha 128 on the decoder, LoRA on the bidirectional encoder, the projector trained in
full, InfoNCE with tau = 0.05, AdamW at lr 1e-4 with 300 warmup steps then a linear decay over a
schedule twice as long as the training, bf16, gradient checkpointing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from c2v_rag.core.config import READOUT_FIELDS
from c2v_rag.training.objectives.registry import ObjectiveConfig, objective_config
from c2v_rag.training.pseudo.config import PseudoPairsConfig

DatasetFormat = Literal["jsonl", "beir", "pairs_tsv", "triplets_tsv", "labelled", "scored_pairs", "corpus"]
Precision = Literal["auto", "fp32", "bf16", "bf16-autocast"]
"""How training computes:

- ``fp32``: everything in float32;
- ``bf16``: frozen backbone weights stored in bf16, trainable weights (LoRA, projector) kept in
  float32, matmuls under bf16 autocast (the fastest on CPUs with native bf16, and half the memory);
- ``bf16-autocast``: float32 weights everywhere, matmuls under bf16 autocast;
- ``auto``: ``bf16`` on CUDA with bf16 and on CPUs with native bf16 matmuls, else ``fp32``.
"""

# Every linear projection of Llama/Mistral/Qwen2/Gemma decoder layers, as in LLM2Vec and Causal2Vec.
DECODER_LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# BERT's attention and feed-forward projections ("output.dense" also matches "attention.output.dense");
# the pooler's dense layer is left out: its output is unused, and a parameter without a gradient
# breaks DDP.
ENCODER_LORA_TARGETS = ["query", "key", "value", "intermediate.dense", "output.dense"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoraSection(_Section):
    """A LoRA adapter (peft). ``target_modules`` are module-name suffixes, or ``"all-linear"``."""

    enabled: bool = True
    r: int = Field(64, ge=1)
    alpha: float = Field(128, gt=0)
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] | Literal["all-linear"] | None = None


# model.config's field that cuts a continued variant's decoder to some of its layers (Causal2VecConfig's own name)
_KEPT_LAYERS = "decoder_layers"


class ModelSection(_Section):
    """Where the model to train comes from.

    Either ``variant`` (a variant directory or preset to continue from; its adapters are kept
    trainable) or ``decoder`` + ``encoder`` (base models for a fresh variant). ``config`` holds
    :class:`~c2v_rag.Causal2VecConfig` fields for a fresh variant (``max_length``,
    ``representation``...); a continued variant takes only :data:`READOUT_FIELDS`, and ``decoder_layers`` to run
    fewer of its decoder's layers (a shallower variant, trained from the deeper one).
    """

    variant: str | None = None
    decoder: str | None = None
    encoder: str | None = "all-minilm-l6-v2"
    config: dict[str, Any] = Field(default_factory=dict)
    max_length: int | None = Field(
        None, ge=8, description="decoder length bound while training (overrides the variant's)"
    )
    projector_seed: int = 0
    projector_scale: Literal["default", "word_embeddings"] = Field(
        "default",
        description=(
            "a fresh projector's output scale: torch's default init, or rescaled so that C starts at the "
            "mean norm of the decoder's word embeddings (the decoder then sees C from the first step)"
        ),
    )

    @model_validator(mode="after")
    def _one_source(self) -> ModelSection:
        for reserved in ("dtype", "decoder", "encoder"):
            if reserved in self.config:
                where = "training.precision" if reserved == "dtype" else f"model.{reserved}"
                raise ValueError(f"model.config.{reserved} is not allowed here: set {where} instead")
        if (self.variant is None) == (self.decoder is None):
            raise ValueError(
                "model: set either 'variant' (continue training a variant directory or preset) or "
                "'decoder' (+ 'encoder') to build a fresh variant, not both and not neither"
            )
        fixed = sorted(set(self.config) - set(READOUT_FIELDS) - {_KEPT_LAYERS})
        if self.variant is not None and fixed:
            # A variant brings its own configuration; silently dropping these fields would train something else.
            raise ValueError(
                f"model.config {fixed} cannot change a variant ('{self.variant}'): its configuration is saved "
                f"with it; only the readout fields {list(READOUT_FIELDS)} and decoder_layers (to drop layers) may "
                "change when continuing one. Remove the others, or build a fresh variant from 'decoder'"
            )
        return self

    def readout_changes(self) -> dict[str, Any]:
        """The readout fields ``config`` sets on a continued variant (:data:`READOUT_FIELDS`), for ``set_readout``."""
        return {name: value for name, value in self.config.items() if name != _KEPT_LAYERS}

    @property
    def kept_decoder_layers(self) -> list[int] | None:
        """The decoder layers a continued variant keeps (``config.decoder_layers``); None keeps them all."""
        return self.config.get(_KEPT_LAYERS)


class DatasetSection(_Section):
    """One training dataset. Each batch is drawn from a single dataset.

    Formats and their ``path``:

    - ``jsonl``: records ``{query, positive, negatives?, instruction? | task?, dataset?}``;
    - ``beir``: a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``);
    - ``pairs_tsv`` / ``triplets_tsv``: ``query<TAB>positive[<TAB>negative...]`` lines;
    - ``labelled``: ``text<sep>label`` lines; pairs are drawn from texts that share a label;
    - ``scored_pairs``: sentence pairs with a similarity score (STS-B layout: columns ``sentence1``,
      ``sentence2``, ``score``); pairs scoring at least ``min_score`` become positives, or, with
      ``loss: cosent``, every pair keeps its score and the batch learns to rank the pairs' cosines
      in the order of their scores (CoSENT);
    - ``corpus``: documents alone (whatever ``ingest`` reads: a folder, files, JSONL). Pseudo-pairs are made from
      them as the ``pseudo_pairs`` block says (crops, headings, LLM questions; see
      :class:`~c2v_rag.training.pseudo.config.PseudoPairsConfig`) and kept as a BEIR folder at ``pairs_dir``
      (default: ``<output.dir>/pairs/<name>``), which a later run with the same documents and settings reuses.

    ``task`` names a registered task (its instruction and whether it is symmetric); ``instruction``
    gives a literal one, with ``symmetric`` saying whether passages get it too.
    """

    name: str | None = None
    format: DatasetFormat
    path: str
    task: str | None = None
    instruction: str | None = None
    symmetric: bool | None = None
    # Formats with columns.
    has_header: bool | None = None
    delimiter: str | None = None
    text_column: str | int | None = None
    label_column: str | int | None = None
    pair_columns: tuple[str | int, str | int] | None = None
    score_column: str | int | None = None
    min_score: float | None = Field(None, description="scored_pairs: lowest score that counts as a positive pair")
    # BEIR.
    split: str = "train"
    # Labelled text: how many (anchor, positive) pairs to draw.
    num_pairs: int | None = Field(None, ge=1)
    limit: int | None = Field(None, ge=1, description="use at most this many examples (after the dev split)")
    dev_fraction: float = Field(0.0, ge=0, lt=1, description="share of queries held out of training, by query")
    dev_seed: int = 0
    weight: float = Field(1.0, gt=0, description="relative share of this dataset's batches")
    icl_examples: int = Field(
        0,
        ge=0,
        description="Causal2Vec w/ ICL (bge-en-icl's training): each query gets a random number, 0 to "
        "this many, of in-context (query, positive) examples drawn from this dataset's other "
        "examples; queries without an instruction get none. 0: off",
    )
    hard_negatives: int | None = Field(None, ge=0, description="overrides training.hard_negatives")
    pseudo_pairs: PseudoPairsConfig | None = Field(None, description="format corpus: how pairs are made")
    pairs_dir: str | None = Field(None, description="format corpus: where the pairs made are kept")
    loss: Literal["info_nce", "cosent"] = Field(
        "info_nce",
        description="info_nce: positives against in-batch and hard negatives; cosent (scored_pairs only): "
        "order the batch's pair cosines like their gold scores, so graded similarity is learned "
        "rather than only near-paraphrases",
    )

    @model_validator(mode="after")
    def _check(self) -> DatasetSection:
        if self.format != "corpus" and (self.pseudo_pairs is not None or self.pairs_dir is not None):
            raise ValueError(
                f"dataset {self.path!r}: 'pseudo_pairs' and 'pairs_dir' apply to format 'corpus' only, "
                f"not {self.format!r}"
            )
        if self.task is not None and self.instruction is not None:
            raise ValueError(f"dataset {self.path!r}: set 'task' or 'instruction', not both")
        if self.loss == "cosent":
            if self.format != "scored_pairs":
                raise ValueError(
                    f"dataset {self.path!r}: loss 'cosent' needs scored pairs (format: scored_pairs), "
                    f"not format {self.format!r}; use loss 'info_nce' there"
                )
            if self.min_score is not None:
                raise ValueError(
                    f"dataset {self.path!r}: loss 'cosent' learns from every score, so 'min_score' "
                    "does not apply; remove it"
                )
            if self.hard_negatives:
                raise ValueError(
                    f"dataset {self.path!r}: loss 'cosent' compares the batch's pairs with each "
                    "other and takes no hard negatives; remove 'hard_negatives'"
                )
        elif self.format == "scored_pairs" and self.min_score is None:
            raise ValueError(
                f"dataset {self.path!r}: a scored_pairs dataset needs 'min_score', the lowest score that makes "
                "a positive pair (STS-B scores run 0-5; 4.0 keeps near-paraphrases)"
            )
        return self

    @property
    def display_name(self) -> str:
        return self.name or Path(self.path).stem


class MiningSection(_Section):
    """Hard-negative mining, run before training for datasets whose examples lack negatives.

    ``method``: ``bm25`` (bm25s over the dataset's passage pool) or ``model`` (the model being
    trained, before training). Negatives come from ranks ``skip_top`` to ``skip_top + depth`` of
    the ranking, never a known positive of the query.
    """

    method: Literal["none", "bm25", "model"] = "none"
    num_negatives: int = Field(1, ge=1)
    depth: int = Field(30, ge=1)
    skip_top: int = Field(0, ge=0, description="skip the very top ranks, where unlabelled positives hide")
    margin: float | None = Field(
        None,
        ge=0,
        description="drop a candidate whose cosine to the query (by the model before training) is above the "
        "positive's minus this margin: it is likely an unlabelled positive (sentence-transformers' absolute_margin)",
    )
    datasets: list[str] | None = Field(None, description="dataset names to mine for (default: those without negatives)")
    seed: int = 0


class EvaluationSection(_Section):
    """Held-out evaluation during training (before the first step, every ``every`` steps, at the end)."""

    every: int = Field(0, ge=0, description="0: only before and after training")
    sts_path: str | None = Field(None, description="an STS-B style TSV (score in column 'score', texts in sentence1/2)")
    sts_limit: int | None = Field(None, ge=1)
    sts_task: str = "STSBenchmark"
    retrieval_dataset: str | None = Field(None, description="name of a BEIR dataset whose dev split to score")
    retrieval_corpus_limit: int | None = Field(
        None, ge=1, description="score against the dev positives plus this many other documents (default: all)"
    )
    retrieval_max_length: int | None = Field(None, ge=8, description="decoder length bound when encoding the corpus")
    batch_size: int = Field(64, ge=1)


class TrainingSection(_Section):
    steps: int = Field(2000, ge=1)
    batch_size: int = Field(128, ge=1, description="queries per step on each process")
    mini_batch_size: int | None = Field(
        None,
        ge=1,
        description="texts per forward pass with gradient caching (GradCache); None embeds a step in one pass",
    )
    hard_negatives: int = Field(1, ge=0, description="hard negatives per query (where the data has them)")
    temperature: float = Field(0.05, gt=0)
    lr: float = Field(1e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    warmup_steps: int = Field(300, ge=0)
    schedule_steps: int | None = Field(None, ge=1, description="length of the linear schedule (default: 2 x steps)")
    max_grad_norm: float | None = Field(None, gt=0)
    precision: Precision = "auto"
    gradient_checkpointing: bool = True
    encoder_attention_dropout: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="the encoder's dropout on attention probabilities while training (BERT-style encoders: 0.1); "
        "None keeps the base model's. At 0, PyTorch's fused attention runs on CPU: less memory and time a step",
    )
    prefetch_workers: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        "auto",
        description=(
            "worker processes that tokenize the next steps while this one trains (torch DataLoader workers, "
            "one thread each); 0 prepares each step in the training process, between steps. 'auto': 0 on a CPU "
            "(workers would take the cores the forward uses), min(8, usable cores - 2) on a GPU. Objectives "
            "other than contrastive prepare their steps in the training process whatever this says"
        ),
    )
    prefetch_depth: int = Field(2, ge=1, description="steps each prefetch worker prepares ahead")
    seed: int = 42
    save_every: int = Field(200, ge=0, description="checkpoint every N steps (0: only at the end)")
    keep_checkpoints: int = Field(2, ge=1, description="how many recent checkpoints to keep")
    log_every: int = Field(1, ge=1)
    device: str | None = None
    progress_bar: bool = True

    @property
    def total_schedule_steps(self) -> int:
        return self.schedule_steps or 2 * self.steps


class OutputSection(_Section):
    dir: str
    default_task: str | None = Field(None, description="written into the variant: the task queries get by default")
    overwrite: bool = False


class TrainConfig(_Section):
    """The whole run, as read from a YAML recipe (see ``recipes/``)."""

    model: ModelSection
    lora: LoraSection = Field(default_factory=LoraSection)
    encoder_lora: LoraSection = Field(default_factory=lambda: LoraSection(r=64, alpha=128))
    train_projector: bool = True
    # What the run optimises: the config of one objective, picked by objective.kind (c2v_rag.training.objectives).
    objective: ObjectiveConfig = Field(default_factory=objective_config)
    datasets: list[DatasetSection] = Field(min_length=1)
    mining: MiningSection = Field(default_factory=MiningSection)
    evaluation: EvaluationSection = Field(default_factory=EvaluationSection)
    training: TrainingSection = Field(default_factory=TrainingSection)
    output: OutputSection

    @field_validator("datasets")
    @classmethod
    def _unique_names(cls, datasets: list[DatasetSection]) -> list[DatasetSection]:
        names = [d.display_name for d in datasets]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"dataset names must be unique; give 'name:' to tell apart {duplicates}")
        return datasets

    @model_validator(mode="after")
    def _check(self) -> TrainConfig:
        ev = self.evaluation
        if ev.retrieval_dataset is not None:
            match = [d for d in self.datasets if d.display_name == ev.retrieval_dataset]
            if not match or match[0].format != "beir" or match[0].dev_fraction <= 0:
                raise ValueError(
                    f"evaluation.retrieval_dataset={ev.retrieval_dataset!r} must name a 'beir' dataset "
                    "with dev_fraction > 0 (its held-out queries are the dev set)"
                )
        return self


# The recipes of a source checkout (what `pip install -e .` installs from); a wheel does not hold them.
RECIPES_DIR = Path(__file__).resolve().parents[2] / "recipes"


def recipe_path(name_or_path: str | Path) -> Path:
    """The recipe file ``name_or_path`` names: a path, or the name of one in :data:`RECIPES_DIR`
    (``llm2vec_mntp`` for ``recipes/llm2vec_mntp.yaml``, as torchtune names its configs)."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    named = RECIPES_DIR / f"{path.name}.yaml"
    if len(path.parts) == 1 and not path.suffix and named.is_file():
        return named
    recipes = sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))
    where = (
        f"; name one of the recipes in {RECIPES_DIR} ({', '.join(recipes)}), or give a recipe file's path"
        if recipes
        else "; give a recipe file's path (the recipes ship in the source repository's recipes/ folder)"
    )
    raise FileNotFoundError(f"training config {name_or_path} does not exist{where}")


def load_config(path: str | Path, overrides: list[str] | None = None, data: list[str] | None = None) -> TrainConfig:
    """Read a YAML recipe (a path, or a recipe's name: :func:`recipe_path`), point it at ``data`` when given, apply
    ``key.sub=value`` overrides, and validate it.

    ``data`` (``--data`` on the command line) replaces the recipe's datasets with one per path, its format read
    from the path (:func:`c2v_rag.training.user_data.replace_datasets`); overrides apply after it, so
    ``datasets.0.task=...`` sets the first of them. Relative paths in the recipe stay relative to the working
    directory, so recipes can name data with a path passed on the command line instead (``datasets.0.path=...``).
    """
    import yaml

    path = recipe_path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ValueError(f"{path} is not valid YAML: {err}") from err
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must hold a mapping at the top level (model:, datasets:, output:...)")
    if data:
        from c2v_rag.training.user_data import replace_datasets

        replace_datasets(raw, list(data))
    for override in overrides or []:
        apply_override(raw, override)
    return TrainConfig.model_validate(raw)


def apply_override(raw: dict, override: str) -> None:
    """Set ``a.b.0.c=value`` in a nested dict/list; the value is parsed as YAML (numbers, null...)."""
    import yaml

    if "=" not in override:
        raise ValueError(f"override {override!r} must look like key.sub=value")
    key, value = override.split("=", 1)
    parts = key.strip().split(".")
    node: Any = raw
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            try:
                index = int(part)
                node[index]
            except (ValueError, IndexError):
                raise ValueError(f"override {override!r}: {part!r} is not an index of a list of {len(node)}") from None
            if last:
                node[index] = yaml.safe_load(value)
            else:
                node = node[index]
        else:
            if last:
                node[part] = yaml.safe_load(value)
            else:
                node = node.setdefault(part, {})
