"""Archived records as Arrow tables and pandas DataFrames, for analytics code.

Kafka's columns, as Spark's Kafka source names and types them: ``key``, ``value`` (binary for
block-GZIP objects; for Avro objects the decoded datum as JSON text), ``topic``, ``partition``,
``offset``, ``timestamp`` (UTC; null where the archive kept none), ``timestampType`` (null: not
archived) and ``headers`` (a list of ``{key, value}``; null where none were kept). pyarrow
is imported only here, so the rest of the reader works without it.

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

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from blockgz.errors import MissingDependencyError
from blockgz.format.datum_json import datum_json
from blockgz.format.decode import Record
from blockgz.kafka_columns import kafka_arrow_schema

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
            pa.nulls(count, pa.int32()),
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
    """The ``key``, ``timestamp`` and ``headers`` columns of records (nulls where the archive
    kept none)."""
    pa = _pyarrow()
    headers = [
        None if r.headers is None else [{"key": k, "value": v} for k, v in r.headers] for r in rows
    ]
    stamps = [None if r.timestamp is None else r.timestamp * 1000 for r in rows]
    return {
        "key": pa.array([r.key for r in rows], pa.binary()),
        "timestamp": pa.array(stamps, pa.timestamp("us", tz="UTC")),
        "headers": pa.array(headers, kafka_schema().field("headers").type),
    }


def table_of(topic: str, partition: int, records: Iterable[Record]) -> pa.Table:
    """One Arrow table of the records (see :func:`kafka_schema`)."""
    pa = _pyarrow()
    return pa.Table.from_batches(list(record_batches(topic, partition, records)), kafka_schema())
