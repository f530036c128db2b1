"""The Python Kafka source's logic without a broker or Spark: options, offsets, limits, reads."""

from __future__ import annotations

import dataclasses
import json
import pickle
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
confluent_kafka = pytest.importorskip("confluent_kafka")

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows  # noqa: E402

from blockgz.errors import ConfigError, DataLossError, SourceError  # noqa: E402
from blockgz.sink.kafka import clients as kclients  # noqa: E402
from blockgz.sink.kafka import offsets as koff  # noqa: E402
from blockgz.sink.kafka import options as kopt  # noqa: E402
from blockgz.sink.kafka import ranges as kranges  # noqa: E402
from blockgz.sink.kafka import source as ks  # noqa: E402
from blockgz.sink.records import kafka_arrow_schema  # noqa: E402

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def config(**options: str) -> kopt.SourceSettings:
    return kopt.parse_options({**BASE, **options})


# -- options ----------------------------------------------------------------------------------


def test_options_are_case_insensitive_and_typed():
    cfg = kopt.parse_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "b1:9092,b2:9092",
            "Subscribe": " a ,b,",
            "startingoffsets": "EARLIEST",
            "maxOffsetsPerTrigger": "500",
            "failOnDataLoss": "False",
            "includeHeaders": "TRUE",
            "kafka.security.protocol": "SSL",
        }
    )
    assert cfg.bootstrap_servers == "b1:9092,b2:9092"
    assert (cfg.strategy, cfg.topics, cfg.starting) == ("subscribe", ("a", "b"), "earliest")
    assert (cfg.max_offsets_per_trigger, cfg.fail_on_data_loss, cfg.include_headers) == (
        500,
        False,
        True,
    )
    assert cfg.kafka == {"security.protocol": "SSL"}


def test_defaults_follow_spark():
    cfg = config(subscribe="t")
    assert cfg.starting == "latest"
    assert cfg.max_offsets_per_trigger is None
    assert cfg.fail_on_data_loss is True
    assert cfg.include_headers is False


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({}, ["subscribe, subscribePattern, assign", "none"]),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, ["exactly one of", "subscribe, assign"]),
        ({"subscribe": " , "}, ["subscribe must list at least one topic"]),
        ({"subscribePattern": "("}, ["subscribePattern is not a valid regex"]),
        ({"assign": "[0]"}, ["assign must be JSON like", '{"topicA": [0, 1]']),
        ({"assign": '{"a": [-1]}'}, ["assign must be JSON like", "'a'"]),
        ({"subscribe": "a", "startingOffsets": "newest"}, ["earliest, latest, s3", "JSON", "-2"]),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, ["startingOffsets", "-3"]),
        ({"subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'}, ["startingOffsets", "'x'"]),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, ["maxOffsetsPerTrigger", "1 or more"]),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "1e5"}, ["maxOffsetsPerTrigger", "'1e5'"]),
        ({"subscribe": "a", "failOnDataLoss": "yes"}, ["failOnDataLoss", "true, false"]),
        ({"subscribe": "a", "includeHeaders": "1"}, ["includeHeaders", "true, false"]),
        ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, ["startingOffsets"]),
        ({"subscribe": "a", "kafka.enable.auto.commit": "true"}, ["kafka.enable.auto.commit"]),
        ({"subscribe": "a", "startingTimestamp": "1"}, ["startingTimestamp", "not supported"]),
    ],
)
def test_bad_options_name_the_option_and_the_allowed_values(options, words):
    with pytest.raises(ConfigError) as caught:
        kopt.parse_options({**BASE, **options})
    for word in words:
        assert word in str(caught.value)


def test_bootstrap_servers_are_required():
    with pytest.raises(ConfigError, match=r"kafka\.bootstrap\.servers is required"):
        kopt.parse_options({"subscribe": "t"})


def test_ignored_spark_options_warn(caplog):
    config(subscribe="t", minPartitions="8")
    assert "minPartitions is ignored" in caplog.text


