"""Held partial files (issue 44): where a micro-batch ends per partition, as pure logic."""

from __future__ import annotations

import pytest

from blockgz.errors import ConfigError
from blockgz.sink.kafka.holding import (
    HoldRules,
    Remainder,
    held_counts,
    holding,
    plan_partition,
    rules_of,
    spark_trigger_options,
)
from blockgz.sink.kafka.offsets import cap_rows
from blockgz.sink.kafka.options import parse_options

MINUTE = 60_000


def plan(start, latest, rules, *, first_ms=None, time_cut=None, now_ms=0):
    return plan_partition(
        Remainder(start, latest), rules, first_ms=first_ms, time_cut=time_cut, now_ms=now_ms
    )


def test_flush_size_alone_reads_whole_files_and_holds_the_rest():
    rules = HoldRules(flush_size=1000)
    assert plan(0, 999, rules)[0] == 0
    assert plan(0, 2500, rules) == (2000, "a full file (flush.size=1000)")
    assert plan(500, 1500, rules) == (1500, "")  # exactly one full file
    assert plan(7, 7, rules) == (7, "")


def test_rotate_interval_closes_the_partial_file_at_the_first_record_that_does_not_fit():
    rules = HoldRules(flush_size=1000, rotate_interval_ms=MINUTE)
    # 120 records, the one at offset 100 is a minute after the first: [0, 100) is a file
    end, why = plan(0, 120, rules, first_ms=5_000, time_cut=100)
    assert end == 100 and "rotate.interval.ms=60000" in why
    # no record a minute later yet: everything waits
    assert plan(0, 120, rules, first_ms=5_000, time_cut=None)[0] == 0
    # the cut is the newest record's successor: everything available closes
    assert plan(0, 120, rules, first_ms=5_000, time_cut=120) == (120, "")
    # after two full files, the cut counts from the partial file's first record
    assert plan(0, 2300, rules, first_ms=5_000, time_cut=2200)[0] == 2200


def test_a_cut_before_the_partial_file_reads_everything():
    """Out-of-order timestamps: Kafka's first record at or after the time lies before the
    partial file; the file is closed rather than held on a time that already passed."""
    rules = HoldRules(flush_size=10, rotate_interval_ms=MINUTE)
    assert plan(0, 25, rules, first_ms=5_000, time_cut=15) == (25, "")


def test_without_the_first_records_time_the_partial_file_waits():
    rules = HoldRules(flush_size=10, rotate_schedule_interval_ms=MINUTE)
    assert plan(0, 5, rules, first_ms=None, now_ms=10 * MINUTE)[0] == 0


def test_scheduled_rotation_reads_everything_once_a_boundary_passed():
    rules = HoldRules(flush_size=10, rotate_schedule_interval_ms=MINUTE)
    first = 10 * MINUTE + 1_000  # 00:10:01 UTC: the next boundary is 00:11:00
    assert plan(0, 5, rules, first_ms=first, now_ms=11 * MINUTE - 1)[0] == 0
    assert plan(0, 5, rules, first_ms=first, now_ms=11 * MINUTE) == (5, "")


def test_wallclock_interval_counts_the_first_records_age():
    rules = HoldRules(flush_size=10, rotate_interval_ms=MINUTE, wallclock=True)
    assert plan(0, 5, rules, first_ms=0, now_ms=MINUTE - 1, time_cut=3)[0] == 0
    assert plan(0, 5, rules, first_ms=0, now_ms=MINUTE) == (5, "")


@pytest.mark.parametrize(
    ("mode", "rules", "once", "held"),
    [
        ("auto", HoldRules(flush_size=10, rotate_interval_ms=1), False, True),
        ("auto", HoldRules(flush_size=10, rotate_interval_ms=1), True, False),
        ("auto", HoldRules(flush_size=10), False, False),
        ("true", HoldRules(flush_size=10), False, True),
        ("true", HoldRules(flush_size=10), True, True),
        ("true", HoldRules(), False, False),
        ("false", HoldRules(flush_size=10, rotate_interval_ms=1), False, False),
        ("true", None, False, False),
    ],
)
def test_when_the_source_holds(mode, rules, once, held):
    assert holding(mode, rules, once=once) is held


