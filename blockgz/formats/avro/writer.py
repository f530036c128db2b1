"""One Avro output object: a container file of one schema, seekable through its sidecar.

:class:`AvroObjectWriter` is :class:`~blockgz.formats.output.ObjectWriter`'s counterpart for
``format.class=avro``: it takes decoded values with their offsets, streams them through
:class:`~blockgz.formats.avro.upload.AvroUpload` (blocks cut at ``s3.compression.block.size``
uncompressed bytes, the sync marker derived from the key, so a replay writes the same bytes)
and returns a :class:`~blockgz.written.files.WrittenFile` on ``close()``.

>>> import tempfile
>>> from blockgz.store import LocalStore
>>> from types import SimpleNamespace as ValueSchema
>>> schema = ValueSchema(json={"type": "record", "name": "r", "fields": [
...     {"name": "f1", "type": "string"}]}, name="r", id=1)
>>> store = LocalStore(tempfile.mkdtemp())
>>> w = AvroObjectWriter(store, "t/t+0+0000000000.avro", schema)
>>> for offset in range(3):
...     w.write({"f1": f"value{offset}"}, offset)
>>> done = w.close()
>>> done.records, done.index_key
(3, 't/.t+0+0000000000.avro.index.json')
"""

from __future__ import annotations

from typing import Any

from blockgz.blocks.writer import DEFAULT_BLOCK_SIZE
from blockgz.formats.avro.upload import AvroUpload
from blockgz.formats.output import OutputObject
from blockgz.store.base import ObjectStore
from blockgz.written.files import WrittenFile


def output_schema(schema: Any, connect_meta_data: bool = True) -> Any:
    """The schema written into the file: the value's schema (``schema.json``, a
    ``blockgz.sink.convert.schemas.ValueSchema``), with Confluent's ``connect.name`` (its full name,
    ``schema.name``) on a named top-level type when ``connect.meta.data`` is on.

    >>> from types import SimpleNamespace as ValueSchema
    >>> output_schema(ValueSchema(json={"type": "record", "name": "r", "namespace": "n",
    ...                                 "fields": []}, name="n.r"))["connect.name"]
    'n.r'
    """
    doc = schema.json
    if (
        connect_meta_data
        and isinstance(doc, dict)
        and doc.get("name")
        and "connect.name" not in doc
    ):
        return {**doc, "connect.name": schema.name}
    return doc


class AvroObjectWriter(OutputObject):
    """Write one ``.avro`` object holding records of ``schema``."""

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        schema: Any,
        *,
        codec: str = "null",
        block_size: int = DEFAULT_BLOCK_SIZE,
        block_records: int | None = None,
        indexed: bool = True,
        connect_meta_data: bool = True,
        topic: str = "",
        partition: int = 0,
        encoded_partition: str = "",
    ):
        super().__init__(key, topic, partition, encoded_partition)
        self.store = store
        self.schema = schema
        self._upload = AvroUpload(
            store,
            key,
            output_schema(schema, connect_meta_data),
            codec=codec,
            block_size=block_size,
            max_records=block_records,
            indexed=indexed,
            schema_id=schema.id,
        )
        self._upload.topic, self._upload.partition = topic, partition

    @property
    def uncompressed_size(self) -> int:
        return self._upload.uncompressed_size

    def write(self, datum: Any, offset: int, timestamp: int | None = None) -> None:
        """Append one decoded value (of this file's schema) holding Kafka ``offset``.
        ``timestamp`` is not kept: an Avro block's index entry has no time range (the file's
        range is in the manifest)."""
        self._upload.write(datum, offset)
        self._count(offset, offset, 1)

    def write_many(self, data: list[Any], offsets: Any) -> None:
        """Append records (of this file's schema) holding Kafka ``offsets``, in one call."""
        if not len(data):
            return
        self._upload.write_many(data, offsets)
        self._count(int(offsets[0]), int(offsets[-1]), len(data))

    def write_encoded(self, data: Any, ends: Any, offsets: Any) -> None:
        """Append records already encoded in this file's schema (``ends`` relative to
        ``data``), in one call; blocks are cut where :meth:`write` would cut them."""
        if not len(ends):
            return
        self._upload.write_encoded(data, ends, offsets)
        self._count(int(offsets[0]), int(offsets[-1]), len(ends))

    @property
    def sidecar_upload(self) -> Any:
        """The Avro upload when it writes a sidecar, else ``None``."""
        return self._upload if self._upload.indexed else None

    def close(self) -> WrittenFile:
        """Finish the object (then its sidecar) and describe it. Leaves nothing on failure."""
        self._upload.close()
        upload = self._upload
        return self._written(
            upload.bytes_written,
            self.uncompressed_size,
            upload.index_key,
            crc32=upload.crc32,
            index_size=upload.index_size,
            index_crc32=upload.index_crc32,
            etag=upload.etag,
        )

    def abort(self) -> None:
        """Drop the object: open multipart parts, buffered blocks, nothing left behind."""
        self._upload.abort()
