"""The options of the RAG calls, declared once: where the store is, which model embeds, how a search runs.

- :class:`ConnectionOptions`: the Qdrant store (a server or an embedded directory), resolved to a
  :class:`~c2v_rag.store.collection.QdrantConfig`;
- :class:`ModelOptions`: the model and how it is loaded, resolved once to a :class:`ResolvedModel`;
- :class:`SearchOptions`: how one search runs (:class:`CommonSearchOptions`: the part ``/v1/search`` takes).

A :class:`~c2v_rag.Collection` holds the first two; its ``search`` takes the third. The keyword forms
(:class:`OpenKeywords`, :class:`SearchKeywords`) type the same fields for ``**kwargs``
(tests/rag/test_options.py checks that each names its models' fields). Keyword arguments are taken as given
(:meth:`_Options.as_given`): each value is checked where the library always checked it (a bad filter before any
model loads, a mode the collection cannot serve once the collection is read), with the library's messages.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, cast

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, StrictInt, field_validator

from c2v_rag.store.backends import StoreKind
from c2v_rag.store.collection import DEFAULT_COLLECTION, QdrantConfig, recorded_readout
from c2v_rag.store.query import Fusion, SearchMode

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from typing import Self

    from qdrant_client import AsyncQdrantClient
    from qdrant_client.http import models

    from c2v_rag.core.config import Causal2VecConfig
    from c2v_rag.hub.variants import VariantDigests
    from c2v_rag.model.causal2vec import Causal2Vec
    from c2v_rag.store.filters import FilterLike
    from c2v_rag.store.store_backend import StoreClient


class _Options(BaseModel):
    """A set of options: no unknown fields; the model, a filter and a QdrantConfig are objects."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    @classmethod
    def as_given(cls, values: Mapping[str, Any]) -> Self:
        """The fields of this set that ``values`` names, as given, the others at their defaults.

        Nothing is validated here (``model_construct``): each value is checked where it is used, so the
        library's errors and their order stay. ``values`` may hold other sets' fields; they are left to those.
        """
        # pydantic's mypy plugin types model_construct as returning the class it is defined on, not cls
        return cast("Self", cls.model_construct(**{name: values[name] for name in cls.model_fields if name in values}))


class ConnectionOptions(_Options):
    """Where the Qdrant store is: a server (``qdrant_url``) or an embedded directory (``path``).

    The open client a call may take (``client=``) is not an option: it is an object the caller
    owns, and it replaces the connection these options describe.
    """

    qdrant_url: str | None = Field(
        default=None, description="a Qdrant server, e.g. https://host:6333; None: embedded Qdrant in path"
    )
    path: str | Path | None = Field(
        default=None, description="the embedded Qdrant directory; None: $C2V_RAG_QDRANT_PATH or the user data directory"
    )
    api_key: SecretStr | None = Field(
        default=None, description="the server's API key; None: $QDRANT_API_KEY. Never logged, not in repr"
    )
    prefer_grpc: bool | None = Field(default=None, description="talk gRPC to the server; None: qdrant's setting")
    store: StoreKind | None = Field(
        default=None,
        description="the embedded engine: 'local' (qdrant-client's local mode) or 'edge' (Qdrant "
        "Edge); None: an existing directory's, else local",
    )
    qdrant: QdrantConfig | None = Field(
        default=None,
        description="the full QdrantConfig (timeouts, vector names, storage); the fields above, "
        "when set, are laid over it",
    )

    @classmethod
    def as_given(cls, values: Mapping[str, Any]) -> Self:
        """:meth:`_Options.as_given`, with a plain-string ``api_key`` wrapped, so repr never shows it."""
        options = super().as_given(values)
        if isinstance(options.api_key, str):
            options.api_key = SecretStr(options.api_key)
        return options

    def resolve(self) -> QdrantConfig:
        """The store these options name: ``qdrant`` with the fields that are set laid over it, the
        default directory filled in and an existing directory's engine detected
        (:meth:`QdrantConfig.resolve <c2v_rag.store.collection.QdrantConfig.resolve>`, which also
        refuses a directory another engine wrote)."""
        api_key = self.api_key.get_secret_value() if isinstance(self.api_key, SecretStr) else self.api_key
        return QdrantConfig.resolve(self.qdrant, self.qdrant_url, self.path, api_key, self.prefer_grpc, self.store)


