"""Planning a scan of an archive: which blocks a query needs, grouped into Spark tasks.

No peer pushes offset filters below the object; blockgz pushes them to the block. A query's
conditions on ``topic``, ``partition`` and ``offset`` (:class:`ScanFilter`) decide which
topic-partitions are looked at, which objects (by their start offsets, or the catalog's offset
ranges) and, through each object's index, which blocks; conditions on ``timestamp`` skip the
objects and blocks whose recorded time range lies outside them. The blocks are grouped into
:class:`Split` s of about ``split_bytes`` compressed bytes each — not whole objects, so one
large object is read by many tasks; objects without an index are read whole, one split each.

Nothing here imports Spark (the reader's ``pushFilters`` and ``partitions`` call it on the
driver; tests call it directly).

>>> ScanFilter().with_range("offset", low=10, high=20).offsets.contains(15)
True
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from blockgz.archive.object_ref import ObjectRef
from blockgz.blocks.framing import NEWLINE, Framing
from blockgz.blocks.index import Chunk
from blockgz.blocks.plan import plan_blocks
from blockgz.reader.reading.archive import Archive
from blockgz.reader.reading.index_hints import (
    BlockSpan,
    Speculation,
    adopt,
    adopt_blocks,
    speculate,
)
from blockgz.reader.reading.overlaps import duplicate_groups
from blockgz.reader.spark.scan_timestamps import fast_timestamps

#: Compressed bytes per split, by default (``blockgz.split.size``).
DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class IntRange:
    """Integers allowed by a conjunction of conditions: ``low..high`` (inclusive, ``None``:
    open) and, after an ``=``/``IN``, only ``points``."""

    low: int | None = None
    high: int | None = None
    points: frozenset[int] | None = None

    def contains(self, value: int) -> bool:
        if self.low is not None and value < self.low:
            return False
        if self.high is not None and value > self.high:
            return False
        return self.points is None or value in self.points

    def overlaps(self, first: int, last: int) -> bool:
        """Whether some allowed integer lies in ``first..last``."""
        low = first if self.low is None else max(first, self.low)
        high = last if self.high is None else min(last, self.high)
        if low > high:
            return False
        if self.points is None:
            return True
        return any(low <= p <= high for p in self.points)

    @property
    def empty(self) -> bool:
        if self.low is not None and self.high is not None and self.low > self.high:
            return True
        return self.points is not None and not any(self.contains(p) for p in self.points)

    @property
    def start(self) -> int | None:
        """The smallest value allowed, when bounded below."""
        if self.points is not None:
            return min((p for p in self.points if self.contains(p)), default=None)
        return self.low

    def narrowed(
        self,
        *,
        low: int | None = None,
        high: int | None = None,
        points: Iterable[int] | None = None,
    ) -> IntRange:
        new_low = self.low if low is None else (low if self.low is None else max(low, self.low))
        new_high = (
            self.high if high is None else (high if self.high is None else min(high, self.high))
        )
        new_points = self.points
        if points is not None:
            given = frozenset(points)
            new_points = given if self.points is None else self.points & given
        return IntRange(new_low, new_high, new_points)


@dataclass(frozen=True)
class ScanFilter:
    """What a query allows of ``topic``, ``partition``, ``offset`` and ``timestamp`` (all:
    no condition). ``times`` is in epoch ms and only prunes objects whose time range the
    export's catalog recorded and blocks whose time range their index says; rows are never
    dropped by it here."""

    topics: frozenset[str] | None = None
    partitions: IntRange = field(default_factory=IntRange)
    offsets: IntRange = field(default_factory=IntRange)
    times: IntRange = field(default_factory=IntRange)

    def with_topics(self, names: Iterable[str]) -> ScanFilter:
        given = frozenset(names)
        return replace(self, topics=given if self.topics is None else self.topics & given)

    def with_range(self, column: str, **bounds) -> ScanFilter:
        """Narrow ``partition``, ``offset`` or ``timestamp`` (epoch ms) by
        ``low``/``high``/``points``."""
        if column == "partition":
            return replace(self, partitions=self.partitions.narrowed(**bounds))
        if column == "timestamp":
            return replace(self, times=self.times.narrowed(**bounds))
        return replace(self, offsets=self.offsets.narrowed(**bounds))

    @property
    def empty(self) -> bool:
        return (
            (self.topics is not None and not self.topics) or self.offsets.empty or self.times.empty
        )

    def may_hold_times(self, ref: ObjectRef) -> bool:
        """Whether ``ref`` can hold a record in the time window (unknown times: yes).

        >>> ref = ObjectRef("k", "t", 0, 0, "json", min_timestamp=100, max_timestamp=200)
        >>> ScanFilter().with_range("timestamp", low=201).may_hold_times(ref)
        False
        """
        if ref.min_timestamp is None or ref.max_timestamp is None:
            return True
        return self.times.overlaps(ref.min_timestamp, ref.max_timestamp)

    def may_hold_block(self, chunk: Chunk) -> bool:
        """Whether a block can hold a wanted record, by its offsets and (when its index
        says) its time range.

        >>> chunk = Chunk(10, 5, 0, 40, 30, min_timestamp=100, max_timestamp=200)
        >>> scan = ScanFilter().with_range("offset", low=12)
        >>> scan.may_hold_block(chunk), scan.with_range("timestamp", high=99).may_hold_block(chunk)
        (True, False)
        """
        if not chunk.num_records:
            return False
        if not self.offsets.overlaps(chunk.first_record_offset, chunk.last_record_offset):
            return False
        # A time condition is only ever a window (no points), as Chunk.may_hold_times takes it.
        return chunk.may_hold_times(self.times.low, self.times.high)


@dataclass(frozen=True)
class Piece:
    """Part of one object a split reads: some of its blocks, or (no ``chunks``) all of it."""

    ref: ObjectRef
    topic: str
    partition: int
    #: ``(block number, chunk)`` of the blocks to read, in file order; ``()``: the whole object.
    chunks: tuple[tuple[int, Chunk], ...] = ()
    #: The object's index as JSON, for blocks whose records need more than the bytes
    #: (Avro, companions); ``""`` when not needed.
    index_json: str = ""
    #: How the object's records are framed (its index says).
    framing: Framing = NEWLINE
    #: Objects that hold some of the same offsets (two writers), ``ref`` first: read together,
    #: each offset once, from the first object holding it (:mod:`blockgz.reader.reading.overlaps`).
    merged: tuple[ObjectRef, ...] = ()
    #: The index's ``codec`` (which family decodes the blocks: gzip, zstd).
    codec: str | None = None
    #: The object's format decodes its blocks itself (Parquet row groups, planned from the
    #: footer): read through the record reader, which reads the footer again.
    decoded: bool = False
    #: Bytes of the object from byte ``prefetched_at`` on, fetched while the plan was made
    #: (:func:`~blockgz.reader.reading.index_hints.adopt_blocks`): the task reads them from here.
    prefetched: bytes = field(default=b"", repr=False)
    prefetched_at: int = 0

    @property
    def whole(self) -> bool:
        return not self.chunks

    @property
    def compressed_bytes(self) -> int:
        if self.merged:
            return sum(max(r.size, 0) for r in self.merged)
        if self.whole:
            return max(self.ref.size, 0)
        return sum(c.byte_length for _, c in self.chunks)


@dataclass(frozen=True)
class Split:
    """What one Spark task reads."""

    pieces: tuple[Piece, ...]

    @property
    def compressed_bytes(self) -> int:
        return sum(p.compressed_bytes for p in self.pieces)


def plan_scan(
    archive: Archive,
    scan: ScanFilter,
    *,
    topics: Iterable[str] | None = None,
    topics_regex: str | None = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
) -> list[Split]:
    """The splits that read exactly the blocks the query can need, in topic-partition and
    offset order."""
    if scan.empty:
        return []
    pieces: list[Piece] = []
    for topic in _topics(archive, scan, topics, topics_regex):
        for partition in _partitions(archive, topic, scan):
            pieces.extend(_pieces(archive, topic, partition, scan))
    return _grouped(pieces, split_bytes)


def _partitions(archive: Archive, topic: str, scan: ScanFilter) -> list[int]:
    """The partitions of ``topic`` to look at. When the query names them (``partition = 0``,
    ``IN (...)``) they are looked up directly: listing the topic's directory (and looking for
    the exports' catalogs first) would cost two sequential requests on S3 before the first
    useful one, and a partition the archive lacks just has no objects."""
    wanted = scan.partitions
    if wanted.points is not None:
        return sorted(p for p in wanted.points if wanted.contains(p))
    return [p for p in archive.partitions(topic) if wanted.contains(p)]


def _topics(archive: Archive, scan: ScanFilter, topics, topics_regex) -> list[str]:
    if topics is not None:
        names = set(topics)
    elif scan.topics is not None:
        names = set(scan.topics)
    else:
        names = set(archive.topics())
    if scan.topics is not None:
        names &= scan.topics
    if topics_regex:
        pattern = re.compile(topics_regex)
        names = {n for n in names if pattern.fullmatch(n)}
    return sorted(names)


def _pieces(archive: Archive, topic: str, partition: int, scan: ScanFilter) -> list[Piece]:
    kept, guess = _objects(archive, topic, partition, scan)
    # Objects holding the same offsets (two writers) are read together, each offset once.
    groups = duplicate_groups(kept, lambda r: archive.index(r) if r.has_index else None)
    group_of = {r.key: group for group in groups for r in group}
    out = []
    for ref in kept:
        group = group_of.get(ref.key)
        if group is not None:
            if group[0] is ref:
                out.append(Piece(ref, topic, partition, merged=tuple(group)))
            continue
        if not ref.has_index:
            out.append(Piece(ref, topic, partition))
            continue
        index = archive.index(ref)
        wanted = tuple((r.block, r.chunk) for r in plan_blocks(index, keep=scan.may_hold_block))
        if wanted and index.blocks is not None:  # Parquet: row groups by their statistics
            out.append(Piece(ref, topic, partition, wanted, decoded=True))
        elif wanted:
            # A timestamps file alone is read beside the blocks (reader.scan_timestamps).
            others = bool(ref.companions) and fast_timestamps(ref) is None
            needs_index = index.avro is not None or others
            index_json = index.to_json() if needs_index else ""
            codec = index.codec if index.avro is None else None
            piece = Piece(ref, topic, partition, wanted, index_json, codec=codec)
            if not out and not index_json and scan.offsets.start is not None:
                piece = _with_prefetched(archive, piece, guess)
            out.append(piece)
    return out


def _with_prefetched(archive: Archive, piece: Piece, guess: Speculation | None) -> Piece:
    """The partition's first piece with the bytes a hint fetched for it during the plan, when
    they are exactly the range it reads
    (:func:`~blockgz.reader.reading.index_hints.adopt_blocks`)."""
    first, last = piece.chunks[0][1], piece.chunks[-1][1]
    span = BlockSpan(
        piece.ref.key,
        piece.ref.size,
        first.byte_offset,
        last.byte_end,
        first.first_record_offset,
        last.last_record_offset,
    )
    data = adopt_blocks(archive, piece.topic, piece.partition, span, guess)
    return piece if data is None else replace(piece, prefetched=data, prefetched_at=span.start)


def _objects(
    archive: Archive, topic: str, partition: int, scan: ScanFilter
) -> tuple[list[ObjectRef], Speculation | None]:
    """The partition's objects that can hold a wanted record, by offsets and times, and the
    GETs started on a hint beside the listing (:mod:`blockgz.reader.reading.index_hints`)."""
    offsets = scan.offsets
    start = offsets.start
    guess = None
    if start is not None:
        guess = speculate(archive, topic, partition, start)  # beside the listing (index_hints)
        refs, _ = archive.seek_objects(topic, partition, start)
    else:
        refs = archive.objects(topic, partition)
    starts = [r.start_offset for r in refs]
    # Objects that start after the last wanted offset hold nothing wanted; without known last
    # offsets (a listing of one partition's directory, where objects follow each other) the
    # ones before the object holding the first wanted offset hold nothing either.
    first = 0
    if start is not None and not any(r.last_offset is not None for r in refs):
        first = max(0, bisect.bisect_right(starts, start) - 1)
    kept = []
    for ref in refs[first:]:
        if offsets.high is not None and ref.start_offset > offsets.high:
            break
        if ref.last_offset is not None and not offsets.overlaps(ref.start_offset, ref.last_offset):
            continue
        if scan.may_hold_times(ref):
            kept.append(ref)
    if start is not None:
        adopt(archive, topic, partition, refs, kept[0] if kept else None, guess)
    return kept, guess


def _grouped(pieces: list[Piece], split_bytes: int) -> list[Split]:
    """Pieces cut and packed into splits of about ``split_bytes`` compressed bytes."""
    splits: list[Split] = []
    current: list[Piece] = []
    size = 0
    for piece in pieces:
        for part in _cut(piece, split_bytes):
            if current and size + part.compressed_bytes > split_bytes:
                splits.append(Split(tuple(current)))
                current, size = [], 0
            current.append(part)
            size += part.compressed_bytes
    if current:
        splits.append(Split(tuple(current)))
    return splits


def _cut(piece: Piece, split_bytes: int) -> list[Piece]:
    """A piece whose blocks exceed ``split_bytes`` as several pieces of whole blocks."""
    if piece.whole or piece.compressed_bytes <= split_bytes:
        return [piece]
    parts: list[Piece] = []
    chunk_run: list[tuple[int, Chunk]] = []
    size = 0
    for item in piece.chunks:
        if chunk_run and size + item[1].byte_length > split_bytes:
            parts.append(replace(piece, chunks=tuple(chunk_run), prefetched=b""))
            chunk_run, size = [], 0
        chunk_run.append(item)
        size += item[1].byte_length
    parts.append(replace(piece, chunks=tuple(chunk_run), prefetched=b""))
    return parts
