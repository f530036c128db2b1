"""Offsets per topic-partition, as manifests, the catalog and intents record them.

>>> merge_offsets({"t": {0: 5}}, {"t": {"0": 3, "1": 9}})
{'t': {0: 5, 1: 9}}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Per topic, per partition: the next offset to read (or a count, for dead letters).
Offsets = dict[str, dict[int, int]]
#: ``startingOffsets`` JSON's "earliest", for partitions no manifest mentions.
EARLIEST = -2


def merge_offsets(target: Offsets, more: Mapping[str, Mapping[Any, Any]]) -> Offsets:
    """Fold ``more`` into ``target`` keeping the highest next offset per topic-partition."""
    for topic, parts in more.items():
        mine = target.setdefault(topic, {})
        for part, nxt in parts.items():
            mine[int(part)] = max(mine.get(int(part), 0), int(nxt))
    return target


def offsets_doc(offsets: Offsets) -> dict[str, dict[str, int]]:
    """``offsets`` as JSON wants them: sorted, partitions as text.

    >>> offsets_doc({"b": {1: 2, 0: 1}, "a": {}})
    {'a': {}, 'b': {'0': 1, '1': 2}}
    """
    return {t: {str(p): n for p, n in sorted(ps.items())} for t, ps in sorted(offsets.items())}
