"""Write an Avro container file and its index sidecar: the data first, then the index, or nothing.

:class:`AvroUpload` is to Avro what :class:`~blockgz.objects.upload.BlockGzipUpload` is to
block-GZIP: records stream into the store's upload (S3 parts go up while records keep coming),
:meth:`~AvroUpload.close` finishes the data object and then writes its sidecar, any failure
aborts the upload, and a data object whose sidecar could not be written is deleted again. The
sync marker comes from the key (:func:`~blockgz.format.avro.avro_sync_marker`), so writing the
same records to the same key gives the same bytes.

    >>> import tempfile
    >>> from blockgz.objects.indexed import IndexedReader
    >>> from blockgz.store import LocalStore
    >>> store = LocalStore(tempfile.mkdtemp())
    >>> schema = {"type": "record", "name": "V", "fields": [{"name": "n", "type": "long"}]}
    >>> with AvroUpload(store, "t+0+0000000005.avro", schema, codec="deflate") as out:
    ...     out.write_many([{"n": n} for n in range(5, 10)], [5, 6, 9, 10, 11])
    >>> out.index.record_count, [o.key for o in store.list("")]
    (5, ['t+0+0000000005.avro', 't+0+0000000005.avro.index.json'])
    >>> with IndexedReader.open_object(store, "t+0+0000000005.avro") as obj:
    ...     list(obj.seek(7, count=2))
    [Record(offset=9, value={'n': 7}), Record(offset=10, value={'n': 8})]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from blockgz.format.avro import AvroBlockWriter, avro_sync_marker
from blockgz.format.index import BlockIndex
from blockgz.format.writer import DEFAULT_BLOCK_SIZE
from blockgz.layout import sidecar_key
from blockgz.objects.upload import publish_index
from blockgz.store.base import ObjectStore


class AvroUpload:
    """An Avro container file being written to ``store`` under ``key``, indexed on close.

    Takes the :class:`~blockgz.format.avro.AvroBlockWriter` settings; with ``indexed=False``
    no sidecar is written (a plain Avro file, as Confluent's sink writes). As a context manager
    it publishes on success and aborts on an exception.
    """

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        schema: Mapping[str, Any] | Sequence[Any] | str,
        *,
        codec: str = "null",
        codec_level: int | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        max_records: int | None = None,
        indexed: bool = True,
        metadata: Mapping[str, str] | None = None,
        schema_id: int | None = None,
    ):
        self.store = store
        self.key = key
        self.indexed = indexed
        self._upload = store.open_upload(key)
        try:
            self.writer = AvroBlockWriter(
                self._upload,
                schema,
                codec=codec,
                codec_level=codec_level,
                block_size=block_size,
                max_records=max_records,
                sync_marker=avro_sync_marker(key),
                metadata=metadata,
                schema_id=schema_id,
            )
        except BaseException:
            self._upload.abort()
            raise
        self._index: BlockIndex | None = None

    # -- writing ------------------------------------------------------------------------------
    def write(self, datum: Any, offset: int) -> None:
        """One record with its Kafka offset (see :meth:`AvroBlockWriter.write`)."""
        self.writer.write(datum, offset)

    def write_many(self, data: Sequence[Any], offsets: Sequence[int]) -> None:
        """Many records with their offsets (see :meth:`AvroBlockWriter.write_many`)."""
        self.writer.write_many(data, offsets)

    @property
    def bytes_written(self) -> int:
        """Bytes of the data object so far (header and finished blocks)."""
        return self.writer.bytes_written

    @property
    def uncompressed_size(self) -> int:
        """Encoded bytes of every record written so far."""
        return self.writer.uncompressed_size

    @property
    def index_key(self) -> str | None:
        """Where the sidecar goes (and, after :meth:`close`, is); ``None`` when not indexed."""
        return sidecar_key(self.key) if self.indexed else None

    @property
    def index(self) -> BlockIndex:
        """The index (after :meth:`close`), published or not."""
        return self.writer.index

    # -- finishing ----------------------------------------------------------------------------
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
        """Drop everything: buffered records and any multipart parts."""
        self._upload.abort()

    def __enter__(self) -> AvroUpload:
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
