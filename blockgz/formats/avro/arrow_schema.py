"""Avro schemas as Arrow types: the one mapping the Parquet writer's columns and the reader's
typed tables share.

As Spark's ``from_avro`` maps them: records are structs, enums strings, fixed and bytes
binary, maps have string keys, ``timestamp-millis``/``-micros`` are UTC timestamps, ``date`` a
date, ``time-millis``/``-micros`` times, ``decimal`` a decimal, ``uuid`` a string. A union with
``null`` is a nullable type; unions of several non-null types have no single Arrow type and are
refused, naming the field.

Two users want two things around that mapping, so an :class:`AvroArrow` says which:

* the error a refused schema raises and what the message says is missing (the reader: a
  :class:`~blockgz.errors.ConfigError`, "no Arrow type"; the Parquet writer: a
  :class:`~blockgz.errors.BadRecordError` pointing at ``format.class=avro``);
* whether a struct field is nullable exactly when its Avro type allows ``null`` (as
  parquet-avro writes columns ``REQUIRED``/``OPTIONAL``), or always (as Spark reads them).

>>> schema = {"type": "record", "name": "R", "fields": [
...     {"name": "id", "type": "long"},
...     {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]}]}
>>> str(AvroArrow().arrow_type(schema))
'struct<id: int64, at: timestamp[ms, tz=UTC]>'
>>> str(AvroArrow(exact_nullability=True).arrow_type(schema))
'struct<id: int64 not null, at: timestamp[ms, tz=UTC]>'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from blockgz.errors import ConfigError


@dataclass(frozen=True)
class AvroArrow:
    """The Avro → Arrow mapping, with the error it raises and its rule for nullable fields.

    >>> AvroArrow().arrow_type({"type": "record", "name": "U", "fields": [
    ...     {"name": "u", "type": ["int", "string"]}]})
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: value.u: an Avro union of 2 non-null types has no Arrow type
    """

    #: The exception a schema without an Arrow type raises.
    error: type[Exception] = ConfigError
    #: What the union's refusal says it has no ("has no {refusal}").
    union_refusal: str = "Arrow type"
    #: A struct field is nullable only when its type allows ``null`` (else: always).
    exact_nullability: bool = False

    def arrow_type(self, schema: Any, where: str = "value") -> Any:
        """The Arrow type of values of the Avro ``schema`` (parsed JSON)."""
        return self._arrow(schema, where, {})

    def typed(self, schema: Any, where: str, named: dict[str, Any]) -> tuple[Any, bool]:
        """``(Arrow type, nullable)`` of the Avro ``schema``, with the named types defined so
        far in ``named`` (and the ones it defines added): nullable when it is ``null`` or a
        union with ``null``."""
        if isinstance(schema, list):
            branch = self._only_branch(schema, where)
            return self._arrow(branch, where, named), "null" in schema
        return self._arrow(schema, where, named), schema == "null"

    def _only_branch(self, union: list[Any], where: str) -> Any:
        branches = [b for b in union if b != "null"]
        if len(branches) != 1:
            raise self.error(
                f"{where}: an Avro union of {len(branches)} non-null types has no "
                f"{self.union_refusal}"
            )
        return branches[0]

    def _field(self, field: dict[str, Any], where: str, named: dict[str, Any]) -> Any:
        import pyarrow as pa

        name = field["name"]
        arrow, nullable = self.typed(field["type"], f"{where}.{name}", named)
        return pa.field(name, arrow, nullable=nullable or not self.exact_nullability)

    def _arrow(self, schema: Any, where: str, named: dict[str, Any]) -> Any:
        import pyarrow as pa

        primitives = {
            "null": pa.null(),
            "boolean": pa.bool_(),
            "int": pa.int32(),
            "long": pa.int64(),
            "float": pa.float32(),
            "double": pa.float64(),
            "bytes": pa.binary(),
            "string": pa.string(),
        }
        if isinstance(schema, str):
            if schema in primitives:
                return primitives[schema]
            if schema in named:
                return named[schema]
            raise self.error(f"{where}: Avro type {schema!r} is not known here")
        if isinstance(schema, list):
            return self._arrow(self._only_branch(schema, where), where, named)
        kind, logical = schema.get("type"), schema.get("logicalType")
        logical_types = {
            "timestamp-millis": pa.timestamp("ms", tz="UTC"),
            "timestamp-micros": pa.timestamp("us", tz="UTC"),
            "date": pa.date32(),
            "time-millis": pa.time32("ms"),
            "time-micros": pa.time64("us"),
            "uuid": pa.string(),
        }
        if logical in logical_types:
            return logical_types[logical]
        if logical == "decimal":
            return pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0)))
        if kind == "record":
            found = pa.struct([self._field(f, where, named) for f in schema["fields"]])
        elif kind in ("enum", "fixed"):
            found = pa.string() if kind == "enum" else pa.binary()
        elif kind == "array":
            return pa.list_(self._arrow(schema["items"], f"{where}[]", named))
        elif kind == "map":
            return pa.map_(pa.string(), self._arrow(schema["values"], f"{where}{{}}", named))
        else:
            return self._arrow(kind, where, named)
        name, namespace = schema["name"], schema.get("namespace")
        named[name] = found
        if namespace and "." not in name:
            named[f"{namespace}.{name}"] = found
        return found
