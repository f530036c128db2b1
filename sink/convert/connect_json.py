"""Connect's JSON, both ways: its schema envelope into Avro, and Avro data out as JSON.

* :func:`avro_schema_from_connect` turns the ``schema`` half of JsonConverter's
  ``{"schema": ..., "payload": ...}`` envelope into an Avro schema, as Confluent's AvroData
  does (structs become records named ``ConnectDefault``, ``ConnectDefault2``, ...; optional
  fields become ``["null", T]`` unions defaulting to null; Connect's Timestamp, Date, Time and
  Decimal become Avro logical types), and :func:`avro_datum_from_connect` reads the payload
  into that schema (base64 text back into bytes, decimals into :class:`~decimal.Decimal`).
* :func:`render_json` writes an Avro datum the way Confluent's JsonFormat writes a Connect
  record (JsonConverter with ``schemas.enable=false``): bytes as base64 text, timestamps as epoch
  milliseconds, dates as days since the epoch, decimals as base64 of the unscaled value or, with
  ``json.decimal.format=NUMERIC``, as a number; a union other than ``[null, T]`` as an object
  with one member per branch, only the chosen one non-null (Connect's Union struct).

>>> schema = {"type": "struct", "fields": [{"field": "id", "type": "int64"},
...           {"field": "tag", "type": "bytes", "optional": True}]}
>>> avro = avro_schema_from_connect(schema)
>>> [f["type"] for f in avro["fields"]]
['long', ['null', 'bytes']]
>>> datum = avro_datum_from_connect(avro, {"id": 7, "tag": "AAE="})
>>> datum
{'id': 7, 'tag': b'\\x00\\x01'}
>>> render_json(avro, datum)
b'{"id":7,"tag":"AAE="}'
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import uuid
from collections.abc import Mapping
from typing import Any

import orjson

DECIMAL_FORMATS = ("BASE64", "NUMERIC")

_CONNECT_PRIMITIVES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "long",
    "float32": "float",
    "float64": "double",
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
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DAY = dt.date(1970, 1, 1)


# -- Connect schema -> Avro ----------------------------------------------------------------------
def avro_schema_from_connect(schema: Mapping[str, Any]) -> Any:
    """The Avro schema AvroData makes of a Connect JSON schema (raises ``ValueError``)."""
    return _ConnectToAvro().convert(schema, top=True)


class _ConnectToAvro:
    def __init__(self) -> None:
        self.structs = 0

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
            return _CONNECT_PRIMITIVES[kind]
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
            record: dict[str, Any] = {"type": "record"}
            record.update(_split_name(name) if name else {})
            if not name:
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


def _split_name(full: str) -> dict[str, str]:
    namespace, _, name = full.rpartition(".")
    return {"name": name, "namespace": namespace} if namespace else {"name": name}


def avro_datum_from_connect(schema: Any, payload: Any) -> Any:
    """Read a JsonConverter payload into the Avro shape of :func:`avro_schema_from_connect`."""
    return _from_connect(schema, payload)


def _from_connect(schema: Any, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(schema, list):  # ["null", T]
        return _from_connect(schema[1], value)
    if isinstance(schema, str):
        if schema == "bytes":
            return base64.b64decode(value) if isinstance(value, str) else value
        return value
    kind, logical = schema.get("type"), schema.get("logicalType")
    if logical == "decimal":
        unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
        return decimal.Decimal(unscaled).scaleb(-schema.get("scale", 0))
    if kind == "record":
        return {f["name"]: _from_connect(f["type"], value.get(f["name"])) for f in schema["fields"]}
    if kind == "array":
        items = schema["items"]
        pairs = isinstance(value, list) and all(isinstance(v, list) and len(v) == 2 for v in value)
        if isinstance(items, dict) and items.get("type") == "record" and pairs:
            kt, vt = (f["type"] for f in items["fields"])
            return [{"key": _from_connect(kt, k), "value": _from_connect(vt, v)} for k, v in value]
        return [_from_connect(items, v) for v in value]
    if kind == "map":
        return {k: _from_connect(schema["values"], v) for k, v in value.items()}
    return value


# -- Avro datum -> Connect's JSON ----------------------------------------------------------------
def render_json(schema: Any, datum: Any, decimal_format: str = "BASE64") -> bytes:
    """One line of JSON for ``datum`` of Avro ``schema`` (the schema as JSON, not parsed)."""
    return orjson.dumps(_Renderer(decimal_format == "NUMERIC").value(schema, datum))


class _Renderer:
    def __init__(self, numeric_decimals: bool):
        self.numeric = numeric_decimals
        self.named: dict[str, Any] = {}

    def value(self, schema: Any, datum: Any, namespace: str = "") -> Any:
        if isinstance(schema, list):
            return self.union(schema, datum, namespace)
        if isinstance(schema, str):
            if schema in self.named:
                return self.value(self.named[schema], datum, namespace)
            qualified = f"{namespace}.{schema}" if namespace else schema
            if qualified in self.named:
                return self.value(self.named[qualified], datum, namespace)
            return self.primitive(schema, datum)
        kind = schema.get("type")
        logical = schema.get("logicalType")
        if logical is not None and datum is not None:
            rendered = self.logical(logical, datum, schema.get("scale", 0))
            if rendered is not _NOT_LOGICAL:
                return rendered
        if kind in ("record", "enum", "fixed", "error"):
            namespace = self.remember(schema, namespace)
        if kind in ("record", "error"):
            if datum is None:
                return None
            return {
                f["name"]: self.value(f["type"], datum.get(f["name"]), namespace)
                for f in schema["fields"]
            }
        if kind == "array":
            return [self.value(schema["items"], v, namespace) for v in datum]
        if kind == "map":
            return {k: self.value(schema["values"], v, namespace) for k, v in datum.items()}
        if kind == "enum":
            return datum
        if kind == "fixed":
            return base64.b64encode(datum).decode("ascii")
        return self.value(kind, datum, namespace)

    def remember(self, schema: Mapping[str, Any], namespace: str) -> str:
        name = schema.get("name", "")
        space = schema.get("namespace", namespace) if "." not in name else name.rpartition(".")[0]
        self.named[name] = schema
        self.named[f"{space}.{name}" if space and "." not in name else name] = schema
        return space or ""

    def primitive(self, kind: str, datum: Any) -> Any:
        if datum is None:
            return None
        if kind == "bytes":
            return base64.b64encode(datum).decode("ascii")
        return datum

    def logical(self, logical: str, datum: Any, scale: int) -> Any:
        if logical == "decimal" and isinstance(datum, decimal.Decimal):
            if self.numeric:
                return orjson.Fragment(str(datum))
            unscaled = int(datum.scaleb(scale))
            length = max(1, (unscaled.bit_length() + 8) // 8)
            return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()
        if isinstance(datum, dt.datetime):
            delta = datum - _EPOCH if datum.tzinfo else datum - _EPOCH.replace(tzinfo=None)
            micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
            return micros if logical.endswith("micros") else micros // 1000
        if isinstance(datum, dt.date):
            return (datum - _EPOCH_DAY).days
        if isinstance(datum, dt.time):
            micros = ((datum.hour * 60 + datum.minute) * 60 + datum.second) * 1_000_000
            micros += datum.microsecond
            return micros if logical.endswith("micros") else micros // 1000
        if isinstance(datum, uuid.UUID):
            return str(datum)
        return _NOT_LOGICAL

    def union(self, branches: list[Any], datum: Any, namespace: str) -> Any:
        others = [b for b in branches if b != "null"]
        if len(others) == 1 and len(branches) == 2:
            return None if datum is None else self.value(others[0], datum, namespace)
        if datum is None:
            return None
        chosen = self.branch(others, datum, namespace)
        out: dict[str, Any] = {}
        for branch in others:
            name = self.branch_name(branch)
            out[name] = self.value(branch, datum, namespace) if branch is chosen else None
        return out

    def branch(self, branches: list[Any], datum: Any, namespace: str) -> Any:
        for branch in branches:
            if _matches(self.resolve(branch, namespace), datum):
                return branch
        return branches[0]

    def resolve(self, schema: Any, namespace: str) -> Any:
        if isinstance(schema, str):
            qualified = f"{namespace}.{schema}" if namespace else schema
            return self.named.get(schema) or self.named.get(qualified) or schema
        return schema

    @staticmethod
    def branch_name(branch: Any) -> str:
        if isinstance(branch, str):
            return branch.rpartition(".")[2]
        return branch.get("name") or branch.get("type")


_NOT_LOGICAL = object()

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "boolean": (bool,),
    "int": (int,),
    "long": (int,),
    "float": (float, int),
    "double": (float, int),
    "string": (str,),
    "bytes": (bytes,),
    "array": (list,),
    "map": (dict,),
    "record": (dict,),
    "error": (dict,),
    "enum": (str,),
    "fixed": (bytes,),
}


def _matches(schema: Any, datum: Any) -> bool:
    """Whether ``datum`` (as fastavro decodes it) belongs to this union branch."""
    kind = schema if isinstance(schema, str) else schema.get("type")
    logical = None if isinstance(schema, str) else schema.get("logicalType")
    if logical == "decimal":
        return isinstance(datum, decimal.Decimal)
    if logical in ("timestamp-millis", "timestamp-micros"):
        return isinstance(datum, dt.datetime)
    if logical == "date":
        return isinstance(datum, dt.date) and not isinstance(datum, dt.datetime)
    if logical in ("time-millis", "time-micros"):
        return isinstance(datum, dt.time)
    if isinstance(datum, bool):
        return kind == "boolean"
    if kind == "enum":
        return isinstance(datum, str) and datum in schema.get("symbols", ())
    if kind in ("record", "error") and isinstance(datum, dict):
        return all(f["name"] in datum or "default" in f for f in schema.get("fields", ()))
    return isinstance(datum, _PY_TYPES.get(kind, ()))
