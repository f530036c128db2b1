"""A topic deleted and recreated under its name is a new life (new topic id, offsets from 0):
the export never archives it beside the old one (issue 41, situation 1).

On Apache Kafka and SeaweedFS. The old life's 1,500 records are archived; the topic is deleted
and recreated and 2,500 records of the new life produced. A rerun of ``blockgz export --once``
(the same checkpoint, and a new one) used to resume at the old offset 1,500, never archive the
new offsets 0-1,499 and put 1,500-2,499 beside the old objects, exit 0. Now it refuses in one
line naming the topic and the two ids, writes nothing, and every reader still returns exactly
the old life. A running export stops with the same kind of line when the topic is recreated
under it: before its next batch is planned (the blockgz source), and before a batch read
before the recreation commits (the commit's check, which Spark's own Kafka source relies on).
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.errors import ExportFailed
from blockgz.kafka.access import describe_topics
from blockgz.reader import open_archive
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.kafka.lives import recorded_topic_ids
from testkit.cli import assert_one_line_failure, export_once
from testkit.faults import fault_options, release
from testkit.running_export import committed, export_while, wait_until
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow

OLD, NEW = 1_500, 2_500
CONNECTOR = "4.2.0"
LOG = "blockgz-export.log"  # the export's log, in its checkpoint


def life_value(life: int):
    """Values that say which life of the topic they belong to."""
    return lambda partition, i: json.dumps({"life": life, "i": i}).encode()


def job_options(kafka, s3_server, bucket: str, topic: str, **extra: str) -> dict[str, str]:
    return {
        "name": "lives",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **s3_options(s3_server.endpoint_url),
        "flush.size": "400",
        **extra,
    }


def recreate(kafka, topic: str, timeout_s: float = 60) -> None:
    """Delete ``topic``, wait until it is gone, and create it again (a new topic id)."""
    from confluent_kafka import KafkaException

    for future in kafka.admin().delete_topics([topic]).values():
        future.result(30)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            kafka.create_topic(topic)
            return
        except KafkaException:  # the deletion is still under way: asked again
            assert time.monotonic() < deadline, f"{topic} was not recreated in {timeout_s} s"
            time.sleep(0.2)  # polling the broker with a deadline


def data_keys(s3_server, bucket: str, topic: str) -> set[str]:
    client = s3_server.client()
    pages = client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=f"topics/{topic}/"
    )
    return {o["Key"] for page in pages for o in page.get("Contents", [])}


def archived(s3_server, bucket: str, topic: str) -> list[tuple[int, dict]]:
    """Every record the reader returns: ``(offset, value)``."""
    with open_archive(f"s3://{bucket}", s3_options(s3_server.endpoint_url)) as archive:
        return sorted((r.offset, json.loads(bytes(r.value))) for _, r in archive.records(topic))


def assert_only_the_old_life(s3_server, bucket: str, topic: str, keys: set[str]) -> None:
    assert data_keys(s3_server, bucket, topic) == keys, "nothing of the new life was written"
    records = archived(s3_server, bucket, topic)
    assert [offset for offset, _ in records] == list(range(OLD))
    assert all(value == {"life": 1, "i": offset} for offset, value in records)


def status(config) -> tuple[int, list[str]]:
    """``blockgz status``: exit code and the problems' lines."""
    result = CliRunner().invoke(main, ["status", str(config), "--output", "json"])
    assert "Traceback" not in result.output, result.output
    (job,) = json.loads(result.stdout)["jobs"]
    return result.exit_code, [i["message"] for i in job["issues"] if i["level"] == "problem"]


def audit(s3_server, bucket: str) -> tuple[int, list[str]]:
    """``blockgz audit``: exit code and the findings' kinds and messages."""
    flags = [a for k, v in s3_options(s3_server.endpoint_url).items() for a in ("-O", f"{k}={v}")]
    result = CliRunner().invoke(main, ["audit", f"s3://{bucket}", *flags, "--output", "json"])
    assert "Traceback" not in result.output, result.output
    (job,) = json.loads(result.stdout)["jobs"]
    return result.exit_code, [f"{f['kind']}: {f['message']}" for f in job["findings"]]


