"""The reranker's base decoder in int8 on a CPU: the embedding path's per-token recipe, calibrated on pairs.

A reranked search runs the whole base decoder over each hit and the query after it: twenty hits of 200 tokens
are 4,000 decoder positions, where a search's own query is twenty. So the decoder's linear layers run as int8
GEMMs in ONNX Runtime, by the recipe the embedding model's ``quantize="int8"`` uses
(:func:`c2v_rag.cpu.int8.rewrite_per_token_int8`: SmoothQuant, each token's activations on their own scale,
7-bit weights that AVX2's int8 instructions take without overflow), over the block-causal attention graph of
:func:`c2v_rag.cpu.onnx_attention.fuse_attention`. What it costs and what it keeps of the float ranking are in
docs/ingest-and-search.md ("Reranking").

**Calibration.** SmoothQuant's factors come from the largest input of each linear layer per channel while the
float decoder scores the package's calibration texts (:func:`c2v_rag.cpu.int8.calibration_texts`) as pairs under
the reranker's template: each document once, with a query. The template's head and middle tokens are the same in
every pair a search scores, so they are in the maxima.

**Cache.** The graph is built once per base decoder, template and tokenizer, and kept beside the embedding
model's graphs (``$C2V_RAG_CACHE/onnx``): keyed by the decoder's weights, this recipe and the pairs' layout. A
later load finds it by the base's content digest (:meth:`~c2v_rag.hub.sources.ResolvedSource.content_digest`)
without loading transformers, then reads only what stays in torch: the word embeddings, which are also the
language-model head of a tied decoder such as SmolLM2.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from c2v_rag.core.devices import INT8_METHOD
from c2v_rag.core.extras import require
from c2v_rag.cpu import int8 as recipe
from c2v_rag.cpu import onnx_decoder as decoder_files
from c2v_rag.rerank.templates import Pair, PairBuilder

if TYPE_CHECKING:
    from c2v_rag.core.config import Causal2VecConfig
    from c2v_rag.cpu.onnx_decoder import OnnxDecoder
    from c2v_rag.hub.sources import ResolvedSource

# Bump when the calibration or the graph's build below changes in a way the recipe's constants do not show.
RECIPE_VERSION = 1
CALIBRATION_BATCH_TOKENS = 4096


def calibration_pairs(pairs: PairBuilder) -> list[Pair]:
    """Each packaged calibration document once, before one of the calibration queries in turn."""
    documents, queries = recipe.calibration_texts()
    out: list[Pair] = []
    for i, document in enumerate(documents):
        out += pairs.pairs(pairs.query_ids(queries[i % len(queries)]), [document])
    return out


def recipe_key(pairs: PairBuilder, shipped: str | None = None) -> str:
    """sha256 of what the graph depends on besides the decoder's weights: the per-token recipe's constants, the
    calibration texts, the pairs' layout (the template's tokens around the document, in this tokenizer), and where
    the maxima come from (``shipped``: the key of the package's maxima for this base, :func:`shipped_maxima`)."""
    digest = recipe.calibration_digest(
        f"c2v-rerank-int8 v{RECIPE_VERSION} {INT8_METHOD} v{recipe.RECIPE_VERSION} {recipe.SMOOTH_ALPHA} "
        f"{recipe.KEEP_FLOAT} {recipe.WEIGHT_LEVELS} {recipe.FOLD_ZERO_POINT} {recipe.maxima_source(shipped)} "
        f"decoder {decoder_files.FORMAT} {decoder_files.OPSET}\n"
    )
    digest.update(_layout(pairs))
    return digest.hexdigest()[:24]


def _layout(pairs: PairBuilder) -> bytes:
    """The pairs' layout as keys record it: the template's tokens around the document."""
    return json.dumps({"head": pairs.head, "middle": pairs.middle}).encode()


SHIPPED_DIR = "rerank_int8_calibration"
"""The package's folder (under ``c2v_rag/resources``) of reranker calibrations made once for known base decoders
(:func:`write_shipped_maxima`): a first int8 reranker on such a base builds its graph without calibrating."""


def shipped_maxima_key(base_digest: str, pairs: PairBuilder) -> str:
    """What shipped maxima are valid for: the base decoder's contents
    (:meth:`~c2v_rag.hub.sources.ResolvedSource.content_digest`), the pairs' layout, the calibration texts, float32
    (the recipe's other constants do not change maxima, statistics of the float decoder alone)."""
    digest = recipe.calibration_digest(f"c2v-rerank-int8-maxima fp32 {base_digest}\n")
    digest.update(_layout(pairs))
    return digest.hexdigest()[:24]


def shipped_folder() -> Path:
    return Path(str(resources.files("c2v_rag") / "resources" / SHIPPED_DIR))


def shipped_maxima(source: ResolvedSource, pairs: PairBuilder) -> recipe.ShippedMaxima | None:
    """The package's maxima for this base decoder and layout, if it ships any (None for a hub id not yet in the
    local cache, whose contents are not known before it loads)."""
    digest = source.content_digest()
    folder = shipped_folder()
    if digest is None or not folder.is_dir():
        return None
    key = shipped_maxima_key(digest, pairs)
    for path in sorted(folder.glob("*.safetensors")):
        found = recipe.read_shipped_maxima(path, key)
        if found is not None:
            return found
    return None


def write_shipped_maxima(
    config: Causal2VecConfig, source: ResolvedSource, pairs: PairBuilder, path: Path
) -> recipe.ShippedMaxima:
    """Calibrate ``config``'s base decoder (at ``source``) for ``pairs``' layout in float32 and save the maxima at
    ``path`` (put it in :func:`shipped_folder` to ship it). What a first int8 reranker on an AVX2 CPU computes."""
    from c2v_rag.hub.sources import load_backbone

    digest = source.content_digest()
    if digest is None:
        raise ValueError(
            f"{source.location}: a hub base not in the local cache has no contents to key a shipped calibration by"
        )
    decoder = load_backbone(source, dtype=torch.float32, attn_implementation="sdpa")
    key = shipped_maxima_key(digest, pairs)
    recipe.write_shipped_maxima(path, _calibrate(decoder, config, pairs, "fp32"), key, {"decoder": digest})
    return recipe.ShippedMaxima(key, path)


def _calibrate(
    decoder: nn.Module, config: Causal2VecConfig, pairs: PairBuilder, precision: str | None = None
) -> dict[str, np.ndarray]:
    """The decoder's linear input maxima while it scores the calibration pairs (:func:`calibration_pairs`)."""
    from c2v_rag.hub.lm_head import lm_head_weight
    from c2v_rag.rerank.likelihood import QueryLikelihood

    head = lm_head_weight(decoder, config.decoder, config.decoder_revision)
    scorer = QueryLikelihood(decoder, head, pairs.pad_id)
    calibration = calibration_pairs(pairs)
    return recipe.linear_input_maxima(
        decoder, lambda: scorer.log_probs(calibration, CALIBRATION_BATCH_TOKENS), precision=precision
    )


def int8_scoring_decoder(
    config: Causal2VecConfig,
    source: ResolvedSource,
    pairs: PairBuilder,
    load_float: Callable[[], nn.Module],
    *,
    cache_dir: Path | None = None,
) -> OnnxDecoder:
    """The base decoder of ``config`` (at ``source``) as an int8 :class:`~c2v_rag.cpu.onnx_decoder.OnnxDecoder`
    for scoring ``pairs``' layout; ``load_float()`` gives the float32 backbone on the CPU whose word embeddings
    stay in torch (any backbone: plain torch serves). Built and cached on first use (the module doc)."""
    from c2v_rag.core.devices import usable_cores
    from c2v_rag.cpu.onnx_decoder import OnnxDecoder

    require("onnxruntime", "the int8 reranker", "int8")
    # A query's hits are several batches, and each session call computes one on one core without waiting at
    # barriers: every core this process may use runs one, whatever torch's thread count (one in a search or a
    # server, for the float path's sake; docs/serving.md, "CPU threads").
    workers = usable_cores()
    shipped, key, alias, found = _lookup(source, pairs, cache_dir)
    if found is not None:
        return OnnxDecoder(load_float(), found, INT8_METHOD, workers)
    path = _build(config, source, pairs, key, cache_dir, shipped)
    if alias is not None:
        recipe.record_int8_graphs(alias, recipe.Int8Graphs(path, None), cache_dir)
    return OnnxDecoder(load_float(), path, INT8_METHOD, workers)


def cached_int8_graph(source: ResolvedSource, pairs: PairBuilder, cache_dir: Path | None = None) -> Path | None:
    """The graph :func:`int8_scoring_decoder` would read for ``source`` and ``pairs``' layout, or None where it
    would build one first (nothing is loaded or built here)."""
    return _lookup(source, pairs, cache_dir)[3]


def _lookup(
    source: ResolvedSource, pairs: PairBuilder, cache_dir: Path | None
) -> tuple[recipe.ShippedMaxima | None, str, str | None, Path | None]:
    """The shipped calibration, the recipe's key, the cache alias (None: the base has no content digest) and the
    cached graph (None: none yet) of ``source``'s int8 reranker for ``pairs``' layout."""
    shipped = shipped_maxima(source, pairs)
    key = recipe_key(pairs, shipped.key if shipped is not None else None)
    digest = source.content_digest()
    alias = _alias(digest, key) if digest is not None else None
    found = recipe.find_int8_graphs(alias, cache_dir) if alias is not None else None
    return shipped, key, alias, found.decoder if found is not None else None


def _alias(digest: str, key: str) -> str:
    return hashlib.sha256(f"c2v-rerank-int8-alias {key} {digest}".encode()).hexdigest()[:24]


def _build(
    config: Causal2VecConfig,
    source: ResolvedSource,
    pairs: PairBuilder,
    key: str,
    cache_dir: Path | None,
    shipped: recipe.ShippedMaxima | None = None,
) -> Path:
    """Calibrate transformers' float32 decoder on the calibration pairs (unless the package ships its maxima),
    export it and write the int8 graph."""
    from c2v_rag.cpu.build_progress import building, stage
    from c2v_rag.hub.sources import load_backbone

    require("onnx", "the int8 reranker", "int8")
    with building("Building the int8 reranker (once; cached for later loads)"):
        # The export traces transformers' modules.
        decoder = load_backbone(source, dtype=torch.float32, attn_implementation="sdpa")
        decoder_files.check_exportable(decoder, "decoder")

        def transform(exported: Path, target: Path) -> Path:
            if shipped is not None:
                maxima = shipped.maxima
            else:
                with stage("calibrating"):
                    maxima = _calibrate(decoder, config, pairs)
            return recipe.write_int8_graph(exported, target, decoder, maxima, readout_rows_only=False)

        return decoder_files.cached_onnx(
            decoder, INT8_METHOD, cache_dir, transform=transform, key_extra=f"rerank {key}"
        )
