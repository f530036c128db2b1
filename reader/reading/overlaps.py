"""Objects of one topic-partition that hold the same offset: found, and resolved one way.

Under ``TimeBasedPartitioner`` or ``FieldPartitioner`` a partition's objects interleave (their
offset *ranges* overlap) while every offset is still in exactly one object. Two writers over one
archive (an export started again without its checkpoint, archives written before blockgz fenced
a second writer, another tool) leave objects that hold the *same* offsets. The readers return
each offset once, and always from the same object: **the object with the lowest first offset,
then the lowest key**. ``blockgz verify`` reports every such overlap as a problem.

An object's offsets come from its index (exact, gaps included), so interleaving objects are
told apart from duplicating ones without reading data; an object without an index is taken to
hold every offset of its range.

>>> from blockgz.archive.object_ref import ObjectRef
>>> a = ObjectRef("a", "t", 0, 300, "json.gz", last_offset=399)
>>> b = ObjectRef("b", "t", 0, 307, "json.gz", last_offset=420)
>>> c = ObjectRef("c", "t", 0, 421, "json.gz", last_offset=500)
>>> [(o.first.key, o.second.key, o.low, o.high) for o in find_overlaps([a, b, c], lambda r: None)]
[('a', 'b', 307, 399)]
>>> [[r.key for r in group] for group in duplicate_groups([a, b, c], lambda r: None)]
[['a', 'b']]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from blockgz.archive.object_ref import ObjectRef
from blockgz.blocks.index import BlockIndex
from blockgz.errors import BlockGzError

#: Gives an object's index, or ``None`` when it has none (or it is not worth loading).
IndexOf = Callable[[ObjectRef], BlockIndex | None]


@dataclass(frozen=True)
class Overlap:
    """Two objects of one topic-partition that both hold ``count`` offsets in ``low..high``."""

    first: ObjectRef
    second: ObjectRef
    low: int
    high: int
    count: int

    def describe(self) -> str:
        """One line for ``verify``, ``ls`` and the readers' warnings."""
        span = f"offset {self.low}" if self.low == self.high else f"offsets {self.low}..{self.high}"
        return (
            f"{self.first.topic}/{self.first.partition}: {self.first.key} and {self.second.key} "
            f"both hold {span} ({self.count} records); readers take them from {self.first.key}"
        )


def find_overlaps(refs: Sequence[ObjectRef], index_of: IndexOf) -> list[Overlap]:
    """Every pair of objects that share an offset (``refs`` of one topic-partition).

    A sweep by first offset: only objects whose ranges overlap are compared, and only those
    pairs load their indexes' offsets, so an archive whose objects follow each other costs
    nothing but the sort.
    """
    ordered = sorted(refs, key=lambda r: (r.start_offset, r.key))
    found: list[Overlap] = []
    held: dict[str, np.ndarray] = {}
    active: list[tuple[ObjectRef, int]] = []  # earlier objects still open at this start
    for n, ref in enumerate(ordered):
        last = _last_offset(ref, index_of, ordered, n)
        active = [(a, a_last) for a, a_last in active if a_last >= ref.start_offset]
        if last is None:
            continue
        for earlier, earlier_last in active:
            shared = _shared((earlier, earlier_last), (ref, last), index_of, held)
            if shared.size:
                found.append(
                    Overlap(earlier, ref, int(shared[0]), int(shared[-1]), int(shared.size))
                )
        active.append((ref, last))
    return found


def duplicate_groups(refs: Sequence[ObjectRef], index_of: IndexOf) -> list[list[ObjectRef]]:
    """The objects that share offsets, in connected groups (each in (first offset, key)
    order); an object that shares nothing with another is in no group."""
    parent = {r.key: r.key for r in refs}

    def root(key: str) -> str:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for overlap in find_overlaps(refs, index_of):
        a, b = root(overlap.first.key), root(overlap.second.key)
        parent[max(a, b)] = min(a, b)
    groups: dict[str, list[ObjectRef]] = {}
    for ref in refs:
        groups.setdefault(root(ref.key), []).append(ref)
    return [
        sorted(group, key=lambda r: (r.start_offset, r.key))
        for group in groups.values()
        if len(group) > 1
    ]


def _last_offset(
    ref: ObjectRef, index_of: IndexOf, ordered: Sequence[ObjectRef], n: int
) -> int | None:
    """The object's last offset: the catalog's, its index's, else (a listing of objects that
    follow each other, or an index that cannot be used: reading the object says so) one
    before the next object's start; ``None``: unknown."""
    if ref.last_offset is not None:
        return ref.last_offset
    try:
        index = index_of(ref) if ref.has_index else None
    except BlockGzError:
        index = None
    if index is not None:
        return index.last_offset
    return ordered[n + 1].start_offset - 1 if n + 1 < len(ordered) else None


def _shared(
    a: tuple[ObjectRef, int],
    b: tuple[ObjectRef, int],
    index_of: IndexOf,
    held: dict[str, np.ndarray],
) -> np.ndarray:
    """The offsets both objects hold (sorted); each given with its last offset."""
    low, high = max(a[0].start_offset, b[0].start_offset), min(a[1], b[1])
    if low > high:
        return np.empty(0, np.int64)
    mine = _held(a, index_of, held)
    theirs = _held(b, index_of, held)
    shared = np.intersect1d(mine, theirs, assume_unique=True)
    return shared[(shared >= low) & (shared <= high)]


def _held(
    span: tuple[ObjectRef, int], index_of: IndexOf, held: dict[str, np.ndarray]
) -> np.ndarray:
    ref, last = span
    if ref.key not in held:
        index = index_of(ref) if ref.has_index else None
        if index is None:  # no index: every offset of its range
            held[ref.key] = np.arange(ref.start_offset, last + 1, dtype=np.int64)
        else:
            parts = [
                np.asarray(c.record_offsets(), np.int64) for c in index.chunks if c.num_records
            ]
            held[ref.key] = np.concatenate(parts) if parts else np.empty(0, np.int64)
    return held[ref.key]