class ModelOptions(_Options):
    """The model that embeds, and how it is loaded (:func:`~c2v_rag.rag.embedding.load_model`: once
    per model, device, dtype and quantization, shared with every other caller).

    :meth:`resolve` reads the variant once, before its weights load: what a collection records about it
    (:class:`ResolvedModel`), so an ingest checks the collection first and a search the model.
    """

    # Any: a loaded Causal2Vec is an object pydantic cannot describe, and naming its class here
    # would import the model layer (torch) with these options.
    model: Any = Field(
        default=None,
        description="a preset name, a variant directory or a loaded Causal2Vec; None: the default "
        "preset (search: the model the collection was built with; another is refused)",
    )
    device: str | None = Field(default=None, description="cpu, cuda, cuda:1...; None: cuda when present")
    dtype: str | None = Field(default=None, description="auto, float32, bfloat16 or float16; None: auto")
    quantize: str | None = Field(
        default=None,
        description="'none', 'int8' (the decoder's linear layers in int8, CPU) or 'auto' (int8 where it met the "
        "quality bound); None: an ingest into an existing collection keeps its kind, new vectors get 'auto' "
        "($C2V_RAG_QUANTIZE sets another); search: the collection's own",
    )

    # Variants resolved by this object, by (model, the collection's recorded model): read once per handle.
    _resolved: dict[tuple[Any, str | None], ResolvedModel] = PrivateAttr(default_factory=dict)

    def resolve(self, recorded: str | None = None) -> ResolvedModel:
        """The variant read once (its reference, config and weights' digest), before its weights load.
        ``recorded`` (a collection's model) stands in when ``model`` is None."""
        key = (self.model, None if self.model is not None else recorded)
        if key not in self._resolved:
            if self.model is not None or recorded is None:
                self._resolved[key] = ResolvedModel.of(self)
            else:
                self._resolved[key] = _resolve_recorded(self.model_copy(update={"model": recorded}), recorded)
        return self._resolved[key]


def _resolve_recorded(chosen: ModelOptions, recorded: str) -> ResolvedModel:
    """The model a collection (or embed folder) recorded, resolved here; where this machine does not have it (the
    vectors were made elsewhere: a cluster's path, a copied store), an error that says where the name came from and
    how to name the same variant here."""
    from c2v_rag.core.errors import VariantLoadError

    try:
        return ResolvedModel.of(chosen)
    except VariantLoadError as err:
        raise VariantLoadError(
            f"the collection records its model as {recorded!r}, which is not found on this machine. Pass "
            "model=... the same variant's folder (or preset) here: its weights are checked against the ones that "
            "made the collection"
        ) from err


