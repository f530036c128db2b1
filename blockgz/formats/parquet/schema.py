"""The columns of a blockgz Parquet object: the value's fields, then Kafka's offset and time.

A value of an Avro record schema (from a registry, or Connect's JSON schema as the converters
turn it into Avro) becomes one column per field, as Confluent's ParquetFormat (parquet-avro)
writes it; any other value schema (``string``, ``bytes``, an array) becomes one column named
``value``. Two columns follow, in every object:

* ``__kafka_offset`` (``int64``, required): the record's Kafka offset. Its statistics give
  each row group's first and last offset, so a reader finds the row group holding an offset
  from the footer alone (:mod:`blockgz.formats.parquet.read`).
* ``__kafka_timestamp`` (``timestamp[ms, UTC]``, null where Kafka had none): the record's
  Kafka timestamp; its statistics let a time window skip row groups.

Types follow Spark's ``from_avro`` (:mod:`blockgz.formats.avro.arrow_schema`, the mapping the reader
uses too): records are structs, enums strings, fixed and bytes binary, maps have string keys,
``timestamp-millis``/``-micros`` are UTC timestamps, ``date`` a date, ``decimal`` a decimal. A
field is nullable exactly when its Avro
type is a union with ``null`` (Parquet ``OPTIONAL``; others are ``REQUIRED``, as parquet-avro
writes them). Unions of several non-null types have no single column type and are refused.

>>> cols = value_columns({"type": "record", "name": "R", "fields": [
...     {"name": "id", "type": "long"},
...     {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]}]})
>>> str(arrow_schema(cols)).splitlines()
['id: int64 not null', 'at: timestamp[ms, tz=UTC]', '__kafka_offset: int64 not null', \
'__kafka_timestamp: timestamp[ms, tz=UTC]']
>>> value_columns("string").wrapped, value_columns("string").names
(True, ('value',))
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from blockgz.errors import BadRecordError
from blockgz.formats.avro.arrow_schema import AvroArrow

#: The Kafka offset of each row; its statistics are a row group's offset range.
OFFSET_COLUMN = "__kafka_offset"
#: The Kafka timestamp of each row (epoch ms as a UTC timestamp; null: none).
TIMESTAMP_COLUMN = "__kafka_timestamp"
#: The column a value that is not a record is kept in.
WRAPPED_COLUMN = "value"
KAFKA_COLUMNS = (OFFSET_COLUMN, TIMESTAMP_COLUMN)
#: Footer key-value metadata: how values sit in the columns (``record``, or the one column).
VALUE_KEY = "blockgz.value"
#: Footer key-value metadata: per row group, the gaps between its offsets (``null``: none).
ROW_GROUPS_KEY = "blockgz.row_groups"
#: Avro types as columns: required unless the type allows ``null``, as parquet-avro writes them.
_MAPPING = AvroArrow(
    error=BadRecordError,
    union_refusal="single Parquet column type; use format.class=avro for such values",
    exact_nullability=True,
)


@dataclass(frozen=True)
class ValueColumns:
    """The value part of an object's columns: Arrow fields, and whether the value is wrapped
    in one ``value`` column (a schema that is not a record)."""

    fields: tuple[Any, ...]
    wrapped: bool

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)


def value_columns(schema: Any) -> ValueColumns:
    """The value columns of values of the Avro ``schema`` (parsed JSON, as a
    ``ValueSchema.json`` holds it). Raises :class:`~blockgz.errors.BadRecordError` for a
    schema Parquet cannot hold as columns (a union of several types, a field named as a
    Kafka column)."""
    import pyarrow as pa

    named: dict[str, Any] = {}
    if isinstance(schema, dict) and schema.get("type") == "record":
        fields = tuple(
            pa.field(f["name"], *_MAPPING.typed(f["type"], f"value.{f['name']}", named))
            for f in schema["fields"]
        )
        clash = sorted(set(KAFKA_COLUMNS) & {f.name for f in fields})
        if clash:
            raise BadRecordError(
                f"the value schema has a field named {clash[0]}, a column blockgz's Parquet "
                "objects keep Kafka's metadata in; rename the field or use format.class=avro"
            )
        return ValueColumns(fields, wrapped=False)
    return ValueColumns((pa.field(WRAPPED_COLUMN, *_MAPPING.typed(schema, "value", named)),), True)


def arrow_schema(columns: ValueColumns) -> Any:
    """The whole Arrow schema of an object: the value columns, then the Kafka columns."""
    import pyarrow as pa

    return pa.schema(
        [
            *columns.fields,
            pa.field(OFFSET_COLUMN, pa.int64(), nullable=False),
            pa.field(TIMESTAMP_COLUMN, pa.timestamp("ms", tz="UTC")),
        ]
    )


def column_encodings(schema: Any) -> dict[str, Any]:
    """pyarrow ``ParquetWriter`` settings for an object of Arrow ``schema``: the value columns
    dictionary-encoded, as pyarrow and parquet-mr do by default; the Kafka columns
    ``DELTA_BINARY_PACKED``.

    Offsets and timestamps are all different and close together: a dictionary keeps every one
    of them once more (~120 KB of a row group's ~980 KB each, in the Parquet benchmark's
    archive), where the deltas of consecutive offsets pack into a few hundred bytes and decode
    twice as fast. Parquet's reference encoding for increasing integers, read by Spark (3.3
    on), pyarrow, Trino, DuckDB and Iceberg's readers.

    >>> import pyarrow as pa
    >>> s = pa.schema([("s", pa.struct([("x", pa.int32())])), ("__kafka_offset", pa.int64())])
    >>> column_encodings(s)
    {'use_dictionary': ['s.x'], 'column_encoding': {'__kafka_offset': 'DELTA_BINARY_PACKED'}}
    """
    kafka = [name for name in schema.names if name in KAFKA_COLUMNS]
    values = [path for path in _leaf_paths(schema) if path not in kafka]
    return {
        "use_dictionary": values,
        "column_encoding": dict.fromkeys(kafka, "DELTA_BINARY_PACKED"),
    }


@functools.lru_cache(maxsize=64)
def _leaf_paths(schema: Any) -> tuple[str, ...]:
    """The Parquet leaf column paths of Arrow ``schema`` (``a.b``, ``tags.list.element``), as
    pyarrow names them: read from the footer of an empty file it writes (pyarrow has no call
    that maps a schema, and its naming of lists and maps is its own to keep); once per schema,
    as each object of a partition has the same one."""
    import io

    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(schema.empty_table(), out)
    meta = pq.ParquetFile(io.BytesIO(out.getvalue())).metadata
    return tuple(meta.schema.column(n).path for n in range(meta.num_columns))
