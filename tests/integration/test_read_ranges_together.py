"""A sink task's small offset ranges read together with one consumer (issue 44), on the real
Apache Kafka broker: each range gives exactly its records, in order, in batches of one
topic-partition; records past a range's end (fetched with it), transaction markers, aborted
records and a range planned past the partition's end are handled as one range read alone."""

from __future__ import annotations

import time
import uuid

import pytest

from blockgz.errors import DataLossError
from blockgz.sink.kafka.options import parse_options
from blockgz.sink.kafka.ranges import Range, read_range_rows, read_ranges, together


def _options(kafka, topic: str, **extra: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "subscribe": topic,
        "kafkaConsumer.pollTimeoutMs": "20000",
        **extra,
    }


def _by_range(batches) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
    """``{(topic, partition): [(offset, value)]}`` of Arrow batches; asserts each batch holds
    one topic-partition."""
    found: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    for batch in batches:
        rows = batch.to_pylist()
        assert len({(r["topic"], r["partition"]) for r in rows}) == 1
        for r in rows:
            found.setdefault((r["topic"], r["partition"]), []).append((r["offset"], r["value"]))
    return found


def _topic(kafka, partitions: int) -> str:
    name = "together_" + uuid.uuid4().hex[:8]
    kafka.create_topic(name, partitions=partitions)
    return name


def test_small_ranges_of_many_partitions_give_exactly_their_records(kafka):
    """Six partitions of 20 records; ranges that start mid-partition and stop before its end
    (the broker sends the records after them in the same fetch), one empty partition's worth
    of nothing, all read together: each range's records exactly once, in offset order."""
    import pyarrow as pa

    topic = _topic(kafka, 6)
    for p in range(6):
        kafka.produce(topic, [b"p%d-%d" % (p, n) for n in range(20)], partition=p)
    parts = [Range(topic, p, p, 20 - 2 * p) for p in range(6)]  # [0,20), [1,18), ... [5,10)
    assert together(parts) == [parts]  # one group: one consumer
    rows = pa.RecordBatch.from_pylist(
        [
            {"topic": r.topic, "partition": r.partition, "startOffset": r.start, "endOffset": r.end}
            for r in parts
        ]
    )
    found = _by_range(read_range_rows(_options(kafka, topic), iter([rows])))
    assert found == {
        (topic, r.partition): [(n, b"p%d-%d" % (r.partition, n)) for n in range(r.start, r.end)]
        for r in parts
    }


def _transactions(kafka, topic: str, partition: int) -> None:
    """Offsets 0-1 plain, 2-4 committed (marker 5), 6-8 aborted (marker 9), 10 plain."""
    from confluent_kafka import Producer

    plain = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 0})
    txn = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"{topic}-{partition}"}
    )
    txn.init_transactions(30)
    for n in range(2):
        plain.produce(topic, b"plain %d" % n, partition=partition)
    plain.flush(30)
    for outcome in ("commit", "abort"):
        txn.begin_transaction()
        for n in range(3):
            txn.produce(topic, b"%s %d" % (outcome.encode(), n), partition=partition)
        txn.flush(30)
        if outcome == "commit":
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)
    _wait_for_end(kafka, topic, partition, 10)  # the abort marker is in
    plain.produce(topic, b"plain 2", partition=partition)
    plain.flush(30)


def _wait_for_end(kafka, topic: str, partition: int, end: int, timeout_s: float = 30) -> None:
    """Until the partition's high watermark reaches ``end`` (a marker lands after the call)."""
    deadline = time.monotonic() + timeout_s
    while kafka.high_watermarks(topic)[partition] < end:
        assert time.monotonic() < deadline, f"{topic}-{partition} did not reach {end}"
        time.sleep(0.1)  # polling the broker with a deadline


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_ranges_over_transaction_markers_read_together(kafka, isolation):
    """Ranges ending on a commit marker, on an abort marker, and spanning both, in three
    partitions read together: each gives what a consumer of that isolation reads in it,
    without waiting for records that never come."""
    topic = _topic(kafka, 3)
    for p in range(3):
        _transactions(kafka, topic, p)
    parts = [Range(topic, 0, 0, 6), Range(topic, 1, 3, 10), Range(topic, 2, 0, 11)]
    started = time.monotonic()
    found = _by_range(read_ranges(parse_options(_options(kafka, topic, **{
        "kafka.isolation.level": isolation})), parts))  # fmt: skip
    took = time.monotonic() - started
    committed = {0: b"plain 0", 1: b"plain 1", 2: b"commit 0", 3: b"commit 1", 4: b"commit 2"}
    aborted = {6: b"abort 0", 7: b"abort 1", 8: b"abort 2"}
    log = {**committed, **({} if isolation == "read_committed" else aborted), 10: b"plain 2"}
    assert found == {
        (topic, r.partition): [(o, v) for o, v in sorted(log.items()) if r.start <= o < r.end]
        for r in parts
    }
    assert took < 10, f"the read waited {took:.1f} s for the ranges' markers"


def test_a_range_planned_past_its_partition_end_is_data_loss(kafka):
    """One of the ranges read together ends past what its partition holds: an error naming it
    under failOnDataLoss, else the other ranges whole and that one up to where Kafka ends."""
    topic = _topic(kafka, 2)
    for p in range(2):
        kafka.produce(topic, [b"r%d" % n for n in range(5)], partition=p)
    parts = [Range(topic, 0, 0, 5), Range(topic, 1, 2, 9)]
    with pytest.raises(DataLossError, match=f"{topic}-1 ends at offset 5"):
        list(read_ranges(parse_options(_options(kafka, topic)), parts))
    lenient = parse_options(_options(kafka, topic, failOnDataLoss="false"))
    found = _by_range(read_ranges(lenient, parts))
    assert found == {
        (topic, 0): [(n, b"r%d" % n) for n in range(5)],
        (topic, 1): [(n, b"r%d" % n) for n in range(2, 5)],
    }


def test_the_sources_records_mode_reads_a_packed_task_together(kafka):
    """``blockgz.tasks.read.kafka=false``: the source's own task reads a packed group of
    small ranges (one consumer) and gives each range's records exactly once, in order."""
    from blockgz.sink.kafka.source import KafkaRangeGroup, KafkaStreamReader

    topic = _topic(kafka, 4)
    for p in range(4):
        kafka.produce(topic, [b"r%d-%d" % (p, n) for n in range(12)], partition=p)
    parts = tuple(Range(topic, p, p, 12 - p) for p in range(4))
    assert together(parts) == [list(parts)]
    reader = KafkaStreamReader(parse_options(_options(kafka, topic)))
    found = _by_range(reader.read(KafkaRangeGroup(parts)))
    assert found == {
        (topic, r.partition): [(n, b"r%d-%d" % (r.partition, n)) for n in range(r.start, r.end)]
        for r in parts
    }