@dataclass(frozen=True)
class ResolvedModel:
    """A model reference resolved once: what a collection records about it, and how it loads.

    ``reference`` is the preset name or the resolved variant directory (None for a loaded model, which has no
    name to reload it by); ``config`` the variant's config; ``digests`` what tells it from another variant with
    that config (:class:`~c2v_rag.hub.variants.VariantDigests`: its weight files, adapter configs, base models'
    contents). A missing or corrupt variant fails here, before anything else is done
    (:class:`~c2v_rag.core.errors.VariantLoadError`).
    """

    options: ModelOptions
    reference: str | None
    config: Causal2VecConfig
    # ``digests`` computed when first asked: hashing the base models converts a packaged GGUF first (half a
    # gigabyte, seconds), which what needs the config alone (c2v-rag env's rerank line) must not pay.
    compute_digests: Callable[[], VariantDigests]
    # The part weights it is read at when not its own (a collection's record): ``config`` has them already.
    readout: dict[str, Any] | None = None

    @cached_property
    def digests(self) -> VariantDigests:
        return self.compute_digests()

    @classmethod
    def of(cls, options: ModelOptions) -> ResolvedModel:
        from c2v_rag.core.config import read_config
        from c2v_rag.hub.presets import DEFAULT_PRESET, resolve_variant_path
        from c2v_rag.hub.variants import VariantDigests
        from c2v_rag.model.causal2vec import Causal2Vec

        model = options.model
        if isinstance(model, Causal2Vec):
            return cls(options, None, model.config, lambda: VariantDigests.of_model(model))
        if model is not None and not isinstance(model, (str, Path)):
            raise TypeError(
                f"model must be a preset name, a variant directory or a Causal2Vec, got {type(model).__name__}"
            )
        path = resolve_variant_path(model)
        as_path = Path(model).expanduser() if model is not None else None
        reference = DEFAULT_PRESET if as_path is None else str(as_path.resolve()) if as_path.is_dir() else str(model)
        config = read_config(path)
        return cls(options, reference, config, lambda: VariantDigests.of_directory(path, config))

    @property
    def loaded(self) -> Causal2Vec | None:
        """The model object the caller passed, if any."""
        return None if self.reference is not None else self.options.model

    def quantization(self, recorded: Mapping[str, Any] | None = None) -> str:
        """What an ingest runs with and a collection records as ``quantize``, before the weights load: a loaded
        model's own; else the one asked for; else the one an existing collection recorded (``recorded``, its
        fingerprint), so that its vectors stay of one kind; else the default for new vectors
        (:func:`~c2v_rag.core.devices.default_quantize`: ``auto``). Resolved for the device."""
        from c2v_rag.core.devices import default_quantize, int8_runtime_installed, resolve_device, resolve_quantize

        quantize, loaded = self.options.quantize, self.loaded
        if loaded is not None:
            if quantize is not None and resolve_quantize(quantize, loaded.device) != loaded.quantization:
                raise ValueError(
                    f"quantize={quantize!r} does not apply to a loaded model (it is quantize="
                    f"{loaded.quantization!r}): load it with Causal2Vec.from_pretrained(..., quantize=...)"
                )
            return loaded.quantization
        device = resolve_device(self.options.device)
        if quantize is None and recorded is not None:
            # A collection from before quantize was recorded holds float vectors. Where int8 cannot run (a GPU,
            # no int8 extra), float vectors join int8 ones and float queries search them: the two kinds search
            # each other alike (check_model; docs/performance.md, "Mixing float and int8 vectors").
            kept = recorded.get("quantize") or "none"
            if kept == "none" or (device.type == "cpu" and int8_runtime_installed()):
                return kept
            logger.info(
                "the collection holds %s vectors, which this machine cannot compute (%s): embedding in float, "
                "which searches them alike",
                kept,
                "no int8 extra: pip install 'c2v-rag[int8]'"
                if device.type == "cpu"
                else f"int8 runs on a CPU, not {device}",
            )
            return "none"
        return resolve_quantize(default_quantize() if quantize is None else quantize, device)

    def load(self, default_quantize: str | None = None, readout: Mapping[str, Any] | None = None) -> Causal2Vec:
        """The model: a loaded one as given, else the shared one (:func:`~c2v_rag.rag.embedding.load_model`),
        with ``default_quantize`` when none was asked for and the part weights (``readout``) a collection recorded
        (search and reindex pass the collection's own; else :attr:`readout`, see :meth:`reading`)."""
        from c2v_rag.rag.embedding import load_model

        if self.loaded is not None:
            return self.loaded
        quantize = self.options.quantize if self.options.quantize is not None else default_quantize
        return load_model(
            self.reference,
            device=self.options.device,
            dtype=self.options.dtype,
            quantize=quantize,
            readout=readout if readout is not None else self.readout,
        )

    def reading(self, recorded: Mapping[str, Any] | None) -> ResolvedModel:
        """This model as it adds vectors to a collection that recorded ``recorded`` (its fingerprint; None: a new
        one): a named model at the part weights the collection recorded, so that old and new vectors are read
        alike, as a search by name reads them (a collection made by an earlier release keeps its weights). A
        loaded model is used as it is; the collection check then names the ``set_readout`` that fits."""
        from c2v_rag.model.causal2vec import readout_config
        from c2v_rag.store.collection import recorded_readout

        readout = recorded_readout(recorded)
        if (
            self.loaded is not None
            or readout is None
            or all(getattr(self.config, name) == value for name, value in readout.items())
        ):
            return self
        try:
            config = readout_config(self.config, **readout)
        except ValueError:  # weights this variant cannot be read at (another layout): the check names the mismatch
            return self
        return replace(self, config=config, readout=readout, compute_digests=lambda: self.digests)  # hashed once

    def as_recorded(self, recorded: Mapping[str, Any] | None) -> Causal2Vec:
        """The model, run as a collection's record says its vectors were made: its quantization unless another
        is asked for, and its part weights (``encoder_share``, ``part_weights``)."""
        recorded = recorded or {}
        # the collection's kind where it can run here, else float, as an ingest into it decides (quantization)
        quantize = None if self.loaded is not None else self.quantization(recorded)
        return self.load(default_quantize=quantize, readout=recorded_readout(recorded))


