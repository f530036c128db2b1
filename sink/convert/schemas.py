"""Value schemas: an Avro schema with the identity the sink needs to compare and order it.

Every converter that knows a schema (Avro from a registry, Connect's JSON envelope, the fixed
``string`` and ``bytes`` of the String and ByteArray converters) hands the sink a
:class:`ValueSchema`. Two schemas are *the same* when their JSON is equal after key sorting
(not Avro's parsing canonical form, which drops logical types and defaults); *newer* is decided
by :attr:`ValueSchema.version`.

>>> s = ValueSchema.from_text('{"type": "record", "name": "r", "fields": [{"name": "f1", '
...                           '"type": "string"}]}', schema_id=7)
>>> s.name, s.id, s.version
('r', 7, 7)
>>> s.same_as(ValueSchema.from_json(s.json))
True
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from blockgz.errors import BadRecordError


@dataclass(frozen=True, eq=False)
class ValueSchema:
    """An Avro schema as the sink uses it.

    ``id`` is the registry's schema id (``None`` for schemas that do not come from a registry);
    ``version`` orders schemas for ``schema.compatibility`` — the registry id (ids grow as
    schemas are registered, so a newer schema has a larger id) or Connect's ``version``.
    """

    json: Any
    id: int | None = None
    version: int | None = None
    parsed: Any = field(repr=False, default=None)
    key: str = field(repr=False, default="")

    @classmethod
    def from_json(
        cls, schema: Any, *, schema_id: int | None = None, version: int | None = None
    ) -> ValueSchema:
        """Parse an Avro schema (a JSON-like value); a bad one raises ``ValueError``."""
        try:
            parsed = fastavro.parse_schema(schema)
        except (SchemaParseException, UnknownType, TypeError, KeyError, ValueError) as exc:
            raise ValueError(f"not a valid Avro schema: {exc}") from exc
        return cls(
            json=schema,
            id=schema_id,
            version=schema_id if version is None else version,
            parsed=parsed,
            key=json.dumps(schema, sort_keys=True, separators=(",", ":")),
        )

    @classmethod
    def from_text(cls, text: str, *, schema_id: int | None = None) -> ValueSchema:
        """Parse an Avro schema given as JSON text (as a registry stores it)."""
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"not a valid Avro schema: the text is not JSON ({exc})") from exc
        return cls.from_json(doc, schema_id=schema_id)

    @property
    def name(self) -> str:
        """The full name of a named schema, else its type (``string``, ``bytes``, ...)."""
        doc = self.json
        if isinstance(doc, dict):
            name = doc.get("name")
            if name:
                namespace = doc.get("namespace")
                return name if not namespace or "." in name else f"{namespace}.{name}"
            return str(doc.get("type"))
        return str(doc)

    @property
    def label(self) -> str:
        """How errors name it: ``schema id 3`` or ``schema 'r'``."""
        return f"schema id {self.id}" if self.id is not None else f"schema {self.name!r}"

    def same_as(self, other: ValueSchema | None) -> bool:
        return other is not None and (self is other or self.key == other.key)

    def text(self) -> str:
        """The schema as compact JSON text."""
        return json.dumps(self.json, separators=(",", ":"))

    def project(self, datum: Any, target: ValueSchema, record=None) -> Any:
        """``datum`` (written with this schema) read with ``target``: Avro schema resolution,
        defaults included. Incompatible schemas raise :class:`BadRecordError` naming both."""
        buffer = io.BytesIO()
        try:
            fastavro.schemaless_writer(buffer, self.parsed, datum)
            buffer.seek(0)
            return fastavro.schemaless_reader(buffer, self.parsed, target.parsed)
        except Exception as exc:  # fastavro raises several types for unresolvable schemas
            message = (
                f"cannot project a record of {self.label} to {target.label} "
                f"({type(exc).__name__}: {exc}); the schemas are not compatible in the "
                "direction schema.compatibility needs"
            )
            if record is not None:
                raise record.fail(message) from exc
            raise BadRecordError(message) from exc


#: The fixed schemas of Connect's String and ByteArray converters.
STRING_SCHEMA = ValueSchema.from_json("string")
BYTES_SCHEMA = ValueSchema.from_json("bytes")
