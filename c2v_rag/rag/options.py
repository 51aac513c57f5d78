"""The options of the RAG calls, declared once: where the store is, which model embeds, how a search runs.

- :class:`ConnectionOptions`: the Qdrant store (a server or an embedded directory), resolved to a
  :class:`~c2v_rag.rag.store.collection.QdrantConfig`;
- :class:`ModelOptions`: the model and how it is loaded;
- :class:`SearchOptions`: what one search asks of a collection (:class:`CommonSearchOptions`: the
  part ``/v1/search`` takes as well).

The public functions take these fields as explicit keyword parameters, with the models' defaults
(tests/rag/test_options.py checks that the two agree), and turn them into one object per set at
the entry point (``from_keywords``); from there the objects go down the call chain whole.
:func:`~c2v_rag.search` also takes a whole ``options=SearchOptions(...)``; the CLI's ``search`` and
the server's ``/v1/search`` build a :class:`SearchOptions` too, so the three read the same fields
with the same meanings.

Building an options object by hand validates its field types, as pydantic does. The keyword
arguments of the public functions are taken as given instead (``from_keywords``, :meth:`_Options.as_given`):
their values are checked by the library where they always were (a bad filter before any model
loads, a mode the collection cannot serve once the collection is read), with the library's messages.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from c2v_rag.rag.store.backends import StoreKind
from c2v_rag.rag.store.collection import DEFAULT_COLLECTION, QdrantConfig
from c2v_rag.rag.store.query import Fusion, SearchMode

if TYPE_CHECKING:
    from qdrant_client.http import models
    from typing_extensions import Self

    from c2v_rag.core.config import Causal2VecConfig
    from c2v_rag.model.causal2vec import Causal2Vec
    from c2v_rag.rag.store.filters import FilterLike

_F = TypeVar("_F", bound=Callable[..., Any])


class _Options(BaseModel):
    """A set of options: no unknown fields; the model, a filter and a QdrantConfig are objects."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    @classmethod
    def as_given(cls, values: Mapping[str, Any]) -> Self:
        """The fields of this set that ``values`` names, as given, the others at their defaults.

        Nothing is validated here (``model_construct``): a function taking these options as keyword
        arguments checks each value at the point it always did, so its errors and their order stay.
        ``values`` may hold other sets' fields (a flat set such as a retriever's, as ``dict(options)``);
        they are left to those.
        """
        return cls.model_construct(**{name: values[name] for name in cls.model_fields if name in values})


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
    def from_keywords(
        cls,
        *,
        qdrant_url: str | None,
        path: str | Path | None,
        api_key: str | SecretStr | None,
        prefer_grpc: bool | None,
        store: StoreKind | None,
        qdrant: QdrantConfig | None,
    ) -> Self:
        """The store a function's keyword arguments name, as given (:meth:`as_given`)."""
        return cls.as_given(
            {
                "qdrant_url": qdrant_url,
                "path": path,
                "api_key": api_key,
                "prefer_grpc": prefer_grpc,
                "store": store,
                "qdrant": qdrant,
            }
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
        (:meth:`QdrantConfig.resolve <c2v_rag.rag.store.collection.QdrantConfig.resolve>`, which also
        refuses a directory another engine wrote)."""
        api_key = self.api_key.get_secret_value() if isinstance(self.api_key, SecretStr) else self.api_key
        return QdrantConfig.resolve(self.qdrant, self.qdrant_url, self.path, api_key, self.prefer_grpc, self.store)


class ModelOptions(_Options):
    """The model that embeds, and how it is loaded (:func:`~c2v_rag.rag.embedding.load_model`: once
    per model, device, dtype and quantization, shared with every other caller).

    Before the weights load, the same object says what a collection records about the model
    (:meth:`reference`, :meth:`variant_config`, :meth:`weights_digest`, :meth:`applied_quantization`),
    so an ingest checks the collection first.
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
        "quality bound); None: none (search: the collection's own; the other is refused)",
    )

    @classmethod
    def from_keywords(
        cls, *, model: str | Path | Causal2Vec | None, device: str | None, dtype: str | None, quantize: str | None
    ) -> Self:
        """The model a function's keyword arguments name, as given (:meth:`as_given`)."""
        return cls.as_given({"model": model, "device": device, "dtype": dtype, "quantize": quantize})

    def load(self, *, default_model: str | None = None, default_quantize: str | None = None) -> Causal2Vec:
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

    def reference(self) -> str | None:
        """What a collection records as the model's name (:func:`~c2v_rag.rag.embedding.model_reference`:
        None for a loaded model); a ``model`` of another type is a TypeError."""
        from c2v_rag.rag.embedding import model_reference

        return model_reference(self.model)

    def variant_config(self) -> Causal2VecConfig:
        """The model's config without its weights (:func:`~c2v_rag.rag.embedding.variant_config`)."""
        from c2v_rag.rag.embedding import variant_config

        return variant_config(self.model)

    def weights_digest(self) -> str | None:
        """The digest of the model's weight files, read before they load
        (:func:`~c2v_rag.rag.embedding.variant_weights`)."""
        from c2v_rag.rag.embedding import variant_weights

        return variant_weights(self.model)

    def applied_quantization(self) -> str:
        """The quantization the model runs with, as a collection records it, before the weights load
        (:func:`~c2v_rag.rag.embedding.applied_quantization`)."""
        from c2v_rag.rag.embedding import applied_quantization

        return applied_quantization(self.model, self.quantize, self.device)


