"""A record as Connect's transforms see it, and the Connect schema helpers they share.

>>> s = struct_schema([field("a", "int32"), field("b", "string", optional=True)], name="r")
>>> [f["field"] for f in s["fields"]], find_field(s, "b")["optional"]
(['a', 'b'], True)
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
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


@dataclass(frozen=True, slots=True)
class Header:
    """One Connect header: a key, a value and its schema (``None``: schemaless)."""

    key: str
    value: Any
    schema: Any = None


@dataclass(frozen=True, slots=True)
class Record:
    """A Connect record (see the package docstring for what each field holds)."""

    topic: str
    partition: int | None
    key: Any
    key_schema: Any
    value: Any
    value_schema: Any
    timestamp: int | None
    headers: tuple[Header, ...] = ()

    def new(self, **changes: Any) -> Record:
        """A copy with ``changes`` (Connect's ``newRecord``)."""
        return replace(self, **changes)


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
