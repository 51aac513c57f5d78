"""Shared pieces of the benchmarks: SciFact texts, models by name, a vector cache, timing, and peak memory.

Benchmarks run as scripts (``python bench/x.py``), so this folder is on ``sys.path`` and they
import this module as ``common``.
"""

from __future__ import annotations

import hashlib
import os
import random
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


def load_scifact_docs(data: Path, n: int | None) -> list[str]:
    """The first ``n`` SciFact abstracts as BEIR embeds them: ``title + " " + text``."""
    from c2v_rag.evaluation.datasets import read_beir_corpus

    docs = list(read_beir_corpus(data / "scifact").values())
    return docs if n is None else docs[:n]


def load_scifact_queries(data: Path, n: int | None) -> list[str]:
    """The first ``n`` SciFact claims (short: ~20 tokens each)."""
    from c2v_rag.evaluation.datasets import read_beir_queries

    claims = list(read_beir_queries(data / "scifact").values())
    return claims if n is None else claims[:n]


def mixed_texts(data: Path, n_docs: int, n_queries: int, seed: int = 0) -> list[str]:
    """Abstracts and claims shuffled together with a fixed seed.

    The shuffle matters for loops that batch in input order: a batch then mixes 20-token claims
    with 300-token abstracts, as a real mixed request stream does.
    """
    texts = load_scifact_docs(data, n_docs) + load_scifact_queries(data, n_queries)
    random.Random(seed).shuffle(texts)
    return texts


# ------------------------------------------------------------------ memory


