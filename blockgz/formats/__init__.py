"""The data formats of an export and their compressions: one module each, behind registries.

Used by the sink's writer and by the readers alike, so neither compares format names:

* :mod:`~blockgz.formats.base`: the :class:`~blockgz.formats.base.Format` every format is;
* :mod:`~blockgz.formats.json`, :mod:`~blockgz.formats.bytearray`,
  :mod:`~blockgz.formats.avro`, :mod:`~blockgz.formats.parquet`: Confluent's JsonFormat,
  ByteArrayFormat, AvroFormat and ParquetFormat (Parquet's columns, writer and footer reader:
  :mod:`~blockgz.formats.parquet_schema`, :mod:`~blockgz.formats.parquet_writer`,
  :mod:`~blockgz.formats.parquet_read`; the Avro → Arrow types its columns and the reader's
  tables share: :mod:`~blockgz.formats.avro_arrow`);
* :mod:`~blockgz.formats.registry`: ``FORMATS`` by name (and Confluent's class names);
* :mod:`~blockgz.formats.compression`: ``s3.compression.type`` (none, gzip, blockgzip);
* the writers of objects: :mod:`~blockgz.formats.output` (framed records: plain, gzip,
  block-GZIP) and :mod:`~blockgz.formats.avro_writer` (Avro container files), with
  :mod:`~blockgz.formats.arrow_entries` (keys/headers entries laid out from Arrow) and
  :mod:`~blockgz.formats.connect_render` (decoded values as Connect's JSON).

Adding a format is one module with a ``Format`` subclass and ``FORMATS.register(...)``.

>>> from blockgz.formats.registry import FORMATS
>>> [f.name for f in FORMATS]
['json', 'bytearray', 'avro', 'parquet']
"""
