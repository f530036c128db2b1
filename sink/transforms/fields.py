"""Connect's field transforms: ``InsertField``, ``ReplaceField``, ``MaskField``, ``ExtractField``,
``HoistField``, ``ValueToKey`` (each ``$Key``/``$Value`` where Connect has both).

>>> from blockgz.sink.transforms.options import TransformOptions
>>> from blockgz.sink.transforms.connect.record import Record
>>> t = TRANSFORMS["ReplaceField$Value"](TransformOptions("t", {"renames": "a:b"}))
>>> t(Record("t", 0, None, None, {"a": 1, "c": 2}, None, None)).value
{'b': 1, 'c': 2}
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import orjson

from blockgz.sink.transforms.connect.record import (
    VALUE,
    Record,
    Rejected,
    Side,
    copy_basics,
    field_schema,
    find_field,
    is_struct,
    require_map,
    require_struct,
    sided,
)
from blockgz.sink.transforms.fused import dump_all, split_list
from blockgz.sink.transforms.masking import mask_field
from blockgz.sink.transforms.options import TransformOptions

TIMESTAMP_SCHEMA = {
    "type": "int64",
    "name": "org.apache.kafka.connect.data.Timestamp",
    "version": 1,
}


def _spec(name: str | None) -> tuple[str, bool] | None:
    """InsertField's ``name!`` (required) / ``name?`` / ``name`` (optional)."""
    if not name:
        return None
    if name.endswith("!"):
        return name[:-1], False
    if name.endswith("?"):
        return name[:-1], True
    return name, True


def insert_field(opts: TransformOptions, side: Side) -> Any:
    """Insert the topic, partition, offset, timestamp and/or a static string."""
    wanted: list[tuple[tuple[str, bool] | None, dict[str, Any], Callable[[Record], Any]]] = [
        (_spec(opts.text("topic.field", "")), {"type": "string"}, lambda r: r.topic),
        (_spec(opts.text("partition.field", "")), {"type": "int32"}, lambda r: r.partition),
        (_spec(opts.text("offset.field", "")), {"type": "int64"}, lambda r: r.offset),
        (_spec(opts.text("timestamp.field", "")), TIMESTAMP_SCHEMA, lambda r: r.timestamp),
    ]
    static = _spec(opts.text("static.field", ""))
    static_value = opts.text("static.value", None)
    if static is not None:
        wanted.append((static, {"type": "string"}, lambda r: static_value))
    active = [(spec, schema, get) for spec, schema, get in wanted if spec is not None]

    def apply(record: Record) -> Record:
        value, schema = side.value(record), side.schema(record)
        if value is None:
            return record
        if schema is None:
            out = dict(require_map(value, "field insertion"))
            for (name, _), _, get in active:
                found = get(record)
                if found is not None:
                    out[name] = found
            return side.set(record, None, out)
        require_struct(schema, value, "field insertion")
        fields = list(schema["fields"])
        out = dict(value)
        for (name, optional), kind, get in active:
            if any(spec["field"] == name for spec in fields):  # Connect's SchemaBuilder refuses
                raise Rejected(f"cannot create field because of field name duplication {name}")
            fields.append({**kind, "optional": optional, "field": name})
            found = get(record)
            if found is None and not optional:
                raise Rejected(f"field {name} is required but the record has no value for it")
            out[name] = found
        return side.set(record, copy_basics(schema, fields), out)

    if side is VALUE:
        # Each field with where it comes from: its index in ``wanted`` (topic, partition,
        # offset, timestamp, static), the topic as -1 (the kernel's context tuple's last).
        sources = [
            (spec[0], _FROM_TOPIC if i == 0 else i)
            for i, (spec, _, _) in enumerate(wanted)
            if spec is not None
        ]
        apply.value_kernel = lambda topic: _insert_kernel(  # type: ignore[attr-defined]
            sources, topic, static_value
        )
    return apply


_FROM_TOPIC = -1


def _insert_kernel(fields: list[tuple[str, int]], topic: str, static: str | None) -> Any:
    """InsertField$Value on one topic's schemaless maps (see :mod:`.fused`): the fields in
    the configured order, a field whose value is null left out, as :func:`insert_field`."""
    constants = {_FROM_TOPIC: topic, 4: static}
    if all(i in constants for _, i in fields):
        pairs = [(name, constants[i]) for name, i in fields if constants[i] is not None]

        def insert_constants(value: Any, partition: int, offset: Any, timestamp: Any) -> Any:
            if type(value) is not dict:
                require_map(value, "field insertion")
            for name, found in pairs:
                value[name] = found
            return value

        insert_constants.reads_record = False  # type: ignore[attr-defined]
        return insert_constants

    def insert(value: Any, partition: int, offset: Any, timestamp: Any) -> Any:
        if type(value) is not dict:
            require_map(value, "field insertion")
        context = (None, partition, offset, timestamp, static, topic)  # [-1] is the topic
        for name, i in fields:
            found = context[i]
            if found is not None:
                value[name] = found
        return value

    return insert


