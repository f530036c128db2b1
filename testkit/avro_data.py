"""Avro test data: numbered records produced with confluent-kafka's real ``AvroSerializer``.

The values carry the same fields as :func:`testkit.kafka_data.value_for` (``i`` is the Kafka
offset, ``p`` the partition), with ``ts`` an Avro ``timestamp-millis``, so
:meth:`Exported.assert_exactly_once` works on Avro exports as on JSON ones. ``V2`` adds a field
with a default (a BACKWARD-compatible change); ``V3_INCOMPATIBLE`` adds one without.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection, Iterable
from typing import Any

from testkit.kafka_data import value_for

V1: dict[str, Any] = {
    "type": "record",
    "name": "Event",
    "namespace": "com.example",
    "fields": [
        {"name": "i", "type": "long"},
        {"name": "p", "type": "int"},
        {"name": "country", "type": "string"},
        {
            "name": "user",
            "type": {
                "type": "record",
                "name": "User",
                "fields": [{"name": "tier", "type": "int"}, {"name": "name", "type": "string"}],
            },
        },
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
V2: dict[str, Any] = copy.deepcopy(V1)
V2["fields"].append({"name": "channel", "type": "string", "default": "web"})
V3_INCOMPATIBLE: dict[str, Any] = copy.deepcopy(V1)
V3_INCOMPATIBLE["fields"].append({"name": "region", "type": "string"})


def avro_value_for(partition: int, i: int, schema: dict[str, Any] = V1) -> dict[str, Any]:
    """The record ``i`` of ``partition`` for ``schema`` (extra fields get a value)."""
    doc = value_for(partition, i)
    names = {f["name"] for f in schema["fields"]}
    if "channel" in names:
        doc["channel"] = "app"
    if "region" in names:
        doc["region"] = "eu"
    return doc


def produce_avro(
    bootstrap: str,
    registry_url: str,
    topic: str,
    rows: Iterable[tuple[int, int, dict[str, Any]]],
    *,
    skip: Collection[tuple[int, int]] = (),
) -> None:
    """Produce ``(partition, i, schema)`` rows with the Avro serializer (auto-registering each
    schema under ``<topic>-value``), one record per Kafka batch (Tansu's watermark). Rows in
    ``skip`` get a value that is not Avro instead (bad records, for dead-letter tests)."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": registry_url})
    serializers: dict[str, AvroSerializer] = {}
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "batch.num.messages": 1,
            "linger.ms": 0,
            "enable.idempotence": False,
        }
    )
    context = SerializationContext(topic, MessageField.VALUE)
    for partition, i, schema in rows:
        text = json.dumps(schema)
        serializer = serializers.get(text)
        if serializer is None:
            serializer = serializers[text] = AvroSerializer(client, text)
        doc = avro_value_for(partition, i, schema)
        value = b"not avro %d" % i if (partition, i) in skip else serializer(doc, context)
        producer.produce(
            topic,
            value,
            key=f"k{i}".encode(),
            partition=partition,
            timestamp=doc["ts"],
        )
        producer.poll(0)
    assert producer.flush(30) == 0, "records left unsent"


def produce_avro_numbered(
    bootstrap: str,
    registry_url: str,
    topic: str,
    partitions: int,
    per_partition: int,
    schema: dict[str, Any] = V1,
) -> None:
    """``per_partition`` records of ``schema`` into each partition."""
    rows = [(p, i, schema) for p in range(partitions) for i in range(per_partition)]
    produce_avro(bootstrap, registry_url, topic, rows)