def test_consumer_config_never_commits_and_passes_kafka_settings_through():
    cfg = config(
        subscribe="t", **{"kafka.isolation.level": "read_committed", "kafka.client.id": "me"}
    )
    conf = cfg.consumer_config()
    assert conf["bootstrap.servers"] == "127.0.0.1:9092"
    assert conf["enable.auto.commit"] is False
    assert conf["enable.partition.eof"] is True
    assert conf["isolation.level"] == "read_committed"
    assert conf["client.id"] == "me"
    assert conf["group.id"].startswith("blockgz-kafka-source-")
    assert config(subscribe="t").consumer_config()["isolation.level"] == "read_uncommitted"
    assert config(subscribe="t", **{"kafka.group.id": "g"}).consumer_config()["group.id"] == "g"


def test_long_ranges_do_not_wait_out_librdkafkas_fetch_backoff():
    """The 1 s default would stall every task reading more than queued.min.messages."""
    assert config(subscribe="t").consumer_config()["fetch.queue.backoff.ms"] == 10
    mine = config(subscribe="t", **{"kafka.fetch.queue.backoff.ms": "500"})
    assert mine.consumer_config()["fetch.queue.backoff.ms"] == "500"


def test_range_consumers_prefetch_little_past_the_range():
    """librdkafka's 64 MiB queue read ranges 2.3-2.6x over (issue 44); a user's value wins."""
    assert config(subscribe="t").consumer_config()["queued.max.messages.kbytes"] == 2048
    mine = config(subscribe="t", **{"kafka.queued.max.messages.kbytes": "65536"})
    assert mine.consumer_config()["queued.max.messages.kbytes"] == "65536"


def test_new_clients_send_a_lost_first_request_again_soon():
    """librdkafka loses a new client's first request with its bootstrap connection and sends
    it again after a pause that follows reconnect.backoff.ms; a user's value wins."""
    for settings in (config(subscribe="t").client_config(), config(subscribe="t").admin_config()):
        assert settings["reconnect.backoff.ms"] == 10
    assert config(subscribe="t").consumer_config()["reconnect.backoff.ms"] == 10
    mine = config(subscribe="t", **{"kafka.reconnect.backoff.ms": "100"})
    assert mine.client_config()["reconnect.backoff.ms"] == "100"
    assert mine.consumer_config()["reconnect.backoff.ms"] == "100"


def test_data_source_schema_and_name():
    source = ks.KafkaDataSource({**BASE, "subscribe": "t", "includeHeaders": "true"})
    assert ks.KafkaDataSource.name() == "blockgz-kafka"
    assert source.schema().endswith("headers ARRAY<STRUCT<key: STRING, value: BINARY>>")
    with pytest.raises(ConfigError):
        ks.KafkaDataSource(BASE)


# -- offsets ----------------------------------------------------------------------------------


def test_offset_json_is_canonical_whatever_the_insertion_order():
    a = {("t", 10): 1, ("t", 2): 2, ("b", 0): 3}
    b = dict(reversed(list(a.items())))
    assert json.dumps(koff.offsets_to_json(a)) == json.dumps(koff.offsets_to_json(b))
    assert json.dumps(koff.offsets_to_json(a)) == '{"b": {"0": 3}, "t": {"2": 2, "10": 1}}'
    round_trip = json.loads(json.dumps(koff.offsets_to_json(a)))
    assert koff.offsets_from_json(round_trip) == a


def test_offsets_from_bad_json_is_a_source_error():
    with pytest.raises(SourceError):
        koff.offsets_from_json({"t": 5})


PARTS = [("t", 0), ("t", 1), ("u", 0)]
EARLIEST = {("t", 0): 2, ("t", 1): 0, ("u", 0): 5}
LATEST = {("t", 0): 10, ("t", 1): 7, ("u", 0): 9}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("earliest", EARLIEST),
        ("latest", LATEST),
        ({("t", 0): 4, ("t", 1): -1, ("u", 0): -2}, {("t", 0): 4, ("t", 1): 7, ("u", 0): 5}),
        ({("t", 1): 3}, {("t", 0): 2, ("t", 1): 3, ("u", 0): 5}),  # left out: earliest
    ],
)
def test_resolve_start(spec, expected):
    assert koff.resolve_start(spec, PARTS, EARLIEST, LATEST) == expected


def test_resolve_start_for_assign_needs_every_partition():
    with pytest.raises(ConfigError, match=r"every assigned partition.*missing: t-0, u-0"):
        koff.resolve_start({("t", 1): 3}, PARTS, EARLIEST, LATEST, every_partition=True)


