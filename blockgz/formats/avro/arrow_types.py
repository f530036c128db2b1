"""Avro schemas as Spark SQL types (DDL) and Arrow types, for reading Avro archives into typed
DataFrames and tables; and schema evolution: which version reads the others (:func:`can_read`)
and values of an older version in a newer one's shape (:func:`resolver`, :func:`with_defaults`).

As Spark's own ``from_avro`` maps them: records are structs, ``["null", X]`` is a nullable X,
enums are strings, fixed and bytes are binary, maps have string keys; logical types
``timestamp-millis``/``-micros`` are timestamps, ``date`` is a date, ``decimal`` a decimal,
``uuid`` a string. Unions of several non-null types have no Spark equivalent and are refused,
naming the field.

>>> avro_to_ddl({"type": "record", "name": "R", "fields": [
...     {"name": "id", "type": "long"},
...     {"name": "tags", "type": {"type": "array", "items": "string"}},
...     {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]}]})
'STRUCT<`id`: BIGINT, `tags`: ARRAY<STRING>, `at`: TIMESTAMP>'
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from blockgz.errors import ConfigError
from blockgz.formats.avro.arrow_schema import AvroArrow

_PRIMITIVES = {
    "null": "VOID",
    "boolean": "BOOLEAN",
    "int": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "bytes": "BINARY",
    "string": "STRING",
}


def avro_to_ddl(schema: Any, *, where: str = "value") -> str:
    """The Spark type (DDL) of values of the Avro ``schema`` (JSON text or parsed)."""
    if isinstance(schema, str) and schema.lstrip().startswith(("{", "[", '"')):
        schema = json.loads(schema)
    return _ddl(schema, where, {})


def _named_type(name: str, where: str, primitives: dict[str, Any], named: dict[str, Any]) -> Any:
    """The type a primitive's or an earlier named type's name stands for."""
    if name in primitives:
        return primitives[name]
    if name in named:
        return named[name]
    raise ConfigError(f"{where}: Avro type {name!r} is not known here")


def _only_branch(union: list[Any], where: str, target: str, hint: str = "") -> Any:
    """The one non-null branch of a union (a nullable type); more have no single type."""
    branches = [b for b in union if b != "null"]
    if len(branches) != 1:
        raise ConfigError(
            f"{where}: an Avro union of {len(branches)} non-null types has no {target}{hint}"
        )
    return branches[0]


def _ddl(schema: Any, where: str, named: dict[str, str]) -> str:
    if isinstance(schema, str):
        return _named_type(schema, where, _PRIMITIVES, named)
    if isinstance(schema, list):
        hint = "; read the values as JSON text instead (leave value.format out)"
        return _ddl(_only_branch(schema, where, "Spark type", hint), where, named)
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical in ("timestamp-millis", "timestamp-micros"):
        return "TIMESTAMP"
    if logical == "date":
        return "DATE"
    if logical == "decimal":
        return f"DECIMAL({int(schema['precision'])}, {int(schema.get('scale', 0))})"
    if logical == "uuid":
        return "STRING"
    if kind == "record":
        parts = []
        for field in schema["fields"]:
            name = field["name"]
            parts.append(f"`{name}`: {_ddl(field['type'], where + '.' + name, named)}")
        fields = ", ".join(parts)
        ddl = f"STRUCT<{fields}>"
        named[_full_name(schema)] = ddl
        named[schema["name"]] = ddl
        return ddl
    if kind == "enum":
        named[_full_name(schema)] = named[schema["name"]] = "STRING"
        return "STRING"
    if kind == "fixed":
        named[_full_name(schema)] = named[schema["name"]] = "BINARY"
        return "BINARY"
    if kind == "array":
        return f"ARRAY<{_ddl(schema['items'], f'{where}[]', named)}>"
    if kind == "map":
        return f"MAP<STRING, {_ddl(schema['values'], f'{where}{{}}', named)}>"
    return _ddl(kind, where, named)


def _full_name(schema: dict[str, Any]) -> str:
    name = schema["name"]
    namespace = schema.get("namespace")
    return f"{namespace}.{name}" if namespace and "." not in name else name


def resolver(writer_schema: str, reader_schema: str) -> Callable[[Any], Any] | None:
    """What turns a datum decoded with ``writer_schema`` into ``reader_schema``'s shape, by
    Avro's schema resolution (fields added since get their defaults, removed ones go, ints
    widen); ``None`` when the two are the same text (nothing to do). A writer the reader
    cannot read is a :class:`~blockgz.errors.ConfigError` when the datum is resolved.

    >>> v1 = '{"type": "record", "name": "E", "fields": [{"name": "n", "type": "int"}]}'
    >>> v2 = ('{"type": "record", "name": "E", "fields": [{"name": "n", "type": "long"},'
    ...       ' {"name": "c", "type": "string", "default": "web"}]}')
    >>> resolver(v1, v2)({"n": 7}), resolver(v2, v2)
    ({'n': 7, 'c': 'web'}, None)
    """
    if writer_schema == reader_schema:
        return None
    return _resolver(writer_schema, reader_schema)


@lru_cache(maxsize=64)
def _resolver(writer_schema: str, reader_schema: str) -> Callable[[Any], Any]:
    import fastavro
    from fastavro.read import SchemaResolutionError

    # Parsed apart: two versions of one schema define the same names.
    writer = fastavro.parse_schema(json.loads(writer_schema))
    reader = fastavro.parse_schema(json.loads(reader_schema))

    def resolve(datum: Any) -> Any:
        # The datum is re-encoded with its writer schema and read back with the reader's:
        # exactly what a consumer holding the reader schema would get.
        out = io.BytesIO()
        fastavro.schemaless_writer(out, writer, datum)
        out.seek(0)
        try:
            return fastavro.schemaless_reader(out, writer, reader)
        except SchemaResolutionError as exc:
            raise ConfigError(
                f"a value written with an older Avro schema cannot be read as the newest one "
                f"({exc}); give value.schema, or read one schema version at a time"
            ) from exc

    return resolve


_PROMOTIONS = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}


def can_read(reader_schema: Any, writer_schema: Any) -> bool:
    """Whether Avro's schema resolution reads data written with ``writer_schema`` as
    ``reader_schema`` (JSON text or parsed): every reader field is in the writer or has a
    default, types match or promote, enums keep the writer's symbols.

    >>> v1 = {"type": "record", "name": "E", "fields": [{"name": "n", "type": "int"}]}
    >>> v2 = {"type": "record", "name": "E", "fields": [{"name": "n", "type": "long"},
    ...       {"name": "c", "type": "string", "default": "web"}]}
    >>> can_read(v2, v1), can_read(v1, v2), can_read(v2, {**v1, "fields": []})  # no narrowing
    (True, False, False)
    """

    def parsed(schema: Any) -> Any:
        if isinstance(schema, str) and schema.lstrip().startswith(("{", "[", '"')):
            return json.loads(schema)
        return schema

    return _reads(parsed(reader_schema), parsed(writer_schema), {}, {})


def _named(schema: Any, names: dict[str, Any]) -> Any:
    """``schema`` with a reference to a named type replaced by its definition (and the
    definitions it holds remembered)."""
    if isinstance(schema, str):
        return names.get(schema, schema)
    if isinstance(schema, dict) and schema.get("type") in ("record", "enum", "fixed"):
        names[_full_name(schema)] = names[schema["name"]] = schema
    return schema


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        kind = schema["type"]
        return kind if isinstance(kind, str) else _kind(kind)
    return schema


def _reads(reader: Any, writer: Any, rnames: dict[str, Any], wnames: dict[str, Any]) -> bool:
    reader, writer = _named(reader, rnames), _named(writer, wnames)
    if isinstance(writer, list):
        return all(_reads(reader, branch, rnames, wnames) for branch in writer)
    if isinstance(reader, list):
        return any(_reads(branch, writer, rnames, wnames) for branch in reader)
    if isinstance(reader, dict) and not isinstance(reader["type"], str):
        return _reads(reader["type"], writer, rnames, wnames)
    if isinstance(writer, dict) and not isinstance(writer["type"], str):
        return _reads(reader, writer["type"], rnames, wnames)
    rkind, wkind = _kind(reader), _kind(writer)
    if wkind in _PROMOTIONS and rkind in _PROMOTIONS[wkind]:
        return True
    return rkind == wkind and _reads_kind(rkind, reader, writer, rnames, wnames)


def _reads_kind(
    kind: str, reader: Any, writer: Any, rnames: dict[str, Any], wnames: dict[str, Any]
) -> bool:
    """:func:`_reads` of two schemas of one ``kind``: records field by field, arrays and maps
    by what they hold, enums by their symbols, fixed by their size; anything else reads."""
    if kind == "record":
        return _reads_record(reader, writer, rnames, wnames)
    if kind == "enum":
        return "default" in reader or set(writer["symbols"]) <= set(reader["symbols"])
    if kind == "fixed":
        return reader.get("size") == writer.get("size")
    if kind == "array":
        return _reads(reader["items"], writer["items"], rnames, wnames)
    if kind == "map":
        return _reads(reader["values"], writer["values"], rnames, wnames)
    return True


def _reads_record(reader: Any, writer: Any, rnames: dict[str, Any], wnames: dict[str, Any]) -> bool:
    """Whether every field of the ``reader`` record reads from the ``writer`` field of its name
    or an alias, or has a default when the writer has none."""
    written = {}
    for field in writer["fields"]:
        for name in [field["name"], *field.get("aliases", [])]:
            written[name] = field
    for field in reader["fields"]:
        names = [field["name"], *field.get("aliases", [])]
        found = next((written[n] for n in names if n in written), None)
        if found is None:
            if "default" not in field:
                return False
        elif not _reads(field["type"], found["type"], rnames, wnames):
            return False
    return True


def keeps_fields(schema: Any, other: Any) -> bool:
    """Whether every top-level field of the record schema ``other`` is in ``schema`` (by name
    or alias): reading ``other``'s data as ``schema`` drops nothing. Non-records: ``True``.

    >>> keeps_fields({"type": "record", "name": "E", "fields": [{"name": "a", "type": "int"}]},
    ...              {"type": "record", "name": "E", "fields": [{"name": "b", "type": "int"}]})
    False
    """
    if isinstance(schema, str):
        schema = json.loads(schema) if schema.lstrip().startswith("{") else schema
    if isinstance(other, str):
        other = json.loads(other) if other.lstrip().startswith("{") else other
    if not (isinstance(schema, dict) and isinstance(other, dict)):
        return True
    if schema.get("type") != "record" or other.get("type") != "record":
        return True
    names = {n for f in schema["fields"] for n in [f["name"], *f.get("aliases", [])]}
    return all(f["name"] in names for f in other["fields"])


def avro_to_arrow(schema: Any, *, where: str = "value") -> Any:
    """The Arrow type of values of the Avro ``schema`` (JSON text or parsed), as
    :func:`avro_to_ddl` maps it for Spark: records are structs, enums strings, logical
    timestamps UTC timestamps, dates dates, decimals decimals. Unions of several non-null
    types are refused (:class:`~blockgz.errors.ConfigError`), naming the field.

    >>> str(avro_to_arrow({"type": "record", "name": "R", "fields": [
    ...     {"name": "id", "type": "long"}, {"name": "tags", "type": {"type": "map",
    ...     "values": "string"}}, {"name": "at", "type": ["null", {"type": "long",
    ...     "logicalType": "timestamp-millis"}]}]}))
    'struct<id: int64, tags: map<string, string>, at: timestamp[ms, tz=UTC]>'
    """
    if isinstance(schema, str) and schema.lstrip().startswith(("{", "[", '"')):
        schema = json.loads(schema)
    return AvroArrow().arrow_type(schema, where)


def with_defaults(datum: Any, schema: Any) -> Any:
    """``datum`` (decoded with an older writer schema) with the fields ``schema`` (parsed)
    added since filled with their defaults, at any depth of records, arrays and maps.

    >>> with_defaults({"n": 1}, {"type": "record", "name": "E", "fields": [
    ...     {"name": "n", "type": "long"}, {"name": "c", "type": "string", "default": "web"}]})
    {'n': 1, 'c': 'web'}
    """
    return _filled(datum, schema, {})


def _filled(datum: Any, schema: Any, named: dict[str, Any]) -> Any:
    if datum is None:
        return None
    if isinstance(schema, str):
        schema = named.get(schema, schema)
    if isinstance(schema, list):
        records = [b for b in schema if b != "null"]
        return _filled(datum, records[0], named) if len(records) == 1 else datum
    if not isinstance(schema, dict):
        return datum
    kind = schema.get("type")
    if kind == "record" and isinstance(datum, dict):
        named[_full_name(schema)] = named[schema["name"]] = schema
        out = dict(datum)
        for field in schema["fields"]:
            name = field["name"]
            if name in out:
                out[name] = _filled(out[name], field["type"], named)
            elif "default" in field:
                out[name] = field["default"]
        return out
    if kind == "array" and isinstance(datum, list):
        return [_filled(d, schema["items"], named) for d in datum]
    if kind == "map" and isinstance(datum, dict):
        return {k: _filled(v, schema["values"], named) for k, v in datum.items()}
    if isinstance(kind, (dict, list)):
        return _filled(datum, kind, named)
    return datum
