"""The restore's plan from an archive alone: topics chosen, renamed, windows counted, configs and
group offsets from the snapshot at or before the point in time (``blockgz restore --dry-run``)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from blockgz.archive.layout import Layout
from blockgz.cli import main
from blockgz.commits.cluster_snapshots import ClusterSnapshot, Snapshots, TopicState
from blockgz.errors import ConfigError
from blockgz.reader import open_archive
from blockgz.reader.reading.window_counts import Window, count_window
from blockgz.reader.restore.planning import plan_restore
from blockgz.reader.restore.request import (
    Rename,
    RestoreRequest,
    parse_offset_window,
    select_topics,
)
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from blockgz.store import LocalStore
from testkit.batches import arrow_batches

T0 = 1_700_000_000_000


def archive_of(root, topic: str, partitions: int, count: int, *, gap: int = 5) -> list:
    """An envelope archive with offset gaps (every ``gap``-th record skips two offsets)."""
    records = []
    for p in range(partitions):
        offset = 0
        for n in range(count):
            records.append(
                KafkaRecord(topic, p, offset, T0 + n * 10, b"k%d" % n, b'{"n":%d}' % n, None)
            )
            offset += 1 if n % gap else 3
    config = SinkSettings.from_options(
        {"path": str(root), "flush.size": "40", "format.json.envelope": "true",
         "s3.compression.type": "blockgzip"}
    )  # fmt: skip
    for p in range(partitions):
        write_task(config, iter(arrow_batches([r for r in records if r.partition == p])))
    return records


def test_names_regex_and_renames():
    assert select_topics(["a", "b", "c1"], ["b"], r"c\d") == ["b", "c1"]
    with pytest.raises(ConfigError, match="holds no topic 'x'; it holds: a, b"):
        select_topics(["a", "b"], ["x"], None)
    with pytest.raises(ConfigError, match="no topic to restore"):
        select_topics(["a"], [], "z.*")
    rename = Rename.parse(["a=a_r"], prefix="dr.")
    assert (rename.target("a"), rename.target("b")) == ("a_r", "dr.b")
    with pytest.raises(ConfigError, match="not a Kafka topic name"):
        Rename.parse([], suffix="/x").target("a")
    with pytest.raises(ConfigError, match="TOPIC:PARTITION=FROM-TO"):
        parse_offset_window("orders=1-2")


def test_counts_match_the_records_the_reader_returns(tmp_path):
    """Counting by the index (with gaps, time windows straddling blocks) agrees with reading."""
    records = archive_of(tmp_path, "t", 1, 200)
    offsets = [r.offset for r in records]
    windows = [
        Window(),
        Window(start=17, end=150),
        Window(from_time=T0 + 333, to_time=T0 + 1507),
        Window(start=40, from_time=T0 + 100, to_time=T0 + 900),
    ]
    asked = [0, 5, 50, 51, 230, 10_000]
    with open_archive(str(tmp_path)) as archive:
        for w in windows:
            inside = [
                r.offset for r in records
                if w.holds_offset(r.offset)
                and (not w.timed or w.holds_time(r.timestamp_ms))
            ]  # fmt: skip
            got = count_window(archive, "t", 0, w, asked)
            assert got.records == len(inside), w
            assert (got.first, got.last) == (inside[0], inside[-1])
            assert got.below == {o: sum(1 for x in inside if x < o) for o in asked}
    assert offsets[-1] > 200  # the gaps are there


def test_plan_takes_configs_and_translates_group_offsets_from_the_snapshot(tmp_path):
    records = archive_of(tmp_path, "orders", 2, 100)
    archive_of(tmp_path, "audit", 1, 10)
    snaps = Snapshots(LocalStore(str(tmp_path)), "", Layout(), "job")
    configs = {"cleanup.policy": "compact", "retention.ms": "86400000"}
    snaps.write(
        ClusterSnapshot(
            at_ms=T0 + 500,
            topics={"orders": TopicState(3, configs)},
            groups={"billing": {"orders": {0: 30, 1: 10_000}}, "other": {"orders": {0: 1}}},
        )
    )
    snaps.write(ClusterSnapshot(at_ms=T0 + 5_000, groups={"billing": {"orders": {0: 99}}}))
    request = RestoreRequest(
        topics=("orders",),
        rename=Rename.parse(["orders=orders_r"]),
        to_time=T0 + 700,
        groups_regex="bill.*",
    )
    with open_archive(str(tmp_path)) as archive:
        plan = plan_restore(archive, request)
    (topic,) = plan.topics
    assert (topic.source, topic.target, topic.partition_count) == ("orders", "orders_r", 3)
    assert dict(topic.state.configs) == configs and plan.snapshot_at == T0 + 500
    restored = {
        p: [r.offset for r in records if r.partition == p and r.timestamp_ms < T0 + 700]
        for p in (0, 1)
    }
    assert [p.count.records for p in topic.partitions] == [70, 70]
    groups = {(g.group, g.partition): (g.target_offset, g.beyond) for g in plan.groups}
    assert groups == {
        ("billing", 0): (sum(1 for o in restored[0] if o < 30), False),
        ("billing", 1): (70, True),  # past the restored range: its end
    }


def test_dry_run_prints_the_plan_as_json_without_kafka(tmp_path):
    archive_of(tmp_path, "orders", 2, 30)
    archive_of(tmp_path, "payments", 1, 20)
    result = CliRunner().invoke(
        main,
        ["restore", str(tmp_path), "--topics-regex", ".*", "--suffix", "_dr",
         "--offsets", "orders:1=10-20", "--dry-run", "--output", "json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert [(t["source"], t["target"], t["records"]) for t in plan["topics"]] == [
        ("orders", "orders_dr", 30 + 8),
        ("payments", "payments_dr", 20),
    ]
    assert plan["topics"][0]["windows"][1]["first_offset"] == 10
    assert "no snapshot of the source cluster" in plan["notes"][0]


def test_dry_run_table_and_one_line_refusals(tmp_path):
    archive_of(tmp_path, "orders", 1, 10)
    table = CliRunner().invoke(main, ["restore", str(tmp_path), "orders", "--dry-run"])
    assert table.exit_code == 0, table.output
    assert "restore plan: 10 records" in table.stdout and "orders" in table.stdout
    for args, words in [
        (["nope", "--dry-run"], "holds no topic 'nope'"),
        (["orders"], "--bootstrap-servers is required"),
        (["orders", "--rename", "orders", "--dry-run"], "write SOURCE=TARGET"),
    ]:
        result = CliRunner().invoke(main, ["restore", str(tmp_path), *args])
        assert result.exit_code != 0
        assert words in result.stderr and "Traceback" not in result.stderr


def test_partition_restores_only_the_named_partitions(tmp_path):
    archive_of(tmp_path, "orders", 3, 10)
    result = CliRunner().invoke(
        main,
        ["restore", str(tmp_path), "orders", "--partition", "orders:1", "--dry-run",
         "--output", "json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (topic,) = json.loads(result.stdout)["topics"]
    assert [w["partition"] for w in topic["windows"]] == [1] and topic["records"] == 10
    for args, words in [
        (["--partition", "orders:7"], "the archive holds partitions [0, 1, 2]"),
        (["--partition", "payments:0"], "--partition names payments"),
        (["--partition", "orders"], "write TOPIC:PARTITION"),
    ]:
        refused = CliRunner().invoke(main, ["restore", str(tmp_path), "orders", *args, "--dry-run"])
        assert refused.exit_code != 0 and words in refused.stderr, refused.output


def test_replay_says_it_is_deprecated_and_names_the_restore_that_replaces_it():
    result = CliRunner().invoke(main, ["replay", "--help"])
    assert result.exit_code == 0
    assert (
        "DEPRECATED" in result.output and "blockgz restore SOURCE TOPIC --rename" in result.output
    )
