"""The encode loop: texts -> token batches -> model -> vectors, in the caller's order.

The loop sits below the model (:class:`~c2v_rag.model.causal2vec.Causal2Vec` calls in here from ``encode``) and
names only what it uses of one: :class:`EncodingModel`.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import torch

from c2v_rag.core.arguments import check_count, check_unicode
from c2v_rag.core.config import Causal2VecConfig
from c2v_rag.core.instructions import Instruction
from c2v_rag.core.progress_bar import CountingBar, unsized_terminal
from c2v_rag.encode.batching import Causal2VecBatch, forward_batches, plan_batches
from c2v_rag.encode.long_texts import (
    LongTexts,
    Windows,
    check_window,
    pool_windows,
    resolve_long_texts,
    split_long_texts,
)
from c2v_rag.encode.precision import quantize
from c2v_rag.encode.prompting import DecoderPieces, PromptBuilder

logger = logging.getLogger("c2v_rag")

# Texts are tokenized a window at a time, so a corpus of millions of documents never holds all
# its token ids at once; windows follow a global sort by character length, so each window is
# already of similar lengths and its token-budget batches pad little.
_WINDOW = 4096

# The encoder runs ahead of the decoder over this many texts at a time (in the decoder's plan order): what an
# ingest embeds at once, so a progress bar or an ingest's observer never waits on more than that much encoder work.
ENCODER_AHEAD_TEXTS = 256

# The share of a text's work a progress bar credits once the encoder has run ahead over it (the rest once the
# decoder has), so that the bar moves through the encoder's pass instead of standing still for it: near the
# encoder's share of an int8 ingest's CPU time (bench/results/notes/int8-history.md). A share off the mark moves the
# bar unevenly within a batch, while the run's rate, and so its ETA, count both passes whatever the share.
ENCODER_WORK_SHARE = 0.25


class EncodingModel(Protocol):
    """What the encode loop uses of a model; :class:`~c2v_rag.model.causal2vec.Causal2Vec` is one.

    ``truncation_warned`` is the loop's own state on the model: whether truncated texts were reported
    at WARNING yet (once per model; later reports go to DEBUG).
    """

    config: Causal2VecConfig
    prompt_builder: PromptBuilder
    fast_tokenizer: Any
    fast_encoder_tokenizer: Any
    encoder_max_length: int | None
    training: bool
    truncation_warned: bool
    quantization: str

    @property
    def device(self) -> torch.device: ...

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def embedding_dim(self) -> int: ...

    @property
    def max_seq_length(self) -> int: ...

    @property
    def batch_workers(self) -> int: ...

    @property
    def encoder_workers(self) -> int: ...

    def to(self, device: str | torch.device) -> Any: ...

    def eval(self) -> Any: ...

    def train(self, mode: bool = True) -> Any: ...

    def prepare(
        self,
        texts: Sequence[str],
        instruction: Instruction,
        *,
        truncate_dim: int | None = None,
        max_length: int | None = None,
    ) -> tuple[list[DecoderPieces], list[list[int]] | None]: ...

    def collate(self, pieces: Sequence[DecoderPieces], encoder_ids: list[list[int]] | None) -> Causal2VecBatch: ...

    def encoder_pass(self, encoder_ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]: ...

    def needs_for(self, truncate_dim: int | None) -> str: ...

    def __call__(self, batch: Causal2VecBatch, truncate_dim: int | None = None) -> torch.Tensor: ...


@dataclass(frozen=True)
class Truncation:
    """What encoding cut: of ``texts`` inputs, how many were longer than the decoder reads (``decoder``:
    over ``max_length`` tokens) and than the encoder reads (``encoder``: over ``encoder_max_length``
    tokens, None for a model without one). A text may count in both. Summed over calls with ``+``."""

    texts: int = 0
    decoder: int = 0
    encoder: int = 0
    max_length: int = 0
    encoder_max_length: int | None = None

    def __add__(self, other: Truncation) -> Truncation:
        # The limits are those of the calls summed: one model at one max_length, so the same in each.
        return replace(
            other,
            texts=self.texts + other.texts,
            decoder=self.decoder + other.decoder,
            encoder=self.encoder + other.encoder,
        )

    def message(self, what: str = "texts") -> str | None:
        """The warning for what was cut, naming only the side that cut (None when nothing was)."""
        parts = []
        if self.decoder:
            parts.append(
                f"{self.decoder} of {self.texts} {what} exceeded max_length={self.max_length} decoder tokens and "
                "were truncated (the instruction and EOS are kept)"
            )
        if self.encoder:
            parts.append(
                f"{self.encoder} of {self.texts} {what} exceeded the encoder's limit of {self.encoder_max_length} "
                "tokens and were truncated for the encoder"
            )
        return "; ".join(parts) + "." if parts else None


class EncodeObserver(Protocol):
    """Follows the encode calls made while it is set (:func:`observing`): an ingest's progress bar."""

    def encoded(self, done: int, of: int, work: float) -> None:
        """``done`` of the call's ``of`` inputs are embedded; called after each forward pass.

        ``work`` is the share of the call's work done, estimated from the inputs' characters: the longest inputs
        go first, so early on the count of inputs runs behind the time spent, and an ETA taken from it is too
        long."""

    def truncated(self, cut: Truncation) -> None:
        """What one call cut; the observer reports it (the call logs nothing)."""