@pytest.fixture(scope="module")
def connector():
    from blockgz.errors import JarResolutionError
    from blockgz.sink.spark_kafka import connector_jars

    try:
        return connector_jars(CONNECTOR)
    except JarResolutionError as exc:
        pytest.skip(f"Spark's Kafka connector is not available: {exc}")


@pytest.mark.parametrize("source", ["blockgz", "spark"])
def test_a_rerun_refuses_the_new_life_of_a_recreated_topic(
    source, request, kafka, s3_server, bucket, tmp_path
):
    extra = {}
    if source == "spark":
        request.getfixturevalue("connector")
        extra = {"blockgz.spark.kafka.jars": CONNECTOR}
    topic = "lives_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic)
    kafka.produce_bulk(topic, OLD - 1, 1, value_fn=life_value(1))
    options = job_options(kafka, s3_server, bucket, topic, **extra)
    for run in ("job", "fresh"):
        (tmp_path / run).mkdir()
    code, lines, _ = export_once(tmp_path / "job", options)
    assert code == 0, lines
    old_keys = data_keys(s3_server, bucket, topic)
    assert old_keys and len(archived(s3_server, bucket, topic)) == OLD

    recreate(kafka, topic)
    kafka.produce_bulk(topic, NEW - 1, 1, value_fn=life_value(2))
    for run in ("job", "fresh"):  # the same checkpoint, then a new one
        code, lines, seconds = export_once(tmp_path / run, options)
        assert_one_line_failure(code, lines, seconds, topic, "deleted and recreated", "topics.dir")
        assert_only_the_old_life(s3_server, bucket, topic, old_keys)
    code, problems = status(tmp_path / "job" / "job.properties")
    assert code == 2 and any(f"{topic}: deleted and recreated in Kafka" in p for p in problems)
    code, findings = audit(s3_server, bucket)
    assert code == 0 and findings == [], "the archive holds one life: intact"

    # Where two lives meet (a stand-in: a batch of the same job recording the new life's id),
    # audit and status name the topic and both ids.
    log = ExportSettings.from_mapping(options).sink.manifest_log()
    old_id = recorded_topic_ids(log)[topic]
    new_id = describe_topics(kafka.admin(), [topic], timeout_s=15)[topic].topic_id
    assert new_id and new_id != old_id
    later = dataclasses.replace(log, epoch="29991231T000000Z000000")  # after the real batches
    later.write(0, files=[], offsets={}, topic_ids={topic: new_id})
    code, findings = audit(s3_server, bucket)
    assert code == 2 and len(findings) == 1, findings
    assert findings[0].startswith(
        f"topic_lives: the manifests of job lives record 2 lives of "
        f"topic {topic} (topic ids {old_id}, then {new_id})"
    ), findings
    code, problems = status(tmp_path / "job" / "job.properties")
    assert code == 2 and any(f"record 2 lives of topic {topic}" in p for p in problems), problems


def running_job(kafka, s3_server, bucket: str, topic: str, fault: str) -> ExportSettings:
    return ExportSettings.from_mapping(
        {
            **job_options(kafka, s3_server, bucket, topic),
            "blockgz.trigger.interval": "1 second",
            **fault_options(fault),
        }
    )


def assert_stopped_with_one_line(error, topic: str, said: str) -> None:
    assert isinstance(error, ExportFailed), error
    message = str(error)
    assert said in message, message
    assert "TopicRecreatedError" in message and f"topic {topic} was deleted and recreated" in (
        message
    ), message
    assert "\n" not in message and "Traceback" not in message


