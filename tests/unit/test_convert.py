"""Converters, schema policy and Connect's JSON rendering: pure logic, no servers.

The Avro converter is given its schemas directly (a :class:`SchemasById` stand-in holding
parsed schemas); the registry round trip is in ``tests/integration/test_avro_export.py``.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json

import fastavro
import orjson
import pytest

from blockgz.errors import BadRecordError, ConfigError, RegistryError, UnknownSchemaError
from blockgz.formats.json.connect_render import render_json
from blockgz.sink.convert.connect_json import avro_datum_from_connect, avro_schema_from_connect
from blockgz.sink.convert.converters import (
    AvroConverter,
    ByteArrayConverter,
    ConverterSettings,
    JsonConverter,
    StringConverter,
)
from blockgz.sink.convert.evolution import SchemaPolicy
from blockgz.sink.convert.schemas import ValueSchema
from blockgz.sink.convert.schemas_by_id import RegistrySettings
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings

V1 = {"type": "record", "name": "user", "fields": [{"name": "id", "type": "long"}]}
V2 = {
    "type": "record",
    "name": "user",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "email", "type": "string", "default": "unknown"},
    ],
}


class FixedSchemas:
    """Schemas by id without a registry (what ``SchemasById`` answers once it has fetched)."""

    def __init__(self, schemas: dict[int, dict], down: bool = False):
        self.schemas = {i: ValueSchema.from_json(s, schema_id=i) for i, s in schemas.items()}
        self.down = down
        self.asked: list[int] = []

    def get(self, schema_id: int) -> ValueSchema:
        self.asked.append(schema_id)
        if self.down:
            raise RegistryError("cannot reach the schema registry at http://127.0.0.1:1")
        if schema_id not in self.schemas:
            raise UnknownSchemaError(f"schema id {schema_id} is not in the registry")
        return self.schemas[schema_id]


def wire(schema_id: int, schema: dict, datum) -> bytes:
    out = io.BytesIO()
    out.write(b"\0" + schema_id.to_bytes(4, "big"))
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), datum)
    return out.getvalue()


def record(value: bytes | None, offset: int = 0) -> KafkaRecord:
    return KafkaRecord("t", 3, offset, 0, None, value)


REGISTRY = RegistrySettings("http://127.0.0.1:1")


# -- the Avro converter -----------------------------------------------------------------------
def test_avro_converter_decodes_confluent_wire_format():
    conv = AvroConverter(REGISTRY, FixedSchemas({7: V2}))
    r = record(wire(7, V2, {"id": 5, "email": "a@b"}))
    conv.decode(r)
    assert r.json() == {"id": 5, "email": "a@b"}
    assert r.schema.id == 7 and r.schema.name == "user"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (b'{"id": 5}', ["t-3@9", "wire format", "0x7b"]),
        (b"\0\0\0", ["t-3@9", "magic byte"]),
        (b"\0\0\0\0\x63" + b"\x02", ["t-3@9", "schema id 99"]),
        (b"\0\0\0\0\x07", ["t-3@9", "cannot decode", "schema id 7"]),
    ],
)
def test_avro_converter_names_the_record_and_the_reason(value, words):
    conv = AvroConverter(REGISTRY, FixedSchemas({7: V2}))
    with pytest.raises(BadRecordError) as info:
        conv.decode(record(value, offset=9))
    for word in words:
        assert word in str(info.value)


def test_registry_down_is_not_a_bad_record():
    conv = AvroConverter(REGISTRY, FixedSchemas({}, down=True))
    with pytest.raises(RegistryError) as info:
        conv.decode(record(wire(1, V1, {"id": 1}), offset=4))
    assert not isinstance(info.value, BadRecordError)
    assert str(info.value).startswith("t-3@4: cannot reach the schema registry")


def test_string_and_bytearray_converters():
    r = record("grüße".encode())
    StringConverter().decode(r)
    assert (r.json(), r.schema.name) == ("grüße", "string")
    with pytest.raises(BadRecordError, match="not utf-8 text"):
        StringConverter().decode(record(b"\xff\xfe"))
    r = record(b"\x00\xff")
    ByteArrayConverter().decode(r)
    assert (r.json(), r.schema.name) == (b"\x00\xff", "bytes")


# -- Connect's JSON envelope --------------------------------------------------------------------
ENVELOPE_SCHEMA = {
    "type": "struct",
    "name": "com.example.Order",
    "version": 2,
    "fields": [
        {"field": "id", "type": "int32"},
        {"field": "note", "type": "string", "optional": True},
        {"field": "blob", "type": "bytes"},
        {
            "field": "at",
            "type": "int64",
            "name": "org.apache.kafka.connect.data.Timestamp",
        },
        {
            "field": "price",
            "type": "bytes",
            "name": "org.apache.kafka.connect.data.Decimal",
            "parameters": {"scale": "2"},
        },
        {"field": "tags", "type": "map", "keys": {"type": "string"}, "values": {"type": "int8"}},
        {
            "field": "where",
            "type": "struct",
            "optional": True,
            "fields": [{"field": "x", "type": "float64"}],
        },
    ],
}
PAYLOAD = {
    "id": 1,
    "note": None,
    "blob": base64.b64encode(b"\x00\x01").decode(),
    "at": 1_700_000_000_123,
    "price": base64.b64encode((12345).to_bytes(2, "big", signed=True)).decode(),
    "tags": {"a": 1},
    "where": {"x": 1.5},
}


def test_json_converter_turns_the_envelope_into_avro():
    conv = JsonConverter(schemas=True)
    r = record(orjson.dumps({"schema": ENVELOPE_SCHEMA, "payload": PAYLOAD}))
    conv.decode(r)
    assert r.schema.name == "com.example.Order" and r.schema.version == 2
    datum = r.json()
    assert datum["blob"] == b"\x00\x01" and datum["price"] == decimal.Decimal("123.45")
    # The datum is valid for the schema: it round-trips through Avro binary.
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, r.schema.parsed, datum)
    buffer.seek(0)
    back = fastavro.schemaless_reader(buffer, r.schema.parsed)
    assert back["price"] == decimal.Decimal("123.45") and back["where"] == {"x": 1.5}
    # ... and rendering it as JSON gives the payload back, as JsonFormat would write it.
    assert json.loads(render_json(r.schema.json, back)) == PAYLOAD


def test_json_converter_refuses_a_bare_value_when_schemas_are_enabled():
    with pytest.raises(BadRecordError, match=r"schemas.enable=false for plain JSON"):
        JsonConverter(schemas=True).decode(record(b'{"a": 1}'))
    r = record(b'{"a": 1}')
    JsonConverter(schemas=False).decode(r)
    assert r.json() == {"a": 1} and r.schema is None


def test_connect_schema_errors_are_clear():
    with pytest.raises(ValueError, match="allowed: int8"):
        avro_schema_from_connect({"type": "uuid"})
    with pytest.raises(ValueError, match="'field' name"):
        avro_schema_from_connect({"type": "struct", "fields": [{"type": "int8"}]})


def test_maps_with_non_string_keys_become_arrays_of_pairs():
    schema = avro_schema_from_connect(
        {"type": "map", "keys": {"type": "int32"}, "values": {"type": "string"}}
    )
    assert schema["type"] == "array" and schema["items"]["name"] == "ConnectDefault"
    datum = avro_datum_from_connect(schema, [[1, "a"], [2, "b"]])
    assert datum == [{"key": 1, "value": "a"}, {"key": 2, "value": "b"}]


# -- rendering Avro data as Connect's JSON ------------------------------------------------------
LOGICAL = {
    "type": "record",
    "name": "x",
    "fields": [
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {"name": "kind", "type": {"type": "enum", "name": "k", "symbols": ["A", "B"]}},
        {"name": "either", "type": ["null", "int", "string"]},
        {"name": "maybe", "type": ["null", "long"]},
        {"name": "id", "type": {"type": "fixed", "name": "f4", "size": 2}},
    ],
}


def decoded(schema: dict, datum: dict):
    parsed = fastavro.parse_schema(schema)
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, parsed, datum)
    buffer.seek(0)
    return fastavro.schemaless_reader(buffer, parsed)


def test_render_json_as_confluents_json_format():
    datum = decoded(
        LOGICAL,
        {
            "ts": 1_700_000_000_123,
            "day": 19_000,
            "amount": decimal.Decimal("-1.50"),
            "kind": "B",
            "either": "s",
            "maybe": 5,
            "id": b"\x01\x02",
        },
    )
    assert isinstance(datum["ts"], dt.datetime)  # fastavro decodes logical types
    doc = json.loads(render_json(LOGICAL, datum))
    assert doc == {
        "ts": 1_700_000_000_123,
        "day": 19_000,
        "amount": base64.b64encode((-150).to_bytes(2, "big", signed=True)).decode(),
        "kind": "B",
        "either": {"int": None, "string": "s"},
        "maybe": 5,
        "id": "AQI=",
    }
    assert b'"amount":-1.50' in render_json(LOGICAL, datum, "NUMERIC")


# -- schema.compatibility ---------------------------------------------------------------------
S1 = ValueSchema.from_json(V1, schema_id=1)
S2 = ValueSchema.from_json(V2, schema_id=2)


def run_policy(mode: str, sequence: list[ValueSchema]) -> tuple[list[int], int]:
    """Schema ids written with, and files started, for records arriving with ``sequence``."""
    policy, open_schema, files, written = SchemaPolicy(mode), None, 0, []
    for schema in sequence:
        target, rotate = policy.place(schema, open_schema)
        if rotate or open_schema is None:
            files += 1
            open_schema = target
        written.append(target.id)
    return written, files


def test_none_rotates_on_every_change():
    assert run_policy("NONE", [S1, S2, S1, S2]) == ([1, 2, 1, 2], 4)


@pytest.mark.parametrize("mode", ["BACKWARD", "FULL"])
def test_backward_projects_to_the_newest_and_alternation_is_not_a_file_storm(mode):
    assert run_policy(mode, [S1, S2, S1, S2, S1, S1]) == ([1, 2, 2, 2, 2, 2], 2)


def test_forward_projects_to_the_oldest():
    assert run_policy("FORWARD", [S2, S1, S2, S2]) == ([2, 1, 1, 1], 2)


def test_projection_fills_defaults_and_incompatible_changes_name_both_ids():
    assert S1.project({"id": 3}, S2) == {"id": 3, "email": "unknown"}
    no_default = ValueSchema.from_json(
        {**V2, "fields": [V2["fields"][0], {"name": "email", "type": "string"}]}, schema_id=3
    )
    with pytest.raises(BadRecordError) as info:
        S1.project({"id": 3}, no_default, record(b"", offset=11))
    assert "t-3@11" in str(info.value)
    assert "schema id 1" in str(info.value) and "schema id 3" in str(info.value)


def test_versions_are_needed_to_compare():
    unversioned = ValueSchema.from_json(V1)
    with pytest.raises(BadRecordError, match=r"schema\.compatibility=BACKWARD compares"):
        SchemaPolicy("BACKWARD").place(unversioned, None)


# -- config -----------------------------------------------------------------------------------
def test_converter_settings_read_connect_names():
    settings = ConverterSettings.from_options(
        {
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": "http://r:8081",
            "value.converter.basic.auth.credentials.source": "USER_INFO",
            "value.converter.basic.auth.user.info": "u:p",
        }
    )
    assert settings.kind == "avro" and settings.has_schema
    assert settings.registry.client_config()["basic.auth.user.info"] == "u:p"
    json_default = ConverterSettings.from_options(
        {"value.converter": "org.apache.kafka.connect.json.JsonConverter"}
    )
    assert json_default.schemas_enable  # Connect's default
    assert not ConverterSettings.from_options({}).schemas_enable


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (
            {
                "value.converter": "avro",
                "value.converter.schema.registry.url": "http://r",
                "value.converter.basic.auth.credentials.source": "SASL_INHERIT",
            },
            ["SASL_INHERIT", "USER_INFO, URL"],
        ),
        (
            {"format.class": "avro", "value.converter": "string", "s3.compression.type": "gzip"},
            ["gzip", "avro.codec", "deflate"],
        ),
        ({"format.class": "bytearray", "value.converter": "string"}, ["ByteArrayConverter"]),
        (
            {
                "format.class": "avro",
                "value.converter": "json",
                "value.converter.schemas.enable": "false",
            },
            ["needs values with a schema"],
        ),
        (
            {
                "format.class": "avro",
                "value.converter": "string",
                "behavior.on.null.values": "write",
            },
            ["store.kafka.keys=true", "tombstone", "fail or ignore"],
        ),
    ],
)
def test_converter_and_format_combinations_are_checked(tmp_path, options, words):
    with pytest.raises(ConfigError) as info:
        SinkSettings.from_options({"path": str(tmp_path), **options})
    for word in words:
        assert word in str(info.value)


def test_avro_config_reads_codec_and_block_size(tmp_path):
    cfg = SinkSettings.from_options(
        {
            "path": str(tmp_path),
            "format.class": "io.confluent.connect.s3.format.avro.AvroFormat",
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": "http://127.0.0.1:8081",
            "avro.codec": "deflate",
            "s3.compression.block.size": "64KiB",
            "schema.compatibility": "BACKWARD",
        }
    )
    assert (cfg.format, cfg.avro_codec, cfg.block_size, cfg.extension) == (
        "avro",
        "deflate",
        65536,
        ".avro",
    )
    assert cfg.decodes_values and cfg.schema_compatibility == "BACKWARD"


def test_json_converter_float_and_double_schemas_are_avro_float_and_double():
    # Kafka's JsonConverter names FLOAT32/FLOAT64 "float"/"double" in the schemas it writes.
    connect = {
        "type": "struct",
        "name": "m",
        "fields": [
            {"field": "f", "type": "float", "optional": False},
            {"field": "d", "type": "double", "optional": True},
        ],
    }
    schema = avro_schema_from_connect(connect)
    types = {field["name"]: field["type"] for field in schema["fields"]}
    assert types["f"] == "float"
    assert types["d"] == ["null", "double"]
    assert avro_datum_from_connect(schema, {"f": 1.5, "d": None}) == {"f": 1.5, "d": None}
