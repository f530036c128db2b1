"""The index GET of a planned scan issued beside the listing, not after it, on a repeat query.

A filtered read on S3 is three round trips one after another: list the partition, fetch the
sidecar index of the object holding the wanted offset, fetch its block. The second needs the
first's answer, except when the process has listed the same partition before: Spark's planner
runs in a reused Python worker, so a repeat query of a partition knows which object held the
offset last time. :func:`speculate` starts that object's index GET on the archive's pool while
the listing runs; :func:`adopt` keeps it only when the fresh listing picks the same object
(same key, same size, and the index's byte length agrees), so the plan is always the fresh
listing's and every byte still comes from the store during the query: what the process
remembers is a hint of which key to fetch, never data. A wrong hint costs one index GET.

>>> hints = IndexHints()
>>> listed = [_Ref("t/0/t+0+0.json.gz", 0), _Ref("t/0/t+0+100.json.gz", 100)]
>>> hints.remember("s3://b/", "t", 0, listed)
>>> hints.predict("s3://b/", "t", 0, 150).key, hints.predict("s3://b/", "t", 1, 150)
('t/0/t+0+100.json.gz', None)
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from blockgz.archive.object_ref import ObjectRef
from blockgz.format.index import BlockIndex
from blockgz.objects.indexed import load_index
from blockgz.store.local import LocalStore

log = logging.getLogger("blockgz.reader")

#: Partitions remembered per process (least recently planned forgotten first).
MAX_PARTITIONS = 1024


@dataclass(frozen=True)
class _Ref:
    """What a hint keeps of a listed object (doctest stand-in for an ObjectRef too)."""

    key: str
    start_offset: int
    size: int = -1
    index_key: str | None = None
    has_index: bool = True


class IndexHints:
    """Per process: each planned partition's indexed objects, by start offset, as last listed."""

    def __init__(self, capacity: int = MAX_PARTITIONS):
        self.capacity = capacity
        self._seen: OrderedDict[tuple[str, str, int], list[_Ref]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, where: str, topic: str, partition: int, refs) -> None:
        """Keep the indexed objects of a fresh listing of ``topic``/``partition`` at ``where``."""
        kept = sorted(
            (_Ref(r.key, r.start_offset, r.size, r.index_key) for r in refs if r.has_index),
            key=lambda r: r.start_offset,
        )
        with self._lock:
            self._seen[(where, topic, partition)] = kept
            self._seen.move_to_end((where, topic, partition))
            while len(self._seen) > self.capacity:
                self._seen.popitem(last=False)

    def predict(self, where: str, topic: str, partition: int, offset: int) -> _Ref | None:
        """The object that held ``offset`` when the partition was last listed, if any."""
        with self._lock:
            refs = self._seen.get((where, topic, partition))
        if not refs:
            return None
        at = bisect.bisect_right([r.start_offset for r in refs], offset) - 1
        return refs[at] if at >= 0 else None


HINTS = IndexHints()


@dataclass
class Speculation:
    """An index GET started before the listing answered."""

    ref: _Ref
    future: Future


def speculate(archive: Any, topic: str, partition: int, offset: int | None) -> Speculation | None:
    """Start the index GET of the object that held ``offset`` last time (``None``: no hint)."""
    if offset is None or type(archive.store) is LocalStore:  # a local directory: no round trip
        return None
    hint = HINTS.predict(archive.store.url(archive.prefix), topic, partition, offset)
    if hint is None:
        return None
    future = archive.executor.submit(
        load_index, archive.store, hint.key, hint.index_key, size=hint.size
    )
    return Speculation(hint, future)


def adopt(
    archive: Any,
    topic: str,
    partition: int,
    listed: list[ObjectRef],
    first: ObjectRef | None,
    guess: Speculation | None,
) -> bool:
    """Remember the fresh ``listed`` objects; when ``guess`` fetched the index of ``first``
    (the object the plan reads first), hand it to the archive. Whether it was used."""
    HINTS.remember(archive.store.url(archive.prefix), topic, partition, listed)
    if guess is None:
        return False
    same = (
        first is not None
        and first.has_index
        and first.key == guess.ref.key
        and first.size == guess.ref.size
    )
    if not same:
        guess.future.cancel()  # when still queued; a GET in flight just finishes unused
        return False
    assert first is not None
    try:
        index: BlockIndex = guess.future.result()
    except Exception:  # the normal path fetches it again and reports what goes wrong
        log.debug("the speculative index GET of %s failed", first.key, exc_info=True)
        return False
    if first.size >= 0 and index.byte_length != first.size:
        return False
    archive.remember_index(first, index)
    return True


__all__ = ["HINTS", "IndexHints", "Speculation", "adopt", "speculate"]
