"""The Avro export end to end: Apache Kafka, a Schema Registry (the stand-in, and Apicurio
Registry where it builds), S3 and Spark local mode.

Records are produced by confluent-kafka's real ``AvroSerializer``; the export decodes them
with the AvroConverter and writes Avro container files (or block-GZIP JSON), which are read
back with fastavro and the blockgz reader.
"""

from __future__ import annotations

import re
import time

import pytest

from blockgz.reader import open_archive
from blockgz.sink.export.job import ExportFailed, run_export
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.store import open_store
from testkit.avro_data import V1, V2, avro_value_for, produce_avro, produce_avro_numbered
from testkit.kafka_data import manifest_keys_of, read_exported
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow

#: The registries the export is shown against: the loopback stand-in and a real one.
REGISTRIES = ["stand-in", "apicurio"]


@pytest.fixture(params=REGISTRIES)
def any_registry(request):
    """The stand-in or Apicurio Registry (``request.param`` says which; topics take it as a
    suffix so the two runs do not share subjects)."""
    return request.getfixturevalue("registry" if request.param == "stand-in" else "apicurio")


def avro_job(kafka, s3_server, registry, bucket, topic, **options) -> ExportSettings:
    return ExportSettings.from_mapping(
        {
            "name": "avro-export",
            "topics": topic,
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(s3_server.endpoint_url),
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": registry.url,
            **options,
        }
    )


def export_once(spark, job, checkpoint):
    return run_export(
        job, checkpoint=checkpoint, once=True, spark=spark, install_signal_handlers=False
    )


def test_avro_quickstart_layout_exactly_once_and_seekable(
    spark, kafka, s3_server, any_registry, bucket, tmp_path
):
    registry = any_registry
    topic = f"avro_quickstart_{type(registry).__name__.lower()}"
    kafka.create_topic(topic, partitions=2)
    produce_avro_numbered(kafka.bootstrap_servers, registry.url, topic, 2, 9)
    job = avro_job(
        kafka,
        s3_server,
        registry,
        bucket,
        topic,
        **{"format.class": "io.confluent.connect.s3.format.avro.AvroFormat", "flush.size": "3"},
    )
    result = export_once(spark, job, tmp_path / "ckpt")
    assert result.records == 18 and result.files == 6
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    exported = read_exported(store, prefix)
    exported.assert_exactly_once(2, 9)
    assert sorted(k for k in exported.objects if "partition=0" in k) == [
        f"topics/{topic}/partition=0/{topic}+0+{n:010d}.avro" for n in (0, 3, 6)
    ]
    assert exported.objects[f"topics/{topic}/partition=1/{topic}+1+0000000003.avro"] == [
        avro_value_for(1, n) for n in (3, 4, 5)
    ]
    assert manifest_keys_of(store, prefix, job.sink) == exported.written
    with open_archive(f"s3://{bucket}", s3_options(s3_server.endpoint_url)) as archive:
        got = list(archive.seek(topic, 1, 4, count=3))
    assert [r.offset for r in got] == [4, 5, 6]
    assert got[0].value["country"] == avro_value_for(1, 4)["country"]


def test_avro_evolution_through_spark_keeps_one_file_per_newer_schema(
    spark, kafka, s3_server, any_registry, bucket, tmp_path
):
    registry = any_registry
    topic = f"avro_evolution_{type(registry).__name__.lower()}"
    kafka.create_topic(topic, partitions=1)
    # Two producers on v1 and v2, interleaved.
    produce_avro(
        kafka.bootstrap_servers,
        registry.url,
        topic,
        [(0, i, V2 if i % 2 else V1) for i in range(12)],
    )
    job = avro_job(
        kafka,
        s3_server,
        registry,
        bucket,
        topic,
        **{"format.class": "avro", "schema.compatibility": "BACKWARD", "avro.codec": "deflate"},
    )
    export_once(spark, job, tmp_path / "ckpt")
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    exported = read_exported(store, prefix)
    exported.assert_exactly_once(1, 12)
    starts = sorted(int(re.search(r"\+(\d{10})\.avro$", k).group(1)) for k in exported.objects)
    assert starts == [0, 1], "v1 at offset 0, then one file in v2 for everything after"
    last = exported.objects[f"topics/{topic}/partition=0/{topic}+0+0000000001.avro"]
    assert [d["channel"] for d in last[:3]] == ["app", "web", "app"]


@pytest.mark.parametrize("tasks_read_kafka", ["false", "true"])
def test_avro_to_block_gzip_json_then_seek(
    spark, kafka, s3_server, registry, bucket, tmp_path, tasks_read_kafka
):
    topic = f"avro_to_blockgzip_{tasks_read_kafka}"
    kafka.create_topic(topic, partitions=1)
    produce_avro_numbered(kafka.bootstrap_servers, registry.url, topic, 1, 40)
    job = avro_job(
        kafka,
        s3_server,
        registry,
        bucket,
        topic,
        **{
            "format.class": "json",
            "s3.compression.type": "blockgzip",
            "s3.compression.block.records": "8",
            "blockgz.tasks.read.kafka": tasks_read_kafka,
        },
    )
    export_once(spark, job, tmp_path / "ckpt")
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    read_exported(store, prefix).assert_exactly_once(1, 40)
    with open_archive(f"s3://{bucket}", s3_options(s3_server.endpoint_url)) as archive:
        (record,) = list(archive.seek(topic, 0, 21, count=1))
    import json

    assert json.loads(record.value) == avro_value_for(0, 21)


