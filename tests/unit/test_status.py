"""``blockgz status`` without servers: the exit-code decision, durations, the JSON's shape, and
the command on a local archive with brokers nobody listens on."""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.errors import ConfigError
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.status.job_status import (
    PROBLEM,
    WARNING,
    Issue,
    PartitionStatus,
    StatusReport,
    assess,
    job_status,
)
from blockgz.times import format_duration, parse_duration


def report_of(*partitions: PartitionStatus) -> StatusReport:
    return StatusReport("j", "s3://b", "k:9092", 10_000.0, list(partitions))


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15m", 900), ("90s", 90), ("1h30m", 5400), ("2 days", 172800), ("500ms", 0.5), ("45", 45)],
)
def test_durations_read_with_units(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "15x", "m", "fifteen minutes", "1h 30q"])
def test_durations_it_cannot_read_name_the_option(text):
    with pytest.raises(ConfigError, match="--max-commit-age: cannot read"):
        parse_duration(text, name="--max-commit-age")


def test_durations_print_compactly():
    assert [format_duration(s) for s in (0, 59, 900, 5400, 90061)] == [
        "0s", "59s", "15m", "1h30m", "1d1h1m1s",
    ]  # fmt: skip


def test_lag_counts_from_the_committed_offset_or_kafkas_log_start():
    assert PartitionStatus("t", 0, committed=40, kafka_end=100).lag == 60
    assert PartitionStatus("t", 0, committed=None, kafka_start=30, kafka_end=100).lag == 100 - 30
    assert PartitionStatus("t", 0, committed=40).lag is None  # Kafka not asked
    assert PartitionStatus("t", 0, committed=120, kafka_end=100).lag == 0  # never negative


def test_healthy_without_thresholds_or_within_them():
    report = report_of(PartitionStatus("t", 0, committed=90, kafka_end=100, last_commit=9_990))
    assert assess(report) == []
    assert assess(report, max_lag=10, max_commit_age=60, now=10_000) == []
    assert report.exit_code == 0


def test_lag_above_max_lag_is_a_warning():
    report = report_of(PartitionStatus("t", 3, committed=89, kafka_end=100, last_commit=9_990))
    issues = assess(report, max_lag=10, now=10_000)
    assert issues == [Issue(WARNING, "t-3: lag 11 records > --max-lag 10")]
    assert report.exit_code == 1


def test_an_old_commit_with_records_waiting_is_a_problem_and_outranks_warnings():
    report = report_of(
        PartitionStatus("t", 0, committed=50, kafka_end=100, last_commit=10_000 - 3600),
        PartitionStatus("t", 1, committed=0, kafka_end=500, last_commit=9_999),
    )
    issues = assess(report, max_lag=100, max_commit_age=900, now=10_000)
    assert [i.level for i in issues] == [PROBLEM, WARNING]
    assert issues[0].line() == (
        "problem: t-0: no commit for 1h > --max-commit-age 15m (50 records wait)"
    )
    assert report.exit_code == 2


def test_an_idle_partition_is_not_stale_however_old_its_commit():
    report = report_of(PartitionStatus("t", 0, committed=100, kafka_end=100, last_commit=0.0))
    assert assess(report, max_commit_age=60, now=10_000) == []


def test_an_old_commit_with_kafka_unknown_is_a_problem():
    report = report_of(PartitionStatus("t", 0, committed=100, last_commit=0.0))
    (issue,) = assess(report, max_commit_age=60, now=10_000)
    assert issue.level == PROBLEM and "records wait" in issue.message


