"""The gate's scores kept between runs, so that a model already scored on the same data is not scored again.

An ``adapt`` run scores two models, its start and its candidate, and scoring one takes minutes on a CPU. The start
is the same model in every run from it: a re-run on the same folder (with another ``--steps``, say) finds all its
scores, a run on another folder its STS-B dev score. A re-run with other gate settings, or of a run cut short in
the gate, finds the candidate's too.

Each part of a model's scores (the held-out queries, STS-B dev, the user's questions) is a JSON file under
``$C2V_RAG_GATE_CACHE`` (else ``$C2V_RAG_CACHE/adapt-gate``; ``0`` turns it off), named by a sha256 of everything
that decides it: the model as loaded (its own weights, its adapters' settings, the contents of its base models, its
config, device, dtype and quantization), the data and how it is read, the code that scores (a digest of c2v_rag's
own source files, so that an edited checkout does not reuse the scores of the code before) and the versions of the
libraries that compute vectors (torch, transformers, tokenizers, onnxruntime). A model on a hub-id base that was not
loaded from the local Hugging Face cache has no digest of its base weights, so it is always scored afresh.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from c2v_rag.core.cache import cache_folder, keep_text

logger = logging.getLogger(__name__)

FOLDER = "adapt-gate"
ENV_SWITCH = "C2V_RAG_GATE_CACHE"


def digest(value: Any) -> str:
    """A sha256 of ``value`` as canonical JSON (sorted keys): the same data, the same digest."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def file_digest(path: Path) -> str:
    """A sha256 of a file's bytes."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@functools.cache
def source_digest(root: Path | None = None) -> str:
    """A sha256 of the Python files (names and bytes) under ``root``, by default c2v_rag's own: read once per
    process, in a few milliseconds."""
    if root is None:
        root = Path(__file__).resolve().parents[2]  # c2v_rag/training/adapt/score_cache.py -> c2v_rag
    hashed = hashlib.sha256()
    for file in sorted(root.rglob("*.py")):
        hashed.update(f"\n{file.relative_to(root).as_posix()}\n".encode())
        hashed.update(file.read_bytes())
    return hashed.hexdigest()


def model_key(model: Any) -> str | None:
    """What decides a loaded model's vectors, as a digest; None where its base weights have no digest (a hub id
    loaded from elsewhere than the local Hugging Face cache)."""
    import torch

    from c2v_rag.hub.sources import distribution_version
    from c2v_rag.hub.variants import VariantDigests
    from c2v_rag.version import __version__

    digests = VariantDigests.of_model(model)
    if digests.bases is None:
        return None
    return digest(
        {
            "config": model.config.model_dump(mode="json"),
            "weights": digests.weights,
            "adapters": digests.adapters,
            "bases": digests.bases,
            "device": str(model.device),
            "dtype": str(model.dtype),
            "quantization": model.quantization,
            "versions": {
                "c2v_rag": __version__,
                "c2v_rag source": source_digest(),
                "torch": torch.__version__,
                **{name: distribution_version(name) for name in ("transformers", "tokenizers", "onnxruntime")},
            },
        }
    )


class ScoreCache:
    """Scores by model and part, in the folder ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.reused: list[str] = []
        """The parts taken from the cache in this run, as ``'<model name>: <part>'``."""

    @classmethod
    def from_environment(cls) -> ScoreCache | None:
        """The cache in ``$C2V_RAG_GATE_CACHE`` when it names a folder, else ``$C2V_RAG_CACHE/adapt-gate`` (else the
        user cache dir's); None when it is ``0`` (or ``off``, ``false``, ``no``)."""
        folder = cache_folder(FOLDER, ENV_SWITCH)
        return None if folder is None else cls(folder)

    def scores(
        self, model: Any, name: str, part: str, inputs: dict[str, Any], compute: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        """``part``'s scores of ``model`` (called ``name`` in :attr:`reused`) on ``inputs`` (what the part reads
        besides the model, as JSON): kept ones when there are, else ``compute()``'s, kept for the next run."""
        key = model_key(model)
        if key is None:
            return compute()
        slug = "-".join(part.lower().split())
        path = self.root / f"{slug}-{digest({'model': key, 'part': part, 'inputs': inputs})[:32]}.json"
        kept = self._read(path)
        if kept is not None:
            logger.info("%s: %s scores reused from an earlier run (%s)", name, part, path)
            self.reused.append(f"{name}: {part}")
            return kept
        scores = compute()
        self._write(path, scores)
        return scores

    @staticmethod
    def _read(path: Path) -> dict[str, Any] | None:
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:  # a torn or foreign file: score again, and overwrite it
            logger.debug("ignoring the unreadable kept scores %s: %s", path, err)
            return None
        return value if isinstance(value, dict) else None

    @staticmethod
    def _write(path: Path, scores: dict[str, Any]) -> None:
        # a read-only cache costs the next run minutes, not this one its result
        failed = keep_text(path, json.dumps(scores, sort_keys=True) + "\n")
        if failed is not None:
            logger.warning("could not keep the gate's scores in %s (%s): the next run scores it again", path, failed)
