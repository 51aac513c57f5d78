"""Checkpoints: the variant so far, optimizer, scheduler and RNG state, without pickles.

A checkpoint directory ``step-000200/`` holds::

    variant/                 a loadable variant (Causal2Vec.from_pretrained works on it)
    trainable.safetensors    every trainable parameter by name, in its training dtype (exact resume)
    optimizer.safetensors    the optimizer's per-parameter tensors
    rng.safetensors          torch (and CUDA) generator states, numpy's key
    trainer_state.json       step, scheduler, optimizer hyper-parameters, python/numpy RNG scalars, log

Tensors go to safetensors and scalars to JSON; nothing is unpickled on resume.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

STATE_FILE = "trainer_state.json"
TRAINABLE_FILE = "trainable.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
RNG_FILE = "rng.safetensors"
VARIANT_DIR = "variant"


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete, or does not fit the run resuming from it."""


def checkpoint_name(step: int) -> str:
    return f"step-{step:06d}"


def list_checkpoints(root: Path) -> list[Path]:
    """Complete checkpoints under ``root``, oldest first (an interrupted save is not complete)."""
    if not root.is_dir():
        return []
    found = [p for p in root.glob("step-*") if (p / STATE_FILE).is_file()]
    return sorted(found, key=lambda p: p.name)


# -------------------------------------------------------------------------------------------- tensors


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().cpu().contiguous() for n, p in model.named_parameters() if p.requires_grad}


def frozen_weights_digest(model: torch.nn.Module, samples: int = 1024) -> str:
    """A digest of the frozen (base) weights, which a checkpoint does not hold.

    A checkpoint restores only the trainable tensors; the frozen ones come from the model paths again. If a path
    now holds other weights, a resumed run would go on from a mix of two models: this digest tells them apart.
    Up to ``samples`` evenly spaced values per tensor are hashed, so it costs milliseconds even for large models.
    """
    import hashlib

    digest = hashlib.sha256()
    for name, param in sorted(model.named_parameters(), key=lambda item: item[0]):
        if param.requires_grad:
            continue
        flat = param.detach().reshape(-1)
        sample = flat[:: max(1, flat.numel() // samples)][:samples].float().cpu().contiguous()
        digest.update(f"{name}:{tuple(param.shape)}:{param.dtype}".encode())
        digest.update(sample.numpy().tobytes())
    return digest.hexdigest()[:16]


def load_trainable_state(model: torch.nn.Module, path: Path) -> None:
    state = load_file(str(path))
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    if set(state) != set(params):
        missing, unexpected = sorted(set(params) - set(state)), sorted(set(state) - set(params))
        raise CheckpointError(
            f"{path} does not match the model being trained (missing {missing[:3]}, unexpected "
            f"{unexpected[:3]}): the recipe's model or LoRA settings changed since the checkpoint"
        )
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(state[name].to(param.dtype))


def optimizer_state(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Split ``optimizer.state_dict()`` into tensors (for safetensors) and JSON scalars."""
    sd = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}
    for index, values in sd["state"].items():
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{index}.{key}"] = value.detach().cpu().contiguous()
            else:
                scalars[f"{index}.{key}"] = value
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def restore_optimizer(optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    state: dict[int, dict[str, Any]] = {}
    for name, value in tensors.items():
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = value
    for name, value in meta["scalars"].items():
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = value
    groups = meta["param_groups"]
    for group in groups:
        if "betas" in group:
            group["betas"] = tuple(group["betas"])
    try:
        optimizer.load_state_dict({"state": state, "param_groups": groups})
    except (ValueError, KeyError) as err:
        raise CheckpointError(f"the optimizer state does not fit the model being trained: {err}") from err


def rng_state() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    tensors = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"cuda.{i}"] = s
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    tensors["numpy.keys"] = torch.from_numpy(np.asarray(keys, dtype=np.int64))
    version, internal, gauss = random.getstate()
    scalars = {"numpy": [kind, int(pos), int(has_gauss), float(cached)], "python": [version, list(internal), gauss]}
    return tensors, scalars


def restore_rng(tensors: dict[str, torch.Tensor], scalars: dict[str, Any]) -> None:
    torch.set_rng_state(tensors["torch"])
    cuda = [tensors[k] for k in sorted(k for k in tensors if k.startswith("cuda."))]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)
    kind, pos, has_gauss, cached = scalars["numpy"]
    np.random.set_state((kind, tensors["numpy.keys"].numpy().astype(np.uint32), pos, has_gauss, cached))
    version, internal, gauss = scalars["python"]
    random.setstate((version, tuple(internal), gauss))


# -------------------------------------------------------------------------------------------- save / load


def save_checkpoint(
    directory: Path, *, model, optimizer: torch.optim.Optimizer, scheduler, step: int, extra: dict[str, Any]
) -> Path:
    """Write a checkpoint atomically: into a temporary sibling, renamed once complete."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    model.save_pretrained(tmp / VARIANT_DIR)
    save_file(trainable_state(model), str(tmp / TRAINABLE_FILE))
    opt_tensors, opt_meta = optimizer_state(optimizer)
    save_file(opt_tensors, str(tmp / OPTIMIZER_FILE))
    rng_tensors, rng_scalars = rng_state()
    save_file(rng_tensors, str(tmp / RNG_FILE))
    state = {"step": step, "optimizer": opt_meta, "scheduler": scheduler.state_dict(), "rng": rng_scalars, **extra}
    (tmp / STATE_FILE).write_text(json.dumps(state), encoding="utf-8")
    if directory.exists():
        shutil.rmtree(directory)
    os.replace(tmp, directory)
    return directory


def load_checkpoint(directory: Path, *, model, optimizer, scheduler) -> dict[str, Any]:
    """Restore model weights, optimizer, scheduler and RNG from ``directory``; return its state."""
    for name in (STATE_FILE, TRAINABLE_FILE, OPTIMIZER_FILE, RNG_FILE):
        if not (directory / name).is_file():
            raise CheckpointError(f"{directory / name} is missing: {directory} is not a complete checkpoint")
    state = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
    load_trainable_state(model, directory / TRAINABLE_FILE)
    restore_optimizer(optimizer, load_file(str(directory / OPTIMIZER_FILE)), state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    restore_rng(load_file(str(directory / RNG_FILE)), state["rng"])
    return state


def prune_checkpoints(root: Path, keep: int) -> None:
    for old in list_checkpoints(root)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
