"""Connect's JSON, both ways: its schema envelope into Avro, and Avro data out as JSON.

* :func:`avro_schema_from_connect` turns the ``schema`` half of JsonConverter's
  ``{"schema": ..., "payload": ...}`` envelope into an Avro schema, as Confluent's AvroData
  does (structs become records named ``ConnectDefault``, ``ConnectDefault2``, ...; optional
  fields become ``["null", T]`` unions defaulting to null; Connect's Timestamp, Date, Time and
  Decimal become Avro logical types), and :func:`avro_datum_from_connect` reads the payload
  into that schema (base64 text back into bytes, decimals into :class:`~decimal.Decimal`).
* :func:`render_json` (:mod:`blockgz.formats.json.connect_render`) writes an Avro datum the way
  Confluent's JsonFormat writes a Connect record (JsonConverter with ``schemas.enable=false``):
  bytes as base64 text, timestamps as epoch milliseconds, dates as days since the epoch,
  decimals as base64 of the unscaled value or, with ``json.decimal.format=NUMERIC``, as a
  number; a union other than ``[null, T]`` as an object with one member per branch, only the
  chosen one non-null (Connect's Union struct).

>>> schema = {"type": "struct", "fields": [{"field": "id", "type": "int64"},
...           {"field": "tag", "type": "bytes", "optional": True}]}
>>> avro = avro_schema_from_connect(schema)
>>> [f["type"] for f in avro["fields"]]
['long', ['null', 'bytes']]
>>> datum = avro_datum_from_connect(avro, {"id": 7, "tag": "AAE="})
>>> datum
{'id': 7, 'tag': b'\\x00\\x01'}
>>> from blockgz.formats.json.connect_render import render_json
>>> render_json(avro, datum)
b'{"id":7,"tag":"AAE="}'
"""

from __future__ import annotations

import base64
import decimal
from collections.abc import Mapping
from typing import Any

_CONNECT_PRIMITIVES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "long",
    "float32": "float",
    "float64": "double",
    # Kafka's JsonConverter writes FLOAT32/FLOAT64 schemas under these names.
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}
_CONNECT_LOGICAL = {
    "org.apache.kafka.connect.data.Timestamp": {"type": "long", "logicalType": "timestamp-millis"},
    "org.apache.kafka.connect.data.Date": {"type": "int", "logicalType": "date"},
    "org.apache.kafka.connect.data.Time": {"type": "int", "logicalType": "time-millis"},
}
_DECIMAL = "org.apache.kafka.connect.data.Decimal"


# -- Connect schema -> Avro ----------------------------------------------------------------------
def avro_schema_from_connect(schema: Mapping[str, Any]) -> Any:
    """The Avro schema AvroData makes of a Connect JSON schema (raises ``ValueError``)."""
    return _ConnectToAvro().convert(schema, top=True)


class _ConnectToAvro:
    def __init__(self) -> None:
        self.structs = 0
        #: Full names of the records defined so far: a named struct seen again (Debezium's
        #: ``before`` and ``after`` share one) is a reference by name, as Avro requires.
        self.defined: set[str] = set()

    def convert(self, schema: Any, top: bool = False) -> Any:
        if not isinstance(schema, Mapping) or "type" not in schema:
            raise ValueError(f"a Connect schema must be an object with a 'type', got {schema!r}")
        avro = self._required(schema)
        if schema.get("optional"):
            avro = ["null", avro]
        return avro

    def _required(self, schema: Mapping[str, Any]) -> Any:
        kind = schema["type"]
        name = schema.get("name")
        if name in _CONNECT_LOGICAL:
            return dict(_CONNECT_LOGICAL[name])
        if name == _DECIMAL:
            params = schema.get("parameters") or {}
            scale = int(params.get("scale", 0))
            precision = int(params.get("connect.decimal.precision", 64))
            return {
                "type": "bytes",
                "logicalType": "decimal",
                "precision": precision,
                "scale": scale,
            }
        if kind in _CONNECT_PRIMITIVES:
            return _named_primitive(schema) if name else _CONNECT_PRIMITIVES[kind]
        if kind == "array":
            return {"type": "array", "items": self.convert(schema.get("items"))}
        if kind == "map":
            keys, values = schema.get("keys"), schema.get("values")
            if (
                isinstance(keys, Mapping)
                and keys.get("type") == "string"
                and not keys.get("optional")
            ):
                return {"type": "map", "values": self.convert(values)}
            return {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": self._struct_name(None),
                    "namespace": "io.confluent.connect.avro",
                    "fields": [
                        {"name": "key", "type": self.convert(keys)},
                        {"name": "value", "type": self.convert(values)},
                    ],
                },
            }
        if kind == "struct":
            fields = schema.get("fields")
            if not isinstance(fields, list):
                raise ValueError("a Connect struct schema needs a 'fields' list")
            if name in self.defined:
                return name
            record: dict[str, Any] = {"type": "record"}
            record.update(_split_name(name) if name else {})
            if name:
                self.defined.add(name)
            else:
                record["name"] = self._struct_name(None)
                record["namespace"] = "io.confluent.connect.avro"
            record["fields"] = [self._field(f) for f in fields]
            return record
        raise ValueError(
            f"Connect schema type {kind!r} is not known; allowed: "
            + ", ".join([*_CONNECT_PRIMITIVES, "array", "map", "struct"])
        )

    def _struct_name(self, _: str | None) -> str:
        self.structs += 1
        return "ConnectDefault" if self.structs == 1 else f"ConnectDefault{self.structs}"

    def _field(self, spec: Any) -> dict[str, Any]:
        if not isinstance(spec, Mapping) or "field" not in spec:
            raise ValueError(f"a Connect struct field needs a 'field' name, got {spec!r}")
        out: dict[str, Any] = {"name": spec["field"], "type": self.convert(spec)}
        if spec.get("optional"):
            out["default"] = None
        elif "default" in spec:
            out["default"] = spec["default"]
        return out


