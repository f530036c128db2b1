"""Moved to :mod:`blockgz.formats.arrow_entries` (the formats lay out their keys/headers
entries); re-exported here for old imports."""

from blockgz.formats.arrow_entries import avro_headers, avro_nullable_bytes, json_text_lines

__all__ = ["avro_headers", "avro_nullable_bytes", "json_text_lines"]
