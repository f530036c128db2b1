"""Sink tasks read Kafka by default: the job's own counts stay records, not Spark's rows."""

from __future__ import annotations

import logging

from blockgz.commits.manifests import Manifest
from blockgz.sink.export.query import range_reading_options
from blockgz.sink.export.tracking import ExportResult, ProgressTracker
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.written.files import WrittenFile

BASE = {
    "name": "s3-sink",
    "topics": "t",
    "kafka.bootstrap.servers": "127.0.0.1:9",
    "s3.bucket.name": "archive",
    "blockgz.snapshot.interval": "off",
}


def test_the_sink_tasks_read_kafka_unless_the_job_opts_out():
    assert ExportSettings.from_mapping(BASE).tasks_read_kafka is True
    opted_out = ExportSettings.from_mapping({**BASE, "blockgz.tasks.read.kafka": "false"})
    assert opted_out.tasks_read_kafka is False


def test_the_range_reader_gets_the_source_options_but_not_the_planning_ones():
    options = range_reading_options(
        {"kafka.bootstrap.servers": "b:9092", "subscribe": "t", "failOnDataLoss": "false",
         "kafka.isolation.level": "read_committed", "maxOffsetsPerTrigger": "9"}
    )  # fmt: skip
    assert options["blockgz.source.failOnDataLoss"] == "false"
    assert options["blockgz.source.kafka.isolation.level"] == "read_committed"
    assert not any("maxOffsetsPerTrigger" in key for key in options)


def _manifest(batch: int, records: int, dead: int = 0) -> Manifest:
    written = WrittenFile("t/0/0.json.gz", "t", 0, "partition=0", 0, records - 1, records, 100, 400)
    return Manifest(
        "s3-sink", "e", str(batch), offsets={"t": {0: records + dead}}, files=(written,),
        dead_letters={"t": {0: dead}} if dead else {},
    )  # fmt: skip


def test_the_batch_line_and_the_result_count_records_when_spark_rows_are_ranges(caplog):
    """With tasks reading Kafka, Spark's ``numInputRows`` is the number of offset ranges (here
    1); the log line, its event and the result count the records the batch consumed (written
    plus dead-lettered: 1,234 + 2)."""
    tracker = ProgressTracker(ExportSettings.from_mapping(BASE), "e", ExportResult())
    tracker.manifests.read_batch = {0: _manifest(0, 1234, dead=2)}.get
    tracker.watermarks.refresh = lambda partitions, now=False: {}
    with caplog.at_level(logging.INFO, logger="blockgz.export"):
        tracker.update([
            {"batchId": 0, "numInputRows": 1, "durationMs": {"addBatch": 1500},
             "timestamp": "2026-12-05T23:00:00.000Z"},
        ])  # fmt: skip
        tracker.update([{"batchId": 1, "numInputRows": 0}])  # an idle trigger: no batch
        tracker.update([{"batchId": 2, "numInputRows": 1, "durationMs": {"addBatch": 9}}])
    lines = [r for r in caplog.records if r.getMessage().startswith("batch ")]
    assert [r.getMessage() for r in lines] == [
        "batch 0: 1,236 records, addBatch 1.5 s",
        "batch 2: no records, addBatch 0.0 s",  # ran, but its manifest is not there
    ]
    first = lines[0].event  # type: ignore[attr-defined]
    assert (first["records"], first["spark_rows"]) == (1236, 1)
    assert first["started"] == "2026-12-05T23:00:00.000Z"  # when Spark began the batch
    assert tracker.result.records == 1236 and tracker.result.dead_letters == 2


class _Captured(Exception):
    """PySpark's CapturedException as far as ``root_cause`` reads it."""

    def __init__(self, desc: str, stack: str = "", cause: Exception | None = None):
        super().__init__(desc)
        self._stackTrace = stack
        self._cause = cause


def test_a_commit_failure_names_the_blockgz_error_spark_wrapped():
    """A lease lost at the commit: Spark's exception says only "Writing job failed."; the
    one line still names the lease (found in the cause's text)."""
    from blockgz.sink.export.job import root_cause

    lost = (
        "[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source "
        'perform commit: Traceback (most recent call last):\n  File "lease.py", line 329\n'
        "blockgz.errors.LeaseLostError: s3://b/_blockgz/j/lease.json: this export lost its "
        "lease to host vm pid 6523\n"
    )
    error = _Captured("Writing job failed.", "at QueryExecutionErrors", _Captured(lost))
    assert root_cause(error) == (
        "LeaseLostError: s3://b/_blockgz/j/lease.json: this export lost its lease to host vm "
        "pid 6523"
    )
    assert root_cause(_Captured("Writing job failed.")) == "Writing job failed."
