"""Reading a split's Parquet row groups straight into Arrow batches of the reader's schema.

The record reader turns each row into a Python dict, the dict into JSON text and the text back
into the struct ``value.schema`` declares: for a columnar file that is three copies of work it
does not need. Here a row group is decoded by pyarrow (:class:`~blockgz.formats.
parquet_read.ParquetBlocks`, from its bytes and the footer, as the record reader fetches them)
and its columns become the batch: ``__kafka_offset`` the offsets, ``__kafka_timestamp`` the
timestamps, and the value columns the ``value`` struct, each field taken by name.

Only where that gives exactly what the JSON round trip gives: values parsed into a struct
(``value.schema``), objects whose values are records (one column per field) and that have no
keys or headers files beside them, and every declared field either missing from the object
(null, as JSON parsing leaves it) or a column of the same type (nullability aside) or of a
type that widens to it without changing a value (a smaller integer to a larger one, an
integer or ``float`` to ``double``). Anything else returns ``None`` and the caller reads the
piece through the record reader, as before.

>>> import pyarrow as pa
>>> columns = pa.schema([("id", pa.int32()), ("item", pa.string()), ("at", pa.date32())])
>>> wanted = pa.struct([("id", pa.int64()), ("item", pa.string()), ("gone", pa.bool_())])
>>> value_plan(columns, wanted)
(('id', DataType(int64)), ('item', None), (None, DataType(bool)))
>>> value_plan(columns, pa.struct([("at", pa.string())])) is None  # JSON text differs
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from blockgz.blocks.plan import BlockRead, fetched, merge_ranges
from blockgz.formats.parquet.columns import (
    column_ranges,
    column_spans,
    fetched_columns,
    leaf_columns,
)
from blockgz.formats.parquet.schema import KAFKA_COLUMNS, OFFSET_COLUMN, TIMESTAMP_COLUMN
from blockgz.objects.indexed import object_ranges
from blockgz.reader.analytics.tables import kafka_batch
from blockgz.reader.reading.archive import Archive
from blockgz.reader.spark.scan_plan import IntRange, Piece

#: How one declared field is made: ``(column, cast to or None)``, or ``(None, type)`` for a
#: field the object has no column of (all null).
FieldPlan = tuple[str | None, Any]
#: Unwanted bytes between two wanted column chunks that are still read along rather than
#: asked for apart. A request to S3 waits ~20 ms for its first byte, in which one stream moves
#: ~1-2 MB; on the loopback SeaweedFS the benchmark uses, 256 KiB gaps made the narrow full
#: scan 1.8x slower (8x the requests for 40 % of the bytes). A blob column's chunks of a few
#: MB each are skipped (``benchmarks/parquet_wide_scan.py``: 1.5 KB values behind 20 ms, 46x
#: fewer bytes, 1.2x faster).
COLUMN_GAP = 1 << 20
#: Drops the rows of a batch outside the scan's offsets (``scan_read._filtered``).
Keep = Callable[[Any, Any, IntRange], Any]


def parquet_batches(
    archive: Archive,
    piece: Piece,
    offsets: IntRange,
    value_type: Any,
    *,
    keep: Keep,
    span_bytes: int,
) -> Iterator[Any] | None:
    """The piece's rows as Arrow batches (Spark's Kafka schema, ``value`` of ``value_type``),
    or ``None`` when they cannot be made from the columns alone (see the module docstring)."""
    if value_type is None or piece.ref.companions or piece.merged or piece.whole:
        return None
    blocks = archive.index(piece.ref).blocks
    if blocks is None or blocks.value != "record":
        return None
    columns = blocks.meta.schema.to_arrow_schema()
    plan = value_plan(columns, value_type)
    if plan is None:
        return None
    wanted = wanted_columns(columns.names, plan)
    return _batches(archive, piece, blocks, offsets, value_type, plan, wanted, keep, span_bytes)


def value_plan(columns: Any, value_type: Any) -> tuple[FieldPlan, ...] | None:
    """How each field of ``value_type`` (an Arrow struct) is made from an object's
    ``columns`` (its Arrow schema); ``None`` if some field cannot be made exactly."""
    import pyarrow as pa

    if not pa.types.is_struct(value_type):
        return None
    names = [n for n in columns.names if n not in KAFKA_COLUMNS]
    plan: list[FieldPlan] = []
    for n in range(value_type.num_fields):
        field = value_type.field(n)
        if field.name not in names:
            plan.append((None, field.type))
            continue
        have = columns.field(field.name).type
        if have == field.type:
            plan.append((field.name, None))
        elif _same_shape(have, field.type) or _widens(have, field.type):
            plan.append((field.name, field.type))
        else:
            return None
    return tuple(plan)


def _same_shape(have: Any, want: Any) -> bool:
    """The same type but for nullability and the names of list items."""
    import pyarrow as pa

    if pa.types.is_struct(have) and pa.types.is_struct(want):
        return have.num_fields == want.num_fields and all(
            have.field(n).name == want.field(n).name
            and _same_shape(have.field(n).type, want.field(n).type)
            for n in range(have.num_fields)
        )
    if pa.types.is_list(have) and pa.types.is_list(want):
        return _same_shape(have.value_type, want.value_type)
    if pa.types.is_map(have) and pa.types.is_map(want):
        return _same_shape(have.key_type, want.key_type) and _same_shape(
            have.item_type, want.item_type
        )
    return have == want


def _widens(have: Any, want: Any) -> bool:
    """Whether every value of ``have`` is the same value in ``want``, as JSON parsing makes
    it (a smaller integer in a larger one; an integer or float in a double)."""
    import pyarrow as pa

    if pa.types.is_integer(have) and pa.types.is_integer(want):
        have_signed, want_signed = (pa.types.is_signed_integer(t) for t in (have, want))
        if have_signed and not want_signed:
            return False
        if want_signed and not have_signed:  # an unsigned one needs a bit more
            return want.bit_width > have.bit_width
        return want.bit_width >= have.bit_width
    return pa.types.is_float64(want) and (pa.types.is_integer(have) or pa.types.is_float32(have))


def _batches(archive, piece, blocks, offsets, value_type, plan, wanted, keep, span_bytes):
    import pyarrow as pa

    key = piece.ref.key
    stamp_type = pa.timestamp("us", tz="UTC")
    for table in _tables(archive, key, piece, blocks, wanted, span_bytes):
        rows = table.num_rows
        children = [
            pa.nulls(rows, cast) if name is None else _column(table, name, cast)
            for name, cast in plan
        ]
        values = pa.StructArray.from_arrays(children, fields=list(value_type))
        record_offsets = table.column(OFFSET_COLUMN).combine_chunks().to_numpy()
        kept = {}
        if TIMESTAMP_COLUMN in table.column_names:
            kept["timestamp"] = _column(table, TIMESTAMP_COLUMN, stamp_type)
        batch = kafka_batch(
            piece.topic, piece.partition, values, record_offsets, value_type, **kept
        )
        batch = keep(batch, record_offsets, offsets)
        if batch.num_rows:
            yield batch


def _tables(archive, key, piece, blocks, wanted, span_bytes):
    """The table of the wanted columns of each row group of the piece. Only the
    wanted columns' chunks are fetched when they are fewer than all: they lie apart, so a
    row group becomes a few requests (:mod:`~blockgz.formats.parquet.columns`)."""

    read_range = object_ranges(archive.store, key, (), piece.ref.committed).read

    reads = [BlockRead(n, c) for n, c in piece.chunks]
    schema = blocks.meta.schema
    leaves = leaf_columns(schema, wanted)
    if len(leaves) == len(schema):
        spans = merge_ranges(reads, limit=span_bytes)
        for read, raw in fetched(read_range, spans, executor=archive.executor, ahead=1):
            yield blocks.table(raw, read, source=key, columns=wanted)
        return
    groups = [(r, column_ranges(blocks.meta.row_group(r.block), leaves)) for r in reads]
    column_reads = column_spans(groups, gap=COLUMN_GAP, limit=span_bytes)
    pieces = fetched_columns(
        read_range, column_reads, executor=archive.executor, ahead=archive.prefetch, source=key
    )
    for read, got in pieces:
        yield blocks.table_of_pieces(got, read, source=key, columns=wanted)


def wanted_columns(names: list[str], plan: tuple[FieldPlan, ...]) -> list[str]:
    """The columns a batch is made from: the planned value fields, the offsets and, where the
    object has them, the timestamps. Only these are decoded (a row group of ten value fields
    decodes ~7× faster for one of them).

    >>> wanted_columns(["id", "name", "__kafka_offset", "__kafka_timestamp"], (("id", None),))
    ['id', '__kafka_offset', '__kafka_timestamp']
    """
    fields = {name for name, _ in plan if name is not None}
    return [n for n in names if n in fields or n in (OFFSET_COLUMN, TIMESTAMP_COLUMN)]


def _column(table: Any, name: str, cast: Any) -> Any:
    column = table.column(name).combine_chunks()
    return column if cast is None else column.cast(cast)
