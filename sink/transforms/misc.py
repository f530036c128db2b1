"""Connect's ``Filter`` (drops every record it runs on: use it with a predicate) and
``SetSchemaMetadata`` (``schema.name``, ``schema.version`` of the key or value schema).

>>> from blockgz.sink.transforms.options import TransformOptions
>>> from blockgz.sink.transforms.connect.record import Record
>>> TRANSFORMS["Filter"](TransformOptions("t", {}))(Record("t", 0, None, None, 1, None, None))
"""

from __future__ import annotations

from typing import Any

from blockgz.sink.transforms.connect.record import Record, Rejected, Side, sided
from blockgz.sink.transforms.options import TransformOptions


def filter_all(opts: TransformOptions) -> Any:
    """Drop the record."""
    return lambda record: None


def set_schema_metadata(opts: TransformOptions, side: Side) -> Any:
    """Set the schema's name and/or version."""
    name = opts.text("schema.name", None)
    version = opts.integer("schema.version", None) if opts.text("schema.version", None) else None
    if name is None and version is None:  # Connect refuses the config
        raise opts.error("schema.name", "neither schema.name nor schema.version is set")

    def apply(record: Record) -> Record:
        schema = side.schema(record)
        if schema is None and side.value(record) is None:  # Connect passes a bare null on
            return record
        if schema is None:
            raise Rejected("schema required for [updating schema metadata]")
        if schema.get("type") != "struct":  # Connect rebuilds the schema from its fields
            raise Rejected("cannot list fields on non-struct type")
        new = dict(schema)
        if name is not None:
            new["name"] = name
        if version is not None:
            new["version"] = version
        return side.set(record, new, side.value(record))

    return apply


TRANSFORMS: dict[str, Any] = {
    "Filter": filter_all,
    **sided("SetSchemaMetadata", set_schema_metadata),
}
