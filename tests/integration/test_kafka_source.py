"""The ``blockgz-kafka`` source end to end: real Tansu broker, real Spark (local mode).

Each query runs with Trigger.AvailableNow into ``foreachBatch``, which collects the rows on
the driver; the expected records come from reading the topic with a plain consumer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

QUERY_TIMEOUT_S = 120


@pytest.fixture
def topic(kafka, request) -> str:
    """A fresh topic name for this test (the broker lives for the whole session)."""
    return "ks-" + re.sub(r"[^a-zA-Z0-9]", "-", request.node.name)[:60]


def run_available_now(
    spark, options: dict[str, Any], checkpoint: Path, columns: tuple[str, ...] = ("*",)
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run one Trigger.AvailableNow query; return its rows (as dicts) and its progress."""
    rows: list[dict[str, Any]] = []

    def collect(frame, batch_id: int) -> None:
        frame = frame.selectExpr(*columns, "unix_millis(timestamp) AS ts_ms")
        rows.extend(row.asDict(recursive=True) for row in frame.collect())

    reader = spark.readStream.format("blockgz-kafka")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    query = (
        reader.load()
        .writeStream.foreachBatch(collect)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "the query did not finish in time"
    finally:
        if query.isActive:
            query.stop()
    progress = [json.loads(p.json) for p in query.recentProgress]
    return rows, progress


def source_options(kafka, **options: Any) -> dict[str, Any]:
    return {"kafka.bootstrap.servers": kafka.bootstrap_servers, **options}


def topic_contents(kafka, topic: str) -> dict[tuple[int, int], dict[str, Any]]:
    """Every record of ``topic`` by (partition, offset), read with a plain consumer."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    watermarks = kafka.high_watermarks(topic)
    consumer = Consumer(
        kafka.client_config(
            {"group.id": "reference", "enable.auto.commit": False, "enable.partition.eof": True}
        )
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in watermarks if watermarks[p]])
    found: dict[tuple[int, int], dict[str, Any]] = {}
    ended: set[int] = set()
    while len(ended) < sum(1 for hw in watermarks.values() if hw):
        for message in consumer.consume(1000, timeout=1):
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF
                ended.add(message.partition())
                continue
            found[(message.partition(), message.offset())] = {
                "key": message.key(),
                "value": message.value(),
                "ts_ms": message.timestamp()[1],
                "headers": message.headers(),
            }
    consumer.close()
    return found


def by_position(rows: Iterable[dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    """Rows by (partition, offset); fails on a duplicate."""
    result: dict[tuple[int, int], dict[str, Any]] = {}
    for row in rows:
        position = (row["partition"], row["offset"])
        assert position not in result, f"duplicate record at {position}"
        result[position] = row
    return result


def produce_keyed(kafka, topic: str, partitions: int, per_partition: int, start: int = 0) -> None:
    for partition in range(partitions):
        records = [
            (b"k%d" % n, b'{"p":%d,"n":%d}' % (partition, n))
            for n in range(start, start + per_partition)
        ]
        kafka.produce(topic, records, partition=partition)


def test_every_record_arrives_exactly_once_with_its_fields(spark, kafka, topic, tmp_path):
    kafka.create_topic(topic, partitions=3)
    produce_keyed(kafka, topic, partitions=3, per_partition=15)
    expected = topic_contents(kafka, topic)
    assert len(expected) == 45

    options = source_options(kafka, subscribe=topic, startingOffsets="earliest")
    rows, _ = run_available_now(spark, options, tmp_path / "cp")

    got = by_position(rows)
    assert got.keys() == expected.keys()
    for position, row in got.items():
        want = expected[position]
        assert row["topic"] == topic
        assert (bytes(row["key"]), bytes(row["value"])) == (want["key"], want["value"])
        assert row["ts_ms"] == want["ts_ms"]
        assert row["timestampType"] == 0  # CreateTime
        assert "headers" not in row


def test_max_offsets_per_trigger_splits_the_work(spark, kafka, topic, tmp_path):
    kafka.create_topic(topic, partitions=2)
    produce_keyed(kafka, topic, partitions=2, per_partition=30)

    options = source_options(
        kafka, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=25
    )
    rows, progress = run_available_now(spark, options, tmp_path / "cp")

    sizes = [p["numInputRows"] for p in progress if p["numInputRows"]]
    assert sizes == [25, 25, 10]
    assert by_position(rows).keys() == {(p, o) for p in range(2) for o in range(30)}
    assert progress[-1]["sources"][0]["endOffset"] == {topic: {"0": 30, "1": 30}}


def test_include_headers(spark, kafka, topic, tmp_path):
    kafka.create_topic(topic)
    kafka.produce(
        topic,
        [
            (b"a", b"1", [("trace", b"t1"), ("empty", None)]),
            (b"b", b"2", None),
            (None, None, [("x", b"")]),
        ],
        partition=0,
    )
    options = source_options(
        kafka, subscribe=topic, startingOffsets="earliest", includeHeaders="true"
    )
    rows, _ = run_available_now(spark, options, tmp_path / "cp")

    got = by_position(rows)
    assert got[(0, 0)]["headers"] == [
        {"key": "trace", "value": bytearray(b"t1")},
        {"key": "empty", "value": None},
    ]
    assert got[(0, 1)]["headers"] is None  # no headers: null, as in Spark's source
    assert got[(0, 2)]["headers"] == [{"key": "x", "value": bytearray(b"")}]
    assert got[(0, 2)]["key"] is None and got[(0, 2)]["value"] is None


def test_starting_offsets_json(spark, kafka, topic, tmp_path):
    kafka.create_topic(topic, partitions=3)
    produce_keyed(kafka, topic, partitions=3, per_partition=10)

    starting = {topic: {"0": 6, "1": -1, "2": -2}}
    options = source_options(kafka, subscribe=topic, startingOffsets=json.dumps(starting))
    rows, _ = run_available_now(spark, options, tmp_path / "cp")

    expected = {(0, o) for o in range(6, 10)} | {(2, o) for o in range(10)}
    assert by_position(rows).keys() == expected


def test_restart_from_the_checkpoint_continues_without_duplicates(spark, kafka, topic, tmp_path):
    kafka.create_topic(topic, partitions=2)
    produce_keyed(kafka, topic, partitions=2, per_partition=10)
    options = source_options(kafka, subscribe=topic, startingOffsets="earliest")
    checkpoint = tmp_path / "cp"

    first, _ = run_available_now(spark, options, checkpoint)
    produce_keyed(kafka, topic, partitions=1, per_partition=7, start=10)
    second, _ = run_available_now(spark, options, checkpoint)

    assert by_position(first).keys() == {(p, o) for p in range(2) for o in range(10)}
    assert by_position(second).keys() == {(0, o) for o in range(10, 17)}
    assert [bytes(r["value"]) for r in sorted(second, key=lambda r: r["offset"])] == [
        b'{"p":0,"n":%d}' % n for n in range(10, 17)
    ]


def test_bulk_data_split_inside_broker_batches(spark, kafka, topic, tmp_path):
    """Large record batches, cut by maxOffsetsPerTrigger in the middle: nothing lost or doubled."""
    kafka.create_topic(topic, partitions=2)
    watermarks = kafka.produce_bulk(topic, 20_000, partitions=2)  # + 1 sentinel each
    assert watermarks == {0: 20_001, 1: 20_001}

    options = source_options(
        kafka, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=15_001
    )
    rows, progress = run_available_now(
        spark, options, tmp_path / "cp", columns=("partition", "offset", "value")
    )

    assert [p["numInputRows"] for p in progress if p["numInputRows"]] == [15_001, 15_001, 10_000]
    assert by_position(rows).keys() == {(p, o) for p in range(2) for o in range(20_001)}
    for row in rows[::1000]:
        expected = b'{"partition":%d,"i":%d}' % (row["partition"], row["offset"])
        assert bytes(row["value"]) == expected


def test_pattern_picks_up_new_topics_from_their_start(spark, kafka, topic, tmp_path):
    kafka.create_topic(topic + "-a")
    kafka.produce(topic + "-a", [b"a0", b"a1"], partition=0)
    options = source_options(kafka, subscribePattern=re.escape(topic) + "-.*")
    checkpoint = tmp_path / "cp"

    first, _ = run_available_now(spark, options, checkpoint)  # startingOffsets=latest
    kafka.create_topic(topic + "-b", partitions=2)
    kafka.produce(topic + "-b", [b"b0", b"b1", b"b2"], partition=1)
    kafka.produce(topic + "-a", [b"a2"], partition=0)
    second, _ = run_available_now(spark, options, checkpoint)

    assert first == []
    assert sorted((r["topic"][-1], r["partition"], r["offset"]) for r in second) == [
        ("a", 0, 2),
        ("b", 1, 0),
        ("b", 1, 1),
        ("b", 1, 2),
    ]


def test_assign_reads_only_the_assigned_partitions(spark, kafka, topic, tmp_path):
    kafka.create_topic(topic, partitions=3)
    produce_keyed(kafka, topic, partitions=3, per_partition=4)
    options = source_options(
        kafka,
        assign=json.dumps({topic: [2, 0]}),
        startingOffsets=json.dumps({topic: {"0": -2, "2": 1}}),
    )
    rows, _ = run_available_now(spark, options, tmp_path / "cp")
    expected = {(0, o) for o in range(4)} | {(2, o) for o in range(1, 4)}
    assert by_position(rows).keys() == expected


def test_local_kafka_watermarks_stay_exact(kafka, topic):
    kafka.create_topic(topic, partitions=2)
    assert kafka.high_watermarks(topic) == {0: 0, 1: 0}
    assert kafka.produce(topic, [b"x"] * 50, partition=1) == 50
    assert kafka.produce_bulk(topic, 5_000, partitions=[0, 1]) == {0: 5_001, 1: 5_051}
    assert kafka.high_watermarks(topic) == {0: 5_001, 1: 5_051}
    assert kafka.partitions(topic) == [0, 1]
    kafka.create_topic(topic, partitions=2, exist_ok=True)


def test_many_small_partitions_share_tasks_and_every_record_arrives_once(
    spark, kafka, topic, tmp_path
):
    """130 partitions of 2 records: beyond MIN_TASKS (64) ranges the source packs small ranges
    (3 a task here), and each task reads its ranges one after the other."""
    from blockgz.sink.kafka.source import MIN_TASKS

    kafka.create_topic(topic, partitions=130)
    produce_keyed(kafka, topic, partitions=130, per_partition=2)
    tasks: list[int] = []

    def count_tasks(frame, batch_id: int) -> None:
        tasks.append(frame.rdd.getNumPartitions())

    options = source_options(kafka, subscribe=topic, startingOffsets="earliest")
    rows, _ = run_available_now(spark, options, tmp_path / "cp")
    assert by_position(rows).keys() == {(p, o) for p in range(130) for o in range(2)}
    assert {bytes(r["value"]) for r in rows if r["partition"] == 129} == {
        b'{"p":129,"n":0}',
        b'{"p":129,"n":1}',
    }
    reader = spark.readStream.format("blockgz-kafka").options(
        **{k: str(v) for k, v in options.items()}
    )
    query = (
        reader.load()
        .writeStream.foreachBatch(count_tasks)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "cp2"))
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S), "the query did not finish in time"
    per_task = -(-130 // MIN_TASKS)  # 3
    assert tasks == [-(-130 // per_task)]  # 44 tasks, not 130
