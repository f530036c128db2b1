"""Kafka Connect's value converters: what the bytes of a Kafka value mean.

``value.converter`` takes Connect's class names (or the short names in brackets):

* ``io.confluent.connect.avro.AvroConverter`` (``avro``): Confluent's wire format — magic byte
  0, a 4-byte schema id, Avro binary (:mod:`blockgz.wire`) — with the schema fetched from
  ``value.converter.schema.registry.url`` once per id and process.
* ``org.apache.kafka.connect.json.JsonConverter`` (``json``): JSON; with
  ``value.converter.schemas.enable`` (default ``true``, as in Connect) each value is a
  ``{"schema": ..., "payload": ...}`` envelope whose schema becomes an Avro schema.
* ``org.apache.kafka.connect.storage.StringConverter`` (``string``): UTF-8 text, schema
  ``string``.
* ``org.apache.kafka.connect.converters.ByteArrayConverter`` (``bytearray``): the bytes,
  schema ``bytes``.

With no ``value.converter`` the sink takes values as they are (JSON for JsonFormat, raw bytes
for ByteArrayFormat), as blockgz always has.

>>> from blockgz.sink.records import KafkaRecord
>>> record = KafkaRecord("t", 0, 5, None, None, b"caf\\xc3\\xa9")
>>> StringConverter().decode(record)
>>> record.json(), record.schema.name
('café', 'string')
"""

from __future__ import annotations

import io
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fastavro
import orjson

from blockgz.errors import ConfigError, RegistryError, UnknownSchemaError
from blockgz.option_defs import OptionDef, OptionSet
from blockgz.options import Options, as_options
from blockgz.sink.convert.connect_json import avro_datum_from_connect, avro_schema_from_connect
from blockgz.sink.convert.schemas import BYTES_SCHEMA, STRING_SCHEMA, ValueSchema
from blockgz.sink.convert.schemas_by_id import RegistrySettings, SchemasById, schemas_from
from blockgz.sink.records import KafkaRecord, parse_json
from blockgz.wire import HEADER_BYTES, schema_id_of

AVRO = "avro"
JSON = "json"
STRING = "string"
BYTEARRAY = "bytearray"

#: Connect's class names and blockgz's short names, to the converter kind.
CONVERTER_CLASSES = {
    "io.confluent.connect.avro.AvroConverter": AVRO,
    "org.apache.kafka.connect.json.JsonConverter": JSON,
    "org.apache.kafka.connect.storage.StringConverter": STRING,
    "org.apache.kafka.connect.converters.ByteArrayConverter": BYTEARRAY,
    AVRO: AVRO,
    JSON: JSON,
    STRING: STRING,
    BYTEARRAY: BYTEARRAY,
}


class Converter(ABC):
    """Decodes a record's (non-null) value in place with :meth:`KafkaRecord.set_decoded`."""

    #: Whether decoded values carry a schema (what AvroFormat needs).
    has_schema = True

    @abstractmethod
    def decode(self, record: KafkaRecord) -> None: ...


class ByteArrayConverter(Converter):
    """The value's bytes, schema ``bytes``."""

    def decode(self, record: KafkaRecord) -> None:
        record.set_decoded(BYTES_SCHEMA, bytes(record.value or b""))


class StringConverter(Converter):
    """The value as text (``value.converter.encoding``, UTF-8 by default), schema ``string``."""

    def __init__(self, encoding: str = "utf-8"):
        self.encoding = encoding

    def decode(self, record: KafkaRecord) -> None:
        data = record.value or b""
        try:
            text = bytes(data).decode(self.encoding)
        except UnicodeDecodeError as exc:
            raise record.fail(f"value is not {self.encoding} text ({exc})") from exc
        record.set_decoded(STRING_SCHEMA, text)


