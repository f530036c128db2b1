"""Debezium change events exported end to end (issue 42): Apache Kafka, SeaweedFS, Spark local
mode. The events' ``before`` and ``after`` share one named struct; they are exported as
Avro (from the Avro wire format, the schema in the ``registry``, and from JsonConverter
envelopes) and as JSON with JSON keys, and read back."""

from __future__ import annotations

import io
import json

import fastavro
import orjson
import pytest

from blockgz.sink.convert.connect_json import avro_datum_from_connect, avro_schema_from_connect
from blockgz.sink.export.job import run_export
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.store import open_store
from testkit import debezium
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow

EVENTS = [debezium.create_event(1005), debezium.update_event(1004), debezium.create_event(1006)]


def _job(kafka, s3_server, bucket, topic, **options) -> ExportSettings:
    return ExportSettings.from_mapping(
        {
            "name": f"dbz-{topic[-12:]}",
            "topics": topic,
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(s3_server.endpoint_url),
            **options,
        }
    )


def _export(spark, job: ExportSettings, checkpoint) -> None:
    result = run_export(
        job, checkpoint=checkpoint, once=True, spark=spark, install_signal_handlers=False
    )
    assert result.records == len(EVENTS)


def _visible(s3_server, bucket: str, under: str) -> dict[str, bytes]:
    """The objects under ``under`` other than hidden ones (sidecars, timestamps files)."""
    store, _ = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    listed = [i.key for i in store.list(under) if not i.key.rsplit("/", 1)[1].startswith(".")]
    return {key: store.get(key) for key in listed}


def _avro_of(objects: dict[str, bytes]) -> tuple[list[dict], dict]:
    (data,) = [v for k, v in objects.items() if k.endswith(".avro")]
    reader = fastavro.reader(io.BytesIO(data))
    return list(reader), reader.writer_schema


def _expected_datums() -> list[dict]:
    avro = avro_schema_from_connect(debezium.VALUE_SCHEMA)
    return [avro_datum_from_connect(avro, event["payload"]) for event in EVENTS]


def test_debezium_avro_events_export_as_avro(spark, kafka, s3_server, bucket, registry, tmp_path):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = f"dbserver1.inventory.customers.avro.{bucket[-8:]}"
    kafka.create_topic(topic, partitions=1)
    avro = avro_schema_from_connect(debezium.VALUE_SCHEMA)  # what AvroConverter registers
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry.url}), json.dumps(avro))
    context = SerializationContext(topic, MessageField.VALUE)
    kafka.produce(topic, [serializer(d, context) for d in _expected_datums()], partition=0)
    job = _job(
        kafka,
        s3_server,
        bucket,
        topic,
        **{
            "format.class": "io.confluent.connect.s3.format.avro.AvroFormat",
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": registry.url,
        },
    )
    _export(spark, job, tmp_path / "ckpt")
    records, schema = _avro_of(_visible(s3_server, bucket, "topics/"))
    assert records == _expected_datums()
    after = {f["name"]: f["type"] for f in schema["fields"]}["after"]
    assert after == ["null", debezium.VALUE_NAME]  # a reference: the type is defined once


def test_debezium_json_envelopes_export_as_avro_and_as_json_with_keys(
    spark, kafka, s3_server, bucket, tmp_path
):
    topic = f"dbserver1.inventory.customers.json.{bucket[-8:]}"
    kafka.create_topic(topic, partitions=1)
    keyed = [(orjson.dumps({"id": e["payload"]["after"]["id"]}), orjson.dumps(e)) for e in EVENTS]
    kafka.produce(topic, keyed, partition=0)
    json_converter = "org.apache.kafka.connect.json.JsonConverter"
    common = {"value.converter": json_converter}
    as_avro = _job(
        kafka,
        s3_server,
        bucket,
        topic,
        **common,
        **{
            "format.class": "io.confluent.connect.s3.format.avro.AvroFormat",
            "topics.dir": "a",
            "name": "dbz-a",
        },
    )
    _export(spark, as_avro, tmp_path / "a")
    records, _ = _avro_of(_visible(s3_server, bucket, "a/"))
    assert records == _expected_datums()

    as_json = _job(
        kafka,
        s3_server,
        bucket,
        topic,
        **common,
        **{
            "format.class": "io.confluent.connect.s3.format.json.JsonFormat",
            "topics.dir": "j",
            "name": "dbz-j",
            "store.kafka.keys": "true",
            "keys.format.class": "io.confluent.connect.s3.format.json.JsonFormat",
            "key.converter": json_converter,
            "key.converter.schemas.enable": "false",
        },
    )
    _export(spark, as_json, tmp_path / "j")
    objects = _visible(s3_server, bucket, "j/")
    (values,) = [v for k, v in objects.items() if k.endswith(".json") and ".keys." not in k]
    (keys,) = [v for k, v in objects.items() if k.endswith(".keys.json")]
    assert [json.loads(line) for line in values.splitlines()] == [e["payload"] for e in EVENTS]
    assert [json.loads(line) for line in keys.splitlines()] == [
        {"id": 1005},
        {"id": 1004},
        {"id": 1006},
    ]
