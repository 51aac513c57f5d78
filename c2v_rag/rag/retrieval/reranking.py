"""``search(..., rerank=N)``: the first stage's top N hits re-ordered by the decoder's likelihood, fused with their
scores (:meth:`~c2v_rag.rerank.Causal2VecReranker.fused_scores`), and the best ``top_k`` of them kept.

``rerank="auto"``, the default of a search by the library, the command line and the frameworks' retrievers, reranks
as deep as the reranker's decoder is fast on this machine (:func:`auto_depth`): the top :data:`AUTO_DEPTH` where it
computes in int8 with AVX-512's int8 dot products, in bf16 or fp16 (a CPU with bf16 in hardware, a GPU), the top
:data:`AVX2_DEPTH` in int8 on an AVX2 CPU, and none in float32; ``$C2V_RAG_RERANK`` sets another default
(docs/ingest-and-search.md, "Reranking", with the cost of each).

The reranker of a variant loads once per process (its base decoder: seconds) and is shared by every handle and
search that names the same model, device and dtype, as :func:`~c2v_rag.rag.embedding.load_model` shares models.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from c2v_rag.rag.options import ModelOptions

if TYPE_CHECKING:
    from c2v_rag.rerank import Causal2VecReranker
    from c2v_rag.rerank.loading import ScoringPlan


class _Hit(Protocol):
    """What reranking reads and sets of a :class:`~c2v_rag.rag.retrieval.search.SearchHit`."""

    text: str
    score: float
    rerank_score: float | None


HitT = TypeVar("HitT", bound=_Hit)

_cache: dict[tuple[Any, ...], Causal2VecReranker] = {}
_failed: set[tuple[Any, ...]] = set()
_lock = threading.Lock()


RERANK_ENV = "C2V_RAG_RERANK"
AUTO_DEPTH = 20
"""The hits ``rerank="auto"`` reorders (at least ``top_k``) where the decoder is fast: the top 20 gained more than
the top 10 on the three sets measured, at twice the cost (docs/ingest-and-search.md)."""
AVX2_DEPTH = 10
"""The hits ``rerank="auto"`` reorders with the int8 decoder on an AVX2 CPU, whose int8 products (``vpmaddubsw``)
run at about half the rate of AVX-512's: the top 10, at about the cost of the top 20 elsewhere."""
_INT8_DOT_PRODUCTS = frozenset({"avx512_vnni", "avx512_bf16", "amx"})  # core.devices.cpu_class rows

logger = logging.getLogger(__name__)


def check_rerank(rerank: Any, top_k: int) -> None:
    """``rerank`` is None, ``"auto"`` (with a valid ``$C2V_RAG_RERANK``) or a number of first-stage hits of at
    least ``top_k``."""
    if rerank == "auto":
        auto_depth_setting()
        return
    if rerank is None:
        return
    if not isinstance(rerank, int) or isinstance(rerank, bool) or rerank < 1:
        raise ValueError(
            "rerank must be a positive integer (how many first-stage hits to rerank), 'auto' or None (no "
            f"reranking), got {rerank!r}"
        )
    if rerank < top_k:
        raise ValueError(
            f"rerank={rerank} is less than top_k={top_k}: the reranker orders the first stage's top {rerank} hits and "
            f"returns the best top_k of them, so pass rerank >= top_k (e.g. rerank=20 with top_k={top_k})"
        )


def rerank_from_text(value: str) -> int | Literal["auto"] | None:
    """A search's ``rerank`` written as text (``--rerank``, ``$C2V_RAG_RERANK``): a number of hits, ``auto``, or
    ``none`` (``off``, ``0``); a ValueError for anything else."""
    word = value.strip().lower()
    if word == "auto":
        return "auto"
    if word in ("none", "off", "0"):
        return None
    if word.isdigit():
        return int(word)
    raise ValueError(f"expected a number of hits (e.g. 20), 'auto' or 'none', got {value!r}")


def auto_depth_setting() -> int | None:
    """What ``rerank="auto"`` does where ``$C2V_RAG_RERANK`` decides: None to follow the device (unset or
    ``auto``), 0 for no reranking (``none``), else that many hits."""
    value = os.environ.get(RERANK_ENV, "").strip().lower()
    if not value:
        return None
    try:
        chosen = rerank_from_text(value)
    except ValueError:
        raise ValueError(
            f"${RERANK_ENV}={value!r} is not 'auto', 'none' or a number of hits (e.g. 20): set it to one or unset it"
        ) from None
    return None if chosen == "auto" else chosen or 0