class CommonSearchOptions(_Options):
    """What every search of a collection takes, the server's ``/v1/search`` included: the
    query's task and in-context examples, and which points come back."""

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
        "c2v_rag.rag.store.filters: {'topic': 'x'}, {'lang': ['en', 'de']}, "
        "{'year': {'gte': 2020}}, {'must_not': {...}}",
    )
    score_threshold: float | None = Field(
        default=None, description="leave out hits scoring below it (the mode's score: cosine, BM25 or fused)"
    )
    group_by_document: bool = Field(
        default=False,
        description="the top_k best documents rather than chunks: each hit is a document's best "
        "chunk, with its score (MaxP: a long document ranks by its best passage, and no "
        "document fills several places); points without a doc_id are left out",
    )


class SearchOptions(CommonSearchOptions):
    """How :func:`~c2v_rag.search` searches: the collection, the query's instruction, the
    retrieval mode and what each hit carries. The query and ``top_k`` belong to the call."""

    collection: str = Field(
        default=DEFAULT_COLLECTION,
        description="a collection or an alias (resolved once per call, so a reindex "
        "switching the alias meanwhile is never half-seen)",
    )
    instruction: str | None = Field(default=None, description="a literal query instruction instead of task")
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
    with_vectors: bool = Field(default=False, description="also return each hit's stored dense vector")

    @classmethod
    def from_keywords(
        cls,
        *,
        collection: str,
        task: str | None,
        instruction: str | None,
        examples: Sequence[tuple[str, str]] | None,
        filter: FilterLike | models.Filter | None,
        score_threshold: float | None,
        mode: SearchMode,
        fusion: Fusion,
        with_vectors: bool,
        group_by_document: bool,
    ) -> Self:
        """The search a function's keyword arguments describe, as given (:meth:`as_given`)."""
        return cls.as_given(
            {
                "collection": collection,
                "task": task,
                "instruction": instruction,
                "examples": examples,
                "filter": filter,
                "score_threshold": score_threshold,
                "mode": mode,
                "fusion": fusion,
                "with_vectors": with_vectors,
                "group_by_document": group_by_document,
            }
        )


def search_keywords_over_options(function: _F) -> _F:
    """Decorates a search function so that the search keywords a call names replace the fields of its
    ``options=SearchOptions(...)``.

    A search function takes the fields of :class:`SearchOptions` as explicit keyword parameters, or
    whole as ``options=``, or both (the CLI passes a built :class:`SearchOptions` with the store and
    model keywords), the keywords given winning. Only the call knows which keywords it gave: an
    explicit ``filter=None`` replaces a filter and yet equals the default. So this wrapper lays the
    given ones over ``options`` before the function runs, and leaves the function to read ``options``
    whole, or its own search keywords when ``options`` is None.

    The function's signature is its own (``functools.wraps``: ``help()`` and :func:`inspect.signature`
    show its parameters), and every other keyword reaches it untouched, so an unknown one fails as
    Python fails it for a named parameter.

    Raises:
        TypeError: ``options`` that are not a :class:`SearchOptions`.
    """
    name = function.__name__

    def laid_over(kwargs: dict[str, Any]) -> dict[str, Any]:
        options = kwargs.get("options")
        if options is None:
            return kwargs
        if not isinstance(options, SearchOptions):
            raise TypeError(f"{name}() options must be a SearchOptions, got {type(options).__name__}")
        given = {key: kwargs.pop(key) for key in list(kwargs) if key in SearchOptions.model_fields}
        kwargs["options"] = options.model_copy(update=given) if given else options
        return kwargs

    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def call_async(*args: Any, **kwargs: Any) -> Any:
            return await function(*args, **laid_over(kwargs))

        return cast(_F, call_async)

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **laid_over(kwargs))

    return cast(_F, call)
