"""``blockgz restore`` sizes its producer from the target topics (issue 42): a record of 2 MiB
goes into a topic created with ``max.message.bytes=5242880``; a topic that takes no such record
refuses it in one line, no traceback. Apache Kafka."""

from __future__ import annotations

import uuid

from blockgz.commits.cluster_snapshots import TopicState
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from testkit.batches import arrow_batches
from tests.integration.test_restore import EXACT, T0, read_all, run, snapshot

BIG = 2 * 1024 * 1024


def _archive_with_a_big_record(root, topic: str) -> list[KafkaRecord]:
    """Seven records of one partition; the fourth's value is a JSON string of 2 MiB."""
    values = [b'{"n":%d}' % n for n in range(7)]
    values[3] = b'"' + b"x" * BIG + b'"'
    records = [KafkaRecord(topic, 0, n, T0 + n, b"k%d" % n, v) for n, v in enumerate(values)]
    config = SinkSettings.from_options(
        {"path": str(root), "s3.compression.type": "blockgzip", "format.json.envelope": "true"}
    )
    write_task(config, iter(arrow_batches(records)))
    return records


def test_a_2_mib_record_goes_into_a_topic_created_to_take_it(kafka, tmp_path):
    topic = f"big_{uuid.uuid4().hex[:6]}"
    records = _archive_with_a_big_record(tmp_path, topic)
    snapshot(tmp_path, T0, {topic: TopicState(1, {"max.message.bytes": "5242880"})}, {})
    target = f"{topic}_r"
    result = run(
        str(tmp_path), topic, "--rename", f"{topic}={target}",
        "--bootstrap-servers", kafka.bootstrap_servers, *EXACT,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"{topic} -> {target} (created): 7 records sent" in result.stderr
    got = read_all(kafka, target)[0]
    assert [m.value() for m in got] == [r.value for r in records]
    assert len(got[3].value()) == BIG + 2


def test_a_record_larger_than_an_existing_topic_takes_is_one_line(kafka, tmp_path):
    topic = f"big_{uuid.uuid4().hex[:6]}"
    _archive_with_a_big_record(tmp_path, topic)
    target = f"{topic}_small"
    kafka.create_topic(target, partitions=1)  # the broker's default: about 1 MiB
    result = run(
        str(tmp_path), topic, "--rename", f"{topic}={target}",
        "--bootstrap-servers", kafka.bootstrap_servers, *EXACT,
    )  # fmt: skip
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr and len(lines) <= 3, result.stderr
    (error,) = [line for line in lines if line.startswith("error:")]
    assert f"{target}[0]: the record of offset 3" in error and "too large" in error, error