def test_resolve_start_rejects_unknown_partitions():
    with pytest.raises(ConfigError, match="not subscribed or do not exist: t-7"):
        koff.resolve_start({("t", 7): 3}, PARTS, EARLIEST, LATEST)


# -- limits -----------------------------------------------------------------------------------


def test_split_limit_is_proportional_exact_and_deterministic():
    lags = {("t", 0): 700, ("t", 1): 200, ("t", 2): 100}
    assert koff.split_limit(lags, 100) == {("t", 0): 70, ("t", 1): 20, ("t", 2): 10}
    assert koff.split_limit(lags, 1000) == lags
    assert koff.split_limit(lags, 5000) == lags
    odd = koff.split_limit({("a", 0): 1, ("a", 1): 1, ("a", 2): 1, ("a", 3): 10}, 6)
    assert sum(odd.values()) == 6 and odd[("a", 3)] == 3


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 10, 99, 1000, 1010, 1011])
def test_split_limit_never_exceeds_the_limit_or_a_lag(limit):
    lags = {("t", p): lag for p, lag in enumerate([1000, 1, 5, 0, 3, 2])}
    shares = koff.split_limit(lags, limit)
    assert sum(shares.values()) == min(limit, sum(lags.values()))
    assert all(0 < shares[tp] <= lags[tp] for tp in shares)
    if limit >= 5:  # every lagging partition moves: none starves
        assert set(shares) == {tp for tp, lag in lags.items() if lag}


def test_split_limit_below_the_partition_count_picks_the_most_lagging():
    lags = {("t", 0): 3, ("t", 1): 9, ("t", 2): 9}
    assert koff.split_limit(lags, 2) == {("t", 1): 1, ("t", 2): 1}


def test_plan_end_honours_the_limit_and_target():
    start = {("t", 0): 0, ("t", 1): 50}
    latest = {("t", 0): 100, ("t", 1): 150}
    assert koff.plan_end(start, latest, {}) == latest
    assert koff.plan_end(start, latest, {}, max_rows=20) == {("t", 0): 10, ("t", 1): 60}
    target = {("t", 0): 30, ("t", 1): 150}
    assert koff.plan_end(start, latest, {}, target=target) == {("t", 0): 30, ("t", 1): 150}
    assert koff.plan_end(latest, latest, {}) == latest  # no data: start unchanged


def test_plan_end_adds_new_partitions_at_earliest_without_reading_them():
    start = {("t", 0): 5}
    latest = {("t", 0): 5, ("t", 1): 40}
    assert koff.plan_end(start, latest, {("t", 1): 0}) == {("t", 0): 5, ("t", 1): 0}
    # Trigger.AvailableNow: partitions unknown at the target's time stay out.
    assert koff.plan_end(start, latest, {("t", 1): 0}, target={("t", 0): 5}) == {("t", 0): 5}


@pytest.mark.parametrize(
    ("start", "latest", "earliest_new", "message"),
    [
        ({("t", 0): 5, ("t", 1): 5}, {("t", 0): 5}, {}, "t-1 no longer exists"),
        ({("t", 0): 5}, {("t", 0): 5, ("t", 1): 9}, {("t", 1): 3}, "starts at offset 3"),
        ({("t", 0): 50}, {("t", 0): 5}, {}, "went back from 50 to 5"),
    ],
)
def test_plan_end_reports_data_loss(start, latest, earliest_new, message, caplog):
    with pytest.raises(DataLossError, match=message):
        koff.plan_end(start, latest, earliest_new)
    end = koff.plan_end(start, latest, earliest_new, fail_on_data_loss=False)
    assert message in caplog.text
    assert set(end) == set(latest)


def test_check_range_start():
    assert koff.check_range_start(("t", 0), 10, 20, 3, True) == 10
    with pytest.raises(DataLossError, match=r"offsets \[10, 15\) of t-0 are no longer in Kafka"):
        koff.check_range_start(("t", 0), 10, 20, 15, True)
    assert koff.check_range_start(("t", 0), 10, 20, 30, False) == 20


# -- the reader, against a fake consumer ------------------------------------------------------


