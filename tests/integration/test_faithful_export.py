"""A faithful archive end to end (Apache Kafka, S3, Spark): dead letters, keys and headers.

One bad record does not stop the export: it goes to the dead-letter topic with its key, value,
headers and Connect's ``__connect.errors.*`` context, the good records are archived, and the
manifests count what went where. The crash cases (a kill between a dead-letter send and the
manifest, and inside the commit) are in ``test_export_crash.py``.
"""

from __future__ import annotations

import json

import pytest

from blockgz.sink.export.job import run_export
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.store import open_store
from testkit.deadletters import produce_mixed, read_topic
from testkit.kafka_data import read_exported
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow


def dead_letter_job(kafka, s3_server, bucket, topic, **extra) -> ExportSettings:
    return ExportSettings.from_mapping(
        {
            "name": "dlq-export",
            "topics": topic,
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(s3_server.endpoint_url),
            "flush.size": "6",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": f"{topic}-dlq",
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true",
            "errors.log.enable": "true",
            **extra,
        }
    )


def test_bad_records_go_to_the_dead_letter_topic_and_good_ones_to_s3(
    spark, kafka, s3_server, bucket, tmp_path
):
    topic = "dlq_mixed"
    kafka.create_topic(topic, partitions=2)
    bad = produce_mixed(kafka, topic, 2, 40)
    job = dead_letter_job(kafka, s3_server, bucket, topic)
    result = run_export(
        job, checkpoint=tmp_path / "ckpt", once=True, spark=spark, install_signal_handlers=False
    )
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    archived = read_exported(store, prefix).offsets()
    assert set(archived) == {(p, i) for p in range(2) for i in range(40)} - bad
    assert max(archived.values()) == 1
    dead = read_topic(kafka, f"{topic}-dlq")  # created by the preflight
    assert len(dead) == len(bad) == 8
    found = set()
    for message in dead:
        headers = {k: v.decode() for k, v in message.headers()}
        key = (int(headers["__connect.errors.partition"]), int(headers["__connect.errors.offset"]))
        found.add(key)
        assert headers["__connect.errors.topic"] == topic
        assert headers["__connect.errors.exception.class.name"] == "BadRecordError"
        assert "not valid JSON" in headers["__connect.errors.exception.message"]
        assert headers["origin"] == "test"  # the record's own headers are kept
        assert message.value() == b"\xffbad %d" % key[1] and message.key() == b"k%d" % key[1]
    assert found == bad
    manifests = job.sink.manifest_log(store, prefix)
    counts: dict[int, int] = {}
    manifest_keys = manifests.keys()
    for key in manifest_keys:
        for part, n in manifests.read(key).dead_letters.get(topic, {}).items():
            counts[part] = counts.get(part, 0) + n
    assert counts == {0: 4, 1: 4}
    assert result.records == 80


def test_keys_and_headers_files_through_the_export(spark, kafka, s3_server, bucket, tmp_path):
    """store.kafka.keys/headers on S3: the archive gives back key, value and headers; with
    behavior.on.null.values=write, tombstones keep only their keys and headers (as Confluent)."""
    from blockgz.reader import open_archive

    topic = "keys_headers_export"
    kafka.create_topic(topic, partitions=1)
    tombstones = {13, 15}
    rows = [
        (
            b"key-%d" % i,
            None if i in tombstones else json.dumps({"i": i, "p": 0}).encode(),
            [("trace", b"t%d" % i)],
        )
        for i in range(20)
    ]
    kafka.produce(topic, rows, partition=0)
    job = ExportSettings.from_mapping(
        {
            "name": "keys-headers",
            "topics": topic,
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(s3_server.endpoint_url),
            "flush.size": "8",
            "s3.compression.type": "blockgzip",
            "store.kafka.keys": "true",
            "store.kafka.headers": "true",
            "keys.format.class": "io.confluent.connect.s3.format.json.JsonFormat",
            "behavior.on.null.values": "write",
        }
    )
    run_export(
        job, checkpoint=tmp_path / "ckpt", once=True, spark=spark, install_signal_handlers=False
    )
    with open_archive(f"s3://{bucket}", s3_options(s3_server.endpoint_url)) as archive:
        got = list(archive.seek(topic, 0, 5, count=6))
    assert [(r.offset, r.key, r.headers) for r in got] == [
        (i, b"key-%d" % i, [("trace", b"t%d" % i)]) for i in range(5, 11)
    ]
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    names = {info.key.rsplit("/", 1)[1] for info in store.list(prefix + "topics/")}
    assert f"{topic}+0+0000000008.keys.json.gz" in names
    assert f"{topic}+0+0000000008.headers.avro" in names
    in_tombstone_dir = {
        info.key.rsplit("/", 1)[1] for info in store.list(f"{prefix}topics/{topic}/tombstone/")
    }
    assert in_tombstone_dir == {
        f"{topic}+0+0000000013.keys.json.gz",
        f".{topic}+0+0000000013.keys.json.index.json",
        f"{topic}+0+0000000013.headers.avro",
        f".{topic}+0+0000000013.headers.avro.index.json",
    }  # the timestamps (kept by default): in the keys file's sidecar, as Confluent's files only
    with open_archive(f"s3://{bucket}", s3_options(s3_server.endpoint_url)) as archive:
        values = [r.offset for r in archive.seek(topic, 0, 0)]
    assert values == [i for i in range(20) if i not in tombstones]
