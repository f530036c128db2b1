"""Topics that change under a running export: a new matching topic, a deleted topic.

The export runs (not ``--once``) on the session's SparkSession, in a thread, against Apache Kafka
and SeaweedFS. Besides partitions added to a topic (``test_real_broker.py``), a running job
gains partitions the other real way: a ``topics.regex`` subscription and a new topic that
matches it, which the job must pick up from its offset 0. A topic named in
``topics`` that is deleted mid-run must stop the job with one clear error naming the partition
(Spark's ``failOnDataLoss=true``, the default; ``false`` would log it and go on), and what was
committed before stays exactly once.
"""

from __future__ import annotations

import time
import uuid

import pytest

from blockgz.errors import ExportFailed
from blockgz.sink.jobconfig.config import ExportSettings
from testkit.running_export import archived_offsets, committed, export_while, wait_until
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow

PER_PARTITION = 30


def job_config(kafka, s3_server, bucket: str, **topics: str) -> ExportSettings:
    return ExportSettings.from_mapping(
        {
            "name": "topics-change",
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(s3_server.endpoint_url),
            "flush.size": "10",
            "blockgz.trigger.interval": "1 second",
            **topics,
        }
    )


def test_a_new_topic_matching_the_regex_is_archived_from_offset_0(
    spark, kafka, s3_server, bucket, tmp_path
):
    stem = "grow_" + uuid.uuid4().hex[:8]
    first, later = f"{stem}_a", f"{stem}_b"
    kafka.create_topic(first, partitions=2)
    kafka.produce_bulk(first, PER_PARTITION - 1, 2)
    job = job_config(kafka, s3_server, bucket, **{"topics.regex": f"{stem}_.*"})

    def steps(stop, alive) -> None:
        everything = dict.fromkeys(range(2), PER_PARTITION)
        wait_until(lambda: committed(job, first) == everything, alive, "the first topic")
        kafka.create_topic(later, partitions=3)  # three partitions the job has never seen
        kafka.produce_bulk(later, PER_PARTITION - 1, 3)
        everything = dict.fromkeys(range(3), PER_PARTITION)
        wait_until(lambda: committed(job, later) == everything, alive, "the new topic")

    assert export_while(spark, job, tmp_path / "ckpt", steps) is None
    for topic, partitions in ((first, 2), (later, 3)):
        seen = archived_offsets(s3_server, bucket, topic)
        expected = {(p, o) for p in range(partitions) for o in range(PER_PARTITION)}
        assert set(seen) == expected and max(seen.values()) == 1, topic


def test_a_deleted_topic_stops_the_export_with_one_clear_error(
    spark, kafka, s3_server, bucket, tmp_path
):
    topic = "gone_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=2)
    kafka.produce_bulk(topic, PER_PARTITION - 1, 2)
    job = job_config(kafka, s3_server, bucket, topics=topic)

    def steps(stop, alive) -> None:
        everything = dict.fromkeys(range(2), PER_PARTITION)
        wait_until(lambda: committed(job, topic) == everything, alive, "the topic")
        for future in kafka.admin().delete_topics([topic]).values():
            future.result(15)
        deadline = time.monotonic() + 60
        while alive():
            assert time.monotonic() < deadline, "the export went on without its topic"
            time.sleep(0.2)  # polling with a deadline

    error = export_while(spark, job, tmp_path / "ckpt", steps)
    assert isinstance(error, ExportFailed), error
    message = str(error)
    assert f"partition {topic}-0 no longer exists" in message, message
    assert "\n" not in message and "Traceback" not in message
    seen = archived_offsets(s3_server, bucket, topic)
    expected = {(p, o) for p in range(2) for o in range(PER_PARTITION)}
    assert set(seen) == expected and max(seen.values()) == 1, "committed data stays once"