@dataclass
class FakeMessage:
    _offset: int
    _value: bytes | None = b"v"
    _key: bytes | None = None
    _headers: list[tuple[str, bytes | None]] | None = None
    _timestamp: tuple[int, int] = (1, 1_700_000_000_123)
    _error: Any = None

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def error(self) -> Any:
        return self._error


def eof(offset: int) -> FakeMessage:
    error = confluent_kafka.KafkaError(confluent_kafka.KafkaError._PARTITION_EOF)
    return FakeMessage(offset, _error=error)


@dataclass
class FakeConsumer:
    """Just enough of confluent_kafka.Consumer: one partition per topic name given."""

    earliest: dict[tuple[str, int], int]
    latest: dict[tuple[str, int], int]
    log: list[FakeMessage] = field(default_factory=list)  # what the broker returns, in order
    assigned: list[Any] = field(default_factory=list)
    asked: list[int] = field(default_factory=list)
    listed: list[int] = field(default_factory=list)  # partitions per offsets_for_times request
    closed: bool = False
    out_of_range: bool = False  # an offset before the earliest was assigned

    def list_topics(self, timeout: float) -> Any:
        topics: dict[str, Any] = {}
        for topic, partition in self.latest:
            meta = topics.setdefault(topic, SimpleNamespace(error=None, partitions={}))
            meta.partitions[partition] = None
        return SimpleNamespace(topics=topics)

    def offsets_for_times(self, tps: list[Any], timeout: float) -> list[Any]:
        source = {-2: self.earliest, -1: self.latest}
        self.listed.append(len(tps))
        return [
            confluent_kafka.TopicPartition(
                tp.topic, tp.partition, source[tp.offset][tp.topic, tp.partition]
            )
            for tp in tps
        ]

    def get_watermark_offsets(self, tp: Any, timeout: float, cached: bool) -> tuple[int, int]:
        key = (tp.topic, tp.partition)
        return self.earliest[key], self.latest[key]

    def assign(self, tps: list[Any]) -> None:
        self.assigned.append(tps)
        self.out_of_range = any(tp.offset < self.earliest[tp.topic, tp.partition] for tp in tps)

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        self.asked.append(num_messages)
        if self.out_of_range:  # as librdkafka under auto.offset.reset=error
            self.out_of_range = False
            reset = confluent_kafka.KafkaError(confluent_kafka.KafkaError._AUTO_OFFSET_RESET)
            return [FakeMessage(-1001, _error=reset)]
        batch, self.log = self.log[:num_messages], self.log[num_messages:]
        return batch

    def position(self, tps: list[Any]) -> list[Any]:
        return [confluent_kafka.TopicPartition(tps[0].topic, tps[0].partition, -1001)]

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake(monkeypatch):
    consumer = FakeConsumer(
        earliest={("t", 0): 0, ("t", 1): 0}, latest={("t", 0): 100, ("t", 1): 20}
    )
    monkeypatch.setattr(ks, "new_consumer", lambda config: consumer)
    monkeypatch.setattr(kranges, "new_consumer", lambda config: consumer)
    return consumer


def reader(**options: str) -> ks.KafkaStreamReader:
    source = ks.KafkaDataSource({**BASE, "subscribe": "t", **options})
    return source.streamReader(None)


def test_reader_plans_batches_with_stable_offset_json(fake):
    r = reader(startingOffsets="earliest", maxOffsetsPerTrigger="60")
    start = json.loads(json.dumps(r.initialOffset()))
    assert start == {"t": {"0": 0, "1": 0}}
    assert r.getDefaultReadLimit() == ReadMaxRows(60)
    first = r.latestOffset(start, r.getDefaultReadLimit())
    assert first == {"t": {"0": 50, "1": 10}}
    everything = r.latestOffset(first, ReadAllAvailable())
    assert everything == {"t": {"0": 100, "1": 20}}
    again = r.latestOffset(everything, ReadMaxRows(60))
    assert json.dumps(again) == json.dumps(everything)  # no data: start, byte for byte
    assert r.partitions(everything, everything) == []
    parts = r.partitions(start, first)  # few partitions: a task each
    assert parts == [ks.KafkaInputPartition("t", 0, 0, 50), ks.KafkaInputPartition("t", 1, 0, 10)]
    assert pickle.loads(pickle.dumps(parts[0])) == parts[0]


