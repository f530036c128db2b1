"""One output object being written: framing, compression, upload, and its index sidecar.

:class:`ObjectWriter` takes encoded records with their offsets and streams them into a store
upload (S3 multipart parts go up in parallel while records keep coming). ``close()`` makes the
object visible — for block-GZIP the data object first, then its ``.index.json`` — and returns
a :class:`WrittenFile` for the commit message; ``abort()`` drops it without a trace.

>>> import tempfile
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> w = ObjectWriter(store, "t/t+0+0000000005.json.gz", "blockgzip", Compression())
>>> for offset in (5, 6, 9):
...     w.write(b'{"n": %d}' % offset, offset)
>>> done = w.close()
>>> done.first_offset, done.last_offset, done.records, done.index_key
(5, 9, 3, 't/t+0+0000000005.json.index.json')
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from blockgz.codec import Compression
from blockgz.errors import RecordFramingError
from blockgz.framing import Separated
from blockgz.index import sidecar_key
from blockgz.store.base import ObjectStore, Upload
from blockgz.writer import DEFAULT_BLOCK_SIZE, BlockGzipWriter

#: Plain and gzip objects hand the upload about this much at a time (fewer Python calls).
WRITE_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """A finished object: where it is and which records it holds (offsets may have gaps)."""

    key: str
    topic: str
    partition: int
    encoded_partition: str
    first_offset: int
    last_offset: int
    records: int
    size: int
    uncompressed_size: int
    index_key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> WrittenFile:
        return cls(**doc)


class ObjectWriter:
    """Write one object; ``compression`` is ``none``, ``gzip`` or ``blockgzip``."""

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        compression: str,
        codec: Compression,
        *,
        separator: bytes = b"\n",
        block_size: int = DEFAULT_BLOCK_SIZE,
        block_records: int | None = None,
        topic: str = "",
        partition: int = 0,
        encoded_partition: str = "",
    ):
        self.store = store
        self.key = key
        self.compression = compression
        self.separator = separator
        self.topic = topic
        self.partition = partition
        self.encoded_partition = encoded_partition
        self.first_offset: int | None = None
        self.last_offset: int | None = None
        self.records = 0
        self.uncompressed_size = 0
        self.first_timestamp: int | None = None  # for rotate.interval.ms, kept by the caller
        self._upload: Upload = store.open_upload(key)
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._deflate: Any = None
        self._blocks: BlockGzipWriter | None = None
        if compression == "gzip":
            # A single gzip member, as Confluent's GZIPOutputStream writes (zlib: deterministic).
            self._deflate = zlib.compressobj(codec.level, zlib.DEFLATED, 31)
        elif compression == "blockgzip":
            self._blocks = BlockGzipWriter(
                self._upload,
                block_size=block_size,
                max_records=block_records,
                compression=codec,
                threads=1,  # parallelism comes from Spark tasks and the upload's part threads
                framing=Separated(separator),
            )

    def write(self, data: bytes, offset: int) -> None:
        """Append one encoded record (without separator) holding Kafka ``offset``."""
        if self._blocks is not None:
            try:
                self._blocks.write(data, offset)
            except RecordFramingError as exc:
                raise RecordFramingError(f"{self.key} offset {offset}: {exc}") from None
        else:
            self._pending.append(data)
            self._pending.append(self.separator)
            self._pending_bytes += len(data) + len(self.separator)
            if self._pending_bytes >= WRITE_CHUNK:
                self._flush_pending()
        self._count(offset, offset, 1, len(data) + len(self.separator))

    def write_framed(self, data: memoryview, ends: np.ndarray, offsets: np.ndarray) -> None:
        """Append records already framed with the separator (see
        :meth:`BlockGzipWriter.write_framed`); ``ends`` are relative to ``data``."""
        if self._blocks is not None:
            self._blocks.write_framed(data, ends, offsets)
        else:
            self._pending.append(data)
            self._pending_bytes += len(data)
            if self._pending_bytes >= WRITE_CHUNK:
                self._flush_pending()
        self._count(int(offsets[0]), int(offsets[-1]), len(ends), len(data))

    def _count(self, first: int, last: int, records: int, size: int) -> None:
        if self.first_offset is None:
            self.first_offset = first
        self.last_offset = last
        self.records += records
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
            self._upload.write(chunk)

    def close(self) -> WrittenFile:
        """Finish the object, then its index, and describe it. Leaves nothing on failure."""
        index = None
        try:
            if self._blocks is not None:
                index = self._blocks.close()
            else:
                self._flush_pending()
                if self._deflate is not None:
                    self._upload.write(self._deflate.flush())
            self._upload.close()
        except BaseException:
            self.abort()
            raise
        index_key = None
        if index is not None:
            index_key = sidecar_key(self.key)
            try:
                self.store.put(index_key, index.to_json().encode())
            except BaseException:
                self.store.delete(self.key)  # data without its index must not stay behind
                raise
        assert self.first_offset is not None and self.last_offset is not None
        return WrittenFile(
            key=self.key,
            topic=self.topic,
            partition=self.partition,
            encoded_partition=self.encoded_partition,
            first_offset=self.first_offset,
            last_offset=self.last_offset,
            records=self.records,
            size=self._upload.bytes_written,
            uncompressed_size=self.uncompressed_size,
            index_key=index_key,
        )

    def abort(self) -> None:
        """Drop the object: buffered data, open multipart parts, nothing left behind."""
        if self._blocks is not None:
            self._blocks.abort()
        self._pending.clear()
        self._upload.abort()
