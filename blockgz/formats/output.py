"""One output object being written: framing, compression, upload, and for block-GZIP its index.

Formats of framed records write through :class:`ObjectWriter`; every writer of an object
(``AvroObjectWriter`` too) is an :class:`OutputObject`.

:class:`ObjectWriter` takes encoded records with their offsets and streams them into a store
upload (S3 multipart parts go up in parallel while records keep coming). ``close()`` makes the
object visible (for block-GZIP through :class:`~blockgz.written.upload.BlockGzipUpload`: data
first, then its ``.index.json``) and returns a :class:`~blockgz.written.files.WrittenFile` for
the commit message; ``abort()`` drops it without a trace.

>>> import tempfile
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> w = ObjectWriter(store, "t/t+0+0000000005.json.gz", "blockgzip", Compression())
>>> for offset in (5, 6, 9):
...     w.write(b'{"n": %d}' % offset, offset)
>>> done = w.close()
>>> done.first_offset, done.last_offset, done.records, done.index_key
(5, 9, 3, 't/.t+0+0000000005.json.index.json')
"""

from __future__ import annotations

from typing import Any

import numpy as np

from blockgz.blocks.codecs.gzip_members import Compression
from blockgz.blocks.framing import NEWLINE, Framing, Separated
from blockgz.blocks.writer import DEFAULT_BLOCK_SIZE
from blockgz.errors import RecordFramingError
from blockgz.formats.compression import COMPRESSIONS, CompressionType
from blockgz.store.base import ObjectStore, Upload
from blockgz.written.files import WrittenFile
from blockgz.written.upload import BlockGzipUpload

#: Plain and gzip objects hand the upload about this much at a time (fewer Python calls).
WRITE_CHUNK = 1024 * 1024


class OutputObject:
    """What every output object tracks: its key, place, offsets, records and first time."""

    def __init__(self, key: str, topic: str, partition: int, encoded_partition: str):
        self.key = key
        self.topic = topic
        self.partition = partition
        self.encoded_partition = encoded_partition
        self.first_offset: int | None = None
        self.last_offset: int | None = None
        self.records = 0
        self.first_timestamp: int | None = None  # for rotate.interval.ms, kept by the caller
        #: The range of the Kafka timestamps written (epoch ms), for readers' time filters.
        self.min_timestamp: int | None = None
        self.max_timestamp: int | None = None
        #: The value schema of the records (when a converter gives one), for schema.compatibility.
        self.schema: Any = None
        #: The ``.keys``/``.headers`` files beside it (:mod:`blockgz.sink.write.companions`), if
        #: any.
        self.companions: Any = None

    @property
    def sidecar_upload(self) -> Any:
        """The indexed upload whose ``.index.json`` sidecar describes this object (its
        ``keep_stamps`` has the sidecar keep the record timestamps), or ``None``: no sidecar."""
        return None

    def note_times(self, low: int, high: int) -> None:
        """Records stamped ``low..high`` (epoch ms) went into the file."""
        if self.min_timestamp is None or low < self.min_timestamp:
            self.min_timestamp = low
        if self.max_timestamp is None or high > self.max_timestamp:
            self.max_timestamp = high

    def _count(self, first: int, last: int, records: int) -> None:
        if self.first_offset is None:
            self.first_offset = first
        self.last_offset = last
        self.records += records

    def _written(
        self,
        size: int,
        uncompressed_size: int,
        index_key: str | None,
        *,
        crc32: int | None = None,
        index_size: int | None = None,
        index_crc32: int | None = None,
        etag: str | None = None,
    ) -> WrittenFile:
        """The manifest entry: ``crc32`` of the stored bytes, ``index_size``/``index_crc32``
        of the sidecar's (what the commit binds, issue 41), ``etag`` the store gave the data
        object (what lets an audit skip its HEAD, issue 44)."""
        assert self.first_offset is not None and self.last_offset is not None
        return WrittenFile(
            key=self.key,
            topic=self.topic,
            partition=self.partition,
            encoded_partition=self.encoded_partition,
            first_offset=self.first_offset,
            last_offset=self.last_offset,
            records=self.records,
            size=size,
            uncompressed_size=uncompressed_size,
            index_key=index_key,
            min_timestamp=self.min_timestamp,
            max_timestamp=self.max_timestamp,
            crc32=crc32,
            index_size=index_size if index_key is not None else None,
            index_crc32=index_crc32 if index_key is not None else None,
            etag=etag,
        )


