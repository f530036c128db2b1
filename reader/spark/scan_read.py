"""Reading one split of a scan (:mod:`blockgz.reader.spark.scan_plan`) into Arrow record batches.

Neighbouring blocks of one object are fetched with one ranged GET
(:func:`~blockgz.blocks.plan.merge_ranges`). A block of
newline-separated records (JSON, or bytearray with the default separator) that carries no
envelope and no keys/headers beside it becomes an Arrow batch without a Python object per
record: numpy finds the separators and the values column is built over the block's bytes.
Parquet row groups whose values are parsed into a struct become batches from their columns
(:mod:`blockgz.reader.spark.scan_parquet`). Everything else (Avro, other Parquet row groups,
envelopes, keys and headers files, other framings, objects without an index) goes through
the record reader
(:class:`~blockgz.reader.reading.archive.Archive`), which knows them all.

With ``value_type`` (an Arrow struct) the values are parsed as JSON into it a block at a
time (:mod:`blockgz.formats.json.values`).

Rows outside the scan's offsets are dropped here, so a block that only partly overlaps the
query gives exactly the rows asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

import numpy as np

from blockgz.blocks.codecs.families import block_codec
from blockgz.blocks.decode import Record, inflate_chunk
from blockgz.blocks.envelope import unwrap
from blockgz.blocks.framing import NEWLINE
from blockgz.blocks.index import BlockIndex, Chunk
from blockgz.blocks.plan import BlockRead, Span, fetched, merge_ranges
from blockgz.errors import CorruptBlockError
from blockgz.formats.json.values import parse_json_lines
from blockgz.objects.committed import CommittedRanges
from blockgz.objects.indexed import object_ranges
from blockgz.reader.analytics.tables import kafka_batch, kept_columns, value_bytes
from blockgz.reader.reading.archive import Archive
from blockgz.reader.spark.scan_parquet import parquet_batches
from blockgz.reader.spark.scan_plan import IntRange, Piece, Split
from blockgz.reader.spark.scan_timestamps import BlockTimestamps, fast_timestamps

if TYPE_CHECKING:
    from blockgz.formats.avro.wire_decode import WireAvroValues

#: How many bytes of neighbouring blocks a scan task fetches with one ranged GET.
SPAN_BYTES = 8 << 20
#: A line that starts like this is the export's envelope (``format.json.envelope``).
_ENVELOPE_START = b'{"topic":'


def split_batches(
    archive: Archive,
    split: Split,
    offsets: IntRange,
    *,
    value_type: Any = None,
    wire: WireAvroValues | None = None,
    reader_schema: str | None = None,
) -> Iterator[Any]:
    """Arrow batches (Spark's Kafka schema, headers included) of the split's rows; with
    ``wire``, values in Confluent's Avro wire format decoded into ``value_type``; with
    ``reader_schema`` (Avro JSON text), values of ``.avro`` objects written with another
    schema resolved into it (defaults filled)."""
    for piece in split.pieces:
        if piece.merged:
            yield from _merged_path(archive, piece, offsets, value_type, wire)
            continue
        if piece.decoded and wire is None:  # Parquet row groups: columns to batches
            batches = parquet_batches(
                archive, piece, offsets, value_type, keep=_filtered, span_bytes=SPAN_BYTES
            )
            if batches is not None:
                yield from batches
                continue
        if piece.whole or piece.index_json or piece.decoded or wire is not None:
            yield from _record_path(archive, piece, offsets, value_type, wire, reader_schema)
            continue
        yield from _block_path(archive, piece, offsets, value_type)


def _block_path(archive: Archive, piece: Piece, offsets: IntRange, value_type: Any):
    """Plain blocks: neighbouring ones fetched with one ranged GET, each made a batch (with
    the record timestamps of the JSON timestamps file beside them, read at once)."""
    stamps = None
    companion = fast_timestamps(piece.ref)
    if companion is not None:
        first, last = piece.chunks[0][1], piece.chunks[-1][1]
        stamps = BlockTimestamps.load(
            archive, companion, first.first_record_offset, last.last_record_offset
        )
        if stamps is None:  # not [ms,type] lines: the record reader reads it
            yield from _record_path(archive, piece, offsets, value_type)
            return
    elif not piece.ref.companions:  # the sidecar's (issue 44), when it keeps them
        stamps = BlockTimestamps.from_chunks([chunk for _, chunk in piece.chunks], piece.ref.key)
    reads = [BlockRead(number, chunk) for number, chunk in piece.chunks]
    # Spans of a few MiB, the next one fetched while this one is inflated and parsed: on S3
    # the task then waits for its first span only, not for the whole split.
    spans = merge_ranges(reads, limit=SPAN_BYTES)
    yield from _block_batches(archive, piece, offsets, value_type, spans, archive.executor, stamps)


def _block_batches(
    archive: Archive,
    piece: Piece,
    offsets: IntRange,
    value_type: Any,
    spans: Iterable[Span],
    pool: Executor,
    stamps: BlockTimestamps | None = None,
) -> Iterator[Any]:
    """The batches of :func:`_block_path`, one span fetched ahead in ``pool``."""
    key = piece.ref.key
    kept, at = piece.prefetched, piece.prefetched_at
    # Committed objects: each answer's size and each block's CRC-32 checked (issue 41).
    chunks = [chunk for _, chunk in piece.chunks]
    ranges = object_ranges(archive.store, key, chunks, piece.ref.committed)

    def bytes_of(start: int, end: int) -> bytes:
        if kept and at <= start and end <= at + len(kept):  # fetched while planning
            data = kept[start - at : end - at]
            if isinstance(ranges, CommittedRanges):
                ranges.check_blocks(start, data)
            return data
        return ranges.read(start, end)

    pairs = fetched(bytes_of, spans, executor=pool, ahead=1)
    codec = block_codec(piece.codec)
    for read, raw in pairs:
        number, chunk = read.block, read.chunk
        data = inflate_chunk(raw, chunk, block=number, source=key, codec=codec)
        batch = _block_batch(piece, chunk, data, offsets, value_type, stamps)
        if batch is None:  # not plain lines: the record reader takes it
            records = _block_records(archive, piece, number, chunk, data)
            if stamps is not None:
                records = stamps.fill(list(records))
            batch = _records_batch(piece, records, offsets, value_type)
        if batch.num_rows:
            yield batch


def _block_batch(
    piece: Piece,
    chunk: Chunk,
    data: bytes | bytearray,
    offsets: IntRange,
    value_type: Any,
    stamps: BlockTimestamps | None = None,
):
    """The block as a batch, built from its bytes (``stamps``: its timestamp columns); ``None``
    if it needs the record reader."""
    import pyarrow as pa

    if piece.framing != NEWLINE or data.startswith(_ENVELOPE_START) or not data:
        return None
    if value_type is not None:
        # Parsed: Arrow's row count is the check (no separate pass for the newlines).
        values = parse_json_lines(data, value_type, source=piece.ref.key)
        if len(values) != chunk.num_records:
            return None  # an empty value, or a mismatch the record reader will name
    else:
        octets = np.frombuffer(data, np.uint8)
        ends = np.flatnonzero(octets == 0x0A)
        if not data.endswith(b"\n"):  # a last record without its separator still counts
            ends = np.append(ends, len(data))
        if len(ends) != chunk.num_records:
            return None  # let the record reader name the mismatch
        starts = np.concatenate(([0], ends[:-1] + 1))
        kept = np.delete(octets, ends[ends < len(data)])
        value_offsets = np.concatenate((starts - np.arange(len(starts)), [len(kept)]))
        values = pa.BinaryArray.from_buffers(
            pa.binary(),
            len(starts),
            [None, pa.py_buffer(value_offsets.astype(np.int32)), pa.py_buffer(kept)],
        )
    record_offsets = np.asarray(chunk.record_offsets(), np.int64)
    stamp_columns = {} if stamps is None else stamps.columns(record_offsets)
    if stamp_columns is None:
        return None  # an offset without its entry: the record reader names it
    batch = kafka_batch(
        piece.topic, piece.partition, values, record_offsets, value_type, **stamp_columns
    )
    return _filtered(batch, record_offsets, offsets)


def _filtered(batch, record_offsets: np.ndarray, offsets: IntRange):
    import pyarrow as pa

    mask = np.ones(len(record_offsets), bool)
    if offsets.low is not None:
        mask &= record_offsets >= offsets.low
    if offsets.high is not None:
        mask &= record_offsets <= offsets.high
    if offsets.points is not None:
        mask &= np.isin(record_offsets, np.fromiter(offsets.points, np.int64))
    return batch if mask.all() else batch.filter(pa.array(mask))


# -- the record reader's path ------------------------------------------------------------------
def _block_records(
    archive: Archive, piece: Piece, number: int, chunk: Chunk, data: bytes | bytearray
):
    """The block's records (envelopes unwrapped), from its bytes."""
    values, total = piece.framing.slice(data, 0, None)
    if total != chunk.num_records:
        raise CorruptBlockError(
            f"{piece.ref.key}: block {number} holds {total} records, the index promises "
            f"{chunk.num_records}",
            block=number,
            byte_offset=chunk.byte_offset,
        )
    for offset, value in zip(chunk.record_offsets(), values, strict=True):
        record = Record(offset, value)
        yield unwrap(record) if archive.envelopes else record


def _record_path(
    archive: Archive,
    piece: Piece,
    offsets: IntRange,
    value_type: Any,
    wire: WireAvroValues | None = None,
    reader_schema: str | None = None,
):
    """Whole objects, Avro, objects with keys/headers files and wire-format Avro values:
    through the archive."""
    ref = piece.ref
    if piece.index_json:  # planned with it: no GET of the sidecar again
        archive.remember_index(ref, BlockIndex.from_json(piece.index_json))
    resolve = None
    if reader_schema is not None and ref.is_avro:
        from blockgz.formats.avro.arrow_types import resolver

        resolve = resolver(archive.avro_schema(ref), reader_schema)
    blocks = (
        [archive.block_records(ref, -1, timestamps=True)]
        if piece.whole
        else archive.blocks_records(ref, [n for n, _ in piece.chunks], timestamps=True)
    )
    for records in blocks:
        batch = _records_batch(piece, records, offsets, value_type, wire, resolve)
        if batch.num_rows:
            yield batch


def _merged_path(
    archive: Archive,
    piece: Piece,
    offsets: IntRange,
    value_type: Any,
    wire: WireAvroValues | None = None,
):
    """Objects that hold some of the same offsets: merged, each offset once."""
    low = offsets.start
    if low is None:
        low = min(r.start_offset for r in piece.merged)
    for run in archive.merged_blocks(list(piece.merged), low, timestamps=True):
        batch = _records_batch(piece, run, offsets, value_type, wire)
        if batch.num_rows:
            yield batch


def _records_batch(
    piece: Piece,
    records,
    offsets: IntRange,
    value_type: Any,
    wire: WireAvroValues | None = None,
    resolve: Any = None,
):
    """A batch of Record objects (keys, headers and timestamps where kept); ``resolve``
    turns decoded Avro values into the reader schema's shape."""
    import pyarrow as pa

    rows = [r for r in records if offsets.contains(r.offset)]
    if resolve is not None:
        rows = [
            r
            if r.value is None
            else Record.kept(
                r.offset, resolve(r.value), key=r.key, headers=r.headers, timestamp=r.timestamp
            )
            for r in rows
        ]
    decoded = any(r.value is not None and not isinstance(r.value, bytes) for r in rows)
    if wire is not None and not decoded:  # Confluent's wire format, through the registry
        where = f"{piece.ref.key}: {piece.topic}-{piece.partition}@"
        values = pa.array(
            [wire.decode(value_bytes(r.value), where=f"{where}{r.offset}") for r in rows],
            type=value_type,
        )
    elif decoded and value_type is not None:  # Avro values, into their own schema's type
        values = pa.array([r.value for r in rows], type=value_type)
    elif value_type is None:
        values = pa.array([value_bytes(r.value) for r in rows], pa.binary())
    else:  # a null value (a tombstone) parses as an object of nulls
        lines = b"".join((value_bytes(r.value) or b"{}") + b"\n" for r in rows)
        values = parse_json_lines(lines, value_type, source=piece.ref.key)
    offsets_of = [r.offset for r in rows]
    return kafka_batch(
        piece.topic, piece.partition, values, offsets_of, value_type, **kept_columns(rows)
    )
