"""``blockgz status`` and records held back on purpose (issue 44): a partial file waiting for
``flush.size`` or a time rotation is shown as held and never alarmed on."""

from __future__ import annotations

from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.status.job_status import (
    PROBLEM,
    WARNING,
    PartitionStatus,
    StatusReport,
    assess,
)
from blockgz.sink.status.sources import mark_held


def report_of(*partitions: PartitionStatus) -> StatusReport:
    return StatusReport("j", "s3://b", "k:9092", 10_000.0, list(partitions))


def job_of(tmp_path, **options: str) -> ExportSettings:
    return ExportSettings.from_mapping(
        {"name": "j", "topics": "t", "path": str(tmp_path), "kafka.bootstrap.servers": "k:9092"}
        | options
    )


def test_held_records_raise_neither_the_lag_warning_nor_the_stale_commit_problem():
    held = PartitionStatus("t", 0, committed=1000, kafka_end=1640, last_commit=0.0, held=640)
    assert assess(report_of(held), max_lag=100, max_commit_age=60, now=10_000.0) == []
    assert held.lag == 640 and held.late == 0


def test_records_beyond_the_held_ones_still_alarm():
    late = PartitionStatus("t", 0, committed=0, kafka_end=2640, last_commit=0.0, held=640)
    issues = assess(report_of(late), max_lag=100, max_commit_age=60, now=10_000.0)
    assert [i.level for i in issues] == [WARNING, PROBLEM]
    assert "lag 2000 records" in issues[0].message and "2000 records wait" in issues[1].message


def test_the_held_part_is_the_partial_file_past_the_committed_offset(tmp_path):
    job = job_of(tmp_path, **{"flush.size": "1000", "rotate.interval.ms": "60000"})
    report = report_of(
        PartitionStatus("t", 0, committed=2000, kafka_end=4640),
        PartitionStatus("t", 1, committed=5, kafka_end=5),
    )
    mark_held(report, job)
    assert [p.held for p in report.partitions] == [640, 0] and report.held == 640
    assert report.held_for == "a full file (flush.size=1000) or rotate.interval.ms=60000"
    assert report.to_dict()["partitions"][0]["held"] == 640


def test_nothing_is_held_when_the_export_does_not_hold(tmp_path):
    for options in (
        {"flush.size": "1000"},  # auto: no time rotation bounds the wait
        {"flush.size": "1000", "rotate.interval.ms": "1", "blockgz.hold.partial.files": "false"},
    ):
        report = report_of(PartitionStatus("t", 0, committed=0, kafka_end=640))
        mark_held(report, job_of(tmp_path, **options))
        assert report.held == 0 and report.held_for == ""


def test_progress_shows_held_records_beside_the_lag():
    from rich.console import Console

    from blockgz.sink.export.progress import render
    from blockgz.sink.export.tracking import ExportResult, PartitionProgress

    result = ExportResult(
        partitions={
            ("t", 0): PartitionProgress(next_offset=2000, latest=4640, hold_size=1000),
            ("t", 1): PartitionProgress(next_offset=0, latest=5, hold_size=None),
        }
    )
    assert [p.held for p in result.partitions.values()] == [640, 0]
    assert PartitionProgress(next_offset=0, latest=7, hold_size=0).held == 7  # time rules only
    console = Console(width=200, record=True)
    console.print(render(result))
    shown = console.export_text()
    assert "2,640 (held 640)" in shown and "(held 0)" not in shown


def test_metrics_show_held_records_beside_the_lag():
    from prometheus_client import generate_latest

    from blockgz.sink.export.metrics import ExportMetrics

    metrics = ExportMetrics("j")
    metrics.holding(1000)
    metrics.committed({"t": {0: 2000}})
    metrics.end_offsets({("t", 0): 4640})
    text = generate_latest(metrics.registry).decode()
    assert 'blockgz_lag_records{job="j",partition="0",topic="t"} 2640.0' in text
    assert 'blockgz_held_records{job="j",partition="0",topic="t"} 640.0' in text
