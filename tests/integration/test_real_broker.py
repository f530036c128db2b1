"""What only a real broker shows (Apache Kafka 4): partitions added to a running export,
transactions, a compacted topic after the log cleaner ran, and retention that overtakes the
export. Each archive is checked record by record against what a consumer of the topic reads.

The exports run (not ``--once``) on the session's SparkSession against SeaweedFS
(:func:`testkit.running_export.export_while`).
"""

from __future__ import annotations

import time
import uuid

import pytest

from blockgz.errors import ExportFailed
from blockgz.reader import open_archive
from blockgz.sink.jobconfig.config import ExportSettings
from testkit.running_export import archived_offsets, committed, export_while, wait_until
from testkit.s3 import s3_options

# `make test` runs these in a pytest session of their own (-m broker): after them, a later
# in-process export on the same worker has met DATA_SOURCE_NOT_FOUND for blockgz's sink
# (root cause still open), so they get their own SparkSession.
pytestmark = [pytest.mark.slow, pytest.mark.broker]


def job_config(kafka, s3_server, bucket: str, **options: str) -> ExportSettings:
    return ExportSettings.from_mapping(
        {
            "name": "real-broker",
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(s3_server.endpoint_url),
            "flush.size": "10",
            "s3.compression.type": "blockgzip",
            "format.json.envelope": "true",
            "blockgz.trigger.interval": "1 second",
            **options,
        }
    )


def topic_records(kafka, topic: str, *, isolation: str = "read_committed") -> dict[int, list]:
    """``{partition: [(offset, key, value)]}``: what a consumer of the topic reads now."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": "truth-" + uuid.uuid4().hex[:6],
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    out: dict[int, list] = {}
    try:
        for partition in kafka.partitions(topic):
            tp = TopicPartition(topic, partition)
            low, high = consumer.get_watermark_offsets(tp, timeout=10)
            consumer.assign([TopicPartition(topic, partition, low)])
            got: list = []
            deadline = time.monotonic() + 30
            while consumer.position([tp])[0].offset < high or (not got and high > low):
                assert time.monotonic() < deadline, f"{topic}/{partition}: read {len(got)}"
                for m in consumer.consume(500, timeout=1):
                    if m.error() is None:
                        got.append((m.offset(), m.key(), m.value()))
                if high - low and got and got[-1][0] >= high - 1:
                    break
            out[partition] = got
    finally:
        consumer.close()
    return out


def archive_records(s3_server, bucket: str, topic: str) -> dict[int, list]:
    with open_archive(f"s3://{bucket}", s3_options(s3_server.endpoint_url)) as archive:
        out: dict[int, list] = {}
        for partition, r in archive.records(topic):
            out.setdefault(partition, []).append((r.offset, r.key, r.value))
        return out


def end_offsets(kafka, topic: str) -> dict[int, int]:
    return kafka.high_watermarks(topic)


def settled_end_offsets(kafka, topic: str, timeout_s: float = 60) -> dict[int, int]:
    """The high watermarks once every transaction's markers are in the log.

    A producer's commit or abort returns before the coordinator has written the markers into
    the partitions, so a marker may still land after the last record; until it does, the last
    stable offset (what a read_committed consumer may read up to) stays below the high
    watermark. Equal, they are the end the export must reach."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    deadline = time.monotonic() + timeout_s
    while True:
        high = kafka.high_watermarks(topic)
        futures = kafka.admin().list_offsets(
            {TopicPartition(topic, p): OffsetSpec.latest() for p in high},
            isolation_level=IsolationLevel.READ_COMMITTED,
            request_timeout=30,
        )
        stable = {tp.partition: f.result().offset for tp, f in futures.items()}
        if stable == high == kafka.high_watermarks(topic):
            return high
        assert time.monotonic() < deadline, f"markers not written in {timeout_s} s: {stable}"
        time.sleep(0.1)  # polling the broker with a deadline


