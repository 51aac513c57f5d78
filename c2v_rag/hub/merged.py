"""A cache of variants' backbones with their LoRA adapters merged in, read instead of merging at every load.

Loading a variant with ``merge_adapters=True`` merges each adapter into its base weights through peft:
importing peft and computing ``W + s * B @ A`` for every adapted matrix takes seconds on a CPU, every time
a process loads the model (every ``c2v-rag search``). The merged backbone is saved once, in Hugging Face
layout (``config.json``, ``model.safetensors``), under ``$C2V_RAG_CACHE/merged`` (else the user cache
directory), and later loads read it in place of the base model: the same tensors, bit for bit, so the
same vectors.

An entry is named by a digest of everything its tensors depend on: the variant's own weights
(:func:`~c2v_rag.hub.variants.weights_digest`, which covers the adapters' weights), the adapter's config (its
scaling and target modules), the base model's contents (:meth:`~c2v_rag.hub.sources.ResolvedSource.content_digest`,
not its path: a cache copied or restored elsewhere, or a base reinstalled in a new environment, finds its entries),
the backbone's role,
the dtype and device type the merge ran in, and the versions of c2v_rag, torch, transformers and peft.
Changing any of them names another entry, so a stale one is never read; the least recently used entries
are removed once the cache outgrows :data:`MAX_CACHE_BYTES`. A base that is a hub id (not a local directory)
is not cached: its files are not known before it loads. ``C2V_RAG_MERGED_CACHE=0`` turns the cache off: every
load merges, as without it.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from c2v_rag.core.cache import cache_dir, switched_off
from c2v_rag.hub.sources import (
    ResolvedSource,
    announce_cache_write,
    cache_entry,
    distribution_version,
    evict_least_recent,
    module_bytes,
    quiet_progress_bars,
)
from c2v_rag.version import __version__

if TYPE_CHECKING:
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

# An entry is as large as its base model in the dtype it was merged in: this keeps a few variants and dtypes.
MAX_CACHE_BYTES = 4 << 30


def merged_dir() -> Path | None:
    """Where merged backbones are kept: ``$C2V_RAG_CACHE/merged``, else ``<user cache dir>/c2v_rag/merged``;
    None when ``$C2V_RAG_MERGED_CACHE`` turns the cache off."""
    return None if switched_off("C2V_RAG_MERGED_CACHE") else cache_dir() / "merged"


def merged_key(
    weights_digest: str | None,
    role: str,
    adapter: Path,
    base: ResolvedSource,
    dtype: torch.dtype,
    device: torch.device,
    layers: Sequence[int] | None = None,
) -> str | None:
    """The name of the entry for ``role``'s backbone merged with the variant's ``adapter`` (its folder), or None
    when it cannot be cached (a base on the hub, a variant without weights of its own, an unreadable adapter).
    ``layers`` are the base layers the backbone runs (``decoder_layers``; None: all), which the entry holds alone."""
    if weights_digest is None or not base.is_local:
        return None
    try:
        adapter_config = (adapter / "adapter_config.json").read_bytes()
    except OSError:
        return None  # loading reports it
    contents = base.content_digest()
    if contents is None:
        return None
    digest = hashlib.sha256(adapter_config + b"\0")
    for part in (
        weights_digest,
        role,
        contents,
        str(dtype),
        device.type,
        __version__,
        torch.__version__,
        distribution_version("transformers"),
        distribution_version("peft"),
    ):
        digest.update(part.encode() + b"\0")
    if layers is not None:
        digest.update(("layers:" + ",".join(map(str, layers))).encode() + b"\0")
    return f"{role}-{digest.hexdigest()[:20]}"


def find_merged(key: str | None) -> Path | None:
    """The entry ``key`` when it is complete (written whole, then renamed into place), marked as just used."""
    root = merged_dir()
    if key is None or root is None:
        return None
    entry = root / key
    if not ((entry / "config.json").is_file() and any(entry.glob("*.safetensors"))):
        return None
    try:
        os.utime(entry)  # its last use, for the eviction
    except OSError:
        pass
    return entry


def store_merged(module: PreTrainedModel, key: str | None) -> None:
    """Save ``module`` (a backbone, adapters merged) as the entry ``key``; a cache that cannot be written is
    skipped with a note in the log (the model is loaded all the same)."""
    root = merged_dir()
    if key is None or root is None:
        return
    target = root / key
    try:
        with cache_entry(target, written=lambda: find_merged(key) is not None) as tmp:
            role = key.split("-", 1)[0]
            announce_cache_write(f"caching the {role} with its adapters merged in", root, module_bytes(module))
            with quiet_progress_bars():
                module.save_pretrained(tmp, safe_serialization=True)
        evict_least_recent(root, MAX_CACHE_BYTES, keep=target)
    except OSError as err:
        logger.info("Could not cache the merged %s weights in %s (%s); the next load merges them again", key, root, err)