class CommonSearchOptions(_Options):
    """What every search of a collection takes, the server's ``/v1/search`` included: the
    query's task and in-context examples, the retrieval mode, and which points come back."""

    task: str | None = Field(
        default=None,
        description="a registered task whose instruction the query gets ('c2v-rag tasks' lists them); "
        "None: the variant's default, else MS MARCO's. Documents were stored without one",
    )
    examples: list[tuple[str, str]] | None = Field(
        default=None,
        description="in-context (query, response) pairs before the query's instruction (Causal2Vec "
        "w/ ICL); None: the task's registered ones, []: none",
    )
    filter: Any = Field(
        default=None,
        description="a qdrant_client.models.Filter (used as is) or the dict form of "
        "c2v_rag.store.filters: {'topic': 'x'}, {'lang': ['en', 'de']}, "
        "{'year': {'gte': 2020}}, {'must_not': {...}}",
    )
    score_threshold: float | None = Field(
        default=None, description="leave out hits scoring below it (the mode's score: cosine, BM25 or fused)"
    )
    mode: SearchMode = Field(
        default="dense",
        description="'dense' (the model's vectors), 'sparse' (BM25) or 'hybrid' (both, fused); the "
        "last two need a collection ingested with sparse='bm25'",
    )
    fusion: Fusion = Field(
        default="rrf",
        description="how mode='hybrid' merges the dense and the BM25 lists, both in Qdrant: 'rrf' "
        "(reciprocal rank) or 'dbsf' (distribution-based score fusion)",
    )
    group_by_document: bool = Field(
        default=False,
        description="the top_k best documents rather than chunks: each hit is a document's best "
        "chunk, with its score (MaxP: a long document ranks by its best passage, and no "
        "document fills several places); points without a doc_id are left out",
    )


class RerankOption(_Options):
    """The second stage of a search by a query's text: :class:`SearchOptions` and the server's ``/v1/search``."""

    rerank: StrictInt | Literal["auto"] | None = Field(
        default="auto",
        description="rerank the first stage's top N hits (N >= top_k) by the decoder's likelihood of the query "
        "given each hit, fused with their scores, and return the best top_k (each hit's rerank_score); None: no "
        "reranking; 'auto': the top 20 where the decoder is fast (int8 with AVX-512, bf16 or fp16), the top 10 in "
        "int8 on AVX2, none where it would compute in float32, or what $C2V_RAG_RERANK says. Costs a decoder pass "
        "over N hits per query (docs/ingest-and-search.md)",
    )

    @field_validator("rerank", mode="before")
    @classmethod
    def _one_rerank_error(cls, value: Any) -> Any:
        # One error naming the field, where the union's own would name each member ("rerank.int").
        if value is None or value == "auto" or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        raise ValueError(
            f"must be a positive integer (how many first-stage hits to rerank), 'auto' or null, got {value!r}"
        )


