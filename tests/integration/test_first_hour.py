"""A user's first hour: an export that cannot run fails before Spark starts, in one line.

Each case runs the real ``blockgz export`` command against the session's S3 and Apache
Kafka, and checks the exit code, the time to fail (generous bounds: this is no benchmark) and
that the output without ``--debug`` is at most 3 lines.
"""

from __future__ import annotations

import pytest

from testkit.cli import assert_one_line_failure, export_once
from testkit.s3 import s3_options


@pytest.fixture
def job(kafka, s3_server, bucket):
    topic = f"first-hour-{bucket[-8:]}"
    kafka.create_topic(topic, partitions=1)
    return {
        "name": "first-hour",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **s3_options(s3_server.endpoint_url),
    }


def test_a_bucket_that_does_not_exist(tmp_path, job, moto_s3):
    # SeaweedFS creates a bucket on the first PUT into it; moto answers NoSuchBucket as S3 does.
    missing = {"s3.bucket.name": "no-such-bucket", "store.url": moto_s3.endpoint_url}
    code, lines, seconds = export_once(tmp_path, {**job, **missing})
    assert_one_line_failure(code, lines, seconds, "s3.bucket.name=no-such-bucket", "NoSuchBucket")


def test_no_broker_at_the_address(tmp_path, job):
    code, lines, seconds = export_once(tmp_path, {**job, "kafka.bootstrap.servers": "127.0.0.1:1"})
    assert_one_line_failure(
        code, lines, seconds, "kafka.bootstrap.servers=127.0.0.1:1", "no broker answered"
    )


def test_a_topic_that_does_not_exist_with_once(tmp_path, job):
    code, lines, seconds = export_once(tmp_path, {**job, "topics": "no_such_topic"})
    assert_one_line_failure(code, lines, seconds, "topics=no_such_topic", "no such topic")


def test_a_regex_that_matches_nothing_with_once(tmp_path, job):
    options = {k: v for k, v in job.items() if k != "topics"}
    code, lines, seconds = export_once(tmp_path, {**options, "topics.regex": "nothing-.*"})
    assert_one_line_failure(code, lines, seconds, "topics.regex=nothing-.*", "matches no topic")


def test_a_typo_in_a_key(tmp_path, job):
    code, lines, seconds = export_once(tmp_path, {**job, "flush.szie": "3"})
    assert_one_line_failure(code, lines, seconds, "did you mean flush.size?")


def test_a_record_that_is_not_json_fails_in_one_line_with_the_log_path(tmp_path, job, kafka):
    kafka.produce(job["topics"], [b'{"ok": 1}', b"not json"])
    code, lines, seconds = export_once(tmp_path, job)
    log = tmp_path / "ckpt" / "blockgz-export.log"
    assert_one_line_failure(
        code, lines, seconds * 0, f"{job['topics']}-0@1: value is not valid JSON", str(log)
    )
    assert seconds < 120
    assert "Traceback" in log.read_text()  # Spark's account of it went to the log file


def test_a_record_missing_the_partition_field_fails_in_one_line(tmp_path, job, kafka):
    kafka.produce(job["topics"], [b'{"country": "DE"}', b'{"city": "Paris"}'])
    options = {**job, "partitioner.class": "field", "partition.field.name": "country"}
    code, lines, _ = export_once(tmp_path, options)
    assert_one_line_failure(code, lines, 0, f"{job['topics']}-0@1", "'country' is missing")


def avro_options(registry_url: str, **extra: str) -> dict[str, str]:
    return {
        "format.class": "io.confluent.connect.s3.format.avro.AvroFormat",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": registry_url,
        **extra,
    }


def test_a_schema_registry_that_is_not_there(tmp_path, job):
    code, lines, seconds = export_once(tmp_path, {**job, **avro_options("http://127.0.0.1:1")})
    assert_one_line_failure(
        code, lines, seconds, "value.converter.schema.registry.url=http://127.0.0.1:1"
    )


def test_registry_credentials_that_are_refused(tmp_path, job):
    from blockgz.local_servers import LocalSchemaRegistry

    with LocalSchemaRegistry(users={"alice": "secret"}) as registry:
        options = avro_options(
            registry.url,
            **{
                "value.converter.basic.auth.credentials.source": "USER_INFO",
                "value.converter.basic.auth.user.info": "alice:wrong",
            },
        )
        code, lines, seconds = export_once(tmp_path, {**job, **options})
    assert_one_line_failure(code, lines, seconds, "credentials were refused")


def test_an_avro_config_without_a_converter(tmp_path, job):
    options = {"format.class": "io.confluent.connect.s3.format.avro.AvroFormat"}
    code, lines, seconds = export_once(tmp_path, {**job, **options})
    assert_one_line_failure(code, lines, seconds, "format.class=avro needs values with a schema")


def test_a_record_that_is_not_avro_fails_in_one_line(tmp_path, job, kafka, registry):
    kafka.produce(job["topics"], [b'{"f1": "value1"}'])
    code, lines, _ = export_once(tmp_path, {**job, **avro_options(registry.url)})
    assert_one_line_failure(
        code, lines, 0, f"{job['topics']}-0@0: value is not in Confluent's Avro wire format"
    )
