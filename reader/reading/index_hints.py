"""The index and block GETs of a planned scan issued beside the listing, not after it, on a
repeat query.

A filtered read on S3 is three round trips one after another: list the partition, fetch the
sidecar index of the object holding the wanted offset, fetch its block. The second needs the
first's answer, and the third the second's, except when the process has planned the same
partition before: Spark's planner runs in a reused Python worker, so a repeat query of a
partition knows which object held the offset last time, and which byte range of it the plan
read. :func:`speculate` starts that object's index GET, and the GET of that byte range, on the
archive's pool while the listing runs. :func:`adopt` keeps the index only when the fresh
listing picks the same object (same key, same size, and the index's byte length agrees), and
:func:`adopt_blocks` keeps the bytes only when the plan, made from the fresh listing and the
fresh index, reads exactly that range of that object: they then travel with the plan to the
task, which reads nothing. So the plan is always the fresh listing's and every byte still comes
from the store during the query: what the process remembers is a hint of which key and range to
fetch, never data. A wrong hint costs one GET of each.

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
from blockgz.blocks.index import BlockIndex
from blockgz.objects.indexed import load_index
from blockgz.store.local import LocalStore

log = logging.getLogger("blockgz.reader")

#: Partitions remembered per process (least recently planned forgotten first).
MAX_PARTITIONS = 1024
#: The largest byte range fetched on a hint (it travels to the task inside the plan).
MAX_SPECULATED_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class _Ref:
    """What a hint keeps of a listed object (doctest stand-in for an ObjectRef too)."""

    key: str
    start_offset: int
    size: int = -1
    index_key: str | None = None
    has_index: bool = True
    #: The manifest entry that committed it (the speculative index load is checked with it).
    committed: Any = None


@dataclass(frozen=True)
class BlockSpan:
    """The byte range ``start..end`` of object ``key`` (of ``size`` bytes) a plan read, whose
    blocks hold offsets ``first_offset..last_offset``."""

    key: str
    size: int
    start: int
    end: int
    first_offset: int
    last_offset: int


class IndexHints:
    """Per process: each planned partition's indexed objects, by start offset, as last listed,
    and the byte range its last plan read."""

    def __init__(self, capacity: int = MAX_PARTITIONS):
        self.capacity = capacity
        self._seen: OrderedDict[tuple[str, str, int], list[_Ref]] = OrderedDict()
        self._spans: OrderedDict[tuple[str, str, int], BlockSpan] = OrderedDict()
        self._lock = threading.Lock()

    def remember_span(self, where: str, topic: str, partition: int, span: BlockSpan) -> None:
        """Keep the byte range a plan of ``topic``/``partition`` at ``where`` read."""
        self._keep(self._spans, (where, topic, partition), span)

    def predict_span(self, where: str, topic: str, partition: int, offset: int) -> BlockSpan | None:
        """The byte range the last plan of the partition read, if it held ``offset``.

        >>> hints = IndexHints()
        >>> hints.remember_span("s3://b/", "t", 0, BlockSpan("k", 900, 100, 300, 40, 59))
        >>> hints.predict_span("s3://b/", "t", 0, 45).start
        100
        >>> hints.predict_span("s3://b/", "t", 0, 60) is None
        True
        """
        with self._lock:
            span = self._spans.get((where, topic, partition))
        if span is None or not span.first_offset <= offset <= span.last_offset:
            return None
        return span

    def remember(self, where: str, topic: str, partition: int, refs) -> None:
        """Keep the indexed objects of a fresh listing of ``topic``/``partition`` at ``where``."""
        kept = sorted(
            (
                _Ref(r.key, r.start_offset, r.size, r.index_key, committed=r.committed)
                for r in refs
                if r.has_index
            ),
            key=lambda r: r.start_offset,
        )
        self._keep(self._seen, (where, topic, partition), kept)

    def _keep(self, table: OrderedDict, key: tuple[str, str, int], value: Any) -> None:
        """``table[key] = value``, the least recently kept forgotten past the capacity."""
        with self._lock:
            table[key] = value
            table.move_to_end(key)
            while len(table) > self.capacity:
                table.popitem(last=False)

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
    """An index GET (and the GET of a byte range) started before the listing answered."""

    ref: _Ref
    future: Future
    span: BlockSpan | None = None
    blocks: Future | None = None


def speculate(archive: Any, topic: str, partition: int, offset: int | None) -> Speculation | None:
    """Start the index GET of the object that held ``offset`` last time, and the GET of the
    byte range the last plan read when it held ``offset`` (``None``: no hint)."""
    if offset is None or type(archive.store) is LocalStore:  # a local directory: no round trip
        return None
    where = archive.store.url(archive.prefix)
    hint = HINTS.predict(where, topic, partition, offset)
    if hint is None:
        return None
    future = archive.executor.submit(
        load_index,
        archive.store,
        hint.key,
        hint.index_key,
        size=hint.size,
        committed=hint.committed,
    )
    span = HINTS.predict_span(where, topic, partition, offset)
    if span is None or span.key != hint.key or span.end - span.start > MAX_SPECULATED_BYTES:
        return Speculation(hint, future)
    blocks = archive.executor.submit(archive.store.get_range, span.key, span.start, span.end)
    return Speculation(hint, future, span, blocks)


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
        and first.committed == guess.ref.committed  # checked against the same manifest entry
    )
    if not same:
        guess.future.cancel()  # when still queued; a GET in flight just finishes unused
        return False
    assert first is not None
    try:
        index: BlockIndex = guess.future.result()
    except Exception:  # the normal path fetches it again and reports what goes wrong
        # (an ArchiveIntegrityError too: the archive's own load raises it)
        log.debug("the speculative index GET of %s failed", first.key, exc_info=True)
        return False
    if first.size >= 0 and index.byte_length != first.size:
        return False
    archive.remember_index(first, index)
    return True


def adopt_blocks(
    archive: Any, topic: str, partition: int, span: BlockSpan, guess: Speculation | None
) -> bytes | None:
    """Remember ``span``, the byte range the fresh plan reads first in the partition; the bytes
    of it when ``guess`` fetched exactly that range of that object (else ``None``: the task
    fetches it). A failed GET is left to the task, which reports what goes wrong."""
    HINTS.remember_span(archive.store.url(archive.prefix), topic, partition, span)
    if guess is None or guess.blocks is None:
        return None
    if guess.span != span:
        guess.blocks.cancel()  # when still queued; a GET in flight just finishes unused
        return None
    try:
        data: bytes = guess.blocks.result()
    except Exception:
        log.debug("the speculative GET of %s failed", span.key, exc_info=True)
        return None
    return data if len(data) == span.end - span.start else None


__all__ = [
    "HINTS",
    "MAX_SPECULATED_BYTES",
    "BlockSpan",
    "IndexHints",
    "Speculation",
    "adopt",
    "adopt_blocks",
    "speculate",
]
