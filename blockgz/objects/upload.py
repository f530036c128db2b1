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
from types import TracebackType
from typing import Any, Self

import numpy as np

from blockgz.archive.sidecars import sidecar_key
from blockgz.format.codec import Compression
from blockgz.format.framing import NEWLINE, Framing
from blockgz.format.index import BlockIndex
from blockgz.format.writer import DEFAULT_BLOCK_SIZE, BlockGzipWriter
from blockgz.store.base import ObjectStore, Upload


class IndexedUpload:
    """An object written through a block writer into a store upload, its sidecar on close.

    The finishing every indexed format shares: data first, then (when ``indexed``) the
    sidecar; an abort on any failure; a data object whose sidecar could not be written deleted
    again. Subclasses open ``writer`` (with ``bytes_written``, ``index``, ``close()`` and
    ``abort()``) over :meth:`_open_upload`'s upload.
    """

    indexed: bool = True
    writer: Any

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
    def index(self) -> BlockIndex:
        """The index (after :meth:`close`), published or not."""
        return self.writer.index

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
        if self.indexed:
            try:
                publish_index(self.store, self.key, index)  # at self.index_key
            except BaseException:
                self.store.delete(self.key)  # data without its index must not stay behind
                raise
        self._index = index
        return index

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

    Takes the :class:`~blockgz.format.writer.BlockGzipWriter` settings. As a context manager it
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
    key = sidecar_key(data_key)
    store.put(key, index.to_json().encode())
    return key
