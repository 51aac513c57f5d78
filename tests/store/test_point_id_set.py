"""PointIdSet holds the same ids as a set of their strings, and answers ``in`` as that set does, whatever the ids:
canonical UUIDs (packed), others (kept as strings), nulls, sliced and chunked Arrow arrays, pickled for Ray."""

from __future__ import annotations

import pickle
import random
import uuid

import pytest

pa = pytest.importorskip("pyarrow")

from c2v_rag.store.point_id_set import PointIdSet  # noqa: E402
from c2v_rag.store.point_schema import point_id  # noqa: E402


def uuid_with(data: bytes) -> str:
    return str(uuid.UUID(bytes=data))


@pytest.fixture(scope="module")
def ids() -> list[str]:
    rng = random.Random(0)
    canonical = [point_id(f"doc-{i}", i % 7, f"{i:064x}") for i in range(3000)]
    edges = [
        uuid_with(b"\x01" + bytes(15)),  # trailing zero bytes, which NumPy's S16 pads with
        uuid_with(bytes(15) + b"\x01"),
        uuid_with(b"\xff" * 16),
    ]
    others = [
        "ABCDEF00-1111-2222-3333-444455556666",
        "7",
        "not-a-uuid-but-thirty-six-characters",
        "é" * 36,
        "é" * 18,
        "",
    ]
    every = canonical + edges + others
    rng.shuffle(every)
    return every


def test_the_set_holds_exactly_the_ids_a_set_of_strings_holds(ids):
    arrays = [pa.array(ids[:1000]), pa.chunked_array([ids[1000:2000], ids[2000:]])]
    held = PointIdSet.from_arrow([arrays[0], *arrays[1].chunks])
    expected = set(ids)
    assert len(held) == len(expected) and set(held) == expected
    assert all(i in held for i in ids)
    canonical = [i for i in ids if len(i) == 36 and i == i.lower() and i.count("-") == 4][:200]
    near = [uuid_with(uuid.UUID(i).bytes[:15] + bytes([(uuid.UUID(i).bytes[15] + 1) % 256])) for i in canonical]
    absent = [n for n in near if n not in expected] + [i.upper() for i in canonical if i.upper() not in expected]
    absent += [uuid_with(bytes(16)), "8", "abcdef00-1111-2222-3333-444455556666", " " + ids[0][1:]]
    assert absent and not any(a in held for a in absent if a not in expected)
    assert 7 not in held and None not in held  # not strings: never a point id as stored


def test_nulls_slices_and_repeats(ids):
    array = pa.array([None, *ids[:300], None, *ids[:100]])
    held = PointIdSet.from_arrow([array.slice(1, 350)])  # an offset into the buffers, a null inside
    assert set(held) == set(ids[:300]) | set(ids[:49])
    assert PointIdSet.from_ids(ids[:10]).__contains__(ids[3]) and len(PointIdSet()) == 0


def test_it_pickles_as_ray_sends_it_to_its_actors(ids):
    held = PointIdSet.from_ids(ids)
    again = pickle.loads(pickle.dumps(held, protocol=5))
    assert set(again) == set(ids) and all(i in again for i in ids[:100])


def test_integer_ids_of_another_tools_collection_are_compared_as_strings():
    held = PointIdSet.from_ids([1, 22, uuid.UUID(int=5)])
    assert "1" in held and "22" in held and str(uuid.UUID(int=5)) in held and "2" not in held
