"""Metadata filters: a small dict form translated to Qdrant's ``models.Filter``, or a Filter as is.

The dict form covers what RAG filters mostly need, on the chunk metadata (the document's
metadata plus ``source``, ``doc_id`` and ``chunk_index``)::

    {"topic": "physics"}                          # equality (str, int or bool)
    {"lang": ["en", "de"]}                        # any of these values
    {"year": {"gte": 2020, "lt": 2024}}           # a range: gt, gte, lt, lte
    {"date": {"gte": "2024-01-01"}}               # datetimes or ISO 8601 strings: a datetime range
    {"topic": {"eq": "physics"}}                  # the same as the first line
    {"lang": {"any": ["en", "de"]}}               # the same as the second line
    {"must_not": {"topic": "retracted"}}          # none of these conditions may hold

All conditions must hold. A ``qdrant_client.models.Filter`` passes through untouched, for
everything else Qdrant can express (``should``, nested keys, geo, ``min_should``...); its keys
are payload paths, so metadata keys there read ``metadata.<key>``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from c2v_rag.store.point_schema import PAYLOAD_METADATA_KEY, metadata_field

if TYPE_CHECKING:
    from qdrant_client.http import models

MUST_NOT = "must_not"
RANGE_OPERATORS = ("gt", "gte", "lt", "lte")
MATCH_OPERATORS = ("eq", "any")
OPERATORS = MATCH_OPERATORS + RANGE_OPERATORS

FilterLike = Mapping[str, Any]


def to_qdrant_filter(filter: FilterLike | models.Filter | None) -> models.Filter | None:
    """A Qdrant ``Filter`` for ``filter``: None, a ``models.Filter`` (returned as is) or the dict form.

    Raises:
        ValueError: an unknown operator (naming it and the allowed ones) or an empty condition.
        TypeError: a value of a type the condition cannot take.
    """
    from qdrant_client.http import models

    if filter is None:
        return None
    if isinstance(filter, models.Filter):
        return filter
    if not isinstance(filter, Mapping):
        raise TypeError(f"filter must be a dict or a qdrant_client.models.Filter, got {type(filter).__name__}")
    if not filter:
        return None
    must: list[Any] = []
    must_not: list[Any] = []
    for key, value in filter.items():
        if key == MUST_NOT:
            if not isinstance(value, Mapping):
                raise TypeError(f"filter['must_not'] must be a dict of conditions, got {type(value).__name__}")
            must_not.extend(_conditions(value, "filter['must_not']"))
        else:
            must.extend(_condition(key, value, "filter"))
    return models.Filter(must=must or None, must_not=must_not or None)


def _conditions(conditions: Mapping[str, Any], where: str) -> list[Any]:
    out = []
    for key, value in conditions.items():
        if key == MUST_NOT:
            raise ValueError(f"{where} cannot hold another 'must_not'; pass a qdrant_client.models.Filter to nest")
        out.extend(_condition(key, value, where))
    return out


def _condition(key: str, value: Any, where: str) -> list[Any]:
    from qdrant_client.http import models

    if not isinstance(key, str) or not key:
        raise TypeError(f"{where} keys must be non-empty metadata key strings, got {key!r}")
    field = metadata_field(key)
    label = f"{where}[{key!r}]"
    if isinstance(value, Mapping):
        unknown = [op for op in value if op not in OPERATORS]
        if unknown:
            raise ValueError(
                f"{label} has the unknown operator {unknown[0]!r}; allowed operators: "
                f"{', '.join(OPERATORS)} (or a plain value for equality, a list for any-of)"
            )
        if not value:
            raise ValueError(
                f"{label} is an empty condition; give a value or one of the operators {', '.join(OPERATORS)}"
            )
        out = []
        if "eq" in value:
            out.append(models.FieldCondition(key=field, match=_match_value(value["eq"], f"{label}['eq']")))
        if "any" in value:
            out.append(models.FieldCondition(key=field, match=_match_any(value["any"], f"{label}['any']")))
        bounds = {op: value[op] for op in RANGE_OPERATORS if op in value}
        if bounds:
            out.append(models.FieldCondition(key=field, range=_range(bounds, label)))
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        return [models.FieldCondition(key=field, match=_match_any(value, label))]
    return [models.FieldCondition(key=field, match=_match_value(value, label))]


def _match_value(value: Any, label: str):
    from qdrant_client.http import models

    if not isinstance(value, (str, int, bool)):
        raise TypeError(
            f"{label} must be a str, int or bool to match, got {type(value).__name__}; "
            "use {'gte': ..., 'lte': ...} for floats and dates"
        )
    return models.MatchValue(value=value)


def _match_any(values: Any, label: str):
    from qdrant_client.http import models

    if not isinstance(values, (list, tuple, set, frozenset)) or not values:
        raise TypeError(f"{label} must be a non-empty list of str or int values, got {values!r}")
    values = list(values)
    # Qdrant's MatchAny takes strings or integers (bool is an int to Python, not to Qdrant).
    if not (
        all(isinstance(v, str) for v in values) or all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    ):
        raise TypeError(f"{label} must hold only strings or only integers, got {values!r}")
    return models.MatchAny(any=values)


def _range(bounds: Mapping[str, Any], label: str):
    from qdrant_client.http import models

    if all(_is_datetime(v) for v in bounds.values()):
        return models.DatetimeRange(**bounds)
    for op, v in bounds.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{label}[{op!r}] must be a number (or all bounds datetimes), got {v!r}")
    return models.Range(**bounds)


def _is_datetime(value: Any) -> bool:
    if isinstance(value, (_dt.date, _dt.datetime)):
        return True
    if isinstance(value, str):
        try:
            _dt.datetime.fromisoformat(value)
        except ValueError:
            return False
        return True
    return False


# ----------------------------------------------------------------------- keys the collection has

# How many points' metadata keys a search reads first to check its filter's keys: a collection this small is read
# whole. In a larger one, a key none of them carries is looked for in the rest (a filtered read of one point), so a
# filter naming a key no chunk carries is refused whatever the collection's size.
KEY_SAMPLE = 256


def filter_keys(filter: Any) -> list[str]:
    """The metadata keys a filter names, in order: a dict form's (its ``must_not`` part's included), or a
    ``qdrant_client.models.Filter``'s conditions on ``metadata.KEY`` paths (nested filters included; conditions on
    other payload paths are the caller's own, and is-empty / is-null ones match a missing key by design)."""
    if isinstance(filter, Mapping):
        keys = [key for key in filter if key != MUST_NOT]
        inner = filter.get(MUST_NOT)
        if isinstance(inner, Mapping):
            keys += [key for key in inner if key not in keys]
        return [key for key in keys if isinstance(key, str)]
    from qdrant_client.http import models

    if not isinstance(filter, models.Filter):
        return []
    found_keys: list[str] = []
    groups = (filter.must, filter.should, filter.must_not, filter.min_should and filter.min_should.conditions)
    for group in groups:
        for condition in group if isinstance(group, list) else [group] if group is not None else []:
            found = filter_keys(condition) if isinstance(condition, models.Filter) else _metadata_key(condition)
            found_keys += [key for key in found if key not in found_keys]
    return found_keys