class ObjectWriter(OutputObject):
    """Write one object; ``compression`` is an ``s3.compression.type``
    (:mod:`blockgz.formats.compression`), or its name."""

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        compression: CompressionType | str,
        codec: Compression,
        *,
        framing: Framing = NEWLINE,
        block_size: int = DEFAULT_BLOCK_SIZE,
        block_records: int | None = None,
        topic: str = "",
        partition: int = 0,
        encoded_partition: str = "",
    ):
        super().__init__(key, topic, partition, encoded_partition)
        self.store = store
        if isinstance(compression, str):
            compression = COMPRESSIONS.get(compression)
        self.compression = compression
        self.framing = framing
        #: Plain and gzip objects append the separator themselves (the encoder checked it).
        self.separator = framing.separator if isinstance(framing, Separated) else None
        self.uncompressed_size = 0
        self._pending: list[bytes | memoryview] = []
        self._pending_bytes = 0
        self._deflate: Any = None
        self._blocks: BlockGzipUpload | None = None
        self._upload: Upload | None = None
        if compression.indexed:
            self._blocks = BlockGzipUpload(
                store,
                key,
                block_size=block_size,
                max_records=block_records,
                compression=codec,
                threads=1,  # parallelism comes from Spark tasks and the upload's part threads
                framing=framing,
            )
            self._blocks.topic, self._blocks.partition = topic, partition
            return
        self._upload = store.open_upload(key)
        self._deflate = compression.deflater(codec)

    @property
    def sidecar_upload(self) -> BlockGzipUpload | None:
        """The block-GZIP upload (``None``: a plain or gzip object, no sidecar)."""
        return self._blocks

    def write(self, data: bytes, offset: int, timestamp: int | None = None) -> None:
        """Append one encoded record (without separator) holding Kafka ``offset``; its
        ``timestamp`` (epoch ms) goes into the block's time range in the index."""
        if self._blocks is not None:
            try:
                self._blocks.write(data, offset, timestamp)
            except RecordFramingError as exc:
                raise RecordFramingError(f"{self.key} offset {offset}: {exc}") from exc
        else:
            if self.separator is not None:
                self._pending.append(data)
                self._pending.append(self.separator)
            else:
                self._pending.append(self.framing.encode(data))
            self._pending_bytes += len(data) + self.framing.overhead(data)
            if self._pending_bytes >= WRITE_CHUNK:
                self._flush_pending()
        self._count_bytes(offset, offset, 1, len(data) + self.framing.overhead(data))

    def write_framed(
        self,
        data: memoryview,
        ends: np.ndarray,
        offsets: np.ndarray,
        timestamps: np.ndarray | None = None,
    ) -> None:
        """Append records already framed with the separator (see
        :meth:`BlockGzipWriter.write_framed`); ``ends`` are relative to ``data``."""
        if self._blocks is not None:
            self._blocks.write_framed(data, ends, offsets, timestamps)
        else:
            self._pending.append(data)
            self._pending_bytes += len(data)
            if self._pending_bytes >= WRITE_CHUNK:
                self._flush_pending()
        self._count_bytes(int(offsets[0]), int(offsets[-1]), len(ends), len(data))

    def write_lines(self, lines: list[bytes], offsets: np.ndarray) -> None:
        """Append encoded records that hold no separator (JSON lines), in one call."""
        if not lines:
            return
        if self.separator is None:
            for line, offset in zip(lines, offsets, strict=True):
                self.write(line, int(offset))
            return
        sep = self.separator
        framed = sep.join(lines) + sep
        ends = np.cumsum(np.fromiter(map(len, lines), np.int64, len(lines)) + len(sep))
        self.write_framed(memoryview(framed), ends, np.asarray(offsets))

    def write_encoded(self, data: Any, ends: np.ndarray, offsets: np.ndarray) -> None:
        """Append entries laid out at once (``data``, each framed, ending at ``ends``), as
        every object writer takes them from :meth:`~blockgz.formats.base.Format.encode_column`."""
        self.write_framed(memoryview(data), ends, offsets)

    def write_many(self, entries: list[bytes], offsets: np.ndarray) -> None:
        """Append entries made one by one (no separator inside), in one call."""
        self.write_lines(entries, offsets)

    def _count_bytes(self, first: int, last: int, records: int, size: int) -> None:
        self._count(first, last, records)
        self.uncompressed_size += size

    def _flush_pending(self) -> None:
        if not self._pending:
            return
        chunk = b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        if self._deflate is not None:
            chunk = self._deflate.compress(chunk)
        if chunk:
            assert self._upload is not None
            self._upload.write(chunk)

    def close(self) -> WrittenFile:
        """Finish the object (and its index) and describe it. Leaves nothing on failure."""
        index_key = index_size = index_crc32 = None
        if self._blocks is not None:
            self._blocks.close()  # data, then its sidecar; neither stays behind on failure
            size, crc32 = self._blocks.bytes_written, self._blocks.crc32
            etag = self._blocks.etag
            index_key = self._blocks.index_key
            index_size, index_crc32 = self._blocks.index_size, self._blocks.index_crc32
        else:
            assert self._upload is not None
            try:
                self._flush_pending()
                if self._deflate is not None:
                    self._upload.write(self._deflate.flush())
                self._upload.close()
            except BaseException:
                self.abort()
                raise
            size, crc32, etag = self._upload.bytes_written, self._upload.crc32, self._upload.etag
        return self._written(
            size,
            self.uncompressed_size,
            index_key,
            crc32=crc32,
            index_size=index_size,
            index_crc32=index_crc32,
            etag=etag,
        )

    def abort(self) -> None:
        """Drop the object: buffered data, open multipart parts, nothing left behind."""
        self._pending.clear()
        if self._blocks is not None:
            self._blocks.abort()
        if self._upload is not None:
            self._upload.abort()
