"""One loaded model per (model, device, dtype), and the query/document instruction policy.

Ingestion, search and the LlamaIndex and LangChain integrations all embed through here, so they
share loaded weights and put instructions on the same side: queries get the task instruction,
documents get none (unless the task is symmetric or a document instruction is set).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

from c2v_rag.core.instructions import check_examples, check_task, get_task, query_prompt
from c2v_rag.documents.chunking import check_decoder_tokens, decoder_tokens
from c2v_rag.encode.long_texts import LongTextMode, LongTexts, resolve_long_texts

if TYPE_CHECKING:
    from c2v_rag.model.causal2vec import Causal2Vec

ModelRef = str | Path | None

logger = logging.getLogger(__name__)

_cache: dict[tuple[str, str, str, str, str | None], Causal2Vec] = {}
_cache_lock = threading.Lock()
_LOCK_ATTR = "_c2v_rag_encode_lock"


def _model_key(
    model: ModelRef,
    device: str | None,
    dtype: str | None,
    quantize: str | None = None,
    readout: Mapping[str, Any] | None = None,
) -> tuple[str, str, str, str, str | None]:
    from c2v_rag.core.devices import resolve_device, resolve_quantize
    from c2v_rag.hub.presets import DEFAULT_PRESET, PRESETS_DIR

    name = DEFAULT_PRESET if model is None else str(model)
    path = Path(name).expanduser()
    if path.is_dir() and path.resolve().parent != PRESETS_DIR.resolve():
        name = str(path.resolve())
    target = resolve_device(device)
    fields = None if readout is None else json.dumps(dict(readout))  # part_weights' order is the vector's layout
    return name, str(target), str(dtype or "auto"), resolve_quantize(quantize, target), fields


def load_model(
    model: ModelRef = None,
    *,
    device: str | None = None,
    dtype: str | None = None,
    quantize: str | None = None,
    readout: Mapping[str, Any] | None = None,
) -> Causal2Vec:
    """The shared :class:`~c2v_rag.Causal2Vec` for a preset or variant directory, loaded once.

    Every caller naming the same model, device, dtype and quantization (``quantize``, resolved:
    ``auto`` and ``int8`` share one model where auto means int8) gets the same object. Another
    truncation length is an encode option (``encode(..., max_length=)``, :class:`Embedder`'s
    ``max_length``), not another model: a second module object sharing the backbones would let its
    ``.train()``/``.to()`` change the model every other caller holds.
    ``readout`` reads the embedding at other part weights than the variant's (``encoder_share``,
    ``part_weights``: what a collection recorded): a model of its own, shared by the callers that name the same.
    A variant whose files changed since it was loaded (saved again over its folder, a base model replaced) is
    loaded again: the name alone does not say which weights it holds.
    """
    from c2v_rag.model.causal2vec import Causal2Vec

    def shared(fields: Mapping[str, Any] | None) -> Causal2Vec:
        key = _model_key(model, device, dtype, quantize, fields)
        if key in _cache and not _files_unchanged(_cache[key], model):
            logger.info("%s changed since it was loaded: loading it again", key[0])
            for stale in [k for k in _cache if k[:4] == key[:4]]:  # its other readouts hold the old weights too
                del _cache[stale]
        if key not in _cache:
            _cache[key] = Causal2Vec.from_pretrained(
                key[0] if model is not None else None, device=device, dtype=dtype, quantize=key[3]
            )
            if fields is not None:  # another readout of the same weights: its own object, the shared one untouched
                _cache[key].set_readout(**fields)
        return _cache[key]

    with _cache_lock:
        loaded = shared(None)
        if readout is not None and any(getattr(loaded.config, name) != value for name, value in readout.items()):
            loaded = shared(readout)
    return loaded


def _files_unchanged(loaded: Causal2Vec, model: ModelRef) -> bool:
    """Whether the variant ``model`` names is still what ``loaded`` was loaded from: the same weight files, adapter
    configs and base models (:class:`~c2v_rag.hub.variants.VariantDigests`, a few ``stat`` calls and two small
    reads once the digests are known). A folder that cannot be read now keeps the model loaded from it."""
    from c2v_rag.core.config import read_config
    from c2v_rag.core.errors import C2VError
    from c2v_rag.hub.presets import resolve_variant_path
    from c2v_rag.hub.variants import VariantDigests

    try:
        path = resolve_variant_path(model)
        now = VariantDigests.of_directory(path, read_config(path))
    except (C2VError, OSError) as err:
        logger.debug("kept the loaded %s: its folder cannot be read now (%s)", model, err)
        return True
    return now == VariantDigests.of_model(loaded)


def clear_model_cache() -> None:
    """Forget every shared model, so its memory is freed once no one else holds it."""
    with _cache_lock:
        _cache.clear()


def encode_lock(model: Causal2Vec) -> threading.Lock:
    """The lock that serializes encode calls on ``model``.

    HF fast tokenizers raise "Already borrowed" when one instance is used from two threads, and
    concurrent forward passes only fight over the same cores; async callers queue here instead.
    """
    return model.__dict__.setdefault(_LOCK_ATTR, threading.Lock())


class Embedder:
    """Embeds documents and queries with one model and one instruction policy.

    Args:
        model: a loaded :class:`~c2v_rag.Causal2Vec`.
        task: a registered task name; its instruction goes on queries (and on documents for
            symmetric tasks).
        query_instruction: a literal query instruction instead of ``task`` (``""`` for none).
        query_examples: in-context ``(query, response)`` pairs before the query instruction (Causal2Vec
            "w/ ICL"); None uses the task's registered ones, ``[]`` none. Documents get none, except
            those of a symmetric task, where every input is a query.
        text_instruction: an instruction for documents too (symmetric use); none by default.
        normalize: unit-length vectors, so cosine and dot product agree.
        long_texts: ``"truncate"`` or ``"chunk"`` (or a :class:`~c2v_rag.encode.long_texts.LongTexts`): what
            ``encode`` does with a text longer than the model reads.
        truncate_dim: keep the first that many values (Matryoshka), one of the sizes the variant was
            trained for (``config.matryoshka_dims``); None keeps the whole vector.
        max_length: decoder tokens per input (``encode(..., max_length=)``); None keeps the model's.
        decoder_max_length: decoder tokens of each document, as an ingest's ``decoder_max_length`` reads its chunks
            (the encoder, and through it the Contextual token, still reads the whole text); queries keep
            ``max_length``. None: documents read to ``max_length`` too.
    """

    def __init__(
        self,
        model: Causal2Vec,
        *,
        task: str | None = None,
        query_instruction: str | None = None,
        text_instruction: str | None = None,
        query_examples: Sequence[tuple[str, str]] | None = None,
        normalize: bool = True,
        show_progress: bool = False,
        batch_size: int = 256,
        max_tokens_per_batch: int | None = None,
        long_texts: str | LongTexts = "truncate",
        truncate_dim: int | None = None,
        max_length: int | None = None,
        decoder_max_length: int | None = None,
    ) -> None:
        if task is not None and query_instruction is not None:
            raise ValueError("pass either task= or query_instruction=, not both")
        self.model = model
        self.truncate_dim = truncate_dim  # checked once, where encode cuts it (a size not trained for is refused)
        self.long_texts = resolve_long_texts(long_texts)
        self.task = task
        self.query_instruction = query_instruction
        self.text_instruction = text_instruction
        self.query_examples = None if query_examples is None else check_examples(query_examples, where="query_examples")
        self.normalize = normalize
        self.show_progress = show_progress
        self.batch_size = batch_size
        self.max_tokens_per_batch = max_tokens_per_batch
        self.max_length = max_length
        self.decoder_max_length = decoder_max_length

    @classmethod
    def for_documents(cls, model: Causal2Vec, settings: Any) -> Embedder:
        """The embedder an ingest, an embed run or a Ray actor writes documents with: unit vectors, and
        ``settings``' ``task``, ``text_instruction``, ``batch_size``, ``max_tokens_per_batch``, ``truncate_dim``
        and ``decoder_max_length`` (an :class:`~c2v_rag.rag.ingestion.config.IngestConfig` or a Ray ``EmbedJob``)."""
        return cls(
            model,
            task=settings.task,
            text_instruction=settings.text_instruction,
            normalize=True,
            batch_size=settings.batch_size,
            max_tokens_per_batch=settings.max_tokens_per_batch,
            truncate_dim=settings.truncate_dim,
            decoder_max_length=settings.decoder_max_length,
        )

    @property
    def dim(self) -> int:
        return self.truncate_dim or self.model.embedding_dim

    def query_prompt(self) -> dict[str, Any]:
        """The ``task``/``instruction``/``examples`` queries are encoded with (``encode_queries`` keywords):
        :func:`~c2v_rag.core.instructions.query_prompt`'s policy, as in every entry point."""
        task, instruction = query_prompt(self.model.config, task=self.task, instruction=self.query_instruction)
        return {"task": task, "instruction": instruction, "examples": self.query_examples}

    def document_prompt(self) -> dict[str, Any]:
        """The ``task``/``instruction``/``examples`` documents are encoded with (``encode_documents`` keywords)."""
        if self.text_instruction is not None:
            return {"instruction": self.text_instruction}
        examples = None
        if self.query_examples is not None and self.task is not None and get_task(self.task).symmetric:
            examples = self.query_examples  # a symmetric task's inputs are all queries (bge-en-icl)
        return {"task": self.task, "examples": examples}

    def _kwargs(self) -> dict[str, Any]:
        return dict(
            normalize_embeddings=self.normalize,
            show_progress_bar=self.show_progress,
            batch_size=self.batch_size,
            max_tokens_per_batch=self.max_tokens_per_batch,
            long_texts=resolve_long_texts(self.long_texts),
            truncate_dim=self.truncate_dim,
            max_length=self.max_length,
        )

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 document vectors, the decoder reading ``decoder_max_length`` tokens of each
        (else ``max_length``). Documents longer than that are read at it by choice, so that cut is not warned of."""
        from c2v_rag.encode.loop import decoder_cut_chosen

        texts = list(texts)
        cap = self.max_length if self.decoder_max_length is None else self.decoder_max_length
        chosen = decoder_cut_chosen(self.model) if cap is not None else contextlib.nullcontext()
        with encode_lock(self.model), chosen:
            vectors = self.model.encode_documents(
                texts, **self.document_prompt(), **{**self._kwargs(), "max_length": cap}
            )
        assert isinstance(vectors, np.ndarray)  # _kwargs asks for encode's default, numpy
        return vectors

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        """``(len(queries), dim)`` float32 query vectors, with the query instruction."""
        with encode_lock(self.model):
            vectors = self.model.encode_queries(list(queries), **self.query_prompt(), **self._kwargs())
        assert isinstance(vectors, np.ndarray)  # _kwargs asks for encode's default, numpy
        return vectors

    def embed_query(self, query: str) -> np.ndarray:
        """One query vector, 1-D."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, got {type(query).__name__}")
        return self.embed_queries([query])[0]


