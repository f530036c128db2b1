"""One Parquet output object: row groups cut by size, each carrying its offsets, written by
pyarrow straight into a store upload.

:class:`ParquetObjectWriter` is the Parquet counterpart of
:class:`~blockgz.formats.avro.writer.AvroObjectWriter`. Values come decoded (one schema per
object, as for Avro); every :data:`BATCH_ROWS` of them (or fewer, to stop exactly at
``s3.compression.block.records``) become an Arrow record batch, and a row group is written once
its batches hold ``parquet.block.size`` bytes (Arrow's in-memory size: the uncompressed
size) or ``s3.compression.block.records`` rows. Each row group goes to the upload as pyarrow
writes it (S3 multipart parts go up while the next row group fills), so memory holds about one
row group. Cut points depend on the records only, and pyarrow writes no time into the file,
so a replay writes the same bytes.

The footer's key-value metadata says, per row group, the gaps between its offsets where they
are not contiguous (:data:`~blockgz.formats.parquet.schema.ROW_GROUPS_KEY`), so a reader seeks
exactly inside a row group of interleaved offsets (a field or time partitioner) too.

>>> import tempfile
>>> import pyarrow.parquet as pq
>>> from blockgz.store import LocalStore
>>> from types import SimpleNamespace as ValueSchema
>>> schema = ValueSchema(json={"type": "record", "name": "r", "fields": [
...     {"name": "f1", "type": "string"}]})
>>> store = LocalStore(tempfile.mkdtemp())
>>> w = ParquetObjectWriter(store, "t/t+0+0000000000.snappy.parquet", schema, block_records=2)
>>> for offset in (0, 1, 5):
...     w.write({"f1": f"value{offset}"}, offset, 1_700_000_000_000 + offset)
>>> done = w.close()
>>> done.records, done.first_offset, done.last_offset, done.index_key
(3, 0, 5, None)
>>> f = pq.ParquetFile(store.path("t/t+0+0000000000.snappy.parquet"))
>>> f.num_row_groups, f.read().column("__kafka_offset").to_pylist()
(2, [0, 1, 5])
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from blockgz.blocks.index import deltas_if_gapped
from blockgz.errors import BadRecordError
from blockgz.formats.output import OutputObject
from blockgz.formats.parquet.schema import (
    ROW_GROUPS_KEY,
    VALUE_KEY,
    WRAPPED_COLUMN,
    arrow_schema,
    column_encodings,
    value_columns,
)
from blockgz.store.base import ObjectStore, Upload
from blockgz.written.files import WrittenFile

#: Values are turned into Arrow at most this many at a time (a row group is cut between
#: batches).
BATCH_ROWS = 1024
#: The first batch of an object, before a row's size is known.
FIRST_BATCH_ROWS = 64
#: ``parquet.codec`` -> pyarrow's compression name.
PYARROW_CODECS = {
    "none": "NONE",
    "snappy": "SNAPPY",
    "gzip": "GZIP",
    "lz4": "LZ4",
    "lz4_raw": "LZ4_RAW",
    "brotli": "BROTLI",
    "zstd": "ZSTD",
}


class _UploadFile:
    """The file pyarrow writes into: each write goes to the store upload as it comes."""

    def __init__(self, upload: Upload):
        self.upload = upload
        self.position = 0
        self.closed = False
        #: Set when the object is dropped: what pyarrow still writes goes nowhere.
        self.dropped = False

    def write(self, data: Any) -> int:
        written = len(memoryview(data))
        if not self.dropped:
            self.upload.write(data)
        self.position += written
        return written

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        """Nothing held here: the upload sends parts as they fill."""

    def close(self) -> None:
        self.closed = True  # the upload is closed by the writer, after the footer


class ParquetObjectWriter(OutputObject):
    """Write one ``.parquet`` object holding records of ``schema`` (a ``ValueSchema``)."""

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        schema: Any,
        *,
        codec: str = "snappy",
        block_size: int = 4 * 1024 * 1024,
        block_records: int | None = None,
        topic: str = "",
        partition: int = 0,
        encoded_partition: str = "",
    ):
        super().__init__(key, topic, partition, encoded_partition)
        import pyarrow.parquet as pq

        self.store = store
        self.schema = schema
        self.columns = value_columns(schema.json)
        self.arrow_schema = arrow_schema(self.columns)
        self.block_size = block_size
        self.block_records = block_records
        self.uncompressed_size = 0
        self.bytes_written = 0
        self._upload = store.open_upload(key)
        self._file = _UploadFile(self._upload)
        self._writer = pq.ParquetWriter(
            self._file,
            self.arrow_schema,
            compression=PYARROW_CODECS[codec],
            # Every column's statistics, as parquet-mr writes them: the Kafka columns' make
            # the footer an index, the values' let engines skip row groups by a predicate.
            write_statistics=True,
            store_schema=True,
            # A CRC-32 in every page header (Parquet's optional page checksum): a reader that
            # asks for it (``blockgz audit --deep``) finds any changed byte of a page.
            write_page_checksum=True,
            **column_encodings(self.arrow_schema),
        )
        self._values: list[Any] = []
        self._offsets: list[int] = []
        self._stamps: list[int | None] = []
        self._batches: list[Any] = []
        self._group_bytes = 0
        self._group_rows = 0
        self._group_offsets: list[int] = []
        self._gaps: list[list[int] | None] = []
        #: Arrow bytes per row of the last batch (sizes the next one).
        self._row_bytes: int | None = None
        #: Rows of the batch being gathered (:meth:`_batch_limit`, worked out once a batch).
        self._limit = self._batch_limit()

    @property
    def stored_size(self) -> int:
        """Bytes of the object written so far (the row groups done; the footer comes last)."""
        return self._file.position

    def write(self, datum: Any, offset: int, timestamp: int | None = None) -> None:
        """Append one decoded value (of this file's schema) holding Kafka ``offset``, stamped
        ``timestamp`` (epoch ms; ``None`` or negative: none)."""
        self._values.append(datum)
        self._offsets.append(offset)
        self._stamps.append(timestamp if timestamp is not None and timestamp >= 0 else None)
        self._count(offset, offset, 1)
        if len(self._values) >= self._limit:
            self._batch()

    def _batch_limit(self) -> int:
        """Rows in the next batch: at most :data:`BATCH_ROWS`, no more than the row group's
        records limit leaves, and about as many as fill the row group at the size the
        previous batch's rows had (the first: :data:`FIRST_BATCH_ROWS`), so a row group
        overshoots its size by about one row; every count follows from the records alone."""
        limit = BATCH_ROWS
        if self.block_records is not None:
            limit = min(limit, self.block_records - self._group_rows)
        if self._row_bytes is None:
            limit = min(limit, FIRST_BATCH_ROWS)
        else:
            left = self.block_size - self._group_bytes
            limit = min(limit, -(-left // max(1, self._row_bytes)))
        return max(1, limit)

    def _batch(self) -> None:
        """The values held so far as one Arrow record batch; a row group when it is full."""
        import pyarrow as pa

        if not self._values:
            return
        try:
            if self.columns.wrapped:
                values = [pa.array(self._values, self.columns.fields[0].type)]
            else:
                struct = pa.struct(list(self.columns.fields))
                values = pa.array(self._values, struct).flatten()
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise BadRecordError(
                f"{self.key}: a value of offsets {self._offsets[0]}..{self._offsets[-1]} does "
                f"not fit its Parquet columns ({exc})",
                topic=self.topic,
                partition=self.partition,
                offset=self._offsets[0],
            ) from exc
        offsets = pa.array(self._offsets, pa.int64())
        stamps = pa.array(self._stamps, pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
        batch = pa.RecordBatch.from_arrays([*values, offsets, stamps], schema=self.arrow_schema)
        self._batches.append(batch)
        self._group_offsets.extend(self._offsets)
        self._row_bytes = -(-batch.nbytes // batch.num_rows)
        self._group_bytes += batch.nbytes
        self._group_rows += batch.num_rows
        self.uncompressed_size += batch.nbytes
        self._values, self._offsets, self._stamps = [], [], []
        if self._group_bytes >= self.block_size or (
            self.block_records is not None and self._group_rows >= self.block_records
        ):
            self._row_group()
        self._limit = self._batch_limit()

    def _row_group(self) -> None:
        """Write the batches held as one row group (pyarrow hands it to the upload)."""
        import pyarrow as pa

        if not self._batches:
            return
        table = pa.Table.from_batches(self._batches, schema=self.arrow_schema)
        self._writer.write_table(table, row_group_size=table.num_rows)
        gaps = deltas_if_gapped(self._group_offsets)
        self._gaps.append(None if gaps is None else list(gaps))
        self._batches, self._group_offsets = [], []
        self._group_bytes = self._group_rows = 0

    def close(self) -> WrittenFile:
        """Write the last row group and the footer, finish the upload and describe the
        object. Leaves nothing on failure."""
        try:
            self._batch()
            self._row_group()
            self._writer.add_key_value_metadata(
                {
                    VALUE_KEY: WRAPPED_COLUMN if self.columns.wrapped else "record",
                    ROW_GROUPS_KEY: json.dumps(self._gaps, separators=(",", ":")),
                }
            )
            self._writer.close()
            self._upload.close()
        except BaseException:
            self.abort()
            raise
        self.bytes_written = self._upload.bytes_written
        return self._written(
            self.bytes_written,
            self.uncompressed_size,
            None,
            crc32=self._upload.crc32,
            etag=self._upload.etag,
        )

    def abort(self) -> None:
        """Drop the object: buffered rows, open multipart parts, nothing left behind."""
        self._values, self._batches = [], []
        self._file.dropped = True
        with contextlib.suppress(Exception):  # the footer of an object dropped anyway
            self._writer.close()
        self._upload.abort()
