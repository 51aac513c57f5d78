"""The options of the RAG calls, declared once: where the store is, which model embeds, how a search runs.

- :class:`ConnectionOptions`: the Qdrant store (a server or an embedded directory), resolved to a
  :class:`~c2v_rag.rag.store.collection.QdrantConfig`;
- :class:`ModelOptions`: the model and how it is loaded;
- :class:`SearchOptions`: what one search asks of a collection (:class:`CommonSearchOptions`: the
  part ``/v1/search`` takes as well).

:func:`~c2v_rag.search`, :func:`~c2v_rag.search_many` and :func:`~c2v_rag.asearch` take every field
as a keyword argument (:class:`SearchKwargs`), and :func:`~c2v_rag.search` also a whole
``options=SearchOptions(...)``; the CLI's ``search`` and the server's ``/v1/search`` build a
:class:`SearchOptions` too, so the three read the same fields with the same meanings.

Building an options object by hand validates its field types, as pydantic does. The keyword
arguments of the search functions are taken as given instead (:meth:`ConnectionOptions.as_given`):
their values are checked by the library where they always were (a bad filter before any model
loads, a mode the collection cannot serve once the collection is read), with the library's messages.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ForwardRef, Literal, NamedTuple, TypedDict, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from c2v_rag.rag.store.collection import DEFAULT_COLLECTION, QdrantConfig
from c2v_rag.rag.store.query import Fusion, SearchMode

if TYPE_CHECKING:
    from typing_extensions import Self
    from qdrant_client.http import models

    from c2v_rag.model.causal2vec import Causal2Vec
    from c2v_rag.rag.store.filters import FilterLike

_F = TypeVar("_F", bound=Callable[..., Any])


class _Options(BaseModel):
    """A set of options: no unknown fields; the model, a filter and a QdrantConfig are objects."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    @classmethod
    def as_given(cls, kwargs: Mapping[str, Any]) -> "Self":
        """The fields of this set that ``kwargs`` names, as given, the others at their defaults.

        Nothing is validated here (``model_construct``): a function taking these options as keyword
        arguments checks each value at the point it always did, so its errors and their order stay.
        ``kwargs`` may hold other sets' fields; they are left to those.
        """
        return cls.model_construct(**{name: kwargs[name] for name in cls.model_fields if name in kwargs})


class ConnectionOptions(_Options):
    """Where the Qdrant store is: a server (``qdrant_url``) or an embedded directory (``path``).

    The open client a call may take (``client=``) is not an option: it is an object the caller
    owns, and it replaces the connection these options describe.
    """

    qdrant_url: str | None = Field(
        default=None, description="a Qdrant server, e.g. https://host:6333; None: embedded Qdrant in path")
    path: str | Path | None = Field(
        default=None, description="the embedded Qdrant directory; None: $C2V_RAG_QDRANT_PATH or the user data "
                                  "directory")
    api_key: SecretStr | None = Field(
        default=None, description="the server's API key; None: $QDRANT_API_KEY. Never logged, not in repr")
    prefer_grpc: bool | None = Field(default=None, description="talk gRPC to the server; None: qdrant's setting")
    store: Literal["local", "edge"] | None = Field(
        default=None, description="the embedded engine: 'local' (qdrant-client's local mode) or 'edge' (Qdrant "
                                  "Edge); None: an existing directory's, else local")
    qdrant: QdrantConfig | None = Field(
        default=None, description="the full QdrantConfig (timeouts, vector names, storage); the fields above, "
                                  "when set, are laid over it")

    @classmethod
    def as_given(cls, kwargs: Mapping[str, Any]) -> "Self":
        """:meth:`_Options.as_given`, with a plain-string ``api_key`` wrapped, so repr never shows it."""
        options = super().as_given(kwargs)
        if isinstance(options.api_key, str):
            options.api_key = SecretStr(options.api_key)
        return options

    def resolve(self) -> QdrantConfig:
        """The store these options name: ``qdrant`` with the fields that are set laid over it, the
        default directory filled in and an existing directory's engine detected
        (:meth:`QdrantConfig.resolve <c2v_rag.rag.store.collection.QdrantConfig.resolve>`, which also
        refuses a directory another engine wrote)."""
        api_key = self.api_key.get_secret_value() if isinstance(self.api_key, SecretStr) else self.api_key
        return QdrantConfig.resolve(self.qdrant, self.qdrant_url, self.path, api_key, self.prefer_grpc, self.store)


