"""Between the sink's decoded values (an Avro schema and its datum, :mod:`blockgz.sink.convert`)
and the Connect schemas and values the transforms work on.

>>> avro = {"type": "record", "name": "r", "namespace": "n", "fields": [
...     {"name": "id", "type": "long"}, {"name": "at", "type": ["null",
...      {"type": "long", "logicalType": "timestamp-millis"}], "default": None}]}
>>> schema = connect_schema(avro)
>>> schema["name"], [(f["field"], f["type"], f["optional"]) for f in schema["fields"]]
('n.r', [('id', 'int64', False), ('at', 'int64', True)])
>>> import datetime as dt
>>> value = connect_value(avro, {"id": 1, "at": dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)})
>>> value
{'id': 1, 'at': 1000}
>>> back_schema, back_value = avro_value(schema, value)
>>> back_value
{'id': 1, 'at': 1000}
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import orjson

from blockgz.sink.convert.connect_json import avro_datum_from_connect, avro_schema_from_connect
from blockgz.sink.convert.schemas import ValueSchema
from blockgz.sink.transforms.connect.json_converter import to_connect_json

_PRIMITIVES = {
    "int": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
    "fixed": "bytes",
    "enum": "string",
}
_LOGICAL = "org.apache.kafka.connect.data."
_LOGICAL_NAMES = {"timestamp-millis": "Timestamp", "date": "Date", "time-millis": "Time"}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class _Names:
    """Named Avro types seen so far (a later reference is by name)."""

    def __init__(self) -> None:
        self.known: dict[str, Any] = {}

    def resolve(self, schema: Any, namespace: str = "") -> Any:
        if isinstance(schema, str) and schema not in ("null", *_PRIMITIVES):
            full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
            return self.known.get(full, self.known.get(schema, schema))
        if isinstance(schema, dict) and schema.get("type") in ("record", "enum", "fixed"):
            full = _full_name(schema, namespace)
            self.known.setdefault(full, schema)
        return schema


def _full_name(schema: dict[str, Any], namespace: str = "") -> str:
    name = schema.get("name", "")
    space = schema.get("namespace", namespace)
    return name if "." in name or not space else f"{space}.{name}"


def connect_schema(avro: Any) -> dict[str, Any]:
    """The Connect schema of an Avro schema."""
    return _schema(avro, _Names(), "", optional=False)


def _schema(avro: Any, names: _Names, namespace: str, optional: bool) -> dict[str, Any]:
    avro = names.resolve(avro, namespace)
    if isinstance(avro, list):
        rest = [b for b in avro if b != "null"]
        if len(rest) != 1:
            raise ValueError("only unions of null and one type can be transformed")
        return _schema(rest[0], names, namespace, optional=len(rest) < len(avro) or optional)
    kind = avro if isinstance(avro, str) else avro.get("type")
    if isinstance(kind, (dict, list)):
        return _schema(kind, names, namespace, optional)
    base: dict[str, Any] = {"optional": optional}
    logical = avro.get("logicalType") if isinstance(avro, dict) else None
    if logical in _LOGICAL_NAMES:
        name = _LOGICAL_NAMES[logical]
        kind = "int64" if name == "Timestamp" else "int32"
        return {"type": kind, **base, "name": _LOGICAL + name, "version": 1}
    if logical == "decimal":
        params = {"scale": str(avro.get("scale", 0))}
        if "precision" in avro:
            params["connect.decimal.precision"] = str(avro["precision"])
        return {"type": "bytes", **base, "name": _LOGICAL + "Decimal", "parameters": params}
    if kind in _PRIMITIVES:
        return {"type": _PRIMITIVES[kind], **base}
    if kind == "array":
        return {"type": "array", **base, "items": _schema(avro["items"], names, namespace, False)}
    if kind == "map":
        values = _schema(avro["values"], names, namespace, False)
        return {
            "type": "map",
            **base,
            "keys": {"type": "string", "optional": False},
            "values": values,
        }
    if kind == "record":
        inner = avro.get("namespace", namespace)
        fields = [
            {**_schema(f["type"], names, inner, False), "field": f["name"]} for f in avro["fields"]
        ]
        return {"type": "struct", **base, "name": _full_name(avro, namespace), "fields": fields}
    raise ValueError(f"the Avro type {kind!r} cannot be transformed")


def connect_value(avro: Any, datum: Any) -> Any:
    """A decoded datum as a Connect value (logical types as epoch ms/days, decimals as bytes)."""
    return _value(connect_schema(avro), datum)


def _value(schema: dict[str, Any], datum: Any) -> Any:
    if datum is None:
        return None
    kind, name = schema["type"], schema.get("name", "")
    if kind == "struct":
        return {f["field"]: _value(f, datum.get(f["field"])) for f in schema["fields"]}
    if kind == "array":
        return [_value(schema["items"], item) for item in datum]
    if kind == "map":
        return {k: _value(schema["values"], v) for k, v in datum.items()}
    if name == _LOGICAL + "Timestamp" and isinstance(datum, dt.datetime):
        return round((datum - _EPOCH).total_seconds() * 1000)
    if name == _LOGICAL + "Date" and isinstance(datum, dt.date):
        return (datum - dt.date(1970, 1, 1)).days
    if name == _LOGICAL + "Time" and isinstance(datum, dt.time):
        return (
            (datum.hour * 60 + datum.minute) * 60 + datum.second
        ) * 1000 + datum.microsecond // 1000
    if name == _LOGICAL + "Decimal" and isinstance(datum, decimal.Decimal):
        scale = int(schema["parameters"]["scale"])
        unscaled = int(datum.scaleb(scale))
        return unscaled.to_bytes((unscaled.bit_length() + 8) // 8 or 1, "big", signed=True)
    return datum


_CACHE: dict[bytes, tuple[ValueSchema, Any]] = {}


def avro_value(schema: dict[str, Any], value: Any) -> tuple[ValueSchema, Any]:
    """The sink's :class:`ValueSchema` and datum of a Connect schema and value."""
    key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    found = _CACHE.get(key)
    if found is None:
        avro = avro_schema_from_connect(schema)
        found = (ValueSchema.from_json(avro, version=schema.get("version")), avro)
        if len(_CACHE) > 1000:
            _CACHE.clear()
        _CACHE[key] = found
    value_schema, avro = found
    return value_schema, avro_datum_from_connect(avro, to_connect_json(schema, value)["payload"])