class JsonConverter(Converter):
    """JSON values; with ``schemas`` the ``{"schema", "payload"}`` envelope of Connect."""

    def __init__(self, schemas: bool = True):
        self.schemas = schemas
        self.has_schema = schemas
        self._cache: dict[bytes, ValueSchema] = {}

    def decode(self, record: KafkaRecord) -> None:
        doc = parse_json(record.value or b"null", record)
        if not self.schemas:
            record.set_decoded(None, doc)
            return
        if not isinstance(doc, dict) or set(doc) != {"schema", "payload"}:
            raise record.fail(
                "value.converter.schemas.enable=true (JsonConverter's default) but the value is "
                'not a {"schema": ..., "payload": ...} envelope; set '
                "value.converter.schemas.enable=false for plain JSON"
            )
        schema = self._schema(doc["schema"], record)
        try:
            datum = avro_datum_from_connect(schema.json, doc["payload"])
        except (ValueError, TypeError, AttributeError) as exc:
            raise record.fail(f"the payload does not match its schema ({exc})") from exc
        record.set_decoded(schema, datum)

    def _schema(self, connect_schema: Any, record: KafkaRecord) -> ValueSchema:
        key = orjson.dumps(connect_schema, option=orjson.OPT_SORT_KEYS)
        found = self._cache.get(key)
        if found is None:
            try:
                avro = avro_schema_from_connect(connect_schema)
                version = (
                    connect_schema.get("version") if isinstance(connect_schema, dict) else None
                )
                found = ValueSchema.from_json(avro, version=version)
            except ValueError as exc:
                raise record.fail(f"the envelope's schema cannot be used: {exc}") from exc
            self._cache[key] = found
        return found


class AvroConverter(Converter):
    """Confluent's Avro wire format, schemas from a Schema Registry."""

    def __init__(self, registry: RegistrySettings, schemas: SchemasById | None = None):
        self.registry = registry
        self._schemas = schemas

    def decode(self, record: KafkaRecord) -> None:
        value = record.value or b""
        schema_id = schema_id_of(value)
        if schema_id is None:
            first = f"0x{value[0]:02x}" if value else "nothing"
            raise record.fail(
                f"value is not in Confluent's Avro wire format: it starts with {first}, expected "
                f"the magic byte 0x00 and a 4-byte schema id (value starts {bytes(value[:20])!r})"
            )
        if self._schemas is None:
            self._schemas = schemas_from(self.registry)
        try:
            schema = self._schemas.get(schema_id)
        except UnknownSchemaError as exc:
            raise record.fail(str(exc)) from exc
        except RegistryError as exc:
            raise RegistryError(
                str(exc), record=(record.topic, record.partition, record.offset)
            ) from exc
        buffer = io.BytesIO(value)
        buffer.seek(HEADER_BYTES)
        try:
            datum = fastavro.schemaless_reader(buffer, schema.parsed, None)
        except Exception as exc:  # fastavro raises EOFError, ValueError, ... on bad bytes
            raise record.fail(
                f"cannot decode the value with {schema.label} ({type(exc).__name__}: {exc})"
            ) from exc
        record.set_decoded(schema, datum)


def _converter_options(which: str) -> tuple[OptionDef, ...]:
    name = f"{which}.converter"
    what = "values" if which == "value" else "the keys written to `.keys` files"
    return (
        OptionDef(
            name,
            "text",
            "",
            f"how {what} are decoded: Connect's `io.confluent.connect.avro.AvroConverter`, "
            "`org.apache.kafka.connect.json.JsonConverter`, `…storage.StringConverter`, "
            "`…converters.ByteArrayConverter` (or `avro`, `json`, `string`, `bytearray`); "
            "none: as they are. See [Avro and converters](#avro-and-converters)",
            "sink",
            origin="connect",
            shown="none",
        ),
        OptionDef(
            f"{name}.",
            "text",
            "",
            "the converter's own settings (AvroConverter: its registry, "
            f"`{name}.schema.registry.url` and the registry options)",
            "sink",
            origin="connect",
            prefix=True,
        ),
        OptionDef(
            f"{name}.schemas.enable",
            "flag",
            True,
            'JSON values are Connect\'s `{"schema", "payload"}` envelopes: JSON output writes '
            "the payload, Avro output the payload in the schema's Avro form",
            "sink",
            origin="connect",
            shown="`true` with JsonConverter, else `false`",
            default_depends_on=name,
        ),
        OptionDef(
            f"{name}.encoding",
            "text",
            "UTF8",
            "StringConverter: the text's encoding",
            "sink",
            origin="connect",
        ),
    )


