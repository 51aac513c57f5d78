"""The encode loop: texts -> token batches -> model -> vectors, in the caller's order."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm.auto import tqdm

from .batching import plan_batches
from .quantization import quantize

if TYPE_CHECKING:
    from .modeling import Causal2Vec

logger = logging.getLogger("c2v_rag")

# Texts are tokenized a window at a time, so a corpus of millions of documents never holds all
# its token ids at once; windows follow a global sort by character length, so each window is
# already of similar lengths and its token-budget batches pad little.
_WINDOW = 4096


def default_max_tokens(device: torch.device) -> int:
    """Padded tokens per batch: large enough to keep the matmuls efficient, small enough for RAM.

    On CPU, small batches win (bench/encode_options.py, SciFact abstracts and claims mixed, one
    core, bf16): 2,048 padded tokens encoded 2.0x faster than 8,192, and 1,024 another 1.06-1.18x
    faster than 2,048 over three runs (512 no better on 200 texts; docs/performance.md). Smaller
    batches pad less, since each spans a narrower range of lengths, and keep the activations that
    attention and the elementwise ops stream through in cache; a 1,024-row GEMM still runs near
    the measured peak.
    """
    return 65536 if device.type == "cuda" else 1024


def check_texts(sentences: str | Iterable[str]) -> tuple[list[str], bool]:
    """Validate the input and return ``(texts, was_single_string)``."""
    if isinstance(sentences, str):
        return [sentences], True
    if isinstance(sentences, (bytes, dict)) or not isinstance(sentences, Iterable):
        raise TypeError(f"expected a string or a list of strings, got {type(sentences).__name__}")
    texts = list(sentences)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(
                f"input at index {i} is a {type(text).__name__}, not a str: {text!r:.80}. "
                "Convert it with str() or drop it."
            )
    return texts, False


def encode_texts(
    model: "Causal2Vec",
    sentences: str | Sequence[str],
    instruction: str | None,
    *,
    batch_size: int = 256,
    max_tokens_per_batch: int | None = None,
    show_progress_bar: bool | None = None,
    normalize_embeddings: bool = False,
    precision: str = "float32",
    convert_to_numpy: bool = True,
    convert_to_tensor: bool = False,
    device: str | torch.device | None = None,
) -> np.ndarray | torch.Tensor:
    """Embed ``sentences`` with one ``instruction``; see :meth:`Causal2Vec.encode`.

    ``batch_size`` caps the texts per batch and ``max_tokens_per_batch`` the padded decoder
    tokens per batch; inputs are sorted by length for batching and returned in input order.
    """
    texts, single = check_texts(sentences)
    if device is not None and torch.device(device) != model.device:
        model.to(device)
    dim = model.embedding_dim
    out = np.zeros((len(texts), dim), dtype=np.float32)
    if texts:
        budget = max_tokens_per_batch or default_max_tokens(model.device)
        show = len(texts) >= 256 if show_progress_bar is None else show_progress_bar
        truncated = _run(model, texts, instruction, out, budget, batch_size, show)
        _report_truncation(model, truncated, len(texts))
    if normalize_embeddings and len(out):
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    result = quantize(out, precision) if precision != "float32" else out
    if single:
        result = result[0]
    if convert_to_tensor:
        return torch.from_numpy(result)
    if not convert_to_numpy:
        return list(torch.from_numpy(np.atleast_2d(result))) if not single else torch.from_numpy(result)
    return result


def _run(model, texts, instruction, out, max_tokens, batch_size, show) -> tuple[int, int]:
    n_ctx = model.config.num_contextual_tokens
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    decoder_truncated = encoder_truncated = 0
    was_training = model.training
    model.eval()
    progress = tqdm(total=len(texts), desc="Encoding", unit="text", disable=not show)
    try:
        with torch.inference_mode():
            for start in range(0, len(order), _WINDOW):
                window = order[start : start + _WINDOW]
                pieces, enc_ids = model.prepare([texts[i] for i in window], instruction)
                decoder_truncated += sum(p.truncated for p in pieces)
                if enc_ids is not None:
                    limit = model.encoder_max_length
                    encoder_truncated += sum(len(e) >= limit for e in enc_ids)
                lengths = [p.length(n_ctx) for p in pieces]
                for batch_rows in plan_batches(lengths, max_tokens=max_tokens, max_batch_size=batch_size):
                    batch = model.collate(
                        [pieces[r] for r in batch_rows],
                        None if enc_ids is None else [enc_ids[r] for r in batch_rows],
                    ).to(model.device)
                    vectors = model(batch).float().cpu().numpy()
                    out[[window[r] for r in batch_rows]] = vectors
                    progress.update(len(batch_rows))
    finally:
        progress.close()
        model.train(was_training)
    return decoder_truncated, encoder_truncated


def _report_truncation(model, truncated: tuple[int, int], total: int) -> None:
    decoder_truncated, encoder_truncated = truncated
    if not (decoder_truncated or encoder_truncated):
        return
    message = ("%d of %d texts exceeded max_length=%d decoder tokens and were truncated (the instruction "
               "and EOS are kept)")
    args: tuple = (decoder_truncated, total, model.max_seq_length)
    if model.encoder_max_length is not None:  # the plain decoder has no encoder to mention
        message += "; %d exceeded the encoder's limit of %d tokens"
        args += (encoder_truncated, model.encoder_max_length)
    message += "."
    # Reported once per model: an ingestion loop calling encode per batch would otherwise flood the log.
    level = logging.DEBUG if model._warned_truncation else logging.WARNING
    model._warned_truncation = True
    logger.log(level, message, *args)

