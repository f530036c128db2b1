"""Files as large as the settings say, at any traffic (issue 44): a running export holds a
partition's partial file back until ``flush.size`` fills it or ``rotate.interval.ms`` closes it.

The export runs (not ``--once``) on the session's SparkSession against Apache Kafka and SeaweedFS
with a short trigger, while records arrive in small bursts across many micro-batches. Without
holding, every batch would cut a file of one burst; with it, every object holds exactly
``flush.size`` records, or ends where Confluent's record-time rule closes the file, and a stop
and restart archives every offset exactly once. With Spark's own Kafka source (an export
process with its connector on the classpath) nothing can be held: its trigger limits only make
batches, and so files, about once a ``rotate.interval.ms``. ``flush.size.bytes`` is not planned
for: with a time rotation, at most one file per closed window is short of it.
"""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest

from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.status.job_status import job_status
from blockgz.store import open_store
from testkit.kafka_data import read_exported
from testkit.running_export import committed, export_while, wait_until
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow

FLUSH = 10
#: Pause between bursts: several triggers (500 ms) see each partial count.
PACE_S = 1.2


def job_config(kafka, s3_server, bucket: str, topic: str, **options: str) -> ExportSettings:
    return ExportSettings.from_mapping(
        {
            "name": "held-files",
            "topics": topic,
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(s3_server.endpoint_url),
            "flush.size": str(FLUSH),
            "blockgz.trigger.interval": "500 milliseconds",
            **options,
        }
    )


