"""Moved to :mod:`blockgz.formats.avro_writer` (the Avro format opens it); re-exported here for
old imports."""

from blockgz.formats.avro_writer import AvroObjectWriter, output_schema

__all__ = ["AvroObjectWriter", "output_schema"]