def _named_primitive(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A primitive with a Connect name (Debezium's ``io.debezium.time.Timestamp``, ``…Enum``):
    the Avro primitive with the name, version and parameters kept as AvroData keeps them."""
    out: dict[str, Any] = {"type": _CONNECT_PRIMITIVES[schema["type"]]}
    if schema.get("version") is not None:
        out["connect.version"] = schema["version"]
    if schema.get("parameters"):
        out["connect.parameters"] = dict(schema["parameters"])
    out["connect.name"] = schema["name"]
    return out


def _split_name(full: str) -> dict[str, str]:
    namespace, _, name = full.rpartition(".")
    return {"name": name, "namespace": namespace} if namespace else {"name": name}


def avro_datum_from_connect(schema: Any, payload: Any) -> Any:
    """Read a JsonConverter payload into the Avro shape of :func:`avro_schema_from_connect`."""
    return _from_connect(schema, payload, _records(schema, {}))


def _records(schema: Any, found: dict[str, Any]) -> dict[str, Any]:
    """The named records of ``schema`` by full name (what a reference by name stands for)."""
    if isinstance(schema, list):
        for branch in schema:
            _records(branch, found)
    elif isinstance(schema, Mapping):
        if schema.get("type") == "record":
            space, name = schema.get("namespace"), schema["name"]
            found[f"{space}.{name}" if space else name] = schema
            for spec in schema["fields"]:
                _records(spec["type"], found)
        for inner in ("items", "values"):
            if inner in schema:
                _records(schema[inner], found)
    return found


def _from_connect(schema: Any, value: Any, named: Mapping[str, Any]) -> Any:
    if value is None:
        return None
    if isinstance(schema, list):  # ["null", T]
        return _from_connect(schema[1], value, named)
    if isinstance(schema, str):
        if schema in named:
            return _from_connect(named[schema], value, named)
        if schema == "bytes":
            return base64.b64decode(value) if isinstance(value, str) else value
        return value
    kind, logical = schema.get("type"), schema.get("logicalType")
    if logical == "decimal":
        unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
        return decimal.Decimal(unscaled).scaleb(-schema.get("scale", 0))
    if kind == "record":
        return {
            f["name"]: _from_connect(f["type"], value.get(f["name"]), named)
            for f in schema["fields"]
        }
    if kind == "array":
        items = schema["items"]
        pairs = isinstance(value, list) and all(isinstance(v, list) and len(v) == 2 for v in value)
        if isinstance(items, dict) and items.get("type") == "record" and pairs:
            kt, vt = (f["type"] for f in items["fields"])
            return [
                {"key": _from_connect(kt, k, named), "value": _from_connect(vt, v, named)}
                for k, v in value
            ]
        return [_from_connect(items, v, named) for v in value]
    if kind == "map":
        return {k: _from_connect(schema["values"], v, named) for k, v in value.items()}
    if kind == "bytes":
        return _from_connect("bytes", value, named)
    return value


__all__ = ["avro_datum_from_connect", "avro_schema_from_connect"]
