"""Parquet batches laid out as the export lays them out, for the Iceberg layer's tests.

Until the Parquet format is on this branch, the tests write the objects with pyarrow, in the
export's layout and with its columns (the value's fields, then ``__kafka_offset`` and
``__kafka_timestamp``: the Parquet format's ``parquet_schema``), and commit them with the
sink's own ``write_manifest``. :func:`parquet_format` registers a stand-in ``parquet``
format (names and extension only: it writes nothing) when the real one is not registered, so
a sink config with ``format.class=parquet`` validates.

>>> import tempfile
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> written = write_parquet(store, "", "t", 0, 10, 3)
>>> written.key, written.first_offset, written.last_offset, written.records
('topics/t/partition=0/t+0+0000000010.snappy.parquet', 10, 12, 3)
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterable, Iterator
from typing import Any

from blockgz.formats.base import Format, FormatSettings, RecordEncoder
from blockgz.formats.by_name import FORMATS
from blockgz.store import ObjectStore
from blockgz.written.files import WrittenFile

#: 2026-11-22T10:00:00Z: each object's records are one per second from here, per offset.
BASE_MS = 1_795_341_600_000


@contextlib.contextmanager
def parquet_format() -> Iterator[None]:
    """Within: a ``parquet`` format is registered (:class:`StandInParquet` unless the real
    one is); the stand-in is dropped again on the way out."""
    if "parquet" in FORMATS.names():
        yield
        return
    FORMATS.register(StandInParquet())
    try:
        yield
    finally:
        FORMATS.unregister("parquet")


def ensure_parquet_format() -> None:
    """Register :class:`StandInParquet` for good unless a ``parquet`` format is registered
    (in a process of its own, such as the crash test's export)."""
    if "parquet" not in FORMATS.names():
        FORMATS.register(StandInParquet())


class StandInParquet(Format):
    """The Parquet format's names and extension, for a sink config to validate; writes nothing."""

    name = "parquet"
    aliases = ("io.confluent.connect.s3.format.parquet.ParquetFormat",)
    default_extension = ".snappy.parquet"
    compresses_inside = True
    companion_roles = frozenset()

    def encoder(self, settings: FormatSettings) -> RecordEncoder:
        raise NotImplementedError("the stand-in Parquet format only names the objects")


def rows(topic: str, partition: int, offsets: Iterable[int], *, extra: bool = False) -> Any:
    """The Arrow table of one object: ``id``, ``name`` (and ``note`` with ``extra``), then
    Kafka's offset and time."""
    import pyarrow as pa

    offsets = list(offsets)
    columns: dict[str, Any] = {
        "id": pa.array([partition * 1_000_000 + o for o in offsets], pa.int64()),
        "name": pa.array([f"{topic}-{partition}-{o}" for o in offsets], pa.string()),
    }
    if extra:
        columns["note"] = pa.array([f"n{o}" for o in offsets], pa.string())
    columns["__kafka_offset"] = pa.array(offsets, pa.int64())
    columns["__kafka_timestamp"] = pa.array(
        [BASE_MS + o * 1000 for o in offsets], pa.timestamp("ms", tz="UTC")
    )
    required = ("id", "__kafka_offset")
    fields = [pa.field(n, c.type, nullable=n not in required) for n, c in columns.items()]
    return pa.table(columns, schema=pa.schema(fields))


def write_parquet(
    store: ObjectStore,
    prefix: str,
    topic: str,
    partition: int,
    first: int,
    count: int,
    *,
    extra: bool = False,
    encoded: str | None = None,
) -> WrittenFile:
    """Write one object of offsets ``first``.. (``count`` of them) in the export's layout."""
    import pyarrow.parquet as pq

    encoded = encoded or f"partition={partition}"
    table = rows(topic, partition, range(first, first + count), extra=extra)
    out = io.BytesIO()
    pq.write_table(table, out, compression="snappy")
    key = f"{prefix}topics/{topic}/{encoded}/{topic}+{partition}+{first:010d}.snappy.parquet"
    data = out.getvalue()
    store.put(key, data)
    stamps = [BASE_MS + o * 1000 for o in range(first, first + count)]
    return WrittenFile(
        key, topic, partition, encoded, first, first + count - 1, count, len(data),
        table.nbytes, min_timestamp=min(stamps), max_timestamp=max(stamps),
    )  # fmt: skip