# Set around the encode calls of one caller (a context variable, so only that thread's calls are
# followed): a progress bar can move within one long call, and truncation is reported once per run
# rather than per call, without a callback in encode's public signature.
_observer: ContextVar[EncodeObserver | None] = ContextVar("c2v_rag_encode_observer", default=None)


@contextlib.contextmanager
def observing(observer: EncodeObserver) -> Iterator[None]:
    """Send the progress and the truncation of the encode calls made inside to ``observer``."""
    token = _observer.set(observer)
    try:
        yield
    finally:
        _observer.reset(token)


_bar_label: ContextVar[str] = ContextVar("c2v_rag_encode_bar_label", default="Encoding")


@contextlib.contextmanager
def bar_label(label: str) -> Iterator[None]:
    """The encode calls made inside show ``label`` on their progress bar instead of "Encoding": which pass of a long
    run is running (adapt's gate encodes for many minutes: which model, which data)."""
    token = _bar_label.set(label)
    try:
        yield
    finally:
        _bar_label.reset(token)


class _ChosenDecoderCut:
    """Passes the progress of the calls it observes on to the observer around it, and their truncation without
    the decoder's cuts: those are at a length the caller chose to read (:func:`decoder_cut_chosen`)."""

    def __init__(self, model: EncodingModel, outer: EncodeObserver | None) -> None:
        self.model = model
        self.outer = outer

    def encoded(self, done: int, of: int, work: float) -> None:
        if self.outer is not None:
            self.outer.encoded(done, of, work)

    def truncated(self, cut: Truncation) -> None:
        send_truncation(self.outer, self.model, replace(cut, decoder=0))


@contextlib.contextmanager
def decoder_cut_chosen(model: EncodingModel) -> Iterator[None]:
    """The encode calls made inside read a decoder length their caller chose on purpose (an ingest's
    ``decoder_max_length``): texts longer than it are not reported as truncated; what the encoder cuts still is."""
    with observing(_ChosenDecoderCut(model, _observer.get())):
        yield


def default_max_tokens(device: torch.device, quantization: str = "none", dtype: torch.dtype = torch.float32) -> int:
    """Padded tokens per batch: large enough to keep the matmuls efficient, small enough for RAM.

    On CPU, small batches win in float32 (docs/performance.md, with ``bench/encode_options.py``): smaller
    batches pad less, since each spans a narrower range of lengths, and keep the activations that attention and
    the elementwise ops stream through in cache, while a 1,024-row GEMM still runs near its peak. In bf16 (or
    fp16) the matmuls are several times faster and 2,048 tokens ran faster, once glibc keeps the memory a
    forward pass frees (:func:`c2v_rag.core.memory.keep_freed_memory`).

    The int8 path (``quantization`` other than ``"none"``: ONNX Runtime, each row on its own) is faster
    smaller still. Its vectors do not depend on the batch, so the budget changes only the speed.
    """
    if device.type == "cuda":
        return 65536
    if quantization != "none":
        return 512
    return 2048 if dtype in (torch.bfloat16, torch.float16) else 1024