def test_partitions_added_to_a_running_export_are_archived_from_offset_0(
    spark, kafka, s3_server, bucket, tmp_path
):
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewPartitions

    topic = "grown_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=2)
    kafka.produce_bulk(topic, 19, 2)
    job = job_config(kafka, s3_server, bucket, topics=topic)

    def steps(stop, alive) -> None:
        wait_until(lambda: committed(job, topic) == {0: 20, 1: 20}, alive, "two partitions")
        futures = kafka.admin().create_partitions([NewPartitions(topic, 4)])
        futures[topic].result(30)
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})  # fresh metadata
        for partition in range(4):
            for n in range(20):
                producer.produce(topic, b'{"n":%d}' % n, partition=partition)
        assert producer.flush(30) == 0
        everything = {0: 40, 1: 40, 2: 20, 3: 20}
        wait_until(lambda: committed(job, topic) == everything, alive, "the added partitions")

    assert export_while(spark, job, tmp_path / "ckpt", steps) is None
    seen = archived_offsets(s3_server, bucket, topic)
    expected = {(p, o) for p, end in {0: 40, 1: 40, 2: 20, 3: 20}.items() for o in range(end)}
    assert set(seen) == expected and max(seen.values()) == 1


def _transactional_history(kafka, topic: str) -> None:
    """Plain records, committed and aborted transactions, interleaved in one partition."""
    from confluent_kafka import Producer

    plain = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 0})
    txn = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": "tx-" + topic}
    )
    txn.init_transactions(30)
    n = 0
    for round_ in range(6):
        plain.produce(topic, b'{"plain":%d}' % n, key=b"p%d" % n, partition=0)
        plain.flush(30)
        n += 1
        txn.begin_transaction()
        for _ in range(3):
            txn.produce(topic, b'{"txn":%d,"round":%d}' % (n, round_), key=b"t%d" % n, partition=0)
            n += 1
        txn.flush(30)  # in the log before the abort (an abort purges what is unsent)
        if round_ % 2:
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
    # The last abort's marker is written after abort_transaction returns: wait for it, so the
    # topic ends with a plain record (a range that ends on a marker once stalled a run of this
    # test for kafkaConsumer.pollTimeoutMs; never reproduced since): it checks the archive.
    settled_end_offsets(kafka, topic)
    plain.produce(topic, b'{"plain":%d}' % n, key=b"p%d" % n, partition=0)
    plain.flush(30)


def test_read_committed_archives_exactly_the_committed_records(
    spark, kafka, s3_server, bucket, tmp_path
):
    topic = "txn_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=1)
    _transactional_history(kafka, topic)
    end = settled_end_offsets(kafka, topic)[0]  # the last abort's marker may come last
    truth = topic_records(kafka, topic)[0]
    uncommitted = topic_records(kafka, topic, isolation="read_uncommitted")[0]
    assert len(uncommitted) > len(truth) > 0  # aborted records exist, and are left out
    job = job_config(kafka, s3_server, bucket, topics=topic)  # read_committed by default

    def steps(stop, alive) -> None:
        wait_until(lambda: committed(job, topic) == {0: end}, alive, "the whole topic", 180)

    assert export_while(spark, job, tmp_path / "ckpt", steps) is None
    archived = archive_records(s3_server, bucket, topic)[0]
    assert [(o, k, v.replace(b" ", b"")) for o, k, v in archived] == [
        (o, k, v.replace(b" ", b"")) for o, k, v in truth
    ]
    # A seek into a gap (an aborted record, a transaction marker) starts at the next record.
    held = {o for o, _, _ in truth}
    gap = next(o for o in range(truth[0][0], truth[-1][0]) if o not in held)
    with open_archive(f"s3://{bucket}", s3_options(s3_server.endpoint_url)) as archive:
        first = next(iter(archive.seek(topic, 0, gap, count=1)))
    assert first.offset == min(o for o in held if o > gap)
    # Spark's reader and verify see the same offsets.
    frame = (
        spark.read.format("blockgz").options(**s3_options(s3_server.endpoint_url))
        .option("topics", topic).load(f"s3://{bucket}")
    )  # fmt: skip
    assert sorted(r.offset for r in frame.select("offset").collect()) == sorted(held)
    # verify reads across the gaps; replay sends exactly the committed records.
    from click.testing import CliRunner

    from blockgz.cli import main

    args = [a for k, v in s3_options(s3_server.endpoint_url).items() for a in ("-O", f"{k}={v}")]
    verified = CliRunner().invoke(main, ["verify", "--topic", topic, *args, f"s3://{bucket}"])
    assert verified.exit_code == 0, verified.output
    kafka.create_topic(topic + "-replayed", partitions=1)
    replayed = CliRunner().invoke(
        main,
        ["replay", f"s3://{bucket}", "--topic", topic, "--to-topic", topic + "-replayed",
         "--bootstrap-servers", kafka.bootstrap_servers, *args],
    )  # fmt: skip
    assert replayed.exit_code == 0, replayed.output
    sent = topic_records(kafka, topic + "-replayed")[0]
    assert [(k, v.replace(b" ", b"")) for _, k, v in sent] == [
        (k, v.replace(b" ", b"")) for _, k, v in truth
    ]


