"""Write a block-GZIP object and its index sidecar: the data first, then the index, or nothing.

:class:`BlockGzipUpload` is the only way an indexed object gets written (the sink, ``blockgz
compress``, the tests and the benchmarks all use it). Records stream into the store's upload
(S3 parts go up while records keep coming); :meth:`~BlockGzipUpload.close` finishes the data
object and then writes its sidecar, so a reader that trusts only indexed objects never sees a
half-written one. Any failure aborts the upload, and a data object whose sidecar could not be
written is deleted again.

    >>> import tempfile
    >>> from blockgz.store import LocalStore
    >>> store = LocalStore(tempfile.mkdtemp())
    >>> with BlockGzipUpload(store, "t+0+0000000005.json.gz", block_size=16) as out:
    ...     for offset in (5, 6, 9):
    ...         out.write(b'{"n": %d}' % offset, offset)
    >>> out.index.record_count, [o.key for o in store.list("")]
    (3, ['.t+0+0000000005.json.index.json', 't+0+0000000005.json.gz'])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from types import TracebackType
from typing import Any, Self

import numpy as np

from blockgz.blocks.checksum import block_crc32
from blockgz.blocks.codecs.gzip_members import Compression
from blockgz.blocks.framing import NEWLINE, Framing
from blockgz.blocks.index import BlockIndex, IndexedObject
from blockgz.blocks.writer import DEFAULT_BLOCK_SIZE, BlockGzipWriter
from blockgz.store.base import ObjectStore, Upload
from blockgz.written.sidecars import sidecar_key


class IndexedUpload:
    """An object written through a block writer into a store upload, its sidecar on close.

    The finishing every indexed format shares: data first, then (when ``indexed``) the
    sidecar; an abort on any failure; a data object whose sidecar could not be written deleted
    again. Subclasses open ``writer`` (with ``bytes_written``, ``index``, ``close()`` and
    ``abort()``) over :meth:`_open_upload`'s upload.
    """

    indexed: bool = True
    writer: Any
    #: The Kafka topic and partition of the records, named in the sidecar's ``"object"``
    #: (set by the export's writers; ``None``: written outside an export).
    topic: str | None = None
    partition: int | None = None
    #: After :meth:`close`: the size and CRC-32 of the sidecar's bytes (``None``: no sidecar).
    index_size: int | None = None
    index_crc32: int | None = None
    #: Gives the timestamps, types and offsets the sidecar is to keep (:meth:`keep_stamps`).
    _stamps: Callable[[], tuple[Any, Any, Any]] | None = None

    def keep_stamps(self, stamps_of: Callable[[], tuple[Any, Any, Any]]) -> None:
        """Have the sidecar keep each record's timestamp and type: ``stamps_of()``, asked at
        :meth:`close`, gives numpy int64 arrays ``(ms, types, offsets)``, one entry per record
        in order, ``-1``: none (:meth:`BlockIndex.with_stamps`)."""
        self._stamps = stamps_of

    def _open_upload(self, store: ObjectStore, key: str, make_writer: Callable[[Upload], Any]):
        self.store = store
        self.key = key
        self._index: BlockIndex | None = None
        self._upload = store.open_upload(key)
        try:
            self.writer = make_writer(self._upload)
        except BaseException:
            self._upload.abort()
            raise

    @property
    def bytes_written(self) -> int:
        """Bytes of the data object so far."""
        return self.writer.bytes_written

    @property
    def index_key(self) -> str | None:
        """Where the sidecar goes (and, after :meth:`close`, is); ``None`` when not indexed."""
        return sidecar_key(self.key) if self.indexed else None

    @property
    def crc32(self) -> int:
        """CRC-32 of the data object's bytes so far (after :meth:`close`, the whole object's)."""
        return self._upload.crc32

    @property
    def etag(self) -> str | None:
        """After :meth:`close`: the data object's ETag as the store gave it (``None``: none)."""
        return self._upload.etag

    @property
    def index(self) -> BlockIndex:
        """The index (after :meth:`close`, naming its object), published or not."""
        return self._index if self._index is not None else self.writer.index

    def close(self) -> BlockIndex:
        """Finish the data object, then write its sidecar; return the index. Idempotent."""
        if self._index is not None:
            return self._index
        try:
            index = self.writer.close()
            self._upload.close()
        except BaseException:
            self.abort()
            raise
        index = replace(index, object=self._named_object(index))
        if self.indexed:
            try:
                if self._stamps is not None:
                    index = index.with_stamps(*self._stamps())
                self.index_size, self.index_crc32 = put_sidecar(self.store, self.key, index)
            except BaseException:
                self.store.delete(self.key)  # data without its index must not stay behind
                raise
        self._index = index
        return index

    def _named_object(self, index: BlockIndex) -> IndexedObject:
        """What the sidecar says about the finished data object."""
        return IndexedObject(
            key=self.key,
            size=self._upload.bytes_written,
            crc32=self._upload.crc32,
            topic=self.topic or None,
            partition=self.partition if self.topic else None,
            first_offset=index.first_offset,
            last_offset=index.last_offset,
            records=index.record_count,
        )

    def abort(self) -> None:
        """Drop everything: pending blocks, buffered data and any multipart parts."""
        try:
            self.writer.abort()
        finally:
            self._upload.abort()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class BlockGzipUpload(IndexedUpload):
    """A block-GZIP object being written to ``store`` under ``key``, with its sidecar on close.

    Takes the :class:`~blockgz.blocks.writer.BlockGzipWriter` settings. As a context manager it
    publishes on success and aborts on an exception.
    """

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        *,
        block_size: int = DEFAULT_BLOCK_SIZE,
        max_records: int | None = None,
        compression: Compression | None = None,
        threads: int | None = None,
        framing: Framing = NEWLINE,
        first_offset: int = 0,
    ):
        self._open_upload(
            store,
            key,
            lambda upload: BlockGzipWriter(
                upload,
                block_size=block_size,
                max_records=max_records,
                compression=compression,
                threads=threads,
                framing=framing,
                first_offset=first_offset,
            ),
        )

    # -- writing ------------------------------------------------------------------------------
    def write(self, record: bytes, offset: int | None = None, timestamp: int | None = None) -> None:
        """One record with its Kafka offset and timestamp (see :meth:`BlockGzipWriter.write`)."""
        self.writer.write(record, offset, timestamp)

    def write_framed(
        self,
        data: bytes | memoryview,
        ends: np.ndarray,
        offsets: np.ndarray,
        timestamps: np.ndarray | None = None,
    ) -> None:
        """Records already framed (see :meth:`BlockGzipWriter.write_framed`)."""
        self.writer.write_framed(data, ends, offsets, timestamps)

    def write_delimited(self, data) -> None:
        """Raw separator-delimited bytes (see :meth:`BlockGzipWriter.write_delimited`)."""
        self.writer.write_delimited(data)


def publish_index(store: ObjectStore, data_key: str, index: BlockIndex) -> str:
    """Write ``index`` as the sidecar of the existing object ``data_key``; return its key."""
    put_sidecar(store, data_key, index)
    return sidecar_key(data_key)


def put_sidecar(store: ObjectStore, data_key: str, index: BlockIndex) -> tuple[int, int]:
    """Write ``index`` as the sidecar of ``data_key``; return its size and CRC-32 (what the
    manifest commits as ``index_size`` and ``index_crc32``)."""
    data = index.to_json().encode()
    store.put(sidecar_key(data_key), data)
    return len(data), block_crc32(data)