def model_max_tokens(model: EncodingModel) -> int:
    """:func:`default_max_tokens` for ``model`` as loaded (its device, quantization and dtype): the budget ``encode``
    and the server plan batches by when none is given."""
    return default_max_tokens(model.device, model.quantization, model.dtype)


def default_encoder_max_tokens(device: torch.device) -> int:
    """Padded encoder tokens per batch of the encoder's own: where it runs ahead of the decoder
    (:func:`encode_ahead`), and where it runs alone (a prefix inside its part). On CPU, batches of an ingest's
    chunks pad little at this size; ahead of the decoder larger ones ran slower in both torch and ONNX Runtime
    (bench/encoder_ahead.py), and alone no budget from 512 to 4,096 stood out (bench/encoder_only.py)."""
    return 65536 if device.type == "cuda" else ENCODER_CPU_MAX_TOKENS


ENCODER_CPU_MAX_TOKENS = 1024


def check_texts(sentences: str | Iterable[str]) -> tuple[list[str], bool]:
    """Validate the input and return ``(texts, was_single_string)``."""
    if isinstance(sentences, str):
        check_unicode(sentences, "input")
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
        check_unicode(text, f"input at index {i}")
    return texts, False


def encode_texts(
    model: EncodingModel,
    sentences: str | Sequence[str],
    instruction: Instruction,
    *,
    batch_size: int = 256,
    max_tokens_per_batch: int | None = None,
    show_progress_bar: bool | None = None,
    normalize_embeddings: bool = False,
    precision: str = "float32",
    convert_to_numpy: bool = True,
    convert_to_tensor: bool = False,
    device: str | torch.device | None = None,
    long_texts: str | LongTexts | None = None,
    truncate_dim: int | None = None,
    max_length: int | None = None,
) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
    """Embed ``sentences`` with one ``instruction``; see :meth:`Causal2Vec.encode`.

    ``batch_size`` caps the texts per batch and ``max_tokens_per_batch`` the padded decoder
    tokens per batch; inputs are sorted by length for batching and returned in input order.
    ``long_texts`` is ``"truncate"`` or ``"chunk"`` (:mod:`c2v_rag.encode.long_texts`). ``truncate_dim`` keeps
    the first that many values, one of the sizes the variant was trained for (``matryoshka_dims``).
    ``max_length`` bounds each input's decoder tokens for this call (None: the model's ``max_seq_length``).
    """
    check_count("batch_size", batch_size)
    check_count("max_tokens_per_batch", max_tokens_per_batch, optional=True)
    policy = resolve_long_texts(long_texts)
    truncate_dim = model.config.check_truncate_dim(truncate_dim)
    max_length = check_max_length(max_length)
    texts, single = check_texts(sentences)
    if device is not None and torch.device(device) != model.device:
        model.to(device)
    dim = truncate_dim or model.embedding_dim
    out = np.zeros((len(texts), dim), dtype=np.float32)
    if texts:
        budget = max_tokens_per_batch or model_max_tokens(model)
        windows = (
            long_text_windows(model, texts, instruction, policy, max_length=max_length)
            if policy.mode == "chunk"
            else None
        )
        inputs = texts if windows is None else windows.texts
        vectors = out if windows is None else np.zeros((len(inputs), dim), dtype=np.float32)
        show = len(inputs) >= 256 if show_progress_bar is None else show_progress_bar
        observer = _observer.get()
        truncated = _run(
            model,
            inputs,
            instruction,
            vectors,
            budget,
            batch_size,
            show,
            truncate_dim,
            observer,
            max_length,
            encoder_budget=max_tokens_per_batch,
        )
        send_truncation(observer, model, truncated)
        if windows is not None:
            out = pool_windows(vectors, windows, policy.pooling)
    if normalize_embeddings:
        normalize_rows(out)
    result = quantize(out, precision) if precision != "float32" else out
    if single:
        result = result[0]
    if convert_to_tensor:
        return torch.from_numpy(result)
    if not convert_to_numpy:
        return list(torch.from_numpy(np.atleast_2d(result))) if not single else torch.from_numpy(result)
    return result