class EmbedderOptions(BaseModel):
    """The options the LlamaIndex and LangChain embedding classes share (pydantic fields)."""

    model: str | None = Field(default=None, description="variant directory or preset name; None is the default preset")
    task: str | None = Field(default=None, description="registered task whose instruction queries get")
    query_instruction: str | None = Field(default=None, description="literal query instruction instead of task")
    text_instruction: str | None = Field(default=None, description="instruction for documents too; none by default")
    query_examples: list[tuple[str, str]] | None = Field(
        default=None,
        description="in-context (query, response) pairs before the query instruction (Causal2Vec "
        "w/ ICL); None: the task's registered ones, []: none",
    )
    max_length: int | None = Field(default=None, ge=8, description="decoder tokens per input; None keeps the variant's")
    decoder_max_length: int | None = Field(
        default=None,
        ge=0,
        description="decoder tokens of each document, queries read whole (to max_length): 96 reads nodes as "
        "c2v_rag.ingest reads its chunks (docs/frameworks.md); the encoder still reads all of each. 0 or None: "
        "documents read to max_length",
    )
    normalize: bool = Field(default=True, description="unit-length vectors")
    device: str | None = Field(default=None, description="cpu, cuda, cuda:1...; None picks cuda when present")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = None
    quantize: Literal["none", "int8", "auto"] | None = Field(
        default=None,
        description="CPU: the decoder's linear layers in int8 (ONNX Runtime, the int8 extra; speed and "
        "agreement with float in docs/performance.md); auto: int8 where it was measured "
        "within the quality bound. Use the collection's setting",
    )
    show_progress: bool = Field(default=False, description="progress bar while encoding")
    max_tokens_per_batch: int | None = Field(default=None, ge=1, description="padded tokens per forward pass")
    long_texts: LongTextMode = Field(
        default="truncate",
        description="a text longer than the model reads: 'truncate' it, or 'chunk' it into "
        "overlapping windows whose unit vectors are mean-pooled into one",
    )
    dimensions: int | None = Field(
        default=None,
        ge=1,
        description="shorter vectors (Matryoshka): one of the sizes the variant was trained "
        "for (its matryoshka_dims), as OpenAI's embedding classes name it",
    )

    @model_validator(mode="after")
    def _check_prompt(self) -> EmbedderOptions:
        if self.task is not None and self.query_instruction is not None:
            raise ValueError("pass either task= or query_instruction=, not both")
        check_task(self.task, custom="query_instruction")
        if self.query_examples is not None:
            check_examples(self.query_examples, where="query_examples")
        check_decoder_tokens(self.decoder_max_length, whole="documents")
        self.decoder_max_length = decoder_tokens(self.decoder_max_length or 0)  # 0, as ingest takes it: None
        return self

    def check_dimensions(self) -> None:
        """A ValueError naming ``dimensions`` where the variant was not trained for that size, read from its config
        before any weights load (the framework classes call it once their model name is settled); a model the hub
        resolves is checked when it loads (:meth:`embedder`)."""
        if self.dimensions is None:
            return
        from c2v_rag.core.config import read_config
        from c2v_rag.core.errors import VariantLoadError
        from c2v_rag.hub.presets import resolve_variant_path

        try:
            folder = resolve_variant_path(self.model)
        except VariantLoadError:
            return  # not a preset or a folder: a hub id, whose config comes with its download
        read_config(folder).check_truncate_dim(self.dimensions, name="dimensions")

    def loaded_model(self) -> Causal2Vec:
        """The shared model these options name (loaded on first use); ``max_length`` applies per call
        (:meth:`embedder`), so this is the same object for every ``max_length``."""
        return load_model(self.model, device=self.device, dtype=self.dtype, quantize=self.quantize)

    def embedder(self, batch_size: int = 256) -> Embedder:
        """An :class:`Embedder` over the shared model; cheap, so it is built per call and never
        stored: a stored one would drag the weights into pickles and ``to_dict``."""
        model = self.loaded_model()
        model.config.check_truncate_dim(self.dimensions, name="dimensions")
        return Embedder(
            model,
            task=self.task,
            query_instruction=self.query_instruction,
            text_instruction=self.text_instruction,
            query_examples=self.query_examples,
            normalize=self.normalize,
            show_progress=self.show_progress,
            batch_size=batch_size,
            max_tokens_per_batch=self.max_tokens_per_batch,
            long_texts=self.long_texts,
            truncate_dim=self.dimensions,
            max_length=self.max_length,
            decoder_max_length=self.decoder_max_length,
        )