def produce(kafka, topic: str, partitions: int, first: int, stamps: list[int]) -> None:
    """One record per timestamp into each partition, values ``{"p", "i"}`` with ``i`` the
    record's offset (one producer, in order, from offset ``first``)."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "linger.ms": 0,
            "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 1,
        }
    )
    for p in range(partitions):
        for n, stamp in enumerate(stamps):
            value = json.dumps({"p": p, "i": first + n}).encode()
            producer.produce(topic, value, partition=p, timestamp=stamp)
    assert producer.flush(30) == 0, "records left unsent"


def now_ms() -> int:
    return int(time.time() * 1000)


def file_sizes(s3_server, bucket: str) -> dict[str, int]:
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    return {key: len(docs) for key, docs in read_exported(store, prefix).objects.items()}


def exported(s3_server, bucket: str):
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    return read_exported(store, prefix)


def test_small_bursts_across_batches_make_files_of_exactly_flush_size(
    spark, kafka, s3_server, bucket, tmp_path
):
    topic = "held_bursts_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=2)
    job = job_config(kafka, s3_server, bucket, topic, **{"blockgz.hold.partial.files": "true"})

    def steps(stop, alive) -> None:
        for burst in range(6):  # 4 records per partition per burst: 24, none a file alone
            produce(kafka, topic, 2, 4 * burst, [now_ms()] * 4)
            time.sleep(PACE_S)  # pacing the producer, so batches run between bursts
        wait_until(lambda: committed(job, topic) == {0: 20, 1: 20}, alive, "two full files")
        time.sleep(4 * PACE_S)  # pacing: more triggers while the 4 remaining records wait
        assert committed(job, topic) == {0: 20, 1: 20}, "the partial file was not held"
        produce(kafka, topic, 2, 24, [now_ms()] * 6)
        wait_until(lambda: committed(job, topic) == {0: 30, 1: 30}, alive, "the third file")

    assert export_while(spark, job, tmp_path / "ckpt", steps) is None
    found = exported(s3_server, bucket)
    found.assert_exactly_once(2, 30)
    sizes = {key: len(docs) for key, docs in found.objects.items()}
    assert sorted(sizes.values()) == [FLUSH] * 6, sizes


def test_rotate_interval_ms_closes_a_partial_file_by_record_time(
    spark, kafka, s3_server, bucket, tmp_path
):
    """``rotate.interval.ms`` counts record time, as Confluent: the first record a whole
    interval after the file's first closes the file and starts the next one. The records are
    ten minutes old by the wall clock, so only their timestamps can close anything."""
    topic = "held_interval_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=2)
    job = job_config(kafka, s3_server, bucket, topic, **{"rotate.interval.ms": "60000"})
    base = now_ms() - 600_000

    def steps(stop, alive) -> None:
        produce(kafka, topic, 2, 0, [base, base + 1_000, base + 2_000])
        time.sleep(3 * PACE_S)  # pacing: several triggers see a partial file not yet closed
        assert committed(job, topic) == {}, "a partial file closed before its interval"
        produce(kafka, topic, 2, 3, [base + 61_000])  # does not fit [base, base + 60 s)
        wait_until(lambda: committed(job, topic) == {0: 3, 1: 3}, alive, "the time cut")
        # 12 more within the second file's minute: one full file, 3 records held
        produce(kafka, topic, 2, 4, [base + 62_000 + n for n in range(12)])
        wait_until(lambda: committed(job, topic) == {0: 13, 1: 13}, alive, "a full file")
        time.sleep(3 * PACE_S)  # pacing: the 3 records of the next file stay held
        assert committed(job, topic) == {0: 13, 1: 13}

    assert export_while(spark, job, tmp_path / "ckpt", steps) is None
    sizes = file_sizes(s3_server, bucket)
    assert sorted(sizes.values()) == [3, 3, FLUSH, FLUSH], sizes
    assert {k.rsplit("+", 1)[1].split(".")[0] for k in sizes} == {"0000000000", "0000000003"}
    # status: the 3 records of the open file are held on purpose, not lag to alarm on
    report = job_status(job, max_lag=0, max_commit_age=0.001)
    assert [(p.lag, p.held) for p in report.partitions] == [(3, 3), (3, 3)]
    assert report.exit_code == 0, report.issues
    assert report.held_for == "a full file (flush.size=10) or rotate.interval.ms=60000"


def test_a_stop_and_restart_with_held_records_archives_each_offset_once(
    spark, kafka, s3_server, bucket, tmp_path
):
    topic = "held_restart_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=2)
    job = job_config(kafka, s3_server, bucket, topic, **{"blockgz.hold.partial.files": "true"})
    checkpoint = tmp_path / "ckpt"

    def first_run(stop, alive) -> None:
        produce(kafka, topic, 2, 0, [now_ms()] * 25)
        wait_until(lambda: committed(job, topic) == {0: 20, 1: 20}, alive, "two full files")

    assert export_while(spark, job, checkpoint, first_run) is None
    before = exported(s3_server, bucket).offsets()
    assert set(before) == {(p, i) for p in range(2) for i in range(20)}, "held ones not written"

    def second_run(stop, alive) -> None:
        produce(kafka, topic, 2, 25, [now_ms()] * 5)
        wait_until(lambda: committed(job, topic) == {0: 30, 1: 30}, alive, "the third file")

    assert export_while(spark, job, checkpoint, second_run) is None
    found = exported(s3_server, bucket)
    found.assert_exactly_once(2, 30)
    assert sorted(len(docs) for docs in found.objects.values()) == [FLUSH] * 6


def test_flush_size_bytes_with_a_time_rotation_leaves_one_short_file_per_window(
    spark, kafka, s3_server, bucket, tmp_path
):
    """``flush.size.bytes`` is not planned for (docs/export.md, "Why not by bytes"): with a time
    rotation the partial file is held by time, the byte bound closes files inside the batch at
    the exact bound, and at most one object per partition per closed time window is short of
    it. 30 records a second apart (ten minutes old: only record time closes anything),
    ``rotate.interval.ms`` 12 s: two windows close, at offsets 12 and 24; the rest is held."""
    bound = 90  # bytes: about five of these JSON lines
    topic = "held_bytes_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=2)
    job = ExportSettings.from_mapping(
        {
            "name": "held-bytes",
            "topics": topic,
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(s3_server.endpoint_url),
            "flush.size.bytes": str(bound),
            "rotate.interval.ms": "12000",
            "blockgz.trigger.interval": "500 milliseconds",
        }
    )
    assert job.sink.flush_size is None
    base = now_ms() - 600_000

    def steps(stop, alive) -> None:
        produce(kafka, topic, 2, 0, [base + 1_000 * n for n in range(30)])
        wait_until(lambda: committed(job, topic) == {0: 24, 1: 24}, alive, "two time windows")

    assert export_while(spark, job, tmp_path / "ckpt", steps) is None
    found = exported(s3_server, bucket)
    assert found.offsets() == {(p, i): 1 for p in range(2) for i in range(24)}
    files = job.sink.manifest_log().committed_values()
    for p in range(2):
        sizes = [f.uncompressed_size for f in files if f.partition == p]
        assert len(sizes) >= 4, sizes  # the byte bound closed files inside the batches
        short = [size for size in sizes if size < bound]
        assert len(short) <= 2, sizes  # one per closed window at most


def confluent_cuts(stamps: list[int], flush_size: int, interval_ms: int) -> list[int]:
    """Where Confluent's sink cuts one partition's files, given its records' timestamps in
    offset order: a record starts a new file when the file holds ``flush.size`` records or
    the record is ``rotate.interval.ms`` or more past the file's first. Each cut closes one
    file; the file after the last cut is still open.

    >>> confluent_cuts([0, 1, 2, 10, 11, 25], 100, 10)
    [3, 5]
    >>> confluent_cuts([0, 1, 2, 3, 4], 2, 1000)
    [2, 4]
    """
    cuts, start = [], 0
    for offset, stamp in enumerate(stamps):
        if offset - start >= flush_size or stamp - stamps[start] >= interval_ms:
            cuts.append(offset)
            start = offset
    return cuts


def trickle(kafka, topic: str, stamps: dict[int, list[int]], rate: int, seconds: float) -> None:
    """``rate`` records a second over the partitions of ``stamps`` for ``seconds``, one record
    per partition per tick stamped with the wall clock; each timestamp is appended to its
    partition's list (values ``{"p", "i"}``, ``i`` counting on from the list's length)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5})
    tick_s = len(stamps) / rate
    begin = time.monotonic()
    for tick in range(int(seconds / tick_s)):
        stamp = now_ms()
        for p, times in stamps.items():
            value = json.dumps({"p": p, "i": len(times)}).encode()
            producer.produce(topic, value, partition=p, timestamp=stamp)
            times.append(stamp)
        producer.poll(0)
        time.sleep(max(0.0, begin + (tick + 1) * tick_s - time.monotonic()))  # the rate
    assert producer.flush(30) == 0