def long_text_windows(
    model: EncodingModel,
    texts: Sequence[str],
    instruction: Instruction,
    long_texts: str | LongTexts | None = "chunk",
    *,
    max_length: int | None = None,
) -> Windows:
    """``texts`` as the model reads them with ``long_texts="chunk"``: each text that fits whole, and
    windows of each one that would be truncated, sized to fit both the decoder (within ``max_length``
    tokens, None: the model's own) and the encoder."""
    policy = resolve_long_texts(long_texts)
    texts = list(texts)
    max_length = check_max_length(max_length)
    fits = [not t for t in prepare_texts(model, texts, instruction, max_length=max_length).truncated]
    tokenizers = [model.fast_tokenizer]
    limit = model.prompt_builder.text_budget(instruction, max_length)
    if model.config.num_contextual_tokens and model.encoder_max_length is not None:
        tokenizers.append(model.fast_encoder_tokenizer)
        specials = len(model.fast_encoder_tokenizer("")["input_ids"])  # [CLS] and [SEP] around the text
        limit = min(limit, model.encoder_max_length - specials)
    window = check_window(policy.window, limit, "the model")
    return split_long_texts(texts, fits, tokenizers, window, policy.overlap)


def check_max_length(max_length: int | None) -> int | None:
    """``max_length`` if it is a usable decoder bound (an int of at least 4 tokens, as ``max_seq_length``
    takes), or None; anything else is refused before any text is tokenized."""
    if max_length is None:
        return None
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 4:
        raise ValueError(f"max_length must be an int of at least 4 tokens, got {max_length!r}")
    return max_length


def truncate_rows(vectors: np.ndarray, dim: int | None) -> np.ndarray:
    """The first ``dim`` values of each row, re-normalized to unit length (Matryoshka); None keeps the rows.

    The same as ``encode(truncate_dim=dim, normalize_embeddings=True)`` on the texts: a prefix is a slice
    of the full vector, whatever it is computed from.
    """
    if dim is None or dim == vectors.shape[-1]:
        return vectors
    return normalize_rows(np.array(vectors[..., :dim], dtype=np.float32, copy=True, ndmin=2)).reshape(
        *vectors.shape[:-1], dim
    )


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Scale each row of a float array to unit length, in place (zero rows stay zero)."""
    if len(vectors):
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return vectors


@dataclass
class PreparedTexts:
    """Texts tokenized for the model, ready for token-budget batching.

    Requests with different instructions are prepared apart and joined with :meth:`concat`, so
    one set of batches can mix them: the instruction lives in each input's own tokens.
    """

    pieces: list[DecoderPieces]
    encoder_ids: list[list[int]] | None
    lengths: list[int]
    """Decoder tokens per text (instruction, Contextual slot, text, EOS), after truncation."""
    decoder_truncated: list[bool]
    encoder_truncated: list[bool]

    @property
    def truncated(self) -> list[bool]:
        """Per text: whether either the decoder or the encoder saw less than the whole text."""
        return [d or e for d, e in zip(self.decoder_truncated, self.encoder_truncated)]

    def __len__(self) -> int:
        return len(self.pieces)

    @classmethod
    def concat(cls, parts: Sequence[PreparedTexts]) -> PreparedTexts:
        """One set of inputs holding every part's texts, in order."""
        has_encoder = bool(parts) and parts[0].encoder_ids is not None
        encoder_ids = [e for part in parts for e in part.encoder_ids or ()]
        return cls(
            pieces=[p for part in parts for p in part.pieces],
            encoder_ids=encoder_ids if has_encoder else None,
            lengths=[n for part in parts for n in part.lengths],
            decoder_truncated=[t for part in parts for t in part.decoder_truncated],
            encoder_truncated=[t for part in parts for t in part.encoder_truncated],
        )