def _metadata_key(condition: Any) -> list[str]:
    """The metadata key of a field condition on ``metadata.KEY`` (``metadata.tags[]``: ``tags``), else none."""
    from qdrant_client.http import models

    if not isinstance(condition, models.FieldCondition) or not condition.key.startswith(f"{PAYLOAD_METADATA_KEY}."):
        return []
    return [condition.key.split(".")[1].removesuffix("[]")]


# (store, collection, key) of the keys a look-up found past the first chunks, in this process (FilterKeyCheck.settle).
_CARRIED: set[tuple[str, str, str]] = set()


class FilterKeyCheck:
    """Refuse a filter whose key no chunk of ``collection`` carries: a key in no payload matches nothing, so a
    misspelt ``file_nme`` turned every search into "no results", and one under ``must_not`` excluded nothing, both
    silently. The message names the keys the chunks carry, and the one likely meant.

    A search reads :meth:`sample` (``scroll`` keywords), hands the points to :meth:`unseen`, reads
    :meth:`look_for` of each key unseen (a filtered read of one point), and hands what it found to :meth:`settle`,
    which refuses the keys found in none: :func:`check_filter_keys` for a client, and the async search the same with
    ``await``.
    """

    def __init__(self, filter: Any, collection: str, location: str) -> None:
        self.keys = filter_keys(filter)
        self.collection = collection
        self.location = location
        self.seen: set[str] = set()
        self.whole = True  # whether the points read were every point there is

    def sample(self) -> dict[str, Any] | None:
        """The ``scroll`` keywords of the first points' metadata, or None when the filter names no key."""
        if not self.keys:
            return None
        return {"limit": KEY_SAMPLE, "with_payload": [PAYLOAD_METADATA_KEY], "with_vectors": False}

    def unseen(self, points: list[Any]) -> list[str]:
        """The keys none of ``points`` carries that the rest of the collection may: none when the sample was the
        whole collection (those are refused here) or an empty one (no hit either way)."""
        if not points:
            return []
        for point in points:
            metadata = (point.payload or {}).get(PAYLOAD_METADATA_KEY)
            if isinstance(metadata, Mapping):
                self.seen.update(metadata)
        missing = [key for key in self.keys if key not in self.seen]
        self.whole = len(points) < KEY_SAMPLE  # the scroll returned every point there is
        if self.whole:
            self.refuse(missing)
            return []
        return [key for key in missing if self._known(key) not in _CARRIED]

    @staticmethod
    def look_for(key: str) -> dict[str, Any]:
        """The ``scroll`` keywords of one point that carries ``key`` (non-empty) in its metadata."""
        from qdrant_client.http import models

        carries = models.IsEmptyCondition(is_empty=models.PayloadField(key=metadata_field(key)))
        return {"scroll_filter": models.Filter(must_not=[carries]), "limit": 1, "with_payload": False}

    def settle(self, found: Mapping[str, bool]) -> None:
        """Take whether each key :meth:`unseen` named was found by :meth:`look_for`: one found is remembered for the
        process (a key carried by later chunks only is looked for once, not at every search: the look-up scans a
        local-mode store in Python; docs/ingest-and-search.md, "Filters", has its cost), the rest refused."""
        _CARRIED.update(self._known(key) for key, carried in found.items() if carried)
        self.refuse([key for key, carried in found.items() if not carried])

    def _known(self, key: str) -> tuple[str, str, str]:
        return self.location, self.collection, key

    def refuse(self, missing: list[str]) -> None:
        """Raise the ValueError that names ``missing`` keys (none: nothing to refuse)."""
        if not missing:
            return
        import difflib

        several = len(missing) > 1
        sentences = [
            f"filter key{'s' if several else ''} {', '.join(map(repr, missing))} {'are' if several else 'is'} in no "
            f"chunk's metadata in collection {self.collection!r} at {self.location}, so "
            f"{'they match' if several else 'it matches'} nothing."
        ]
        for key in missing:
            close = difflib.get_close_matches(key, sorted(self.seen), n=1)
            if close:
                sentences.append(f"Did you mean {close[0]!r}?")
        carried = ", ".join(sorted(self.seen)) or "no metadata"
        which = "The chunks carry" if self.whole else f"The first {KEY_SAMPLE} chunks carry"
        sentences.append(f"{which}: {carried} (docs/ingest-and-search.md, 'Payload fields')")
        raise ValueError(" ".join(sentences))


def check_filter_keys(client: Any, concrete: str, filter: Any, collection: str, location: str) -> None:
    """:class:`FilterKeyCheck` of ``filter`` on the collection ``concrete`` (named ``collection`` in messages)
    through a synchronous client."""
    check = FilterKeyCheck(filter, collection, location)
    sample = check.sample()
    if sample is None:
        return
    unseen = check.unseen(client.scroll(concrete, **sample)[0])
    check.settle({key: bool(client.scroll(concrete, **check.look_for(key))[0]) for key in unseen})
