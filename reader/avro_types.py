"""Avro schemas as Spark SQL types (DDL), for reading Avro archives into typed DataFrames.

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

import json
from typing import Any

from blockgz.errors import ConfigError

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


def _ddl(schema: Any, where: str, named: dict[str, str]) -> str:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema in named:
            return named[schema]
        raise ConfigError(f"{where}: Avro type {schema!r} is not known here")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise ConfigError(
                f"{where}: an Avro union of {len(branches)} non-null types has no Spark type; "
                "read the values as JSON text instead (leave value.format out)"
            )
        return _ddl(branches[0], where, named)
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