class SearchOptions(RerankOption, CommonSearchOptions):
    """How one search runs: :class:`CommonSearchOptions`, the reranker, a literal query instruction and what each
    hit carries. The query and ``top_k`` belong to the call, the store and the model to the
    :class:`~c2v_rag.Collection`; ``collection`` names the collection for :func:`c2v_rag.search` (a handle's search
    checks it is its own)."""

    collection: str = Field(
        default=DEFAULT_COLLECTION,
        description="a collection or an alias (resolved once per call, so a reindex "
        "switching the alias meanwhile is never half-seen)",
    )
    instruction: str | None = Field(default=None, description="a literal query instruction instead of task")
    with_vectors: bool = Field(default=False, description="also return each hit's stored dense vector")
    show_progress: bool = Field(
        default=False,
        description="progress bars with an ETA while the queries are embedded and while they are reranked (a "
        "search_many over an evaluation set's questions)",
    )


class OpenKeywordsWithoutUrl(TypedDict, total=False):
    """:class:`OpenKeywords` less ``qdrant_url``: the keywords of :func:`c2v_rag.ingest`, which takes the URL as a
    parameter of its own too."""

    path: str | Path | None
    api_key: str | SecretStr | None
    prefer_grpc: bool | None
    store: StoreKind | None
    qdrant: QdrantConfig | None
    model: str | Path | Causal2Vec | None
    device: str | None
    dtype: str | None
    quantize: str | None
    client: StoreClient | AsyncQdrantClient | None


class OpenKeywords(OpenKeywordsWithoutUrl, total=False):
    """The keyword form of :class:`ConnectionOptions` and :class:`ModelOptions`, and an open ``client``: what
    :class:`~c2v_rag.Collection` and every top-level function take to name the store and the model."""

    qdrant_url: str | None


class SearchKeywords(TypedDict, total=False):
    """The keyword form of :class:`SearchOptions` (less ``collection``, which a handle has), and ``options=``
    (a whole :class:`SearchOptions`, the keywords given laid over it)."""

    task: str | None
    instruction: str | None
    examples: Sequence[tuple[str, str]] | None
    filter: FilterLike | models.Filter | None
    score_threshold: float | None
    mode: SearchMode
    fusion: Fusion
    with_vectors: bool
    show_progress: bool
    group_by_document: bool
    rerank: int | Literal["auto"] | None
    options: SearchOptions | None


OPEN_KEYS = frozenset(OpenKeywords.__annotations__)
SEARCH_KEYS = frozenset(SearchKeywords.__annotations__)


def split_keywords(where: str, kwargs: Mapping[str, Any], *allowed: frozenset[str]) -> list[dict[str, Any]]:
    """``kwargs`` split into one dict per key set in ``allowed``; a key in none of them is a TypeError worded
    as Python words one for a named parameter, before anything else is looked at."""
    known = frozenset().union(*allowed)
    for key in kwargs:
        if key not in known:
            raise TypeError(f"{where}() got an unexpected keyword argument {key!r}")
    return [{k: v for k, v in kwargs.items() if k in keys} for keys in allowed]


def search_options(where: str, given: Mapping[str, Any], collection: str | None = None) -> SearchOptions:
    """The :class:`SearchOptions` of a call: ``options=`` (or the defaults) with the search keywords given laid
    over it, as given; ``collection``, when named, must agree with the options' own."""
    options = given.get("options")
    if options is not None and not isinstance(options, SearchOptions):
        raise TypeError(f"{where}() options must be a SearchOptions, got {type(options).__name__}")
    fields = {k: v for k, v in given.items() if k != "options"}
    if collection is not None:
        if options is not None and "collection" in options.model_fields_set and options.collection != collection:
            raise ValueError(
                f"{where}(): options.collection={options.collection!r} is not this collection ({collection!r})"
            )
        fields["collection"] = collection
    if options is None:
        return SearchOptions.as_given(fields)
    return options.model_copy(update=fields) if fields else options