@pytest.mark.parametrize("case", ["abort marker last", "commit marker, next transaction open"])
def test_a_read_committed_range_ending_on_a_marker_is_read_at_once(kafka, case):
    """The blockgz-kafka source's task read of ``[0, end)`` where ``end - 1`` is a
    transaction marker: the partition's newest entry (an abort), or a commit marker followed
    by a transaction still open (the last stable offset). Neither waits for a record that
    never comes (kafkaConsumer.pollTimeoutMs here: 20 s)."""
    from confluent_kafka import Producer

    from blockgz.sink.kafka.options import parse_options
    from blockgz.sink.kafka.ranges import Range, read_range

    topic = "marker_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=1)
    txn = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": topic})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(3):
        txn.produce(topic, b"committed %d" % i, partition=0)
    txn.commit_transaction(30)  # offsets 0-2, its marker at 3
    txn.begin_transaction()
    for i in range(3):
        txn.produce(topic, b"aborted %d" % i, partition=0)
    txn.flush(30)  # offsets 4-6, in the log while the transaction is open
    if case == "abort marker last":
        txn.abort_transaction(30)
        end = settled_end_offsets(kafka, topic)[0]  # 8: the abort marker at 7 is in
    else:
        end = 4  # the last stable offset while the second transaction is open
    config = parse_options(
        {
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "subscribe": topic,
            "kafka.isolation.level": "read_committed",
            "kafkaConsumer.pollTimeoutMs": "20000",
        }
    )
    started = time.monotonic()
    rows = [
        row for batch in read_range(config, Range(topic, 0, 0, end)) for row in batch.to_pylist()
    ]
    took = time.monotonic() - started
    if case != "abort marker last":
        txn.abort_transaction(30)
    assert [(r["offset"], r["value"]) for r in rows] == [(i, b"committed %d" % i) for i in range(3)]
    assert took < 10, f"the read waited {took:.1f} s for the range's marker"


def compacted_state(delivered: list[tuple[int, bytes, bytes | None]]) -> list[tuple]:
    """What a compacted partition holds once the cleaner has cleaned every closed segment:
    the last record of each key, in offset order, when the active segment holds only the last
    record (the sentinel). Tombstones stay while ``delete.retention.ms`` has not passed."""
    last = {key: (offset, key, value) for offset, key, value in sorted(delivered)}
    return sorted(last.values())


