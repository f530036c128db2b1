"""Connect's header transforms: ``InsertHeader``, ``DropHeaders``, ``HeaderFrom$Key/$Value``.

>>> from blockgz.sink.transforms.options import TransformOptions
>>> from blockgz.sink.transforms.connect.record import Record
>>> t = TRANSFORMS["InsertHeader"](TransformOptions("t", {"header": "h", "value.literal": "42"}))
>>> t(Record("t", 0, None, None, 1, None, None)).headers
(Header(key='h', value=42, schema={'type': 'int8', 'optional': False}),)
"""

from __future__ import annotations

from typing import Any

from blockgz.sink.transforms.connect.record import (
    Header,
    Record,
    Rejected,
    Side,
    copy_basics,
    field_schema,
    find_field,
    require_map,
    require_struct,
    sided,
)
from blockgz.sink.transforms.connect.values_parse import parse_string
from blockgz.sink.transforms.options import TransformOptions


def insert_header(opts: TransformOptions) -> Any:
    """Add the header ``header`` with the value ``value.literal``, typed as Connect's
    ``Values.parseString`` types it (``null`` is a null header)."""
    name = opts.text("header")
    value, schema = parse_string(opts.text("value.literal"))

    def apply(record: Record) -> Record:
        return record.new(headers=(*record.headers, Header(name, value, schema)))

    return apply


def drop_headers(opts: TransformOptions) -> Any:
    """Remove every header named in ``headers``."""
    names = set(opts.names("headers"))
    if not names:
        raise opts.error("headers", "missing (this transform needs it)")

    def apply(record: Record) -> Record:
        return record.new(headers=tuple(h for h in record.headers if h.key not in names))

    return apply


def header_from(opts: TransformOptions, side: Side) -> Any:
    """Copy or move ``fields`` of the key/value into the headers ``headers``."""
    names = opts.names("fields")
    targets = opts.names("headers")
    if not names:
        raise opts.error("fields", "missing (this transform needs it)")
    if len(names) != len(targets):
        raise opts.error("headers", "must name as many headers as there are fields")
    move = opts.choice("operation", ("move", "copy")) == "move"

    def apply(record: Record) -> Record:
        value, schema = side.value(record), side.schema(record)
        # No early return for a null key or value: Connect refuses it (requireMap/requireStruct).
        added = []
        if schema is None:
            data = require_map(value, "header " + ("move" if move else "copy"))
            for name, header in zip(names, targets, strict=True):
                added.append(Header(header, data.get(name), None))
            new_value = {k: v for k, v in data.items() if not (move and k in names)}
            new_schema = None
        else:
            data = require_struct(schema, value, "header " + ("move" if move else "copy"))
            for name, header in zip(names, targets, strict=True):
                spec = find_field(schema, name)
                if spec is None:
                    raise Rejected(f"{name} is not a valid field name")
                added.append(Header(header, data.get(name), field_schema(spec)))
            if move:
                fields = [f for f in schema["fields"] if f["field"] not in names]
                new_schema = copy_basics(schema, fields)
                new_value = {f["field"]: data.get(f["field"]) for f in fields}
            else:
                new_schema, new_value = schema, value
        moved = side.set(record, new_schema, new_value)
        return moved.new(headers=(*record.headers, *added))

    return apply


TRANSFORMS: dict[str, Any] = {
    "InsertHeader": insert_header,
    "DropHeaders": drop_headers,
    **sided("HeaderFrom", header_from),
}