def _value_schema(spec: dict[str, Any]) -> Any:
    """What Connect's ``Struct.put`` checks a value against: a primitive's type and logical
    name, or a whole struct/array/map schema (``ConnectSchema.equals``)."""
    if spec.get("type") in ("struct", "array", "map"):
        return {k: v for k, v in spec.items() if k != "field"}
    return spec.get("type"), spec.get("name")


def replace_field(opts: TransformOptions, side: Side) -> Any:
    """Drop (``exclude``), keep (``include``) and rename (``renames=a:b``) fields."""
    exclude = set(opts.names("exclude") or opts.names("blacklist"))
    include = set(opts.names("include") or opts.names("whitelist"))
    renames = opts.pairs("renames")
    back = {new: old for old, new in renames.items()}

    def keep(name: str) -> bool:
        return name not in exclude and (not include or name in include)

    def apply(record: Record) -> Record:
        value, schema = side.value(record), side.schema(record)
        if value is None:
            return record
        if schema is None:
            data = require_map(value, "field replacement")
            if include:
                kept = {k: v for k, v in data.items() if k in include and k not in exclude}
            else:
                kept = {k: v for k, v in data.items() if k not in exclude}
            if renames:
                kept = {renames.get(k, k): v for k, v in kept.items()}
            return side.set(record, None, kept)
        data = require_struct(schema, value, "field replacement")
        fields = [
            {**spec, "field": renames.get(spec["field"], spec["field"])}
            for spec in schema["fields"]
            if keep(spec["field"])
        ]
        names = [spec["field"] for spec in fields]
        if len(set(names)) < len(names):  # Connect's SchemaBuilder refuses a name twice
            raise Rejected(f"cannot create field because of field name duplication in {names}")
        for spec in fields:  # Connect reads each output field by its name before any rename
            source = find_field(schema, back.get(spec["field"], spec["field"]))
            if source is None:
                raise Rejected(
                    f"{back.get(spec['field'], spec['field'])} is not a valid field name"
                )
            if _value_schema(source) != _value_schema(spec):
                # a kept field named like another's new name gets that field's value
                raise Rejected(f"invalid value for schema of field {spec['field']!r}")
        out = {spec["field"]: data.get(back.get(spec["field"], spec["field"])) for spec in fields}
        return side.set(record, copy_basics(schema, fields), out)

    if side is VALUE:
        kernel = _replace_kernel(exclude, include, renames)
        apply.value_kernel = lambda topic: kernel  # type: ignore[attr-defined]
    return apply


def _replace_kernel(exclude: set[str], include: set[str], renames: dict[str, str]) -> Any:
    """ReplaceField$Value on schemaless maps (see :mod:`.fused`): the same map as
    :func:`replace_field`, built in place where that keeps the fields' order.

    Renaming a field in place would move it to the end, so a rename rebuilds the map, which
    costs more than the rest of the chain. When the serialised JSON is all that is wanted,
    ``replace.dumped`` leaves the rename to the bytes: see :func:`_renamed_json`."""
    dropped = tuple(exclude)
    renamed = tuple(renames)

    def keep(value: Any, partition: int, offset: Any, timestamp: Any) -> Any:
        if type(value) is not dict:
            require_map(value, "field replacement")
        if include:
            return {k: v for k, v in value.items() if k in include and k not in exclude}
        for name in dropped:
            value.pop(name, None)
        return value

    def replace(value: Any, partition: int, offset: Any, timestamp: Any) -> Any:
        value = keep(value, partition, offset, timestamp)
        for name in renamed:
            if name in value:  # renaming keeps a field's place: the map is rebuilt
                return {renames.get(k, k): v for k, v in value.items()}
        return value

    replace.reads_record = keep.reads_record = False  # type: ignore[attr-defined]
    if renames:
        replace.dumped = (keep, _renamed_json(renames))  # type: ignore[attr-defined]
    return replace


def _renamed_json(renames: dict[str, str]) -> Any:
    """``serialise(maps) -> list[bytes]``: the JSON of each map with ``renames`` applied, as
    ``orjson.dumps`` writes the renamed map.

    orjson writes a map as ``{``, its ``"key":value`` pairs joined by ``,`` and ``}``, so
    with one field to rename the JSON of a renamed map is the map's JSON with the key's bytes
    ``"old":`` replaced by ``"new":`` — when the map does not hold the new name, and the old
    key's bytes occur only once (text in a string or a nested key can hold them too). The
    maps are serialised as one list, where each map holding the key holds its bytes at least
    once; when they occur exactly as many times as maps hold the key (and cannot overlap
    themselves: every occurrence counts) and no map holds the new name, each occurrence is a
    key to rename, replaced in one pass. Anything else is serialised from rebuilt maps."""
    dumps = orjson.dumps
    if len(renames) != 1:

        def rebuilt(values: list[Any]) -> list[bytes]:
            return dump_all([{renames.get(k, k): v for k, v in m.items()} for m in values])

        return rebuilt
    ((old_name, new_name),) = renames.items()
    old, new = dumps(old_name) + b":", dumps(new_name) + b":"
    overlaps = any(old[k:] == old[: len(old) - k] for k in range(1, len(old)))

    def renamed(values: list[Any]) -> list[bytes]:
        data = dumps(values)
        names = [old_name] * len(values)
        having = sum(map(operator.contains, values, names))
        found = None
        if not having:
            found = split_list(data)
        elif not overlaps and not any(map(operator.contains, values, [new_name] * len(values))):
            pieces = data.split(old)
            if len(pieces) == having + 1:
                found = split_list(new.join(pieces))
        if found is not None:
            return found
        return dump_all(
            [
                {new_name if k == old_name else k: v for k, v in m.items()} if old_name in m else m
                for m in values
            ]
        )

    return renamed