class ModelOptions(_Options):
    """The model that embeds, and how it is loaded (:func:`~c2v_rag.rag.embedding.load_model`: once
    per model, device, dtype and quantization, shared with every other caller)."""

    # Any: a loaded Causal2Vec is an object pydantic cannot describe, and naming its class here
    # would import the model layer (torch) with these options.
    model: Any = Field(
        default=None, description="a preset name, a variant directory or a loaded Causal2Vec; None: the default "
                                  "preset (search: the model the collection was built with; another is refused)")
    device: str | None = Field(default=None, description="cpu, cuda, cuda:1...; None: cuda when present")
    dtype: str | None = Field(default=None, description="auto, float32, bfloat16 or float16; None: auto")
    quantize: str | None = Field(
        default=None, description="'none', 'int8' (the decoder's linear layers in int8, CPU) or 'auto' (int8 where it met the "
                                  "quality bound); None: none (search: the collection's own; the other is refused)")

    def load(self, *, default_model: str | None = None, default_quantize: str | None = None) -> "Causal2Vec":
        """The model: a loaded Causal2Vec as given, else the shared one for these options, with
        ``default_model``/``default_quantize`` standing in for those left None (search passes the
        collection's own, the only ones whose query vectors compare with its points)."""
        from c2v_rag.model.causal2vec import Causal2Vec
        from c2v_rag.rag.embedding import load_model

        if isinstance(self.model, Causal2Vec):
            return self.model
        model = self.model if self.model is not None else default_model
        quantize = self.quantize if self.quantize is not None else default_quantize
        return load_model(model, device=self.device, dtype=self.dtype, quantize=quantize)


class CommonSearchOptions(_Options):
    """What every search of a collection takes, the server's ``/v1/search`` included: the
    query's task and in-context examples, and which points come back."""

    task: str | None = Field(
        default=None, description="a registered task whose instruction the query gets ('c2v-rag tasks' lists them); "
                                  "None: the variant's default, else MS MARCO's. Documents were stored without one")
    examples: list[tuple[str, str]] | None = Field(
        default=None, description="in-context (query, response) pairs before the query's instruction (Causal2Vec "
                                  "w/ ICL); None: the task's registered ones, []: none")
    filter: Any = Field(
        default=None, description="a qdrant_client.models.Filter (used as is) or the dict form of "
                                  "c2v_rag.rag.store.filters: {'topic': 'x'}, {'lang': ['en', 'de']}, "
                                  "{'year': {'gte': 2020}}, {'must_not': {...}}")
    score_threshold: float | None = Field(
        default=None, description="leave out hits scoring below it (the mode's score: cosine, BM25 or fused)")
    group_by_document: bool = Field(
        default=False, description="the top_k best documents rather than chunks: each hit is a document's best "
                                   "chunk, with its score (MaxP: a long document ranks by its best passage, and no "
                                   "document fills several places); points without a doc_id are left out")


class SearchOptions(CommonSearchOptions):
    """How :func:`~c2v_rag.search` searches: the collection, the query's instruction, the
    retrieval mode and what each hit carries. The query and ``top_k`` belong to the call."""

    collection: str = Field(
        default=DEFAULT_COLLECTION, description="a collection or an alias (resolved once per call, so a reindex "
                                                "switching the alias meanwhile is never half-seen)")
    instruction: str | None = Field(default=None, description="a literal query instruction instead of task")
    mode: SearchMode = Field(
        default="dense", description="'dense' (the model's vectors), 'sparse' (BM25) or 'hybrid' (both, fused); the "
                                     "last two need a collection ingested with sparse='bm25'")
    fusion: Fusion = Field(
        default="rrf", description="how mode='hybrid' merges the dense and the BM25 lists, both in Qdrant: 'rrf' "
                                   "(reciprocal rank) or 'dbsf' (distribution-based score fusion)")
    with_vectors: bool = Field(default=False, description="also return each hit's stored dense vector")


# The same fields as keyword arguments, for type checkers and IDEs (PEP 692: ``**kwargs:
# Unpack[SearchKwargs]`` checks each keyword's name and type, and completes them). Why this form:
# writing the twenty parameters on each function is the repetition these options remove, and a
# decorator copying a template function's parameters onto the three (a ParamSpec) needs a cast per
# function, for ``query`` against ``queries`` and async against sync, and leaves a template to keep.
# A TypedDict has to be written out for checkers to read it (pydantic cannot generate one they
# see), so each mirrors its model by name; tests/rag/test_options.py checks that they name the
# same fields. Types are the ones callers pass (a Sequence of examples, a plain string API key),
# which the models' fields accept; the defaults are the models' alone (spell_out_kwargs shows them).
class StoreKwargs(TypedDict, total=False):
    """:class:`ConnectionOptions` as keyword arguments, but for ``qdrant_url``, which ``ingest`` takes
    positionally (a keyword that repeats a named parameter is an error for type checkers)."""

    path: str | Path | None
    api_key: str | SecretStr | None
    prefer_grpc: bool | None
    store: Literal["local", "edge"] | None
    qdrant: QdrantConfig | None


