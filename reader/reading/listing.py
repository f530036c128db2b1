"""The listing for people: every data object under an archive's prefix, one summary each.

What ``blockgz ls`` prints and ``blockgz verify`` checks (:meth:`Archive.ls
<blockgz.reader.reading.archive.Archive.ls>` returns it): each object's offsets and record count
(from
its index; without one, its last offset is taken as one before the next object's start), plus
the strays listed beside them.

>>> import tempfile
>>> from concurrent.futures import ThreadPoolExecutor
>>> from blockgz.sample import write_sample_objects
>>> from blockgz.objects.indexed import load_index
>>> from blockgz.reader.reading.locate import ObjectLocator
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> _ = write_sample_objects(store, "t", (0, 5))
>>> def index_of(ref):
...     return load_index(store, ref.key, ref.index_key)
>>> with ThreadPoolExecutor(1) as pool:
...     rows = list_objects(ObjectLocator(store, ""), index_of, pool)
>>> [(r.first_offset, r.last_offset, r.records, r.indexed) for r in rows]
[(0, 4, 5, True), (5, 9, 5, True)]
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

from blockgz.archive.object_ref import ObjectRef
from blockgz.blocks.index import BlockIndex
from blockgz.errors import BlockGzError
from blockgz.reader.reading.locate import ObjectLocator
from blockgz.reader.reading.strays import Listing


@dataclass(frozen=True)
class ObjectSummary:
    """One line of ``blockgz ls``."""

    key: str
    topic: str
    partition: int
    first_offset: int
    last_offset: int | None
    records: int | None
    size: int
    indexed: bool


def list_objects(
    locator: ObjectLocator,
    index_of: Callable[[ObjectRef], BlockIndex],
    pool: Executor,
    topic: str | None = None,
) -> Listing:
    """Every data object under the locator's prefix (or one topic), with offsets and record
    counts; its ``strays`` are the other keys listed there, which no reader reads. ``index_of``
    gives an indexed object's index (loaded on ``pool``)."""
    listed = locator.layout.topic_prefix(locator.prefix, topic)
    refs = locator.parse_listing(listed, topic, None)
    if not refs and (locator.relocate() or locator.learn_layout()):
        return list_objects(locator, index_of, pool, topic)
    indexes = list(pool.map(lambda r: _index_or_none(index_of, r), refs))
    out = []
    for n, (ref, index) in enumerate(zip(refs, indexes, strict=True)):
        following = refs[n + 1] if n + 1 < len(refs) else None
        if index:
            last = index.last_offset
        elif following is not None and (following.topic, following.partition) == (
            ref.topic,
            ref.partition,
        ):
            last = following.start_offset - 1
        else:
            last = None
        out.append(
            ObjectSummary(
                ref.key,
                ref.topic,
                ref.partition,
                ref.start_offset,
                last,
                index.record_count if index else None,
                ref.size,
                ref.has_index,
            )
        )
    return Listing(out, [k for k in locator.strays if k.startswith(listed)])


def _index_or_none(
    index_of: Callable[[ObjectRef], BlockIndex], ref: ObjectRef
) -> BlockIndex | None:
    """The object's index; ``None`` without one, or when it cannot be used (the listing goes
    on: ``verify`` names that sidecar on the object's own line)."""
    if not ref.has_index:
        return None
    try:
        return index_of(ref)
    except BlockGzError:
        return None
