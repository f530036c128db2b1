"""A record as Connect's transforms see it, and the Connect schema helpers they share.

>>> s = struct_schema([field("a", "int32"), field("b", "string", optional=True)], name="r")
>>> [f["field"] for f in s["fields"]], find_field(s, "b")["optional"]
(['a', 'b'], True)
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from blockgz.errors import BadRecordError

#: Connect's primitive schema types.
PRIMITIVES = (
    "int8",
    "int16",
    "int32",
    "int64",
    "float32",
    "float64",
    "boolean",
    "string",
    "bytes",
)


class Rejected(BadRecordError):
    """A transform refused a record (where Connect throws a ``DataException``)."""


@dataclass(slots=True)
class Header:
    """One Connect header: a key, a value and its schema (``None``: schemaless). Treated as
    immutable (not frozen: a frozen dataclass is five times slower to make)."""

    key: str
    value: Any
    schema: Any = None


@dataclass(slots=True)
class Record:
    """A Connect record (see the package docstring for what each field holds). Transforms
    never change one: they make a new one with :meth:`new` (it is not frozen only because a
    frozen dataclass is five times slower to make, once per transform and record)."""

    topic: str
    partition: int | None
    key: Any
    key_schema: Any
    value: Any
    value_schema: Any
    timestamp: int | None
    headers: tuple[Header, ...] = ()
    #: The Kafka offset (a sink record's ``kafkaOffset``; ``None`` when not known).
    offset: int | None = None

    def new(self, **changes: Any) -> Record:
        """A copy with ``changes`` (Connect's ``newRecord``)."""
        out = self.copy()
        for name, value in changes.items():
            setattr(out, name, value)
        return out

    def copy(self) -> Record:
        """A shallow copy (faster than ``dataclasses.replace``)."""
        return Record(
            self.topic,
            self.partition,
            self.key,
            self.key_schema,
            self.value,
            self.value_schema,
            self.timestamp,
            self.headers,
            self.offset,
        )


def field(name: str, type_: str | dict[str, Any], optional: bool = False) -> dict[str, Any]:
    """A struct field in JsonConverter's form, from a type name or a schema."""
    schema = {"type": type_, "optional": optional} if isinstance(type_, str) else dict(type_)
    return {**schema, "field": name}


def struct_schema(
    fields: list[dict[str, Any]], name: str | None = None, optional: bool = False
) -> dict[str, Any]:
    """A struct schema in JsonConverter's form."""
    schema: dict[str, Any] = {"type": "struct", "fields": fields, "optional": optional}
    if name is not None:
        schema["name"] = name
    return schema


def find_field(schema: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The field ``name`` of a struct schema, or ``None``."""
    for spec in schema.get("fields", ()):
        if spec["field"] == name:
            return spec
    return None


def field_schema(spec: dict[str, Any]) -> dict[str, Any]:
    """A field's schema without its ``field`` name."""
    return {k: v for k, v in spec.items() if k != "field"}


def optional_copy(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema made optional (Connect's ``SchemaUtil.copySchemaBasics`` + ``optional()``)."""
    out = copy.deepcopy(schema)
    out["optional"] = True
    return out


def is_struct(schema: Any) -> bool:
    """Whether a schema is a Connect struct."""
    return isinstance(schema, dict) and schema.get("type") == "struct"


class Side:
    """The key or the value of a record (the ``$Key``/``$Value`` variants of a transform)."""

    def __init__(self, which: str):
        self.which = which

    def schema(self, record: Record) -> Any:
        """The side's schema."""
        return record.key_schema if self.which == "key" else record.value_schema

    def value(self, record: Record) -> Any:
        """The side's value."""
        return record.key if self.which == "key" else record.value

    def set(self, record: Record, schema: Any, value: Any) -> Record:
        """A copy of ``record`` with this side replaced."""
        out = record.copy()
        if self.which == "key":
            out.key_schema, out.key = schema, value
        else:
            out.value_schema, out.value = schema, value
        return out


KEY = Side("key")
VALUE = Side("value")


def sided(name: str, factory: Any) -> dict[str, Any]:
    """``name$Key`` and ``name$Value`` entries of a registry for a ``factory(opts, side)``."""
    return {
        f"{name}$Key": lambda opts: factory(opts, KEY),
        f"{name}$Value": lambda opts: factory(opts, VALUE),
    }


def require_map(value: Any, purpose: str) -> dict[str, Any]:
    """A schemaless map, or :class:`Rejected` as Connect's ``requireMap``."""
    if not isinstance(value, dict):
        found = "null" if value is None else type(value).__name__
        raise Rejected(
            f"only maps are supported in absence of schema for [{purpose}], found: {found}"
        )
    return value


def require_struct(schema: Any, value: Any, purpose: str) -> dict[str, Any]:
    """A struct's value, or :class:`Rejected` as Connect's ``requireStruct``."""
    if not is_struct(schema) or not isinstance(value, dict):
        raise Rejected(f"only structs are supported for [{purpose}]")
    return value


def copy_basics(schema: dict[str, Any], fields: list[dict[str, Any]]) -> dict[str, Any]:
    """A struct schema with ``schema``'s name, version, doc, parameters and optionality."""
    out = {k: v for k, v in schema.items() if k not in ("fields", "default")}
    out["fields"] = fields
    return out
