"""The data formats of an export and their compressions: one module each, behind registries.

Used by the sink's writer and by the readers alike, so neither compares format names:

* :mod:`~blockgz.formats.base`: the :class:`~blockgz.formats.base.Format` every format is;
* :mod:`~blockgz.formats.json.json_format`, :mod:`~blockgz.formats.bytearray.bytearray_format`,
  :mod:`~blockgz.formats.avro.avro_format`, :mod:`~blockgz.formats.parquet.parquet_format`:
  Confluent's JsonFormat,
  ByteArrayFormat, AvroFormat and ParquetFormat (Parquet's columns, writer and footer reader:
  :mod:`~blockgz.formats.parquet.schema`, :mod:`~blockgz.formats.parquet.writer`,
  :mod:`~blockgz.formats.parquet.read`; the Avro → Arrow types its columns and the reader's
  tables share: :mod:`~blockgz.formats.avro.arrow_schema`);
* :mod:`~blockgz.formats.by_name`: ``FORMATS`` by name (and Confluent's class names);
* :mod:`~blockgz.formats.compression`: ``s3.compression.type`` (none, gzip, blockgzip);
* the writers of objects: :mod:`~blockgz.formats.output` (framed records: plain, gzip,
  block-GZIP) and :mod:`~blockgz.formats.avro.writer` (Avro container files), with
  :mod:`~blockgz.formats.arrow_entries` (keys/headers entries laid out from Arrow) and
  :mod:`~blockgz.formats.json.connect_render` (decoded values as Connect's JSON).

Adding a format is one module with a ``Format`` subclass and ``FORMATS.register(...)``.

>>> from blockgz.formats.by_name import FORMATS
>>> [f.name for f in FORMATS]
['json', 'bytearray', 'avro', 'parquet']
"""