def test_a_running_export_stops_before_the_next_batch_of_a_recreated_topic(
    spark, kafka, s3_server, bucket, tmp_path
):
    topic = "lives_run_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic)
    kafka.produce_bulk(topic, OLD - 1, 1, value_fn=life_value(1))
    marker = str(tmp_path / "held")
    job = running_job(kafka, s3_server, bucket, topic, f"hold-in-commit:0:{marker}")
    keys: set[str] = set()

    def steps(stop, alive) -> None:
        wait_until(lambda: committed(job, topic) == {0: OLD}, alive, "the old life committed")
        wait_until(lambda: (tmp_path / "held").exists(), alive, "the commit held")
        keys.update(data_keys(s3_server, bucket, topic))
        recreate(kafka, topic)
        kafka.produce_bulk(topic, NEW - 1, 1, value_fn=life_value(2))
        release(marker)
        wait_until(lambda: not alive(), alive=lambda: True, what="the export stopped")

    error = export_while(spark, job, tmp_path / "ckpt", steps)
    assert_stopped_with_one_line(error, topic, "while the export ran")  # the source's check
    assert_only_the_old_life(s3_server, bucket, topic, keys)


def test_a_batch_read_before_the_topic_was_recreated_does_not_commit(
    spark, kafka, s3_server, bucket, tmp_path
):
    topic = "lives_commit_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic)
    kafka.produce_bulk(topic, OLD - 1, 1, value_fn=life_value(1))
    marker = str(tmp_path / "held")
    job = running_job(kafka, s3_server, bucket, topic, f"hold-after-files:1:1:{marker}")
    keys: set[str] = set()

    def steps(stop, alive) -> None:
        wait_until(lambda: committed(job, topic) == {0: OLD}, alive, "the old life committed")
        keys.update(data_keys(s3_server, bucket, topic))
        kafka.produce(topic, [json.dumps({"life": 1, "i": OLD + i}).encode() for i in range(10)])
        wait_until(lambda: (tmp_path / "held").exists(), alive, "batch 1's task held")
        recreate(kafka, topic)  # batch 1 was planned and read in the old life
        kafka.produce_bulk(topic, NEW - 1, 1, value_fn=life_value(2))
        release(marker)
        wait_until(lambda: not alive(), alive=lambda: True, what="the export stopped")

    error = export_while(spark, job, tmp_path / "ckpt", steps)
    assert_stopped_with_one_line(error, topic, "holds the life with id")  # the commit's check
    assert_only_the_old_life(s3_server, bucket, topic, keys)  # batch 1's objects removed


def test_spark_kafka_source_export_stops_before_committing_a_recreated_topic(
    connector, kafka, s3_server, bucket, tmp_path
):
    """Spark's own Kafka source plans the new life's offsets 1,500-2,499 as the old life's
    continuation; the sink's commit check refuses the batch and its objects are removed."""
    from tests.integration.test_export_crash import ExportProcess

    topic = "lives_spark_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic)
    kafka.produce_bulk(topic, OLD - 1, 1, value_fn=life_value(1))
    marker = tmp_path / "held"
    options = {
        **job_options(kafka, s3_server, bucket, topic),
        "blockgz.spark.kafka.jars": CONNECTOR,
        "blockgz.trigger.interval": "1 second",
        **fault_options(f"hold-in-commit:0:{marker}"),
    }
    config = tmp_path / "job.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in options.items()))
    log = tmp_path / "export.out"
    export = ExportProcess(config, tmp_path / "ckpt", log, once=False)
    try:
        export.wait_for(marker)
        keys = data_keys(s3_server, bucket, topic)
        recreate(kafka, topic)
        kafka.produce_bulk(topic, NEW - 1, 1, value_fn=life_value(2))
        release(str(marker))
        code = export.proc.wait(180)
    finally:
        if export.proc.poll() is None:
            export.kill()
    output = log.read_text()
    assert "reading Kafka with the Spark Kafka source" in (tmp_path / "ckpt" / LOG).read_text()
    assert code == 1, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"topic {topic} was deleted and recreated" in errors[0], output
    assert "holds the life with id" in errors[0]
    assert_only_the_old_life(s3_server, bucket, topic, keys)