#: The issue's workload (100 partitions, 200 records/s, 120 s, rotate.interval.ms=60000),
#: scaled: 20 partitions, 200 records/s in all for 20 s, flush.size=1000 and
#: rotate.interval.ms=5000 (a partition gets ~50 records per interval: files close by time).
#: ``BLOCKGZ_HELD_WORKLOAD=partitions,rate,seconds,interval_ms`` measures another scale.
WORKLOAD = dict(
    zip(
        ("partitions", "rate", "seconds", "interval_ms"),
        map(int, os.environ.get("BLOCKGZ_HELD_WORKLOAD", "20,200,20,5000").split(",")),
        strict=True,
    )
)


#: ``BLOCKGZ_HELD_MODE=false`` measures the old per-batch files (the workload test's bound then
#: fails; the Spark-source test only prints its count).
MODE = os.environ.get("BLOCKGZ_HELD_MODE", "auto")


def test_the_workload_writes_the_files_confluents_rules_give(
    spark, kafka, s3_server, bucket, tmp_path
):
    """Records trickle into many partitions under the default 5 s trigger: the objects are the
    ones Confluent's rotation closes (at most 1.1x their number; without holding, one per
    partition per batch)."""
    parts, rate, seconds = (WORKLOAD[k] for k in ("partitions", "rate", "seconds"))
    interval = WORKLOAD["interval_ms"]
    topic = "held_workload_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=parts)
    job = job_config(
        kafka,
        s3_server,
        bucket,
        topic,
        **{
            "flush.size": "1000",
            "rotate.interval.ms": str(interval),
            "blockgz.trigger.interval": "5 seconds",
            "blockgz.hold.partial.files": MODE,
        },
    )
    stamps: dict[int, list[int]] = {p: [] for p in range(parts)}

    def steps(stop, alive) -> None:
        trickle(kafka, topic, stamps, rate, seconds)
        # every closed file committed: each partition up to its open file's first record
        ends = {p: confluent_cuts(stamps[p], 1000, interval)[-1] for p in range(parts)}
        if MODE == "false":  # measuring the per-batch files: everything gets written
            ends = {p: len(stamps[p]) for p in range(parts)}
        try:
            wait_until(lambda: committed(job, topic) == ends, alive, "every closed file", 60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: committed {committed(job, topic)}, want {ends}") from None

    assert export_while(spark, job, tmp_path / "ckpt", steps) is None
    found = exported(s3_server, bucket)
    expected = sum(len(confluent_cuts(stamps[p], 1000, interval)) for p in range(parts))
    ratio = len(found.objects) / expected
    print(f"workload: {len(found.objects)} objects; Confluent's rules: {expected} ({ratio:.2f}x)")
    assert len(found.objects) <= 1.1 * expected, (len(found.objects), expected)
    assert max(found.offsets().values()) == 1


@pytest.mark.crash
def test_a_killed_export_with_held_records_loses_and_duplicates_nothing(
    kafka, s3_server, bucket, tmp_path
):
    """``blockgz export`` processes SIGKILLed while records are held, then restarted from
    their checkpoint: the held records are read after the restart, once."""
    import signal

    from testkit.kafka_data import produce_numbered
    from testkit.service_export import ServiceExport, service_config

    topic = "held_killed_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=2)
    extra = {"flush.size": str(FLUSH), "blockgz.hold.partial.files": "true"}
    config = service_config(tmp_path / "job.properties", kafka, s3_server, bucket, topic, **extra)
    reading = job_config(kafka, s3_server, bucket, topic, name="service-test")
    checkpoint = tmp_path / "ckpt"

    def until(export: ServiceExport, offsets: dict[int, int]) -> None:
        deadline = time.monotonic() + 180
        while committed(reading, topic) != offsets:
            assert export.proc.poll() is None, export.output.read_text()[-3000:]
            assert time.monotonic() < deadline, f"not committed: {offsets}"
            time.sleep(0.2)  # polling S3 with a deadline

    produce_numbered(kafka.bootstrap_servers, topic, 2, 25)
    first = ServiceExport(config, checkpoint, tmp_path / "first.log")
    try:
        until(first, {0: 20, 1: 20})
        first.signal(signal.SIGKILL, to="tree")  # 5 records per partition held
    finally:
        first.kill()
    produce_numbered(kafka.bootstrap_servers, topic, 2, 5, start=25)
    second = ServiceExport(config, checkpoint, tmp_path / "second.log")
    try:
        until(second, {0: 30, 1: 30})
        second.signal(signal.SIGKILL, to="tree")
    finally:
        second.kill()
    found = exported(s3_server, bucket)
    found.assert_exactly_once(2, 30)
    assert sorted(len(docs) for docs in found.objects.values()) == [FLUSH] * 6


def test_a_once_run_holds_only_when_asked_and_ends(spark, kafka, s3_server, bucket, tmp_path):
    """``--once`` drains everything by default (auto); with ``true`` it archives the whole
    files, holds the rest and still ends."""
    from blockgz.sink.export.job import run_export

    topic = "held_once_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=2)
    produce(kafka, topic, 2, 0, [now_ms()] * 25)
    held = job_config(kafka, s3_server, bucket, topic, **{"blockgz.hold.partial.files": "true"})
    once = {"checkpoint": tmp_path / "a", "once": True, "install_signal_handlers": False}
    run_export(held, spark=spark, **once)
    assert committed(held, topic) == {0: 20, 1: 20}
    drained = job_config(kafka, s3_server, bucket, topic, **{"rotate.interval.ms": "60000"})
    run_export(drained, spark=spark, **once)
    assert committed(drained, topic) == {0: 25, 1: 25}
    exported(s3_server, bucket).assert_exactly_once(2, 25)


#: The workload read by Spark's own Kafka source (``partitions,rate,seconds,interval_ms,
#: trigger_s``; ``BLOCKGZ_HELD_SPARK_WORKLOAD=20,200,60,20000,5`` is the issue-like measurement).
SPARK_WORKLOAD = dict(
    zip(
        ("partitions", "rate", "seconds", "interval_ms", "trigger_s"),
        map(int, os.environ.get("BLOCKGZ_HELD_SPARK_WORKLOAD", "10,100,24,8000,1").split(",")),
        strict=True,
    )
)


@pytest.fixture(scope="module")
def connector():
    from blockgz.errors import JarResolutionError
    from blockgz.sink.spark_kafka import connector_jars

    try:
        return connector_jars("4.2.0")
    except JarResolutionError as exc:
        pytest.skip(f"Spark's Kafka connector is not available: {exc}")


@pytest.mark.crash
def test_sparks_kafka_source_waits_for_the_rotation_between_batches(
    connector, kafka, s3_server, bucket, tmp_path
):
    """Spark's source cannot hold a partition's partial file, but a running export sets its
    ``minOffsetsPerTrigger`` (flush.size x partitions) and ``maxTriggerDelay``
    (rotate.interval.ms less a trigger): under a 1 s trigger, a batch (and so a file per
    partition) comes about once an interval, not once a trigger.

    Two priming records per partition, each committed before the next is sent, start Spark's
    delay clock (its first batch never waits, and a slow first batch lets the second start at
    once); then the trickle gets at most one file per partition per delay, plus one for the
    batch that catches the trickle's end."""
    import math
    import signal

    from testkit.service_export import ServiceExport, service_config

    parts, rate, seconds = (SPARK_WORKLOAD[k] for k in ("partitions", "rate", "seconds"))
    interval, trigger_s = SPARK_WORKLOAD["interval_ms"], SPARK_WORKLOAD["trigger_s"]
    topic = "held_spark_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=parts)
    extra = {
        "flush.size": "1000",
        "rotate.interval.ms": str(interval),
        "maxOffsetsPerTrigger": "1000000",
        "blockgz.spark.kafka.jars": "4.2.0",
        "blockgz.trigger.interval": f"{trigger_s} seconds",
        "blockgz.hold.partial.files": MODE,
    }
    config = service_config(tmp_path / "job.properties", kafka, s3_server, bucket, topic, **extra)
    reading = job_config(kafka, s3_server, bucket, topic, name="service-test")
    export = ServiceExport(config, tmp_path / "ckpt", tmp_path / "export.out")
    stamps: dict[int, list[int]] = {p: [] for p in range(parts)}
    try:
        alive = lambda: export.proc.poll() is None  # noqa: E731
        for n in (1, 2):  # the priming records: a batch each
            stamp = now_ms()
            produce(kafka, topic, parts, n - 1, [stamp])
            for times in stamps.values():
                times.append(stamp)
            want = dict.fromkeys(range(parts), n)
            wait_until(lambda: committed(reading, topic) == want, alive, f"priming {n}", 300)  # noqa: B023
        trickle(kafka, topic, stamps, rate, seconds)
        ends = {p: len(stamps[p]) for p in range(parts)}
        last = interval / 1000 + 60
        wait_until(lambda: committed(reading, topic) == ends, alive, "the trickle", last)
        export.signal(signal.SIGTERM)
        assert export.wait(90) == 0, export.output.read_text()[-3000:]
    finally:
        export.kill()
    job_log = (tmp_path / "ckpt" / "blockgz-export.log").read_text()
    assert "reading Kafka with the Spark Kafka source" in job_log
    delay = max(interval - trigger_s * 1000, interval // 2)
    held = f"minOffsetsPerTrigger={1000 * parts} or maxTriggerDelay={delay}ms" in job_log
    assert held == (MODE != "false")
    found = exported(s3_server, bucket)
    found.assert_exactly_once(parts, ends[0])
    trickled = [k for k in found.objects if int(k.rsplit("+", 1)[1].split(".")[0]) >= 2]
    bound = parts * (math.ceil(seconds * 1000 / delay) + 1)
    rule = sum(len(confluent_cuts(stamps[p][2:], 1000, interval)) + 1 for p in range(parts))
    print(
        f"Spark's source: {len(trickled)} objects for the trickle; bound {bound}; Confluent's "
        f"rule {rule} (open files included); one per trigger ~{parts * seconds // trigger_s}"
    )
    assert len(trickled) <= bound or MODE == "false", (len(trickled), bound)