def test_group_ranges_packs_small_ranges_in_order_and_leaves_big_ones_alone():
    ranges = [kranges.Range("t", p, 0, n) for p, n in enumerate([3, 3, 3, 3, 3, 10_000, 3, 3])]
    groups = ks.group_ranges(ranges, per_task=2)
    assert [[r.partition for r in g] for g in groups] == [[0, 1], [2, 3], [4], [5], [6, 7]]
    assert [r for g in groups for r in g] == ranges  # every range once, in order
    assert [len(g) for g in ks.group_ranges(ranges, per_task=32)] == [5, 1, 2]
    assert [len(g) for g in ks.group_ranges(ranges, per_task=1)] == [1] * 8
    assert ks.group_ranges([], per_task=4) == []


def test_thousands_of_partitions_are_asked_in_chunks_and_the_start_once(fake):
    from blockgz.sink.kafka.oldest import OFFSETS_CHUNK

    fake.earliest = {("t", p): 0 for p in range(1_200)}
    fake.latest = {("t", p): 3 for p in range(1_200)}
    r = reader(startingOffsets="earliest")
    start = r.initialOffset()
    chunks = [200, OFFSETS_CHUNK, OFFSETS_CHUNK]
    assert sorted(fake.listed) == sorted(chunks * 2)  # the earliest, and the latest for batch 0
    fake.earliest = {tp: 1 for tp in fake.earliest}  # retention moved on meanwhile
    assert r.initialOffset() == start  # Spark asks again for the first batch: same answer
    assert len(fake.listed) == 6
    end = r.latestOffset(start, ReadAllAvailable())
    assert len(fake.listed) == 6  # batch 0's end: the latest offsets asked with its start
    assert koff.offsets_from_json(end) == fake.latest
    tasks = r.partitions(start, end)  # packed by 19 (no fewer than ks.MIN_TASKS = 64 tasks)
    assert [len(t.ranges) for t in tasks] == [19] * 63 + [3]
    assert pickle.loads(pickle.dumps(tasks[0])) == tasks[0]
    packed = reader(**{"blockgz.ranges.per.task": "8"}).partitions(start, end)
    assert [len(t.ranges) for t in packed] == [8] * 150
    apart = reader(**{"blockgz.ranges.per.task": "1"}).partitions(start, end)
    assert apart[:2] == [ks.KafkaInputPartition("t", 0, 0, 3), ks.KafkaInputPartition("t", 1, 0, 3)]
    assert len(apart) == 1_200


def test_a_task_of_several_ranges_reads_them_in_order(fake, monkeypatch):
    # one range at a time: the fake consumer has one log for every partition (reading small
    # ranges together, with one consumer, is tested on the broker: test_read_ranges_together)
    monkeypatch.setattr(kranges, "together", lambda parts: [[p] for p in parts])
    fake.log = [FakeMessage(n) for n in range(5)] + [FakeMessage(n) for n in range(3)]
    fake.latest = {("t", 0): 5, ("t", 1): 3}
    task = ks.KafkaRangeGroup((kranges.Range("t", 0, 0, 5), kranges.Range("t", 1, 0, 3)))
    table = read_all(reader(), task)
    assert table.column("partition").to_pylist() == [0] * 5 + [1] * 3
    assert table.column("offset").to_pylist() == [0, 1, 2, 3, 4, 0, 1, 2]
    rows = list(reader(**{"blockgz.emit": "ranges"}).read(task))
    assert rows == [("t", 0, 0, 5), ("t", 1, 0, 3)]


def test_trigger_available_now_freezes_the_target(fake):
    r = reader(startingOffsets="earliest")
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    fake.latest[("t", 0)] = 500  # arrives after the target was taken
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 100, "1": 20}}
    assert r.latestOffset(end, ReadAllAvailable()) == end


def test_reader_pickles_without_its_consumer(fake, monkeypatch):
    from blockgz.sink.kafka import lives

    monkeypatch.setattr(lives, "live_topic_ids", lambda client, topics: {"t": "ID"})
    r = reader(**{kopt.TOPIC_IDS: json.dumps({"t": "ID"})})
    r.initialOffset()  # the topic ids are being asked on a thread (a Future is kept)
    assert r._consumer is fake
    copy = pickle.loads(pickle.dumps(r))
    assert copy._consumer is None and copy.config == r.config
    r.stop()
    assert fake.closed