def test_json_shape():
    report = report_of(PartitionStatus("t", 0, 0, 89, 90, 0, 100, dead_letters=2, last_commit=0.0))
    report.issues.append(Issue(WARNING, "t-0: lag 10 records > --max-lag 5"))
    doc = json.loads(report.to_json())
    assert set(doc) == {
        "job", "archive", "brokers", "checked_at", "status", "exit_code", "manifests",
        "records", "held", "held_for", "last_commit", "partitions", "open_uploads",
        "uncommitted", "issues",
    }  # fmt: skip
    assert doc["status"] == "warning" and doc["exit_code"] == 1
    assert doc["last_commit"] == "1970-01-01T00:00:00Z"
    assert doc["partitions"] == [
        {
            "topic": "t", "partition": 0, "first_offset": 0, "last_offset": 89,
            "committed": 90, "kafka_start": 0, "kafka_end": 100, "dead_letters": 2,
            "held": 0, "lag": 10, "last_commit": "1970-01-01T00:00:00Z",
        }
    ]  # fmt: skip
    assert doc["issues"] == [{"level": "warning", "message": "t-0: lag 10 records > --max-lag 5"}]


# -- on a local archive, with brokers nobody listens on -------------------------------------
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def local_job(tmp_path):
    config = tmp_path / "job.properties"
    config.write_text(
        f"name=j\ntopics=t\npath={tmp_path / 'archive'}\n"
        f"kafka.bootstrap.servers=127.0.0.1:{closed_port()}\n"
    )
    job = ExportSettings.from_file(config)
    job.sink.manifest_log().write(0, files=[], offsets={"t": {0: 10}}, dead_letters={"t": {0: 2}})
    job.sink.manifest_log().write(1, files=[], offsets={"t": {0: 25, 1: 4}})
    return config, job


def test_the_archive_part_without_kafka(local_job):
    _, job = local_job
    store, _ = job.sink.make_store()
    store.put("topics/t/partition=0/t+0+0000000025.json", b"{}")  # an uncommitted batch
    store.put("topics/t/partition=0/t+0+0000000010.json", b"{}")  # before the committed offset
    report = job_status(job, kafka=False)
    assert [(p.topic, p.partition, p.committed, p.dead_letters) for p in report.partitions] == [
        ("t", 0, 25, 2),
        ("t", 1, 4, 0),
    ]
    assert all(p.last_commit is not None for p in report.partitions)
    assert [o["key"] for o in report.uncommitted] == ["topics/t/partition=0/t+0+0000000025.json"]
    assert report.manifests == 2 and report.exit_code == 0


def test_an_unreachable_broker_is_one_problem_line_and_the_archive_still_shows(local_job):
    config, _ = local_job
    result = CliRunner().invoke(main, ["status", str(config), "--output", "json"])
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("problem: kafka.bootstrap.servers=127.0.0.1:")
    assert "Traceback" not in result.output
    doc = json.loads(result.stdout)
    assert doc["exit_code"] == 2
    assert [p["committed"] for p in doc["jobs"][0]["partitions"]] == [25, 4]


def test_a_corrupt_manifest_is_a_problem(local_job):
    config, job = local_job
    store, _ = job.sink.make_store()
    store.put(job.sink.manifest_log().key(2), b"{not json")
    result = CliRunner().invoke(main, ["status", str(config), "--no-kafka"])
    assert result.exit_code == 2
    assert next(line for line in result.stderr.splitlines() if line).startswith(
        "problem: corrupt manifest or catalog:"
    )


def test_a_missing_config_is_a_problem_without_traceback(tmp_path):
    result = CliRunner().invoke(main, ["status", str(tmp_path / "nope.properties")])
    assert result.exit_code == 2
    assert result.stderr.startswith("problem: ") and "Traceback" not in result.stderr


def test_an_archive_url_shows_every_job_there(local_job, tmp_path):
    result = CliRunner().invoke(main, ["status", str(tmp_path / "archive"), "--no-kafka"])
    assert result.exit_code == 0, result.output
    assert "job j:" in result.stdout and "committed" in result.stdout


def test_a_bad_max_commit_age_is_a_usage_error(local_job):
    config, _ = local_job
    result = CliRunner().invoke(main, ["status", str(config), "--max-commit-age", "soon"])
    assert result.exit_code == 2 and "cannot read 'soon' as a duration" in result.stderr


def test_help_has_examples():
    result = CliRunner().invoke(main, ["status", "--help"])
    assert result.exit_code == 0 and "blockgz status s3-sink.properties --max-lag" in result.output