def test_a_compacted_topic_is_archived_as_the_cleaner_left_it(
    spark, kafka, s3_server, bucket, tmp_path
):
    """The export reads the topic only once the log cleaner has reached its fixed point:
    every record but the sentinel, alone in the active segment, is in a cleaned segment, so
    nothing the cleaner does later changes what a consumer reads while the export runs."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    topic = "compacted_" + uuid.uuid4().hex[:8]
    config = {
        "cleanup.policy": "compact",
        "segment.ms": "100",  # rolls when a record is stamped 100 ms after its segment's first
        "min.cleanable.dirty.ratio": "0.001",
        "min.compaction.lag.ms": "0",
        "delete.retention.ms": "3600000",  # tombstones stay, so the archive must keep them
    }
    kafka.admin().create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
    producer = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 0, "enable.idempotence": True}
    )
    delivered: list[tuple[int, bytes, bytes | None]] = []

    def on_delivery(error, message) -> None:
        assert error is None, error
        delivered.append((message.offset(), message.key(), message.value()))

    # Record timestamps (not the wall clock) roll the segments: each round is stamped a second
    # after the one before, so it starts a segment of its own and the sentinel, stamped a
    # second after the last round, starts the active segment alone. Stamped in the past (the
    # broker keeps them: log.retention.ms=-1), so min.compaction.lag.ms holds none back.
    stamp = int(time.time() * 1000) - 60_000
    for round_ in range(5):
        for key in range(8):
            if round_ == 4 and key % 4 == 0:
                continue  # keys 0 and 4 end on round 3's tombstones
            value = None if (round_ == 3 and key % 4 == 0) else b'{"k":%d,"r":%d}' % (key, round_)
            producer.produce(
                topic,
                value,
                key=b"key-%d" % key,
                partition=0,
                timestamp=stamp + 1000 * round_,
                on_delivery=on_delivery,
            )
        assert producer.flush(30) == 0
    producer.produce(
        topic,
        b'{"sentinel":1}',
        key=b"sentinel",
        partition=0,
        timestamp=stamp + 5000,
        on_delivery=on_delivery,
    )
    assert producer.flush(30) == 0
    expected = compacted_state(delivered)
    tombstones = [offset for offset, _, value in expected if value is None]
    assert len(tombstones) == 2 and len(expected) == 9 < len(delivered) == 39
    deadline = time.monotonic() + 120
    while (truth := topic_records(kafka, topic)[0]) != expected:
        assert time.monotonic() < deadline, f"the log cleaner left {len(truth)} records"
        time.sleep(0.2)  # the cleaner runs every log.cleaner.backoff.ms; polled with a deadline
    end = end_offsets(kafka, topic)[0]
    assert end == max(o for o, _, _ in delivered) + 1
    job = job_config(kafka, s3_server, bucket, topics=topic, **{"behavior.on.null.values": "write"})

    def steps(stop, alive) -> None:
        wait_until(lambda: committed(job, topic) == {0: end}, alive, "the compacted topic")

    assert export_while(spark, job, tmp_path / "ckpt", steps) is None
    archived = archive_records(s3_server, bucket, topic)[0]
    assert topic_records(kafka, topic)[0] == truth  # the cleaner left the topic as it was
    assert archived == truth  # the survivors at their offsets, with their keys and values
    assert [o for o, _, v in archived if v is None] == tombstones


def test_retention_that_overtakes_the_export_stops_it_naming_the_lost_range(
    spark, kafka, s3_server, bucket, tmp_path
):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    topic = "retained_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=1)
    kafka.produce_bulk(topic, 19, 1)
    job = job_config(kafka, s3_server, bucket, topics=topic)
    checkpoint = tmp_path / "ckpt"

    def first_run(stop, alive) -> None:
        wait_until(lambda: committed(job, topic) == {0: 20}, alive, "the first records")

    assert export_while(spark, job, checkpoint, first_run) is None
    # While the export is stopped, 40 more records arrive and close their segment (segment.ms;
    # the next record rolls it), and retention deletes it: the export's next offset is gone.
    resource = ConfigResource("topic", topic)

    def alter(name: str, value: str) -> None:
        entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        changed = ConfigResource("topic", topic, incremental_configs=[entry])
        kafka.admin().incremental_alter_configs([changed])[resource].result(30)
        # The controller has the change now; the broker applies it from the metadata log a
        # moment later. Until then it still rolls and retains by the old value: a retention
        # pass with retention.ms=1 after the "-1" returned would delete the records sent next.
        deadline = time.monotonic() + 30
        while describe(name) != value:
            assert time.monotonic() < deadline, f"the broker did not take {name}={value}"
            time.sleep(0.1)  # polling the broker with a deadline

    def describe(name: str) -> str:
        return kafka.admin().describe_configs([resource])[resource].result(30)[name].value

    alter("segment.ms", "100")
    kafka.produce(topic, [b'{"n":%d}' % n for n in range(40)], partition=0)
    time.sleep(0.2)  # older than segment.ms: the next record starts a new segment
    kafka.produce(topic, [b'{"n":40}'], partition=0)
    alter("retention.ms", "1")
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "x"})
    deadline = time.monotonic() + 90
    while consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0] <= 20:
        assert time.monotonic() < deadline, "retention did not delete the records"
        time.sleep(0.5)  # retention runs every log.retention.check.interval.ms
    earliest = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]
    consumer.close()
    alter("retention.ms", "-1")  # what arrives from now on stays
    kafka.produce(topic, [b'{"after":%d}' % n for n in range(5)], partition=0)
    end = kafka.high_watermarks(topic)[0]

    def until_it_fails(stop, alive) -> None:
        deadline = time.monotonic() + 60
        while alive():
            assert time.monotonic() < deadline, "the export went on past lost records"
            time.sleep(0.2)  # polling with a deadline

    error = export_while(spark, job, checkpoint, until_it_fails)
    assert isinstance(error, ExportFailed), error
    message = str(error)
    lost = f"offsets [20, {earliest}) of {topic}-0 are no longer in Kafka "
    lost += f"({earliest - 20} offsets lost"
    assert lost in message and "\n" not in message, message

    lenient = job_config(kafka, s3_server, bucket, topics=topic, failOnDataLoss="false")

    def goes_on(stop, alive) -> None:
        wait_until(lambda: committed(lenient, topic) == {0: end}, alive, "what is left")

    assert export_while(spark, lenient, checkpoint, goes_on) is None
    seen = archived_offsets(s3_server, bucket, topic)
    assert set(seen) == {(0, o) for o in [*range(20), *range(earliest, end)]}
    assert max(seen.values()) == 1


@pytest.fixture(scope="module")
def own_kafka():
    """A broker of this module's own: the restart test kills it (the session's stays up)."""
    from blockgz.local_servers.apache_kafka import ApacheKafka

    with ApacheKafka() as broker:
        yield broker


def test_a_broker_killed_and_restarted_with_its_data_mid_export(
    spark, own_kafka, s3_server, bucket, tmp_path
):
    topic = "restarted_" + uuid.uuid4().hex[:8]
    own_kafka.create_topic(topic, partitions=2)
    own_kafka.produce_bulk(topic, 29, 2)
    job = job_config(own_kafka, s3_server, bucket, topics=topic)

    def steps(stop, alive) -> None:
        wait_until(lambda: committed(job, topic) == {0: 30, 1: 30}, alive, "the first records")
        own_kafka.restart()  # SIGKILL, then the same ports and log directory
        assert own_kafka.high_watermarks(topic) == {0: 30, 1: 30}  # its data survived
        own_kafka.produce_bulk(topic, 29, 2)
        everything = {0: 60, 1: 60}
        wait_until(lambda: committed(job, topic) == everything, alive, "after the restart", 180)

    assert export_while(spark, job, tmp_path / "ckpt", steps) is None
    seen = archived_offsets(s3_server, bucket, topic)
    assert set(seen) == {(p, o) for p in range(2) for o in range(60)}
    assert max(seen.values()) == 1