def test_assign_needs_existing_partitions(fake):
    r = ks.KafkaDataSource({**BASE, "assign": '{"t": [0, 5]}'}).streamReader(None)
    with pytest.raises(SourceError, match="assigned partitions do not exist: t-5"):
        r.initialOffset()


def read_all(r: ks.KafkaStreamReader, partition: Any) -> Any:
    batches = list(r.read(partition))
    return pa.Table.from_batches(batches, schema=kafka_arrow_schema(r.config.include_headers))


def test_read_skips_offsets_below_start_and_stops_at_end(fake):
    fake.log = [FakeMessage(n, b"%d" % n) for n in range(0, 30)]  # a whole batch from 0
    r = reader()
    table = read_all(r, ks.KafkaInputPartition("t", 0, 5, 25))
    assert table.column("offset").to_pylist() == list(range(5, 25))
    assert table.column("value").to_pylist()[0] == b"5"
    assert all(n <= 25 - 5 for n in fake.asked)  # never asks for more than the range
    assert fake.closed


def test_read_builds_exactly_sparks_arrow_schema(fake):
    fake.log = [
        FakeMessage(0, b"a", b"k", [("h", b"x"), ("n", None)], (1, 1_700_000_000_123)),
        FakeMessage(1, None, None, None, (2, 5)),
    ]
    r = reader(includeHeaders="true")
    batches = list(r.read(ks.KafkaInputPartition("t", 0, 0, 2)))
    assert batches[0].schema.equals(kafka_arrow_schema(True))
    rows = batches[0].to_pylist()
    assert rows[0]["timestamp"].isoformat() == "2023-11-14T22:13:20.123000+00:00"
    assert [row["timestampType"] for row in rows] == [0, 1]
    assert rows[0]["headers"] == [{"key": "h", "value": b"x"}, {"key": "n", "value": None}]
    assert rows[1]["headers"] is None and rows[1]["value"] is None
    assert rows[0]["topic"] == "t" and rows[0]["partition"] == 0


def test_read_splits_into_batches_of_10k_rows(fake):
    fake.latest[("t", 0)] = 25_000
    fake.log = [FakeMessage(n) for n in range(25_000)]
    sizes = [b.num_rows for b in reader().read(ks.KafkaInputPartition("t", 0, 0, 25_000))]
    assert sizes == [10_000, 10_000, 5_000]


def test_read_stops_at_a_gap_at_the_end(fake):
    fake.log = [FakeMessage(0), FakeMessage(2), eof(100)]  # offsets 1 and 3..9 compacted away
    table = read_all(reader(), ks.KafkaInputPartition("t", 0, 0, 10))
    assert table.column("offset").to_pylist() == [0, 2]


def test_read_reports_a_partition_shorter_than_planned(fake):
    fake.log = [FakeMessage(0), eof(1)]
    with pytest.raises(DataLossError, match="t-0 ends at offset 1"):
        read_all(reader(), ks.KafkaInputPartition("t", 0, 0, 10))
    fake.log = [FakeMessage(0), eof(1)]
    assert (
        read_all(reader(failOnDataLoss="false"), ks.KafkaInputPartition("t", 0, 0, 10)).num_rows
        == 1
    )


def test_read_reports_deleted_offsets(fake):
    fake.earliest[("t", 0)] = 8
    with pytest.raises(DataLossError, match=r"offsets \[0, 8\) of t-0"):
        read_all(reader(), ks.KafkaInputPartition("t", 0, 0, 10))
    fake.log = [FakeMessage(8), FakeMessage(9)]
    table = read_all(reader(failOnDataLoss="false"), ks.KafkaInputPartition("t", 0, 0, 10))
    assert table.column("offset").to_pylist() == [8, 9]
    assert fake.assigned[-1][0].offset == 8


def test_read_gives_up_after_the_poll_timeout(fake):
    r = reader(**{"kafkaConsumer.pollTimeoutMs": "300"})
    with pytest.raises(SourceError, match="no record of t-0 at offset 0 arrived in 300 ms"):
        read_all(r, ks.KafkaInputPartition("t", 0, 0, 10))


