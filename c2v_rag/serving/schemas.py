"""Request and response bodies: OpenAI's embeddings schema, plus c2v_rag's search and extensions.

Every rejection is an :class:`ApiError` whose message names the field at fault and the fix; the
app renders it in OpenAI's error shape, so OpenAI clients raise it with that message.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from c2v_rag.core.arguments import check_unicode
from c2v_rag.rag.options import CommonSearchOptions, RerankOption, SearchOptions


class ApiError(Exception):
    """An HTTP error with OpenAI's body: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        type: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class EmbeddingRequest(BaseModel):
    """POST /v1/embeddings. Unknown fields (OpenAI's ``user``...) are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    input: Any = Field(None, description="a string or a list of strings (required; checked by check_input)")
    model: str | None = Field(None, description="the served model's name (GET /v1/models); optional here")
    encoding_format: Literal["float", "base64"] = "float"
    # Strict: JSON's true read as 1 and "384" as 384 (and the 400 for true said "not 1").
    dimensions: StrictInt | None = Field(None, ge=1)
    input_type: Literal["query", "document"] | None = Field(
        None, description="extension: queries get the task's instruction, documents none (asymmetric tasks)"
    )
    task: str | None = Field(None, description="extension: a registered task name (c2v-rag tasks)")
    examples: list[tuple[str, str]] | None = Field(
        None,
        description="extension: in-context [query, response] pairs before the query instruction (Causal2Vec "
        "w/ ICL); null: the task's registered ones, []: none. Queries only (and symmetric tasks)",
    )


class _SearchQuery(BaseModel):
    """What /v1/search takes beside the search options: the query, how many hits, the collection."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1)
    top_k: StrictInt = Field(5, ge=1, le=1000)
    collection: str | None = Field(None, description="default: the server's --collection")


class SearchRequest(RerankOption, CommonSearchOptions, _SearchQuery):
    """POST /v1/search: the chunks of a Qdrant collection nearest to a query.

    The options are the library's (:class:`~c2v_rag.rag.options.CommonSearchOptions`: ``task``,
    ``examples``, ``filter``, ``score_threshold``, ``mode`` and ``fusion``, ``group_by_document``; and
    ``rerank``, by the served variant's reranker, the one /v1/rerank uses); the served model embeds the query, so
    ``instruction`` and the model's options are not taken (and, as any unknown field, refused).
    ``_SearchQuery`` comes last among the bases so that its fields come first, in the order a body's first
    error has always been reported in.
    """

    # Off unless a request asks: the server's reranker runs one request at a time, so reranking every search by
    # default would hold a loaded server to about one search a second on a CPU.
    rerank: StrictInt | Literal["auto"] | None = Field(
        None,
        description="rerank the first stage's top N hits by the decoder's likelihood; 'auto' as the library "
        "decides it for the served model (the top 20 where its decoder is fast: int8 with AVX-512, bf16 or fp16; "
        "the top 10 in int8 on AVX2); null: none",
    )
    # JSON carries the dict form of a filter only (a qdrant_client Filter is a Python object).
    filter: dict[str, Any] | None = Field(
        None,
        description="metadata conditions: equality, a list for any-of, "
        "{'gte': ...} ranges, 'must_not' (c2v_rag.store.filters)",
    )

    def search_options(self, default_collection: str) -> SearchOptions:
        """The library's options for this request, with ``default_collection`` where it names none."""
        given = {name: getattr(self, name) for name in (*CommonSearchOptions.model_fields, *RerankOption.model_fields)}
        return SearchOptions(collection=self.collection or default_collection, **given)


class RerankRequest(BaseModel):
    """POST /v1/rerank, in the shape of TEI's, Cohere's and Jina's ``/rerank``: a query, the documents to order,
    ``top_n`` (None: all) and ``return_documents``. TEI's ``texts`` is taken for ``documents``; unknown fields
    (Cohere's ``max_chunks_per_doc``...) are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    query: str = Field(min_length=1)
    documents: Any = Field(None, description="a list of strings (required; checked by check_input)")
    texts: Any = Field(None, description="TEI's name for documents")
    top_n: StrictInt | None = Field(None, ge=1)
    return_documents: bool = False
    model: str | None = Field(None, description="the served model's name (GET /v1/models); optional here")


def parse_body(raw: bytes, schema: type[BaseModel]) -> BaseModel:
    """Decode, parse and validate a JSON body, or raise a 400 that says what is wrong."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ApiError(
            400,
            f"the request body is not valid UTF-8 (byte {err.start}): send JSON encoded as UTF-8",
            code="invalid_encoding",
        ) from None
    if not text.strip():
        raise ApiError(400, "the request body is empty: send a JSON object", code="invalid_json")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ApiError(
            400,
            f"the request body is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}",
            code="invalid_json",
        ) from None
    if not isinstance(data, dict):
        raise ApiError(
            400, f"the request body must be a JSON object, not a JSON {_json_type(data)}", code="invalid_json"
        )
    try:
        return schema.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "body"
        raise ApiError(400, f"'{field}': {first['msg']}", param=field, code="invalid_value") from None


def check_input(value: Any, max_texts: int, field: str = "input") -> tuple[list[str], bool]:
    """``(texts, was_single_string)`` from OpenAI's ``input`` (or another ``field`` of the same form, /v1/rerank's
    ``documents``), or a 400/413 naming the bad item."""
    if value is None:
        raise ApiError(400, f"'{field}' is required: a string or a list of strings", param=field)
    if isinstance(value, str):
        value, single = [value], True
    elif isinstance(value, list):
        single = False
    else:
        raise ApiError(
            400, f"'{field}' must be a string or a list of strings, not a JSON {_json_type(value)}", param=field
        )
    if not value:
        raise ApiError(400, f"'{field}' is an empty list: send at least one string", param=field)
    if len(value) > max_texts:
        raise ApiError(
            413,
            f"'{field}' holds {len(value)} texts, more than this server's limit of {max_texts} "
            "per request: split it into smaller requests",
            param=field,
            code="too_many_inputs",
        )
    for i, item in enumerate(value):
        where = f"'{field}'" if single else f"'{field}[{i}]'"
        if isinstance(item, str):
            if not item:
                raise ApiError(400, f"{where} is an empty string: every input needs some text", param=field)
            try:  # a JSON "\ud800" escape decodes to a lone surrogate, which no tokenizer takes
                check_unicode(item, where)
            except ValueError as err:
                raise ApiError(400, str(err), param=field) from None
            continue
        if isinstance(item, (int, list)) and not isinstance(item, bool):
            raise ApiError(
                400,
                f"{where} is token ids; this server embeds text: send strings (LangChain: "
                "OpenAIEmbeddings(check_embedding_ctx_length=False))",
                param=field,
                code="token_ids_unsupported",
            )
        raise ApiError(400, f"{where} must be a string, not a JSON {_json_type(item)}", param=field)
    return value, single


def _json_type(value: Any) -> str:
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        int: "number",
        float: "number",
        type(None): "null",
    }.get(type(value), type(value).__name__)