def resolve_rerank(
    rerank: int | str | None, top_k: int, model: ModelOptions, recorded: str | None = None
) -> int | None:
    """How many first-stage hits a search reranks (None: none). ``"auto"``: ``$C2V_RAG_RERANK``'s choice, else
    :func:`auto_depth` (at least ``top_k``) for the reranker of the model that searches (``recorded``, a
    collection's model, when ``model`` names none)."""
    if rerank != "auto":
        return rerank if isinstance(rerank, int) else None
    setting = auto_depth_setting()
    if setting is not None:
        return max(setting, top_k) if setting else None
    try:
        plan = auto_plan(model, recorded)
    except ValueError:
        return None  # loading the model reports a bad dtype
    depth = auto_depth(plan)
    return max(depth, top_k) if depth else None


def auto_plan(model: ModelOptions, recorded: str | None = None) -> ScoringPlan:
    """How the reranker a search loads (:func:`shared_reranker`) would score: where, and in int8 or which dtype."""
    from c2v_rag.rerank.loading import scoring_plan

    resolved = model.resolve(recorded)
    return scoring_plan(resolved.config, resolved.loaded, "base", model.device, model.dtype, "auto")


def auto_depth(plan: ScoringPlan) -> int | None:
    """The hits ``rerank="auto"`` reorders with a reranker that scores as ``plan`` says: :data:`AUTO_DEPTH` in
    int8 on a CPU with AVX-512's int8 dot products (VNNI; AMX) and in bf16 or fp16, :data:`AVX2_DEPTH` in int8 on
    an AVX2 CPU, none in float32 (two to five times int8's time: docs/ingest-and-search.md)."""
    from c2v_rag.core.devices import cpu_class

    if plan.int8:
        return AUTO_DEPTH if cpu_class() in _INT8_DOT_PRODUCTS else AVX2_DEPTH
    return AUTO_DEPTH if plan.precision in ("bfloat16", "float16") else None


def auto_reranker(model: ModelOptions, recorded: str | None) -> Causal2VecReranker | None:
    """:func:`shared_reranker` for ``rerank="auto"``: a reranker that cannot load (its base decoder not on this
    machine, say) leaves the search unreranked, with a warning once per model, rather than failing it."""
    try:
        return shared_reranker(model, recorded)
    except LOAD_ERRORS as err:
        warn_unreranked(_failed, (recorded, str(model.model)), err, "pass rerank=None (--rerank none) to silence this")
        return None


def auto_reranker_unbuilt(model: ModelOptions, recorded: str | None = None) -> bool:
    """Whether the first ``rerank="auto"`` search with ``model`` would build its reranker before reranking: it
    reranks in int8 on this machine and the graph is not in the cache yet (nothing is loaded or built here)."""
    from c2v_rag.rerank.loading import int8_reranker_built

    if resolve_rerank("auto", 1, model, recorded) is None or not auto_plan(model, recorded).int8:
        return False
    return not int8_reranker_built(model.resolve(recorded).config)


LOAD_ERRORS = (OSError, ValueError, ImportError)
"""What a reranker that cannot load raises (its base decoder missing offline, a bad dtype, a missing extra): under
``rerank="auto"`` the search goes on unreranked (:func:`warn_unreranked`)."""


def warn_unreranked(warned: set[Any], key: Any, err: Exception, silence: str) -> None:
    """Say once per ``key`` (a model; ``warned`` holds those said) that ``rerank="auto"`` searches go unreranked
    because the reranker could not load (``err``), and how to ``silence`` it."""
    with _lock:
        first = key not in warned
        warned.add(key)
    if first:
        logger.warning(
            "rerank='auto': the reranker could not load (%s), so searches are not reranked; %s", err, silence
        )


def shared_reranker(model: ModelOptions, recorded: str | None) -> Causal2VecReranker:
    """The reranker of the model that searches (``recorded``, a collection's model, when none is named)."""
    from c2v_rag.rerank import Causal2VecReranker

    resolved = model.resolve(recorded)
    source = resolved.loaded if resolved.loaded is not None else resolved.reference
    key = (source, model.device, model.dtype)
    with _lock:
        if key not in _cache:
            # quantize="auto": int8 where new vectors would be int8, unless a dtype was asked for
            _cache[key] = Causal2VecReranker(source, device=model.device, dtype=model.dtype)
        return _cache[key]


def rerank_hits(reranker: Causal2VecReranker, query: str, hits: Sequence[HitT], top_k: int) -> list[HitT]:
    """``hits`` ordered by their fused score (set as each hit's ``rerank_score``), the best ``top_k`` kept."""
    if not hits:
        return []
    ranked = reranker.rerank(query, [hit.text for hit in hits], top_k, first_stage=[hit.score for hit in hits])
    for result in ranked:
        hits[result.index].rerank_score = result.relevance_score
    return [hits[result.index] for result in ranked]