class ConnectionKwargs(StoreKwargs, total=False):
    """:class:`ConnectionOptions` as keyword arguments."""

    qdrant_url: str | None


class ModelKwargs(TypedDict, total=False):
    """:class:`ModelOptions` as keyword arguments."""

    model: str | Path | Causal2Vec | None
    device: str | None
    dtype: str | None
    quantize: str | None


class SearchOptionsKwargs(TypedDict, total=False):
    """:class:`SearchOptions` as keyword arguments."""

    collection: str
    task: str | None
    instruction: str | None
    examples: Sequence[tuple[str, str]] | None
    filter: FilterLike | models.Filter | None
    score_threshold: float | None
    mode: SearchMode
    fusion: Fusion
    with_vectors: bool
    group_by_document: bool


class SearchKwargs(ConnectionKwargs, ModelKwargs, SearchOptionsKwargs, total=False):
    """The keyword options of :func:`~c2v_rag.search`, :func:`~c2v_rag.search_many` and
    :func:`~c2v_rag.asearch`: the fields of :class:`ConnectionOptions`, :class:`ModelOptions` and
    :class:`SearchOptions`."""


class IngestKwargs(StoreKwargs, ModelKwargs, total=False):
    """The keyword options of :func:`~c2v_rag.ingest` shared with search: the store (``qdrant_url`` is
    ``ingest``'s second positional parameter) and the model."""


class SearchArguments(NamedTuple):
    """A search call's keyword options, split into their three sets."""

    connection: ConnectionOptions
    model: ModelOptions
    search: SearchOptions

    @classmethod
    def from_call(cls, function: str, kwargs: Mapping[str, Any],
                  options: SearchOptions | None = None) -> "SearchArguments":
        """The options ``function`` was called with: ``kwargs`` as given (unchecked, see
        :meth:`_Options.as_given`), the search fields among them laid over ``options`` when given.

        Raises:
            TypeError: a keyword no set has, worded as Python words it for a named parameter;
                ``options`` that are not a :class:`SearchOptions`.
        """
        reject_unknown(function, kwargs, ConnectionOptions, ModelOptions, SearchOptions)
        if options is None:
            search = SearchOptions.as_given(kwargs)
        elif isinstance(options, SearchOptions):
            search = options.model_copy(update={k: v for k, v in kwargs.items() if k in SearchOptions.model_fields})
        else:
            raise TypeError(f"{function}() options must be a SearchOptions, got {type(options).__name__}")
        return cls(ConnectionOptions.as_given(kwargs), ModelOptions.as_given(kwargs), search)


def reject_unknown(function: str, kwargs: Mapping[str, Any], *option_sets: type[BaseModel]) -> None:
    """A keyword in ``kwargs`` that no set in ``option_sets`` has is Python's TypeError for it."""
    for name in kwargs:
        if not any(name in options.model_fields for options in option_sets):
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")


def spell_out_kwargs(kwargs_type: type, *option_sets: type[BaseModel]) -> Callable[[_F], _F]:
    """A decorator: the function's ``**kwargs`` shown by ``help()`` and :func:`inspect.signature` as
    the keyword arguments of ``kwargs_type`` they stand for, with the defaults of ``option_sets``.

    The function itself is unchanged; only its ``__signature__`` is set, so help lists every option
    with its default where it would otherwise say ``**kwargs``.
    """
    defaults = {name: field.default for options in option_sets for name, field in options.model_fields.items()}

    def spelled_out(function: _F) -> _F:
        signature = inspect.signature(function)
        named = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        # In the option sets' field order (qdrant_url first, as the models declare it), not the
        # TypedDicts' inheritance order.
        annotations = kwargs_type.__annotations__
        keywords = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=defaults[name],
                                      annotation=_annotation(annotations[name]))
                    for name in defaults if name in annotations]
        first_keyword = next((i for i, p in enumerate(named) if p.kind is inspect.Parameter.KEYWORD_ONLY),
                             len(named))
        function.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=named[:first_keyword] + keywords + named[first_keyword:])
        return function

    return spelled_out


def _annotation(annotation: Any) -> Any:
    # TypedDict keeps a postponed annotation as a ForwardRef; help() shows its text, as it shows
    # the other parameters' (this module and its callers use `from __future__ import annotations`).
    return annotation.__forward_arg__ if isinstance(annotation, ForwardRef) else annotation
