"""Debezium change events through the JSON converter (issue 42): the shared named struct of
``before`` and ``after``, Debezium's semantic types, and JSON keys, as Connect writes them."""

from __future__ import annotations

import decimal
import io
import json

import fastavro
import orjson
import pytest

from blockgz.formats.json.connect_render import render_json
from blockgz.formats.json.json_format import JsonFormat
from blockgz.sink.convert.connect_json import avro_schema_from_connect
from blockgz.sink.convert.converters import JsonConverter
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.companions import decode_key
from testkit import debezium


def _decoded(event: dict) -> KafkaRecord:
    record = KafkaRecord("dbserver1.inventory.customers", 0, 7, None, None, orjson.dumps(event))
    JsonConverter(schemas=True).decode(record)
    return record


def test_the_shared_value_struct_is_defined_once_and_then_referenced_by_name():
    avro = avro_schema_from_connect(debezium.VALUE_SCHEMA)
    fields = {f["name"]: f for f in avro["fields"]}
    before, after = fields["before"]["type"], fields["after"]["type"]
    assert before[0] == "null" and before[1]["type"] == "record"
    assert (before[1]["namespace"], before[1]["name"]) == ("dbserver1.inventory.customers", "Value")
    assert after == ["null", debezium.VALUE_NAME]
    assert fields["before"]["default"] is None and fields["after"]["default"] is None
    fastavro.parse_schema(avro)  # no "redefined named type"


def test_debeziums_semantic_types_keep_their_connect_names():
    avro = avro_schema_from_connect(debezium.VALUE_SCHEMA)
    value = {f["name"]: f["type"][1] for f in avro["fields"][0]["type"][1]["fields"][4:]}
    assert value["created_at"] == {
        "type": "long",
        "connect.version": 1,
        "connect.name": "io.debezium.time.Timestamp",
    }
    assert value["birth_date"]["connect.name"] == "io.debezium.time.Date"
    assert value["tier"]["connect.parameters"] == {"allowed": "gold,silver,bronze"}
    assert value["balance"] == {
        "type": "bytes",
        "logicalType": "decimal",
        "precision": 10,
        "scale": 2,
    }
    assert value["score"]["name"] == "VariableScaleDecimal"
    assert value["flags"]["type"] == "bytes"


@pytest.mark.parametrize("make", [debezium.update_event, debezium.create_event])
def test_an_event_round_trips_through_avro_and_renders_as_its_payload(make):
    event = make()
    record = _decoded(event)
    assert record.schema.name == debezium.ENVELOPE_NAME
    datum = record.json()
    assert datum["after"]["balance"] == decimal.Decimal("1234.56")
    assert datum["after"]["score"]["value"] == (-98_765).to_bytes(3, "big", signed=True)
    assert datum["after"]["flags"] == b"\x05"
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, record.schema.parsed, datum)
    buffer.seek(0)
    back = fastavro.schemaless_reader(buffer, record.schema.parsed)
    assert back == datum
    # JsonFormat writes what JsonConverter(schemas.enable=false) would: the payload itself.
    assert json.loads(render_json(record.schema.json, back)) == event["payload"]


def test_a_debezium_key_with_its_schema_is_written_as_its_payload():
    keyed = KafkaRecord("t", 0, 1, None, orjson.dumps(debezium.key_event(1004)), b"{}")
    schema, key = decode_key(JsonConverter(schemas=True), keyed)
    assert schema.name == "dbserver1.inventory.customers.Key"
    entry = JsonFormat().encode_key(keyed, schema, key, decoded=True, writer=None)
    assert json.loads(entry) == {"id": 1004}


@pytest.mark.parametrize("raw", [b'{"id": 1004}', b"[1, 2]", b'"k-1"', b"42", b"true"])
def test_a_schemaless_json_key_is_written_as_the_json_it_is(raw):
    keyed = KafkaRecord("t", 0, 1, None, raw, b"{}")
    schema, key = decode_key(JsonConverter(schemas=False), keyed)
    entry = JsonFormat().encode_key(keyed, schema, key, decoded=True, writer=None)
    assert json.loads(entry) == json.loads(raw)
