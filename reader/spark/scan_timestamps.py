"""A scan's record timestamps from the value object's sidecar (issue 44:
:meth:`BlockTimestamps.from_chunks`, no request) or, in archives written before, the hidden
timestamps file beside the values, read without a Python object per record (the Spark
reader's block path).

A JSON timestamps file (``[ms,type]`` lines, block-compressed and indexed: what the export
writes beside JSON and bytearray values, :mod:`blockgz.archive.timestamps_keys`) is fetched
for the offsets a piece reads (neighbouring blocks with one ranged GET), its lines parsed by
pyarrow's CSV reader into int64 columns (C code; a hand-written parse would be a Python step per
record), and each value block's rows are matched to their entries by offset (numpy). A file of
another shape (Avro, not indexed, lines that are not pairs) gives ``None``: the record reader
(:class:`~blockgz.reader.reading.archive.Archive`) takes the piece, as it takes keys and headers.

>>> import numpy as np
>>> stamps = BlockTimestamps(np.array([5, 6, 8]), np.array([100, -1, 300]), np.array([0, -1, 1]))
>>> cols = stamps.columns(np.array([6, 8]))
>>> cols["timestamp"].to_pylist()[1].timestamp(), cols["timestampType"].to_pylist()
(0.3, [None, 1])
>>> stamps.columns(np.array([7])) is None  # an offset it has no entry for
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from blockgz.archive.object_ref import ObjectRef
from blockgz.blocks.codecs.families import block_codec
from blockgz.blocks.decode import Record, inflate_chunk
from blockgz.blocks.index import Chunk
from blockgz.blocks.plan import BlockRead, fetched, merge_ranges
from blockgz.formats.by_name import format_of_extension
from blockgz.formats.json.json_format import int_pair_lines
from blockgz.objects.indexed import object_ranges

if TYPE_CHECKING:
    from blockgz.reader.reading.archive import Archive


def fast_timestamps(ref: ObjectRef) -> ObjectRef | None:
    """The timestamps file of ``ref`` when it is its only companion and this module reads it
    (JSON, indexed); ``None`` otherwise."""
    if len(ref.companions) != 1:
        return None
    (stamps,) = ref.companions
    if stamps.role != "timestamps" or not stamps.has_index:
        return None
    fmt = format_of_extension(stamps.extension, stamps.bytearray_extension)
    return stamps if fmt is not None and fmt.json_text else None  # lines of JSON text


@dataclass(frozen=True)
class BlockTimestamps:
    """Entries of a timestamps file: each record's offset, epoch ms and type (``-1``: none)."""

    offsets: np.ndarray
    stamps: np.ndarray
    kinds: np.ndarray

    @classmethod
    def from_chunks(cls, chunks: list[Chunk], source: str = "index") -> BlockTimestamps | None:
        """The entries the chunks of a sidecar keep (issue 44, :mod:`blockgz.blocks.stamps`):
        no request; ``None`` when one of them keeps none (an older sidecar).

        >>> from blockgz.blocks.index import BlockIndex
        >>> idx = BlockIndex([Chunk(4, 2, 0, 9, 9)])
        >>> idx = idx.with_stamps(np.array([7, -1]), np.array([1, -1]), np.array([4, 5]))
        >>> BlockTimestamps.from_chunks(list(idx.chunks)).lookup(np.array([5]))
        (array([-1]), array([-1]))
        """
        if not chunks or any(c.stamps is None for c in chunks):
            return None
        offsets, stamps, kinds = [], [], []
        for chunk in chunks:
            assert chunk.stamps is not None
            ms, types = chunk.stamps.decode(chunk.num_records, source=source)
            offsets.append(np.asarray(chunk.record_offsets(), np.int64))
            stamps.append(ms)
            kinds.append(types)
        return cls(np.concatenate(offsets), np.concatenate(stamps), np.concatenate(kinds))

    @classmethod
    def load(
        cls, archive: Archive, ref: ObjectRef, first: int, last: int
    ) -> BlockTimestamps | None:
        """The entries of ``ref`` (a timestamps file) for offsets ``first..last``; ``None``
        when its blocks are not ``[int,int]`` lines."""
        index = archive.index(ref)
        reads = [
            BlockRead(n, c)
            for n, c in enumerate(index.chunks)
            if c.num_records and c.last_record_offset >= first and c.first_record_offset <= last
        ]
        codec = block_codec(index.codec)
        key = ref.key
        offsets, blocks = [], []
        spans = merge_ranges(reads)
        ranges = object_ranges(archive.store, key, index.chunks, ref.committed)
        for read, raw in fetched(ranges.read, spans):
            chunk = read.chunk
            blocks.append(inflate_chunk(raw, chunk, block=read.block, source=key, codec=codec))
            offsets.append(np.asarray(chunk.record_offsets(), np.int64))
        pairs = _pairs(b"".join(blocks))
        if pairs is None:
            return None
        all_offsets = np.concatenate(offsets) if offsets else np.empty(0, np.int64)
        if len(all_offsets) != len(pairs[0]):
            return None
        return cls(all_offsets, *pairs)

    def lookup(self, record_offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """``(ms, type)`` of each offset (``-1``: none); ``None`` if one has no entry."""
        if not len(record_offsets):
            return np.empty(0, np.int64), np.empty(0, np.int64)
        at = np.searchsorted(self.offsets, record_offsets)
        if at.max() >= len(self.offsets) or not np.array_equal(self.offsets[at], record_offsets):
            return None
        return self.stamps[at], self.kinds[at]

    def columns(self, record_offsets: np.ndarray) -> dict[str, Any] | None:
        """The ``timestamp`` and ``timestampType`` columns of a batch's rows (Spark's Kafka
        schema); ``None`` if some row has no entry."""
        import pyarrow as pa

        found = self.lookup(record_offsets)
        if found is None:
            return None
        stamps, kinds = found
        return {
            "timestamp": pa.array(stamps * 1000, pa.timestamp("us", tz="UTC"), mask=stamps < 0),
            "timestampType": pa.array(kinds.astype(np.int32), pa.int32(), mask=kinds < 0),
        }

    def fill(self, records: list[Record]) -> list[Record]:
        """``records`` with the timestamps kept for them (where they have none of their own).

        >>> stamps = BlockTimestamps(np.array([1, 2]), np.array([10, 20]), np.array([0, 1]))
        >>> [(r.timestamp, r.timestamp_type) for r in stamps.fill([Record(2, b"v")])]
        [(20, 1)]
        """
        found = self.lookup(np.fromiter((r.offset for r in records), np.int64, len(records)))
        if found is None:
            raise IndexError("the timestamps file has no entry for some record of the block")
        out = []
        for record, stamp, kind in zip(records, found[0].tolist(), found[1].tolist(), strict=True):
            if record.timestamp is not None:
                out.append(record)
                continue
            out.append(
                Record.kept(
                    record.offset,
                    record.value,
                    key=record.key,
                    headers=record.headers,
                    timestamp=None if stamp < 0 else stamp,
                    timestamp_type=None if kind < 0 else kind,
                    holds=record.holds | {"timestamp"},
                )
            )
        return out


def _pairs(data: bytes) -> tuple[np.ndarray, np.ndarray] | None:
    """``[ms,type]`` lines as two int64 arrays
    (:func:`~blockgz.formats.json.json_format.int_pair_lines`);
    ``None`` for anything else.

    >>> [a.tolist() for a in _pairs(b"[1700000000000,0]\\n[-1,-1]\\n")]
    [[1700000000000, -1], [0, -1]]
    >>> _pairs(b'"text"\\n') is None
    True
    """
    pairs = int_pair_lines(data, data.count(b"\n"))
    if pairs is None:
        return None
    try:
        return np.asarray(pairs[0], np.int64), np.asarray(pairs[1], np.int64)
    except OverflowError:  # beyond int64: no Kafka timestamp; the record path reports it
        return None