def test_starting_offsets_s3_reads_the_sink_manifests(tmp_path):
    from blockgz.archive.layout import Layout
    from blockgz.commits.manifest_log import ManifestLog
    from blockgz.sink.kafka.offsets import manifest_start
    from blockgz.sink.kafka.options import parse_options
    from blockgz.store import LocalStore

    log = ManifestLog(LocalStore(tmp_path), "", Layout(), "job")
    log.write(0, files=[], offsets={"t": {0: 7}})
    log.write(1, files=[], offsets={"t": {0: 12}})
    sink = {"path": str(tmp_path), "name": "job"}
    source = parse_options(
        {"kafka.bootstrap.servers": "x:1", "subscribe": "t", "startingOffsets": "s3", **sink}
    )
    assert source.starting == "s3"
    start = manifest_start(source.manifest_options, [("t", 0), ("t", 1)])
    assert start == {("t", 0): 12, ("t", 1): -2}


def test_starting_offsets_s3_needs_a_sink_target():
    from blockgz.errors import ConfigError
    from blockgz.sink.kafka.options import parse_options

    with pytest.raises(ConfigError, match=r"s3\.bucket\.name is required"):
        parse_options({"kafka.bootstrap.servers": "x:1", "subscribe": "t", "startingOffsets": "s3"})


@pytest.fixture
def asked(monkeypatch) -> list[list[str]]:
    """The topics each question for the live topic ids named; each answer: topic t is now the
    life with id NEW."""
    from blockgz.sink.kafka import lives

    topics_asked: list[list[str]] = []

    def live_ids(client: Any, topics: Any) -> dict[str, str | None]:
        topics_asked.append(sorted(topics))
        return {"t": "NEW"}

    monkeypatch.setattr(lives, "live_topic_ids", live_ids)
    return topics_asked


def test_a_recreated_topic_refuses_before_its_offsets_look_like_data_loss(fake, monkeypatch, asked):
    """The live ids are asked beside the offsets, and checked before the end is planned: a
    topic recreated under its name (offsets back at 0) stops the query as a new life."""
    from blockgz.errors import TopicRecreatedError
    from blockgz.sink.kafka import lives

    r = reader(**{kopt.TOPIC_IDS: json.dumps({"t": "OLD"})})
    went_back = {"t": {"0": 500, "1": 20}}  # partition 0's latest (100) is below its start
    with pytest.raises(TopicRecreatedError, match="its topic id is now NEW, not OLD"):
        r.latestOffset(went_back, ReadAllAvailable())
    monkeypatch.setattr(lives, "live_topic_ids", lambda client, topics: {"t": "OLD"})
    with pytest.raises(DataLossError, match="went back from 500 to 100"):
        r.latestOffset(went_back, ReadAllAvailable())
    assert asked == [["t"]]
    r.stop()


def test_the_starts_answers_plan_only_the_batch_that_begins_there_and_only_soon(fake, monkeypatch):
    listed: list[int] = []
    ask = fake.offsets_for_times

    def recording(tps: list[Any], timeout: float) -> list[Any]:
        listed.extend({tp.offset for tp in tps})
        return ask(tps, timeout)

    fake.offsets_for_times = recording
    # a restart replays batch 0: Spark asks the start and plans no batch from it
    replayed = reader(startingOffsets="earliest")
    replayed.initialOffset()
    fake.latest = {("t", 0): 150, ("t", 1): 20}
    batch_1 = replayed.latestOffset({"t": {"0": 100, "1": 20}}, ReadAllAvailable())
    assert batch_1 == {"t": {"0": 150, "1": 20}}  # asked afresh, not the start's answer
    assert listed == [-2, -1, -1]

    monkeypatch.setattr(ks, "FIRST_ASKED_FOR_S", 0.0)  # the first batch planned too late
    late = reader(startingOffsets="earliest")
    start = late.initialOffset()
    fake.latest = {("t", 0): 170, ("t", 1): 20}
    assert late.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 170, "1": 20}}