def _field_path(opts: TransformOptions) -> list[str]:
    """``field`` as a path: one name (``field.syntax.version=V1``, the default) or, with
    ``V2`` (KIP-821), names joined by dots. Backtick-quoted V2 names are refused."""
    name = opts.text("field")
    version = opts.choice("field.syntax.version", ("V1", "V2"), "V1")
    if version == "V1" or "." not in name:
        return [name]
    if "`" in name:
        raise opts.error("field", "backtick-quoted names in a V2 path are not supported")
    return name.split(".")


def _nested(schema: Any, value: Any, path: list[str]) -> tuple[Any, Any]:
    """The schema and value at ``path`` in a struct (Connect's V2 field path)."""
    for step in path:
        spec = find_field(schema, step) if is_struct(schema) else None
        if spec is None:
            raise Rejected(f"unknown field: {'.'.join(path)}")
        if value is not None:
            value = require_struct(schema, value, "nested field access").get(step)
        schema = field_schema(spec)
    return schema, value


def _nested_map(value: Any, path: list[str]) -> Any:
    """The value at ``path`` in a schemaless map (a missing or null step gives null)."""
    for step in path:
        if value is None:
            return None
        value = require_map(value, "nested field access").get(step)
    return value


def extract_field(opts: TransformOptions, side: Side) -> Any:
    """Replace the key or value by one of its fields (a nested one with a V2 path)."""
    path = _field_path(opts)
    if len(path) > 1:
        return _extract_path(path, side)
    name = path[0]

    def apply(record: Record) -> Record:
        value, schema = side.value(record), side.schema(record)
        if schema is None:
            if value is None:
                return side.set(record, None, None)
            return side.set(record, None, require_map(value, "field extraction").get(name))
        spec = find_field(schema, name) if is_struct(schema) else None
        if spec is None:
            raise Rejected(f"unknown field: {name}")
        if value is None:
            return side.set(record, field_schema(spec), None)
        data = require_struct(schema, value, "field extraction")
        return side.set(record, field_schema(spec), data.get(name))

    return apply


def _extract_path(path: list[str], side: Side) -> Any:
    """``ExtractField`` of a nested V2 path."""

    def apply(record: Record) -> Record:
        value, schema = side.value(record), side.schema(record)
        if schema is None:
            return side.set(record, None, _nested_map(value, path))
        if not is_struct(schema):
            raise Rejected(f"unknown field: {'.'.join(path)}")
        return side.set(record, *_nested(schema, value, path))

    return apply


def hoist_field(opts: TransformOptions, side: Side) -> Any:
    """Wrap the key or value in a struct (or map) with one field."""
    name = opts.text("field")

    def apply(record: Record) -> Record:
        value, schema = side.value(record), side.schema(record)
        if schema is None:
            return side.set(record, None, {name: value})
        wrapped = {"type": "struct", "optional": False, "fields": [{**schema, "field": name}]}
        return side.set(record, wrapped, {name: value})

    return apply


def value_to_key(opts: TransformOptions) -> Any:
    """Replace the key with a struct (or map) of the value's ``fields``."""
    names = opts.names("fields")
    if not names:
        raise opts.error("fields", "missing (this transform needs it)")

    def apply(record: Record) -> Record:
        value, schema = record.value, record.value_schema
        if schema is None:
            data = require_map(value, "copying fields from value to key")
            return record.new(key={n: data.get(n) for n in names}, key_schema=None)
        data = require_struct(schema, value, "copying fields from value to key")
        fields = []
        for name in names:
            spec = find_field(schema, name)
            if spec is None:
                raise Rejected(f"field does not exist: {name}")
            fields.append(spec)
        key_schema = {"type": "struct", "optional": False, "fields": fields}
        return record.new(key={n: data.get(n) for n in names}, key_schema=key_schema)

    return apply


TRANSFORMS: dict[str, Any] = {
    **sided("InsertField", insert_field),
    **sided("ReplaceField", replace_field),
    **sided("MaskField", mask_field),
    **sided("ExtractField", extract_field),
    **sided("HoistField", hoist_field),
    "ValueToKey": value_to_key,
}
