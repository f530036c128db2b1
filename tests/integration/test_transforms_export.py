"""Connect's transforms in a real export: Apache Kafka, SeaweedFS, Spark local mode.

A pasted connector config with a chain (InsertField, then a RegexRouter under a
TopicNameMatches predicate) exports; the archived objects hold the inserted field under the
routed topic's folder, the manifest and the reader see the routed topic, and the offsets
committed are those of the topic read. A transform class blockgz does not run is refused by
``blockgz export`` before Spark starts, in one line.
"""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.reader.reading.archive import open_archive
from blockgz.sink.export.job import run_export
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.store import open_store
from testkit.cli import assert_one_line_failure, export_once
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow

K = "org.apache.kafka.connect.transforms."
RECORDS = 12


def pasted_config(kafka, s3_server, bucket: str, topic: str) -> dict[str, str]:
    """A Confluent S3 sink config as a user pastes it (Connect's keys and class names)."""
    return {
        "name": "smt-export",
        "connector.class": "io.confluent.connect.s3.S3SinkConnector",
        "tasks.max": "1",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **s3_options(s3_server.endpoint_url),
        "format.class": "io.confluent.connect.s3.format.json.JsonFormat",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "flush.size": "5",
        "transforms": "InsertSource,Route",
        "transforms.InsertSource.type": K + "InsertField$Value",
        "transforms.InsertSource.static.field": "origin",
        "transforms.InsertSource.static.value": "dc1",
        "transforms.InsertSource.offset.field": "kafka_offset",
        "transforms.Route.type": K + "RegexRouter",
        "transforms.Route.regex": "smt_(.*)",
        "transforms.Route.replacement": "archived_$1",
        "transforms.Route.predicate": "IsSmt",
        "predicates": "IsSmt",
        "predicates.IsSmt.type": K + "predicates.TopicNameMatches",
        "predicates.IsSmt.pattern": "smt_.*",
    }


def test_a_chain_inserts_the_field_and_routes_the_topic_folder(
    spark, kafka, s3_server, bucket, tmp_path
):
    suffix = uuid.uuid4().hex[:8]
    topic, routed = f"smt_{suffix}", f"archived_{suffix}"
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [json.dumps({"n": n}).encode() for n in range(RECORDS)])
    job = ExportSettings.from_mapping(pasted_config(kafka, s3_server, bucket, topic))
    run_export(
        job, checkpoint=tmp_path / "ckpt", once=True, spark=spark, install_signal_handlers=False
    )

    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    keys = [info.key for info in store.list(prefix + "topics/")]
    data = sorted(k for k in keys if not k.rsplit("/", 1)[1].startswith("."))
    assert data and all(k.startswith(f"topics/{routed}/partition=0/{routed}+0+") for k in data)
    assert not any(f"/{topic}/" in k for k in keys)  # nothing under the topic read

    rows = [json.loads(line) for k in data for line in store.get(k).splitlines()]
    assert rows == [{"n": n, "origin": "dc1", "kafka_offset": n} for n in range(RECORDS)]

    with open_archive(f"s3://{bucket}", s3_options(s3_server.endpoint_url)) as archive:
        read = [(p, r.offset, json.loads(r.value)) for p, r in archive.records(routed)]
    assert [(p, o) for p, o, _ in read] == [(0, n) for n in range(RECORDS)]
    assert all(v["origin"] == "dc1" for _, _, v in read)

    log = job.sink.manifest_log()
    assert log.committed_offsets().get(topic) == {0: RECORDS}  # the offsets of the topic read

    flags = [a for k, v in s3_options(s3_server.endpoint_url).items() for a in ("-O", f"{k}={v}")]
    listed = CliRunner().invoke(main, ["ls", f"s3://{bucket}", "--topic", routed, *flags])
    assert listed.exit_code == 0, listed.output
    assert routed in listed.output and f"{len(data)} objects" in listed.output
    audited = CliRunner().invoke(main, ["audit", f"s3://{bucket}", *flags])
    assert audited.exit_code == 0, audited.output


def test_a_transform_blockgz_does_not_run_is_refused_before_spark(
    kafka, s3_server, bucket, tmp_path
):
    topic = f"smt_{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=1)
    config = pasted_config(kafka, s3_server, bucket, topic)
    config["transforms.Route.type"] = "com.github.jcustenborder.kafka.connect.transform.Router"
    code, lines, seconds = export_once(tmp_path, config)
    assert_one_line_failure(
        code,
        lines,
        seconds,
        "transforms.Route.type=com.github.jcustenborder.kafka.connect.transform.Router",
        "blockgz does not run this transform",
        "RegexRouter",
        "ExtractNewRecordState",
    )
    assert seconds < 15  # no JVM was started