def test_a_capped_share_is_cut_to_whole_files():
    """maxOffsetsPerTrigger's share of 75 becomes two files of 30; a share below one file
    stays as it is (the partition would otherwise never be read)."""
    start = {("t", 0): 0, ("t", 1): 100}
    latest = {("t", 0): 300, ("t", 1): 200}
    end = cap_rows(start, dict(latest), 100, flush_size=30)
    assert end == {("t", 0): 60, ("t", 1): 125}
    assert held_counts(start, latest, end) == {("t", 0): 240, ("t", 1): 75}


def test_the_source_reads_its_hold_options():
    base = {"kafka.bootstrap.servers": "b:9092", "subscribe": "t"}
    rules = HoldRules(flush_size=5, rotate_interval_ms=MINUTE, timezone="Europe/Berlin")
    config = parse_options(
        {**base, "blockgz.hold.partial.files": "TRUE", "blockgz.hold.rules": rules.to_json()}
    )
    assert config.hold_mode == "true" and config.hold_rules == rules
    assert parse_options(base).hold_mode == "auto" and parse_options(base).hold_rules is None
    with pytest.raises(ConfigError, match=r"blockgz\.hold\.partial\.files"):
        parse_options({**base, "blockgz.hold.partial.files": "maybe"})
    with pytest.raises(ConfigError, match=r"blockgz\.hold\.rules"):
        parse_options({**base, "blockgz.hold.rules": "[1"})


def test_rules_follow_the_sinks_settings_and_its_extractor():
    from blockgz.sink.write.config import SinkSettings

    sink = SinkSettings.from_options(
        {"path": "/tmp/x", "flush.size": "7", "rotate.interval.ms": "9000"}
    )
    assert rules_of(sink) == HoldRules(flush_size=7, rotate_interval_ms=9000)
    timed = SinkSettings.from_options(
        {
            "path": "/tmp/x",
            "rotate.interval.ms": "9000",
            "partitioner.class": "io.confluent.connect.storage.partitioner.HourlyPartitioner",
            "locale": "en",
            "timezone": "UTC",
        }
    )
    assert rules_of(timed).wallclock  # the extractor defaults to Wallclock