CONVERTER_OPTIONS = OptionSet(*_converter_options("value"), *_converter_options("key"))


@dataclass(frozen=True)
class ConverterSettings:
    """A validated ``value.converter`` (or ``key.converter``) and its options."""

    kind: str | None = None
    schemas_enable: bool = False
    encoding: str = "utf-8"
    registry: RegistrySettings | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any], which: str = "value") -> ConverterSettings:
        """Read ``<which>.converter`` and its ``<which>.converter.*`` options.

        >>> ConverterSettings.from_options({"value.converter": "StringConverter"})
        Traceback (most recent call last):
        ...
        blockgz.errors.ConfigError: value.converter: 'StringConverter' is not a converter \
blockgz can honour; allowed: io.confluent.connect.avro.AvroConverter, ...
        """
        opts: Options = as_options(options)
        name = f"{which}.converter"
        raw = CONVERTER_OPTIONS.read(opts, name)
        if not raw:
            schemas = CONVERTER_OPTIONS[f"{name}.schemas.enable"]
            return cls(schemas_enable=schemas.read(opts, default=False))
        kind = CONVERTER_CLASSES.get(raw) or CONVERTER_CLASSES.get(raw.lower())
        if kind is None:
            raise ConfigError(
                f"{name}: {raw!r} is not a converter blockgz can honour; allowed: "
                + ", ".join(CONVERTER_CLASSES)
            )
        registry = None
        if kind == AVRO:
            prefixed = {k: v for k, v in opts.items() if k.startswith(name + ".")}
            registry = RegistrySettings.from_options(prefixed, name)
        encoding = CONVERTER_OPTIONS.read(opts, f"{name}.encoding")
        try:
            "".encode(_python_encoding(encoding))
        except LookupError as exc:
            raise ConfigError(f"{name}.encoding: {encoding!r} is not a known encoding") from exc
        return cls(
            kind=kind,
            schemas_enable=CONVERTER_OPTIONS.read(opts, f"{name}.schemas.enable"),
            encoding=_python_encoding(encoding),
            registry=registry,
        )

    def build(self) -> Converter | None:
        """A converter (one per task), or ``None`` to take values as they are."""
        if self.kind == AVRO:
            assert self.registry is not None
            return AvroConverter(self.registry)
        if self.kind == JSON:
            return JsonConverter(self.schemas_enable)
        if self.kind == STRING:
            return StringConverter(self.encoding)
        if self.kind == BYTEARRAY:
            return ByteArrayConverter()
        return None

    def label(self, *, unwrap_payload: bool = False) -> str:
        """How the manifests name this converter (:func:`converter_label`)."""
        return converter_label(self.kind, self.schemas_enable, self.encoding, unwrap_payload)

    @property
    def has_schema(self) -> bool:
        """Whether values come with a schema (AvroFormat needs one)."""
        return self.kind in (AVRO, STRING, BYTEARRAY) or (self.kind == JSON and self.schemas_enable)


def _python_encoding(java_name: str) -> str:
    """Java's charset names (``UTF8``, ``UTF-16``, ``ISO-8859-1``) as Python's."""
    return {"UTF8": "utf-8", "UTF16": "utf-16"}.get(java_name.upper(), java_name)


def converter_label(
    kind: str | None, schemas_enable: bool = False, encoding: str = "utf-8", unwrap: bool = False
) -> str:
    """A converter as a file's manifest entry names it, so a restore knows what the stored
    values were in Kafka: ``none`` (the bytes as they were; ``none+payload`` when
    ``schemas.enable`` alone unwrapped Connect's envelope), ``avro``, ``json`` /
    ``json+schemas``, ``string:<encoding>``, ``bytearray``.

    >>> converter_label(None), converter_label(STRING, encoding="utf-16")
    ('none', 'string:utf-16')
    >>> converter_label(JSON, True), converter_label(None, True, unwrap=True)
    ('json+schemas', 'none+payload')
    """
    if kind is None:
        return "none+payload" if unwrap else "none"
    if kind == JSON:
        return "json+schemas" if schemas_enable else "json"
    if kind == STRING:
        return f"string:{encoding}"
    return kind
