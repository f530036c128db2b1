"""Archived records as Arrow tables and pandas DataFrames, for analytics code.

Kafka's columns, as Spark's Kafka source names and types them: ``key``, ``value`` (binary for
block-GZIP objects), ``topic``, ``partition``, ``offset``, ``timestamp`` (UTC; null where the
archive kept none), ``timestampType`` (null where the archive kept none) and ``headers`` (a
list of ``{key, value}``; null where none were kept). The values of Avro objects are columns
instead of ``value`` (:func:`avro_table_of`): one per top-level field of the record schema,
typed as the schema says (nested records as structs, dicts in pandas). pyarrow is imported
only here, so the rest of the reader works without it.

>>> import tempfile
>>> from blockgz import BlockGzipUpload
>>> from blockgz.store import LocalStore
>>> from reader import open_archive
>>> root = tempfile.mkdtemp()
>>> with BlockGzipUpload(LocalStore(root), "topics/t/partition=0/t+0+0000000000.json.gz") as out:
...     for n in range(5):
...         out.write(b'{"n": %d}' % n)
>>> with open_archive(root) as archive:
...     table = archive.read_arrow("t", 0, start=1, end=3)
>>> table.column("offset").to_pylist(), table.column("value").to_pylist()
([1, 2], [b'{"n": 1}', b'{"n": 2}'])
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from blockgz.blocks.decode import Record
from blockgz.errors import MissingDependencyError
from blockgz.formats.avro.datum_json import datum_json
from blockgz.kafka.columns import kafka_arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa

#: Rows per Arrow record batch built from the records.
BATCH_ROWS = 65_536


def _pyarrow():
    try:
        import pyarrow
    except ImportError as exc:  # pragma: no cover - pyarrow is a dependency of the extras
        raise MissingDependencyError(
            "Arrow tables need pyarrow: pip install 'blockgz[spark]' (or pip install pyarrow)"
        ) from exc
    return pyarrow


def kafka_schema() -> pa.Schema:
    """The columns of a table of archived records: Spark's Kafka source's, headers included."""
    return kafka_arrow_schema(True)


def kafka_batch(
    topic: str,
    partition: int,
    values: Any,
    offsets: Any,
    value_type: Any = None,
    **kept: Any,
) -> Any:
    """One Arrow batch of Spark's Kafka schema: ``values`` (an Arrow array, ``binary`` unless
    ``value_type``) at ``offsets``, and the ``key``/``timestamp``/``headers`` columns given in
    ``kept`` (see :func:`kept_columns`; nulls otherwise)."""
    import numpy as np

    pa = _pyarrow()
    count = len(offsets)
    schema = kafka_arrow_schema(True, value_type)
    return pa.RecordBatch.from_arrays(
        [
            kept.get("key", pa.nulls(count, pa.binary())),
            values,
            pa.repeat(pa.scalar(topic, pa.string()), count),
            pa.array(np.full(count, partition, np.int32)),
            pa.array(np.asarray(offsets, np.int64), pa.int64()),
            kept.get("timestamp", pa.nulls(count, pa.timestamp("us", tz="UTC"))),
            kept.get("timestampType", pa.nulls(count, pa.int32())),
            kept.get("headers", pa.nulls(count, schema.field("headers").type)),
        ],
        schema=schema,
    )


def record_batches(topic: str, partition: int, records: Iterable[Record]) -> Iterable[Any]:
    """Arrow record batches of :func:`kafka_schema`, ``BATCH_ROWS`` rows at most each."""
    pa = _pyarrow()
    rows: list[Record] = []

    def batch():
        values = pa.array([value_bytes(r.value) for r in rows], pa.binary())
        offsets = [r.offset for r in rows]
        return kafka_batch(topic, partition, values, offsets, **kept_columns(rows))

    for record in records:
        rows.append(record)
        if len(rows) == BATCH_ROWS:
            yield batch()
            rows = []
    if rows:
        yield batch()


def value_bytes(value: Any) -> bytes | None:
    """A record's value as stored bytes; a decoded Avro datum as JSON text."""
    if value is None or isinstance(value, bytes):
        return value
    return datum_json(value)


def kept_columns(rows: list[Record]) -> dict[str, Any]:
    """The ``key``, ``timestamp``, ``timestampType`` and ``headers`` columns of records (nulls
    where the archive kept none)."""
    pa = _pyarrow()
    headers = [
        None if r.headers is None else [{"key": k, "value": v} for k, v in r.headers] for r in rows
    ]
    stamps = [None if r.timestamp is None else r.timestamp * 1000 for r in rows]
    return {
        "key": pa.array([r.key for r in rows], pa.binary()),
        "timestamp": pa.array(stamps, pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array([r.timestamp_type for r in rows], pa.int32()),
        "headers": pa.array(headers, kafka_schema().field("headers").type),
    }


def table_of(topic: str, partition: int, records: Iterable[Record]) -> pa.Table:
    """One Arrow table of the records (see :func:`kafka_schema`)."""
    pa = _pyarrow()
    return pa.Table.from_batches(list(record_batches(topic, partition, records)), kafka_schema())


def avro_table_of(topic: str, partition: int, records: Iterable[Record], schema: str) -> pa.Table:
    """One Arrow table of decoded Avro records, read into ``schema`` (Avro JSON text, the
    newest writer schema): Kafka's columns with ``value`` replaced by one column per
    top-level field of a record schema, in the schema's order (a field named like a Kafka
    column becomes ``value.<name>``); values written with older schemas get the fields added
    since with their defaults. A schema that is not a record keeps one typed ``value`` column.

    >>> v = {"type": "record", "name": "E", "fields": [{"name": "n", "type": "long"},
    ...      {"name": "offset", "type": "string", "default": "?"}]}
    >>> table = avro_table_of("t", 0, [Record(4, {"n": 1})], json.dumps(v))
    >>> table.column_names[:4]
    ['key', 'n', 'value.offset', 'topic']
    >>> table.column("value.offset").to_pylist(), table.column("n").to_pylist()
    (['?'], [1])
    """
    from blockgz.formats.avro.arrow_types import avro_to_arrow, with_defaults

    pa = _pyarrow()
    parsed = json.loads(schema)
    value_type = avro_to_arrow(parsed)
    batches = []
    rows: list[Record] = []

    def batch():
        values = pa.array([with_defaults(r.value, parsed) for r in rows], value_type)
        offsets = [r.offset for r in rows]
        return kafka_batch(topic, partition, values, offsets, value_type, **kept_columns(rows))

    for record in records:
        rows.append(record)
        if len(rows) == BATCH_ROWS:
            batches.append(batch())
            rows = []
    if rows or not batches:
        batches.append(batch())
    table = pa.Table.from_batches(batches, kafka_arrow_schema(True, value_type))
    if not pa.types.is_struct(value_type):
        return table
    kafka_names = set(table.column_names)
    at = table.column_names.index("value")
    fields = table.column("value").combine_chunks()
    table = table.remove_column(at)
    for n in range(value_type.num_fields):
        name = value_type.field(n).name
        column = fields.field(n)
        if fields.null_count:  # a null value (a tombstone): its fields are null
            import pyarrow.compute as pc

            column = pc.if_else(fields.is_valid(), column, pa.scalar(None, column.type))
        shown = f"value.{name}" if name in kafka_names else name
        table = table.add_column(at + n, shown, column)
    return table