def prepare_texts(
    model: EncodingModel,
    texts: Sequence[str],
    instruction: Instruction,
    *,
    truncate_dim: int | None = None,
    max_length: int | None = None,
) -> PreparedTexts:
    """Tokenize ``texts`` with one instruction, truncating as :meth:`Causal2Vec.encode` does (at ``max_length``
    decoder tokens, None: the model's own); for a ``truncate_dim`` prefix, only what it is computed from
    (:meth:`Causal2Vec.needs_for`)."""
    pieces, enc_ids = model.prepare(list(texts), instruction, truncate_dim=truncate_dim, max_length=max_length)
    n_ctx = model.config.num_contextual_tokens
    encoder_truncated = _encoder_truncated(model, texts, enc_ids)
    return PreparedTexts(
        pieces, enc_ids, [p.length(n_ctx) for p in pieces], [p.truncated for p in pieces], encoder_truncated
    )


def _encoder_truncated(model: EncodingModel, texts: Sequence[str], enc_ids: list[list[int]] | None) -> list[bool]:
    """Per text: whether the encoder's tokens were cut at its limit. A text that fills the limit exactly was
    not: only those at the limit are tokenized again, whole, to tell."""
    limit = model.encoder_max_length
    cut = [False] * len(texts)
    if enc_ids is None or limit is None:
        return cut
    full = [i for i, ids in enumerate(enc_ids) if len(ids) >= limit]
    if full:
        # verbose=False: the tokenizer's own "longer than the maximum" notice is what is being checked here.
        whole = model.fast_encoder_tokenizer([texts[i] for i in full], verbose=False)["input_ids"]
        for i, ids in zip(full, whole):
            cut[i] = len(ids) > limit
    return cut


def embed_prepared(
    model: EncodingModel,
    prepared: PreparedTexts,
    out: np.ndarray,
    rows: Sequence[int] | None = None,
    *,
    max_tokens: int,
    batch_size: int,
    max_pad_fraction: float | None = None,
    on_batch: Callable[[int, int], None] | None = None,
    truncate_dim: int | None = None,
    encoder_max_tokens: int | None = None,
    on_encoded: Callable[[int], None] | None = None,
) -> None:
    """Run ``prepared`` through the model in token-budget batches, writing row ``rows[i]`` of ``out``.

    ``rows`` defaults to ``0..n-1``; ``max_pad_fraction`` is :func:`~c2v_rag.encode.batching.plan_batches`'s.
    A model with a Contextual token runs its encoder ahead of the decoder, a slice of the plan at a time, in
    batches of ``encoder_max_tokens`` padded encoder tokens (None: :func:`default_encoder_max_tokens`) planned by
    the encoder's own lengths (:func:`encode_ahead`), then the decoder's batches of ``max_tokens`` with its outputs.
    ``truncate_dim`` computes that prefix only (``prepared`` with the same ``truncate_dim``); one inside the
    encoder's part runs no decoder, its batches planned as the encoder's are.
    ``on_batch(texts, padded_tokens)`` (of the model part that ran) is called after each
    forward pass (progress bars, serving metrics); ``on_encoded(texts)`` after each batch of the encoder run ahead
    (progress bars: those texts are not embedded yet). The caller puts the model in eval mode.
    """
    targets = range(len(prepared)) if rows is None else rows
    lengths = prepared.lengths
    encoder_only = (
        truncate_dim is not None and prepared.encoder_ids is not None and model.needs_for(truncate_dim) == "encoder"
    )
    encoder_budget = encoder_max_tokens or default_encoder_max_tokens(model.device)
    if encoder_only:
        assert prepared.encoder_ids is not None  # encoder_only checked it
        # No decoder runs: batch by the encoder's own lengths and budget (the decoder inputs are a few tokens each).
        lengths = [len(ids) for ids in prepared.encoder_ids]
        max_tokens = encoder_budget
    plan = plan_batches(lengths, max_tokens=max_tokens, max_batch_size=batch_size, max_pad_fraction=max_pad_fraction)
    ahead = bool(prepared.encoder_ids) and not encoder_only
    encoded: EncodedAhead | None = None  # the encoder's outputs for the slice of the plan running now

    def forward(batch_rows: list[int]) -> tuple[list[int], np.ndarray, int]:
        with torch.inference_mode():  # per thread: the workers below need it too
            batch = model.collate(
                [prepared.pieces[r] for r in batch_rows],
                None if prepared.encoder_ids is None or ahead else [prepared.encoder_ids[r] for r in batch_rows],
            )
            if encoded is not None:
                batch.contextual, batch.sentence = encoded.rows(batch_rows)
            batch = batch.to(model.device)
            padded = batch.encoder_input_ids if encoder_only else batch.input_ids
            assert padded is not None  # encoder_only: the batch holds the encoder ids
            return batch_rows, model(batch, truncate_dim).float().cpu().numpy(), int(padded.numel())

    workers = model.encoder_workers if encoder_only else model.batch_workers
    for part in _slices(plan, ENCODER_AHEAD_TEXTS) if ahead else [plan]:
        if ahead:
            assert prepared.encoder_ids is not None  # ahead checked it
            slice_rows = [r for batch_rows in part for r in batch_rows]
            encoded = encode_ahead(
                model,
                prepared.encoder_ids,
                slice_rows,
                max_tokens=encoder_budget,
                batch_size=batch_size,
                on_batch=on_encoded,
            )
        for batch_rows, vectors, padded in forward_batches(forward, part, workers):
            out[[targets[r] for r in batch_rows]] = vectors
            if on_batch is not None:
                on_batch(len(batch_rows), padded)