def test_registry_down_fails_the_export_and_commits_nothing(
    spark, kafka, s3_server, registry, bucket, tmp_path
):
    topic = "avro_registry_down"
    kafka.create_topic(topic, partitions=1)
    # A schema no Python worker has seen yet (workers cache schemas by id for their lifetime).
    fresh = {**V1, "name": "DownEvent"}
    produce_avro(kafka.bootstrap_servers, registry.url, topic, [(0, i, fresh) for i in range(5)])
    job = avro_job(
        kafka,
        s3_server,
        registry,
        bucket,
        topic,
        **{
            "format.class": "avro",
            "value.converter.max.retries": "0",
            "blockgz.preflight": "false",  # down after the start: the preflight saw it up
        },
    )
    with registry.outage(), pytest.raises(ExportFailed, match="cannot reach the schema registry"):
        export_once(spark, job, tmp_path / "ckpt")
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    assert read_exported(store, prefix).objects == {}
    assert job.sink.manifest_log(store, prefix).committed_offsets() == {}


def topic_messages(kafka, topic: str) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
    """``(key, value)`` of every record of ``topic``, per partition, in offset order."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "avro-check"})
    out: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
    try:
        for partition, end in kafka.high_watermarks(topic).items():
            consumer.assign([TopicPartition(topic, partition, 0)])
            got: list = []
            deadline = time.monotonic() + 60  # a whole read, not each fetch: a busy broker lags
            while len(got) < end:
                assert time.monotonic() < deadline, f"{topic}-{partition}: {len(got)} of {end}"
                got += [m for m in consumer.consume(500, timeout=1) if m.error() is None]
            out[partition] = [(m.key(), m.value()) for m in got]
    finally:
        consumer.close()
    return out


def test_replay_of_an_avro_archive_sends_the_bytes_the_topic_held(
    spark, kafka, s3_server, registry, bucket, tmp_path
):
    """Exported with Confluent's Avro config (AvroConverter + registry, AvroFormat, keys kept
    in an Avro .keys file, as the ByteArrayConverter's ``bytes``), replayed with the registry:
    the keys are the produced bytes, every value is Confluent's wire format again, byte for byte
    what was produced (the registry answers each schema with the id it had), across a schema
    change; without a registry the replay is refused in one line and sends nothing."""
    from click.testing import CliRunner

    from blockgz.cli import main

    topic, target, refused = "avro_replay_src", "avro_replay_dst", "avro_replay_refused"
    elsewhere = "avro_replay_dr"
    for name in (topic, target, refused, elsewhere):
        kafka.create_topic(name, partitions=2)
    rows = [(p, i, V1 if i < 5 else V2) for p in range(2) for i in range(8)]
    produce_avro(kafka.bootstrap_servers, registry.url, topic, rows)
    job = avro_job(
        kafka, s3_server, registry, bucket, topic,
        **{"format.class": "io.confluent.connect.s3.format.avro.AvroFormat", "flush.size": "3",
           "store.kafka.keys": "true", "keys.format.class": "avro"},
    )  # fmt: skip
    assert export_once(spark, job, tmp_path / "ckpt").records == 16
    options = [f"s3://{bucket}", "--topic", topic, "--bootstrap-servers", kafka.bootstrap_servers]
    for key, value in s3_options(s3_server.endpoint_url).items():
        options += ["-O", f"{key}={value}"]

    no_registry = CliRunner().invoke(main, ["replay", *options, "--to-topic", refused])
    assert no_registry.exit_code == 1
    lines = no_registry.stderr.strip().splitlines()
    assert lines[0].startswith("DeprecationWarning: The command 'replay' is deprecated")
    assert len(lines) == 2 and "--schema-registry-url" in lines[1], no_registry.stderr
    assert kafka.high_watermarks(refused) == {0: 0, 1: 0}, "a refused replay sent something"

    done = CliRunner().invoke(
        main, ["replay", *options, "--to-topic", target, "--schema-registry-url", registry.url]
    )
    assert done.exit_code == 0, done.stderr
    original, replayed = topic_messages(kafka, topic), topic_messages(kafka, target)
    assert replayed == original
    assert {v[1:5] for msgs in replayed.values() for _, v in msgs} == {
        b"\x00\x00\x00" + bytes([n]) for n in {v[4] for msgs in original.values() for _, v in msgs}
    } and len({v[1:5] for msgs in replayed.values() for _, v in msgs}) == 2, "two schema ids"

    # Into another cluster's fresh registry: new ids there, and its consumers decode each value
    # to what was produced.
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    from blockgz.local_servers.schema_registry import LocalSchemaRegistry

    with LocalSchemaRegistry() as fresh:
        moved = CliRunner().invoke(
            main, ["replay", *options, "--to-topic", elsewhere, "--schema-registry-url", fresh.url]
        )
        assert moved.exit_code == 0, moved.stderr
        decode = AvroDeserializer(SchemaRegistryClient({"url": fresh.url}))
        restored = topic_messages(kafka, elsewhere)
        for p in range(2):
            docs = [decode(v, None) for _, v in restored[p]]
            docs = [
                {**d, "ts": round(d["ts"].timestamp() * 1000)} for d in docs
            ]  # timestamp-millis
            assert docs == [avro_value_for(p, i, V1 if i < 5 else V2) for i in range(8)]
            assert [k for k, _ in restored[p]] == [k for k, _ in original[p]]
