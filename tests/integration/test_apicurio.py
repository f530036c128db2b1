"""Apicurio Registry's Confluent-compatible API, driven by confluent-kafka's client and serdes."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from testkit.apicurio import BUILD_TIMEOUT_S, START_TIMEOUT_S

# The first run builds the registry with Maven (a download of ~230 MB), in the fixture's setup
# (``apicurio`` in tests/conftest.py).
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(BUILD_TIMEOUT_S + START_TIMEOUT_S + 60),
]


def record(*fields: dict) -> Schema:
    avsc = {"type": "record", "name": "Order", "namespace": "shop", "fields": list(fields)}
    return Schema(json.dumps(avsc), "AVRO")


ID = {"name": "id", "type": "long"}
ITEM = {"name": "item", "type": "string"}
V1 = record(ID, ITEM)
V2_WITH_DEFAULT = record(ID, ITEM, {"name": "qty", "type": "int", "default": 1})
V2_ITEM_INT = record(ID, {"name": "item", "type": "int"})


def test_avro_round_trip_and_backward_compatibility(apicurio):
    client = SchemaRegistryClient({"url": apicurio.url})
    client.set_compatibility("orders-value", "BACKWARD")
    assert client.get_compatibility("orders-value") == "BACKWARD"

    schema_id = client.register_schema("orders-value", V1)
    assert json.loads(client.get_schema(schema_id).schema_str) == json.loads(V1.schema_str)

    ctx = SerializationContext("orders", MessageField.VALUE)
    serializer = AvroSerializer(client, V1.schema_str, conf={"auto.register.schemas": False})
    data = serializer({"id": 1, "item": "pen"}, ctx)
    assert data[:5] == b"\x00" + schema_id.to_bytes(4, "big")
    reader = SchemaRegistryClient({"url": apicurio.url})  # nothing from the first one's cache
    assert AvroDeserializer(reader)(data, ctx) == {"id": 1, "item": "pen"}

    v2_id = client.register_schema("orders-value", V2_WITH_DEFAULT)
    assert v2_id != schema_id
    latest = SchemaRegistryClient({"url": apicurio.url}).get_latest_version("orders-value")
    assert (latest.version, latest.schema_id) == (2, v2_id)

    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("orders-value", V2_ITEM_INT)
    assert refused.value.http_status_code == 409
    assert "Incompatible" in refused.value.error_message
    assert "orders-value" in reader.get_subjects()  # other tests share the registry
