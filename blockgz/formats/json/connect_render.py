"""Avro data out as Connect's JSON: what JsonFormat writes for values a converter decoded.

(Moved here from ``blockgz.sink.convert.connect_json``: the JSON format renders with it, and
the formats cannot import the sink.)

:func:`render_json` writes an Avro datum the way Confluent's JsonFormat writes a Connect
record (JsonConverter with ``schemas.enable=false``): bytes as base64 text, timestamps as epoch
milliseconds, dates as days since the epoch, decimals as base64 of the unscaled value or, with
``json.decimal.format=NUMERIC``, as a number; a union other than ``[null, T]`` as an object
with one member per branch, only the chosen one non-null (Connect's Union struct).

>>> schema = {"type": "record", "name": "r", "fields": [{"name": "id", "type": "long"},
...           {"name": "tag", "type": ["null", "bytes"]}]}
>>> render_json(schema, {"id": 7, "tag": b"\\x00\\x01"})
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
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DAY = dt.date(1970, 1, 1)


# -- Avro datum -> Connect's JSON ----------------------------------------------------------------
def render_json(schema: Any, datum: Any, decimal_format: str = "BASE64") -> bytes:
    """One line of JSON for ``datum`` of Avro ``schema`` (the schema as JSON, not parsed)."""
    return orjson.dumps(_Renderer(decimal_format == "NUMERIC", schema).value(schema, datum))


_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


class _Renderer:
    def __init__(self, numeric_decimals: bool, root: Any = None):
        self.numeric = numeric_decimals
        self.named: dict[str, Any] = {}
        self.root = root
        self.learned = False

    def value(self, schema: Any, datum: Any, namespace: str = "") -> Any:
        if isinstance(schema, list):
            return self.union(schema, datum, namespace)
        if isinstance(schema, str):
            if schema in self.named:
                return self.value(self.named[schema], datum, namespace)
            qualified = f"{namespace}.{schema}" if namespace else schema
            if qualified in self.named:
                return self.value(self.named[qualified], datum, namespace)
            if schema not in _PRIMITIVES and not self.learned:
                # A reference to a type defined where no datum was rendered yet (Debezium's
                # after names the Value struct its null before defined): learn every name.
                self.learn(self.root, "")
                return self.value(schema, datum, namespace)
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

    def learn(self, schema: Any, namespace: str) -> None:
        """Remember every named type of ``schema`` (once per rendering, when needed)."""
        self.learned = True
        if isinstance(schema, list):
            for branch in schema:
                self.learn(branch, namespace)
        elif isinstance(schema, Mapping):
            kind = schema.get("type")
            if kind in ("record", "enum", "fixed", "error"):
                namespace = self.remember(schema, namespace)
            for field in schema.get("fields", ()) if kind in ("record", "error") else ():
                self.learn(field["type"], namespace)
            for inner in ("items", "values"):
                if inner in schema:
                    self.learn(schema[inner], namespace)

    def remember(self, schema: Mapping[str, Any], namespace: str) -> str:
        name = schema.get("name", "")
        space = schema.get("namespace", namespace) if "." not in name else name.rpartition(".")[0]
        self.named[name] = schema
        self.named[f"{space}.{name}" if space and "." not in name else name] = schema
        return space or ""

    def primitive(self, kind: str, datum: Any) -> Any:
        if datum is None:
            return None
        if kind == "bytes" and isinstance(datum, (bytes, bytearray, memoryview)):
            return base64.b64encode(datum).decode("ascii")
        return datum  # a schemaless JSON value (JsonConverter, schemas.enable=false) as it is

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
