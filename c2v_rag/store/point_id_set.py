"""Many point ids in little memory: the ids an ``embed`` folder or a collection already holds, asked about chunk by
chunk so that a resumed run embeds nothing twice.

A point id is a UUID's canonical string (:func:`~c2v_rag.store.point_schema.point_id`). Held as Python strings in a
set, each costs over 100 bytes, so the ids of a folder of ten million chunks took more than a gigabyte, in the
driver and again in every Ray actor they were sent to. :class:`PointIdSet` keeps each such id as its 16 bytes in one
sorted NumPy array, which Ray hands its actors without a copy each; any other id (an integer id of another tool's
collection, a string not in the canonical form) stays a string beside it, so membership is exactly that of a set of
the strings.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

# A canonical UUID string: 36 lower-case characters, dashes at these offsets, hex digits elsewhere.
_LENGTH = 36
_DASHES = [8, 13, 18, 23]
_HEX_AT = [i for i in range(_LENGTH) if i not in _DASHES]
# byte -> the value of the hex digit it is, 255 for a byte that is not a lower-case hex digit
_HEX_VALUE = np.full(256, 255, dtype=np.uint8)
_HEX_VALUE[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = np.arange(16, dtype=np.uint8)
# Rows converted at once: bounds the temporary arrays (about 100 bytes a row) whatever the column's size.
_BLOCK = 1 << 18


class PointIdSet:
    """An immutable set of point ids (strings), for ``in``: canonical UUID strings as a sorted array of their 16
    bytes, any other id as a string."""

    __slots__ = ("_uuids", "_others")

    def __init__(self, uuids: np.ndarray | None = None, others: Iterable[str] = ()) -> None:
        # Sorted, each once, dtype S16 (NumPy pads and compares fixed-width bytes alike, trailing zeros included).
        self._uuids = np.empty(0, dtype="S16") if uuids is None else uuids
        self._others = frozenset(others)

    @classmethod
    def from_ids(cls, ids: Iterable[Any]) -> PointIdSet:
        """The set of ``ids``, each as ``str(id)`` (how a point id is compared), read a block at a time."""
        import itertools

        import pyarrow as pa

        def blocks() -> Iterator[Any]:
            items = iter(ids)
            while block := [str(i) for i in itertools.islice(items, _BLOCK)]:
                yield pa.array(block, pa.string())

        return cls.from_arrow(blocks())

    @classmethod
    def from_arrow(cls, arrays: Iterable[Any]) -> PointIdSet:
        """The set of the strings of Arrow string arrays (record batches' ``id`` columns, a ``ChunkedArray``'s
        chunks), converted without a Python object per id where they are canonical UUIDs."""
        parts: list[np.ndarray] = []
        others: list[str] = []
        for array in arrays:
            for start in range(0, len(array), _BLOCK):
                packed, rest = _uuid_bytes(array.slice(start, _BLOCK))
                parts.append(packed)
                others.extend(rest)
        return cls(_sorted_once(parts), others)

    def __contains__(self, point_id: object) -> bool:
        return isinstance(point_id, str) and bool(self.isin([point_id])[0])

    def isin(self, ids: Sequence[str]) -> np.ndarray:
        """For each of ``ids`` (a batch of chunks' point ids), whether the set holds it: one vectorized lookup."""
        found = np.zeros(len(ids), dtype=bool)
        fits = [i for i, text in enumerate(ids) if len(text) == _LENGTH and text.isascii()]
        if fits:
            grid = np.frombuffer("".join(ids[i] for i in fits).encode("ascii"), dtype=np.uint8).reshape(-1, _LENGTH)
            keys, good = _pack(grid)
            if len(self._uuids):
                at = np.minimum(np.searchsorted(self._uuids, keys), len(self._uuids) - 1)
                found[np.asarray(fits)[good]] = self._uuids[at] == keys
            checked = set(np.asarray(fits)[good].tolist())
        else:
            checked = set()
        if self._others:
            for i, text in enumerate(ids):
                if i not in checked:
                    found[i] = text in self._others
        return found

    def __len__(self) -> int:
        return len(self._uuids) + len(self._others)

    def __iter__(self) -> Iterator[str]:
        raw = self._uuids.view(np.uint8).reshape(-1, 16)
        yield from (str(uuid.UUID(bytes=row.tobytes())) for row in raw)
        yield from self._others

    def __repr__(self) -> str:
        return f"PointIdSet({len(self)} ids)"


def _sorted_once(parts: list[np.ndarray]) -> np.ndarray | None:
    """The values of ``parts``, sorted, each once; sorted in place (a folder's ids are unique: no second copy)."""
    if not parts:
        return None
    values = np.concatenate(parts)
    parts.clear()
    values.sort()
    repeated = values[1:] == values[:-1]
    return values[np.concatenate([[True], ~repeated])] if repeated.any() else values


def _uuid_bytes(array: Any) -> tuple[np.ndarray, list[str]]:
    """A (sliced) Arrow string array's canonical UUIDs as S16 values, and its other strings (nulls dropped)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_string(array.type):
        array = array.cast(pa.string())
    if len(array) == 0:
        return np.empty(0, dtype="S16"), []
    fits = pc.fill_null(pc.equal(pc.binary_length(array), _LENGTH), False).to_numpy(zero_copy_only=False)
    rows = pc.filter(array, pa.array(fits))
    chars = np.frombuffer(_joined(rows), dtype=np.uint8)  # the chosen rows' characters, end to end: 36 bytes each
    packed, good = _pack(chars.reshape(-1, _LENGTH))
    rest = np.flatnonzero(~fits)
    bad_rows = np.flatnonzero(fits)[~good]
    others = [s for s in array.take(pa.array(np.concatenate([rest, bad_rows]))).to_pylist() if s is not None]
    return packed, others


def _joined(rows: Any) -> bytes:
    """The bytes of a string array's values, end to end (its data buffer between its first and last offset)."""
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int32)[rows.offset : rows.offset + len(rows) + 1]
    data = rows.buffers()[2]
    return b"" if data is None else memoryview(data)[offsets[0] : offsets[-1]].tobytes()


def _pack(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of 36 ASCII bytes -> the 16 bytes of each canonical UUID among them (S16), and which rows those are."""
    nibbles = _HEX_VALUE[grid[:, _HEX_AT]]
    good = (grid[:, _DASHES] == ord("-")).all(axis=1) & (nibbles != 255).all(axis=1)
    nibbles = nibbles[good]
    values = (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]  # (rows, 16) uint8
    return np.ascontiguousarray(values).view("S16").reshape(-1), good