class _Times:
    """Kafka's answers for one partition whose record ``i`` has timestamp ``i * 100`` ms (the
    planning under test is pure; what Kafka answers is fixed here)."""

    def __init__(self, latest: int, gone: tuple = ()):
        self.latest = latest
        self.asked: list[int] = []
        self.waits: list[tuple] = []  # each first_times call's wait_s and later
        self.gone = set(gone)  # partitions whose offset retention deleted

    def forget(self, keep):
        pass

    def reading(self):
        return 0

    def first_times(self, offsets, wait_s=None, later=False):
        self.asked += list(offsets.values())
        self.waits.append((wait_s, later))
        return {tp: off * 100 for tp, off in offsets.items()}

    def time_cuts(self, offsets, due, ends=None):
        assert ends is not None and set(due) <= set(ends)  # each partition's end, for the cache
        cuts = {tp: -(-ms // 100) for tp, ms in due.items()}  # first record at or after
        return {tp: cut for tp, cut in cuts.items() if cut < self.latest}


def reader_with(times: _Times, rules: HoldRules):
    from blockgz.sink.kafka.source import KafkaStreamReader

    config = parse_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t"})
    reader = KafkaStreamReader(config)
    reader._clock = times
    return reader


def test_a_backlog_closes_several_files_by_time_in_one_batch():
    """10 records per second, rotate.interval.ms=1000: files of 10 records; 35 available
    give three closed files in one batch and 5 held."""
    rules = HoldRules(flush_size=1000, rotate_interval_ms=1000)
    reader = reader_with(_Times(latest=35), rules)
    planned = reader._hold({("t", 0): 0}, {("t", 0): 35}, rules)
    assert planned == {("t", 0): 30} and reader.held == {("t", 0): 5}
    assert reader._clock.asked == [0, 10, 20, 30]


def test_only_a_running_exports_first_look_at_its_partial_files_waits_little():
    """The first round of a running export's batch waits at most FIRST_TIMES_WAIT_S for a large
    read of first records; a backlog's later cuts and a --once run (a frozen end) wait for it."""
    from blockgz.sink.kafka.source import FIRST_TIMES_WAIT_S

    rules = HoldRules(flush_size=1000, rotate_interval_ms=1000)
    running = reader_with(_Times(latest=35), rules)
    running._hold({("t", 0): 0}, {("t", 0): 35}, rules)
    assert running._clock.waits == [(FIRST_TIMES_WAIT_S, False)] + [(None, False)] * 3
    once = reader_with(_Times(latest=35), rules)
    once._target = {("t", 0): 35}
    once._hold({("t", 0): 0}, {("t", 0): 35}, rules)
    assert once._clock.waits == [(None, False)] * 4
    # a query's first batch, which Spark's planning of the query follows: the read starts later
    first = reader_with(_Times(latest=35), rules)
    first._hold({("t", 0): 0}, {("t", 0): 35}, rules, first_batch=True)
    assert first._clock.waits[0] == (FIRST_TIMES_WAIT_S, True)


@pytest.mark.parametrize("isolation, committed", [(None, False), ("read_committed", True)])
def test_the_clock_asks_time_cuts_through_the_drivers_admin_client(
    monkeypatch, isolation, committed
):
    """The cuts come with their records' times through the admin client, asked at the
    source's isolation level (a read_committed source: up to the last stable offset)."""
    from blockgz.sink.kafka import oldest
    from blockgz.sink.kafka.source import KafkaStreamReader

    made: list[dict] = []

    def clock(consumer, **kwargs):
        made.append(kwargs)
        return _Times(latest=35)

    monkeypatch.setattr(oldest, "HoldClock", clock)
    options = {"kafka.bootstrap.servers": "b:9092", "subscribe": "t"}
    if isolation:
        options["kafka.isolation.level"] = isolation
    reader = KafkaStreamReader(parse_options(options))
    reader._consumer = reader._admin = admin = object()
    rules = HoldRules(flush_size=1000, rotate_interval_ms=1000)
    reader._hold({("t", 0): 0}, {("t", 0): 35}, rules)
    assert [(m["admin"], m["committed"]) for m in made] == [(admin, committed)]


def test_partitions_without_new_records_or_gone_back_are_left_alone():
    rules = HoldRules(flush_size=10, rotate_interval_ms=1000)
    reader = reader_with(_Times(latest=0), rules)
    begin = {("t", 0): 10, ("t", 1): 10}
    assert reader._hold(begin, {("t", 0): 10, ("t", 1): 5}, rules) == {("t", 0): 10, ("t", 1): 5}
    assert reader._clock.asked == [] and reader.held == {}


def test_a_partial_file_whose_records_retention_deleted_is_read_to_report_the_loss():
    """Held forever, the loss would never show: the range's read reports it (failOnDataLoss)."""
    rules = HoldRules(flush_size=10, rotate_interval_ms=1000)
    reader = reader_with(_Times(latest=5, gone=[("t", 0)]), rules)
    assert reader._hold({("t", 0): 0}, {("t", 0): 5}, rules) == {("t", 0): 5}


def test_spark_trigger_options_map_the_rotation_onto_sparks_trigger_limits():
    """Spark's Kafka source: a trigger waits for flush.size x partitions new offsets or the
    shorter time rotation; what the job set itself is kept (Spark reads options ignoring case)."""
    rules = HoldRules(flush_size=1000, rotate_interval_ms=20_000)
    assert spark_trigger_options(rules, 20, {}) == {
        "minOffsetsPerTrigger": "20000",
        "maxTriggerDelay": "20000ms",
    }
    scheduled = HoldRules(rotate_interval_ms=MINUTE, rotate_schedule_interval_ms=10_000)
    found = spark_trigger_options(scheduled, 5, {})
    assert found["maxTriggerDelay"] == "10000ms"
    assert int(found["minOffsetsPerTrigger"]) == 2**63 - 1  # no flush.size: only time
    assert spark_trigger_options(rules, 20, {"maxoffsetspertrigger": "500"}) == {
        "minOffsetsPerTrigger": "500",  # never more than one batch may read
        "maxTriggerDelay": "20000ms",
    }
    given = {"MinOffsetsPerTrigger": "7", "maxTriggerDelay": "1m"}
    assert spark_trigger_options(rules, 20, given) == {}
    assert spark_trigger_options(HoldRules(flush_size=10), 0, {}) == {"minOffsetsPerTrigger": "10"}
    # Spark starts a batch at the first trigger after the delay: one trigger off, so that a
    # batch spans at most the rotation's record time and ends in one file
    assert spark_trigger_options(rules, 20, {}, trigger_ms=5_000)["maxTriggerDelay"] == "15000ms"