def status_kib(field: str, pid: int | str = "self") -> int:
    """A ``/proc/PID/status`` field in KiB (``VmRSS``, ``VmHWM``): this process's, or another's by its pid."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def reset_peak_rss() -> int:
    """Give freed heap back to the OS and reset the kernel's peak-RSS mark; return RSS in KiB.

    Writing 5 to ``/proc/self/clear_refs`` resets ``VmHWM`` (Linux >= 4.0), so the next
    :func:`peak_rss_kib` is the high-water mark of what ran since. ``malloc_trim`` first, so one
    configuration's freed-but-cached heap does not hide the next one's growth.
    """
    from c2v_rag.core.memory import release_freed_memory

    release_freed_memory()
    with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
        f.write("5")
    return status_kib("VmRSS")


def peak_rss_kib() -> int:
    """Peak resident set size (``VmHWM``) in KiB since the last :func:`reset_peak_rss`."""
    return status_kib("VmHWM")


@dataclass
class Measurement:
    """One timed run: wall and CPU seconds, RSS before and at peak (KiB), and what it returned."""

    seconds: float
    cpu_seconds: float
    before_kib: int
    peak_kib: int
    result: Any = None

    @property
    def working_mib(self) -> float:
        return (self.peak_kib - self.before_kib) / 1024


def measure(fn: Callable[[], Any]) -> Measurement:
    """Run ``fn`` once, timing it by the wall clock and by this process's CPU time.

    On a shared machine the wall clock also counts the time other processes held the core; the
    process CPU time (all threads, user + sys) does not, so with one intra-op thread it is the
    steadier measure of the work done. Both are kept.
    """
    before = reset_peak_rss()
    cpu, start = time.process_time(), time.perf_counter()
    result = fn()
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    return Measurement(seconds, cpu_seconds, before, peak_rss_kib(), result)


def speed_flags() -> list[str]:
    """The CPU features that decide a speed number here, named beside every timing a benchmark prints
    (``c2v_rag.core.devices.speed_flags``; imported when asked, as torch comes with it)."""
    from c2v_rag.core.devices import speed_flags as flags

    return flags()


def speed_flags_note() -> str:
    """:func:`speed_flags` as one line for a report."""
    return " ".join(speed_flags()) or "none of avx2/avx512/amx"


def single_thread_note() -> str:
    import os

    import torch

    return (
        f"torch {torch.__version__}, {torch.get_num_threads()} intra-op thread(s), "
        f"CPU affinity {sorted(os.sched_getaffinity(0))}"
    )


def load(name: str):
    """A Causal2Vec variant or preset, else a bi-encoder alone."""
    from c2v_rag import Causal2Vec
    from c2v_rag.evaluation import BiEncoder
    from c2v_rag.hub.presets import list_presets

    if name == "default" or name in list_presets() or Path(name, "causal2vec_config.json").is_file():
        return Causal2Vec.from_pretrained(None if name == "default" else name, device="cpu")
    return BiEncoder(name, device="cpu")


def cached(encode, texts: list[str], cache: Path | None, tag: str, slice_size: int = 64) -> np.ndarray:
    """``encode(texts)``, slice by slice, each slice saved under ``cache`` and reused when present."""
    if cache is None:
        return encode(texts)
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:12]
    folder = cache / f"{tag.replace('/', '_')}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    parts = []
    started = time.perf_counter()
    for start in range(0, len(texts), slice_size):
        path = folder / f"{start:07d}.npy"
        if not path.exists():
            part = encode(texts[start : start + slice_size])
            np.save(folder / "partial.npy", part)
            (folder / "partial.npy").rename(path)
            print(
                f"  {tag}: {min(start + slice_size, len(texts))}/{len(texts)} ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
        parts.append(np.load(path))
    return np.concatenate(parts) if parts else encode(texts)


def shown_path(value: str | Path) -> str:
    """``value`` with the home folder written ``~``: how a result file records a local path (results are committed,
    and a reader's home is another)."""
    text, home = str(value), str(Path.home())
    if home in ("", os.sep):
        return text
    if text == home:
        return "~"
    return text.replace(home + os.sep, "~" + os.sep)


def recorded_command(script: str, args: Sequence[str]) -> str:
    """The command that made a result, to store beside it: ``python <script> <args>``, quoted for a shell, with the
    home folder written ``~`` (left unquoted, so that the shell expands it again)."""

    def quoted(arg: str) -> str:
        shown = shown_path(arg)
        if shown == "~":
            return shown
        if shown.startswith("~" + os.sep):  # the slash after ~ unquoted, or a shell would not expand it
            return "~" + os.sep + shlex.quote(shown[2:])
        return shlex.quote(shown)

    return " ".join(["python", shlex.quote(script), *(quoted(a) for a in args)])


def chunker_key(context: str) -> dict[str, str]:
    """A cache-key entry for collections cut with ``chunk_context=context``: the digest of the code that cuts and
    leads chunks, so a change there makes such collections anew; empty for ``none`` (chunks alone), whose
    collections keep their keys."""
    if context == "none":
        return {}
    import c2v_rag.documents.chunking
    import c2v_rag.documents.outline
    import c2v_rag.encode.splitting

    digest = hashlib.sha256()
    for module in (c2v_rag.documents.chunking, c2v_rag.documents.outline, c2v_rag.encode.splitting):
        digest.update(Path(str(module.__file__)).read_bytes())
    return {"chunker": digest.hexdigest()[:16]}


def pages_found(
    folder: Path, store: Path, questions: Sequence[tuple[str, str]], page_of: Callable[[str | None], str], **ingest: Any
) -> tuple[Any, dict[str, Any]]:
    """``folder`` ingested into a new store with the library's defaults (and ``ingest``'s options), then each
    question searched with ``c2v_rag.search_many``'s (top 10, reranked as ``rerank="auto"`` does on this CPU): the
    ingest's result, and its documents, chunks and seconds, MRR@10 where a hit is right when ``page_of`` its
    ``doc_id`` is the question's page (any copy of it), each question's reciprocal rank, and how many distinct pages
    the ten hits hold."""
    import statistics

    import c2v_rag

    started = time.perf_counter()
    result = c2v_rag.ingest(folder, path=store, collection="kb", show_progress=False, **ingest)
    ingest_s = time.perf_counter() - started
    hits = c2v_rag.search_many([q for q, _ in questions], top_k=10, path=store, collection="kb")
    reciprocal, distinct = [], []
    for (_, answer), found in zip(questions, hits, strict=True):
        pages = [page_of(hit.doc_id) for hit in found]
        reciprocal.append(next((1 / (rank + 1) for rank, page in enumerate(pages) if page == answer), 0.0))
        distinct.append(len(set(pages)))
    return result, {
        "documents": result.documents,
        "chunks": result.chunks,
        "ingest_s": round(ingest_s, 1),
        "mrr_at_10": round(statistics.mean(reciprocal), 4),
        "reciprocal_ranks": reciprocal,
        "distinct_pages_in_top_10": round(statistics.mean(distinct), 2),
    }