# sentence-transformers' encode() keywords that the framework classes accept in encode_kwargs /
# query_encode_kwargs (as LangChain's HuggingFaceEmbeddings does), and the Embedder option each sets.
ENCODE_KWARGS = {
    "batch_size": "batch_size",
    "normalize_embeddings": "normalize",
    "show_progress_bar": "show_progress",
    "max_tokens_per_batch": "max_tokens_per_batch",
    "long_texts": "long_texts",
    "truncate_dim": "truncate_dim",
    "prompt": None,
    "prompt_name": None,
}
PROMPT_NAMES = ("query", "document")


def check_encode_kwargs(kwargs: dict[str, Any], field: str) -> None:
    """Refuse what :func:`apply_encode_kwargs` would not use, naming the key and the accepted ones."""
    unknown = sorted(set(kwargs) - set(ENCODE_KWARGS))
    if unknown:
        raise ValueError(f"{field} has {unknown}, which Causal2Vec does not use; accepted: {sorted(ENCODE_KWARGS)}")
    if kwargs.get("prompt_name") not in (None, *PROMPT_NAMES):
        raise ValueError(
            f"{field}['prompt_name'] must be one of {PROMPT_NAMES}, got {kwargs['prompt_name']!r}; "
            "pass prompt='<instruction>' for any other instruction"
        )
    if "prompt" in kwargs and "prompt_name" in kwargs:
        raise ValueError(f"{field} has both prompt and prompt_name: pass one")
    if "long_texts" in kwargs:
        try:
            resolve_long_texts(kwargs["long_texts"])
        except (ValueError, TypeError) as err:
            raise ValueError(f"{field}['long_texts']: {err}") from None


def apply_encode_kwargs(embedder: Embedder, kwargs: dict[str, Any], side: Literal["query", "document"]) -> Embedder:
    """Set ``embedder``'s options from sentence-transformers-style encode keywords, for one side.

    ``prompt`` is the instruction for that side (``""`` for none); ``prompt_name="query"`` gives
    the side the query instruction, ``"document"`` the document one (none).
    """
    for key, option in ENCODE_KWARGS.items():
        if option is not None and key in kwargs:
            setattr(embedder, option, kwargs[key])
    instruction = kwargs.get("prompt")
    if kwargs.get("prompt_name") == "query":
        prompt = embedder.query_prompt()
        instruction = prompt["instruction"] if prompt["task"] is None else get_task(prompt["task"]).instruction
    elif kwargs.get("prompt_name") == "document":
        instruction = ""
    if instruction is not None:
        if side == "query":
            embedder.task, embedder.query_instruction = None, instruction
        else:
            embedder.text_instruction = instruction
    return embedder