def _slices(plan: list[list[int]], texts: int) -> Iterator[list[list[int]]]:
    """Consecutive runs of ``plan``'s batches, each holding at least ``texts`` texts (the last: what is left)."""
    part: list[list[int]] = []
    held = 0
    for batch_rows in plan:
        part.append(batch_rows)
        held += len(batch_rows)
        if held >= texts:
            yield part
            part, held = [], 0
    if part:
        yield part


@dataclass(frozen=True)
class EncodedAhead:
    """The encoder's outputs for some rows of a :class:`PreparedTexts` (:func:`encode_ahead`): C [N, n, d] and the
    encoder's own sentence vector [N, k] (:meth:`Causal2Vec.encoder_pass`); ``index`` maps a row to its place."""

    index: dict[int, int]
    contextual: torch.Tensor
    sentence: torch.Tensor

    def rows(self, rows: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        at = torch.as_tensor([self.index[r] for r in rows], device=self.contextual.device)
        return self.contextual[at], self.sentence[at]


def encode_ahead(
    model: EncodingModel,
    encoder_ids: Sequence[Sequence[int]],
    rows: Sequence[int],
    *,
    max_tokens: int,
    batch_size: int,
    on_batch: Callable[[int], None] | None = None,
) -> EncodedAhead:
    """Run the encoder over ``rows`` of ``encoder_ids`` in batches planned by its own lengths and budget, before
    the decoder's batches of those rows; ``on_batch(texts)`` after each.

    The decoder's batches are planned by decoder lengths, and with an ingest's ``decoder_max_length`` most chunks
    share one: inside those batches the encoder, which reads every token of a chunk, padded much and ran in
    batches sized for the decoder (bench/encoder_ahead.py measures both)."""
    plan = plan_batches([len(encoder_ids[r]) for r in rows], max_tokens=max_tokens, max_batch_size=batch_size)

    def forward(batch: list[int]) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        with torch.inference_mode():  # per thread, as in embed_prepared
            contextual, sentence = model.encoder_pass([encoder_ids[rows[i]] for i in batch])
        return batch, contextual, sentence

    with torch.inference_mode():
        contextual = sentence = torch.empty(0)
        for batch, c, s in forward_batches(forward, plan, model.encoder_workers):
            if not contextual.numel():
                contextual = c.new_empty((len(rows), *c.shape[1:]))
                sentence = s.new_empty((len(rows), *s.shape[1:]))
            at = torch.as_tensor(batch, device=c.device)
            contextual[at], sentence[at] = c, s
            if on_batch is not None:
                on_batch(len(batch))
    return EncodedAhead({r: i for i, r in enumerate(rows)}, contextual, sentence)


def _run(
    model: EncodingModel,
    texts: Sequence[str],
    instruction: Instruction,
    out: np.ndarray,
    max_tokens: int,
    batch_size: int,
    show: bool,
    truncate_dim: int | None = None,
    observer: EncodeObserver | None = None,
    max_length: int | None = None,
    *,
    encoder_budget: int | None = None,
) -> Truncation:
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    decoder_truncated = encoder_truncated = 0
    was_training = model.training
    model.eval()
    # Characters of the texts embedded so far, in the order the batches run (the order above): the work done, which
    # the bar's percentage and ETA follow (by texts, the longest first would make its early ETAs far too long).
    chars = np.cumsum([0] + [len(texts[i]) for i in order])
    total_chars = max(1, int(chars[-1]))
    progress = CountingBar(
        total=total_chars,
        items=len(texts),
        noun="texts",
        desc=_bar_label.get(),
        disable=not show,
        **unsized_terminal(sys.stderr),
    )
    done = encoded = 0  # texts through the whole model; texts the encoder ran ahead over
    encoder_share = 0.0  # ENCODER_WORK_SHARE once the encoder is seen running ahead (before any text is done)
    started = time.perf_counter()

    def report() -> None:
        work = encoder_share * chars[encoded] + (1 - encoder_share) * chars[done]
        progress.update(int(work) - progress.n)
        if observer is not None:
            observer.encoded(done, len(texts), float(work) / total_chars)

    def on_encoded(n: int) -> None:
        nonlocal encoded, encoder_share
        if not done:
            encoder_share = ENCODER_WORK_SHARE
        encoded += n
        report()

    def on_batch(n: int, _tokens: int) -> None:
        nonlocal done
        done += n
        progress.count = done
        progress.set_postfix_str(f"{done / max(time.perf_counter() - started, 1e-9):.1f} texts/s", refresh=False)
        report()

    try:
        for start in range(0, len(order), _WINDOW):
            window = order[start : start + _WINDOW]
            prepared = prepare_texts(
                model, [texts[i] for i in window], instruction, truncate_dim=truncate_dim, max_length=max_length
            )
            decoder_truncated += sum(prepared.decoder_truncated)
            encoder_truncated += sum(prepared.encoder_truncated)
            embed_prepared(
                model,
                prepared,
                out,
                window,
                max_tokens=max_tokens,
                batch_size=batch_size,
                on_batch=on_batch,
                truncate_dim=truncate_dim,
                encoder_max_tokens=encoder_budget,
                on_encoded=on_encoded,
            )
    finally:
        progress.close()
        model.train(was_training)
    limit = model.max_seq_length if max_length is None else max_length
    return Truncation(len(texts), decoder_truncated, encoder_truncated, limit, model.encoder_max_length)


def send_truncation(observer: EncodeObserver | None, model: EncodingModel, truncated: Truncation) -> None:
    """What one encode call cut, to ``observer`` (who reports it once per run), else logged for ``model``."""
    if observer is not None:
        observer.truncated(truncated)
    else:
        report_truncation(model, truncated)


def report_truncation(model: EncodingModel, truncated: Truncation) -> None:
    """Log what the decoder and the encoder truncated, if anything: at WARNING the first time for ``model``
    (its ``truncation_warned``), at DEBUG after that."""
    message = truncated.message()
    if message is None:
        return
    # Reported once per model: a loop calling encode per batch would otherwise flood the log.
    level = logging.DEBUG if model.truncation_warned else logging.WARNING
    model.truncation_warned = True
    logger.log(level, message)
