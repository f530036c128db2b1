"""Write an Avro container file and its index sidecar: the data first, then the index, or nothing.

:class:`AvroUpload` is to Avro what :class:`~blockgz.written.upload.BlockGzipUpload` is to
block-GZIP: records stream into the store's upload (S3 parts go up while records keep coming),
:meth:`~AvroUpload.close` finishes the data object and then writes its sidecar, any failure
aborts the upload, and a data object whose sidecar could not be written is deleted again. The
sync marker comes from the key (:func:`~blockgz.blocks.avro.container.avro_sync_marker`), so
writing the
same records to the same key gives the same bytes.

    >>> import tempfile
    >>> from blockgz.objects.indexed import IndexedReader
    >>> from blockgz.store import LocalStore
    >>> store = LocalStore(tempfile.mkdtemp())
    >>> schema = {"type": "record", "name": "V", "fields": [{"name": "n", "type": "long"}]}
    >>> with AvroUpload(store, "t+0+0000000005.avro", schema, codec="deflate") as out:
    ...     out.write_many([{"n": n} for n in range(5, 10)], [5, 6, 9, 10, 11])
    >>> out.index.record_count, [o.key for o in store.list("")]
    (5, ['.t+0+0000000005.avro.index.json', 't+0+0000000005.avro'])
    >>> with IndexedReader.open_object(store, "t+0+0000000005.avro") as obj:
    ...     list(obj.seek(7, count=2))
    [Record(offset=9, value={'n': 7}), Record(offset=10, value={'n': 8})]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from blockgz.blocks.avro.container import AvroBlockWriter, avro_sync_marker
from blockgz.blocks.writer import DEFAULT_BLOCK_SIZE
from blockgz.store.base import ObjectStore
from blockgz.written.upload import IndexedUpload


class AvroUpload(IndexedUpload):
    """An Avro container file being written to ``store`` under ``key``, indexed on close.

    Takes the :class:`~blockgz.blocks.avro.container.AvroBlockWriter` settings; with
    ``indexed=False``
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
        self.indexed = indexed
        self._open_upload(
            store,
            key,
            lambda upload: AvroBlockWriter(
                upload,
                schema,
                codec=codec,
                codec_level=codec_level,
                block_size=block_size,
                max_records=max_records,
                sync_marker=avro_sync_marker(key),
                metadata=metadata,
                schema_id=schema_id,
            ),
        )

    # -- writing ------------------------------------------------------------------------------
    def write(self, datum: Any, offset: int) -> None:
        """One record with its Kafka offset (see :meth:`AvroBlockWriter.write`)."""
        self.writer.write(datum, offset)

    def write_many(self, data: Sequence[Any], offsets: Sequence[int]) -> None:
        """Many records with their offsets (see :meth:`AvroBlockWriter.write_many`)."""
        self.writer.write_many(data, offsets)

    def write_encoded(self, data: Any, ends: Any, offsets: Any) -> None:
        """Records already encoded (see :meth:`AvroBlockWriter.write_encoded`)."""
        self.writer.write_encoded(data, ends, offsets)

    @property
    def uncompressed_size(self) -> int:
        """Encoded bytes of every record written so far."""
        return self.writer.uncompressed_size