def test_the_first_batch_asks_the_live_ids_with_its_start_and_still_checks_them(fake, asked):
    from blockgz.errors import TopicRecreatedError

    r = reader(**{kopt.TOPIC_IDS: json.dumps({"t": "OLD"})})
    start = r.initialOffset()
    assert asked == [["t"]]  # beside the start's offsets
    with pytest.raises(TopicRecreatedError, match="its topic id is now NEW, not OLD"):
        r.latestOffset(start, ReadAllAvailable())
    assert asked == [["t"]]  # batch 0 checks that answer and asks no other
    with pytest.raises(TopicRecreatedError):
        r.latestOffset(start, ReadAllAvailable())  # a later batch asks again
    assert asked == [["t"], ["t"]]
    r.stop()


@dataclass
class Questions:
    """What the fake broker was asked: the offsets (-2 earliest, -1 latest) of each
    ListOffsets, and each metadata request's timeout."""

    offsets: list[int] = field(default_factory=list)
    metadata: list[float] = field(default_factory=list)


@pytest.fixture
def questions(fake) -> Questions:
    asked = Questions()
    ask, list_topics = fake.offsets_for_times, fake.list_topics

    def recording(tps: list[Any], timeout: float) -> list[Any]:
        asked.offsets.extend({tp.offset for tp in tps})
        return ask(tps, timeout)

    def metadata(timeout: float) -> Any:
        asked.metadata.append(timeout)
        return list_topics(timeout)

    fake.offsets_for_times, fake.list_topics = recording, metadata
    return asked


@pytest.mark.parametrize(
    ("spec", "asked"),
    [("earliest", [-2, -1]), ("latest", [-1]), ({("t", 0): -1, ("t", 1): 7}, [-2, -1])],
)
def test_the_first_batch_asks_each_offset_and_the_metadata_once(fake, spec, asked, questions):
    wanted, listed = questions.offsets, questions.metadata
    r = reader()
    r.config = dataclasses.replace(r.config, starting=spec)
    start = r.initialOffset()
    assert r.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 100, "1": 20}}
    assert wanted == asked  # the start's offsets, and the latest for the end, once each
    assert len(listed) == 1
    expected = {"earliest": {"0": 0, "1": 0}, "latest": {"0": 100, "1": 20}}
    assert start == {"t": expected[spec] if isinstance(spec, str) else {"0": 100, "1": 7}}
    fake.latest = {("t", 0): 150, ("t", 1): 20}
    later = r.latestOffset(start, ReadAllAvailable())  # a later batch asks afresh
    assert later == {"t": {"0": 150, "1": 20}}
    assert wanted == [*asked, -1]
    assert len(listed) == 2


@pytest.mark.parametrize(("spec", "asked"), [("earliest", [-1, -2]), ("latest", [-1])])
def test_a_once_run_starts_from_the_end_it_froze_without_asking_it_again(
    fake, spec, asked, questions
):
    """``--once``: Spark freezes the end (``prepareForTriggerAvailableNow``: the metadata and
    the latest offsets), then asks the start, which plans from that end."""
    r = reader(startingOffsets=spec)
    r.prepareForTriggerAvailableNow()
    fake.latest[("t", 0)] = 500  # arrives after the end was frozen
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    assert questions.offsets == asked and len(questions.metadata) == 1
    assert end == {"t": {"0": 100, "1": 20}}
    assert start == ({"t": {"0": 0, "1": 0}} if spec == "earliest" else end)


@pytest.mark.parametrize("code", ["FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "_TRANSPORT"])
def test_a_restarted_brokers_answers_are_asked_again(code, monkeypatch):
    """A broker killed and restarted with its data bumps the leader epoch: ListOffsets sent
    with the old epoch fails until librdkafka refreshes its metadata (seen in a CI run)."""
    from confluent_kafka import KafkaError, KafkaException

    monkeypatch.setattr(kclients.time, "sleep", lambda s: None)
    answers: list[Any] = [KafkaException(KafkaError(getattr(KafkaError, code))), 42]

    def ask() -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    config = kopt.parse_options({**BASE, "subscribe": "t"})
    assert kclients.asking_again(config, "cannot list offsets", ask) == 42
    assert answers == []


def test_any_other_answer_is_a_source_error_at_once():
    from confluent_kafka import KafkaError, KafkaException

    calls: list[int] = []

    def ask() -> Any:
        calls.append(1)
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    config = kopt.parse_options({**BASE, "subscribe": "t"})
    with pytest.raises(SourceError, match="cannot list offsets from Kafka at"):
        kclients.asking_again(config, "cannot list offsets", ask)
    assert calls == [1]
