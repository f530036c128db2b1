"""The export benchmark's settings, data and output checks (``test_export_bench.py``).

The consumer loop is in :mod:`benchmarks.export_loop`, process sampling in
:mod:`benchmarks.process_usage`, the report in :mod:`benchmarks.export_report`.
Nothing here imports pyspark: the consumer-loop processes import this module too.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.support import SCALE

MiB = 1024 * 1024
RESULTS_PATH = Path(__file__).resolve().parent / "results" / "export.md"
REPRODUCE = "make bench-export"

PARTITIONS = 4
TOTAL_RECORDS = max(PARTITIONS * 1000, round(1_000_000 * SCALE / PARTITIONS) * PARTITIONS)
PER_PARTITION = TOTAL_RECORDS // PARTITIONS  # includes produce_bulk's one sentinel
MAX_OFFSETS_PER_TRIGGER = max(PARTITIONS * 250, round(250_000 * SCALE))  # 4 micro-batches
#: The consumer loop cuts an object every this many offsets, like one micro-batch does.
OFFSETS_PER_OBJECT = MAX_OFFSETS_PER_TRIGGER // PARTITIONS
ARROW_BATCH_ROWS = 10_000  # spark.sql.execution.arrow.maxRecordsPerBatch (Spark's default)
WARMUP_PER_PARTITION = 2_500
SEED = 20261122

TARGET_VS_NATIVE = 1.0
TARGET_VS_LOOP = 0.6


KEY_BLOCKGZ = "blockgz"
KEY_BLOCKGZ_SPARK = "blockgz-spark-kafka"
KEY_BLOCKGZ_TASKS = "blockgz-tasks-read-kafka"
KEY_JSON = "spark-json"
KEY_TEXT = "spark-text"
KEY_LOOP = "loop"
KEY_LOOP_DEFAULTS = "loop-defaults"
ALL_KEYS = (
    KEY_JSON,
    KEY_TEXT,
    KEY_BLOCKGZ_SPARK,
    KEY_BLOCKGZ,
    KEY_BLOCKGZ_TASKS,
    KEY_LOOP_DEFAULTS,
    KEY_LOOP,
)
#: The blockgz rows compared against the hand-written pipelines and the loop: Spark's source,
#: and blockgz-kafka as exported by default (the sink's tasks read Kafka).
BLOCKGZ_KEYS = (KEY_BLOCKGZ_SPARK, KEY_BLOCKGZ_TASKS)
#: ``blockgz.spark.kafka.jars``: Spark's Kafka connector (the newest on Maven Central) for the
#: hand-written pipelines and the export with Spark's source.
SPARK_KAFKA_JARS = "4.2.0"
#: librdkafka >= 2.4 postpones a partition's next fetch by ``fetch.queue.backoff.ms`` (1 s by
#: default) once its local queue is over ``queued.min.messages`` (100k): a consumer slower than
#: the fetcher then drains the queue and waits. The loop reads 250k records per partition, so
#: it hits that; the ceiling uses 10 ms. (The Spark source reads 62.5k per task and does not.)
LOOP_CONSUMER_TUNING = {"fetch.queue.backoff.ms": 10}
CASE_TITLES = {
    KEY_JSON: (
        'H. hand-written `readStream.format("kafka")` → `selectExpr("CAST(value AS STRING) AS '
        'value")` → `writeStream.format("json")`, gzip (local disk)'
    ),
    KEY_TEXT: (
        'H\'. the same → `writeStream.format("text")`, gzip: the value string as the line '
        "(local disk)"
    ),
    KEY_BLOCKGZ_SPARK: (
        "S. blockgz export with Spark's Kafka source (`blockgz.spark.kafka.jars=4.2.0`) → "
        "`blockgz` sink → S3"
    ),
    KEY_BLOCKGZ: (
        "A0. blockgz export with the blockgz-kafka source, `blockgz.tasks.read.kafka=false` "
        "(records through Spark's rows) → `blockgz` sink → S3"
    ),
    KEY_BLOCKGZ_TASKS: (
        "A. the same as exported by default, `blockgz.tasks.read.kafka=true` (sink tasks read "
        "their offset ranges from Kafka; records skip the JVM)"
    ),
    KEY_LOOP_DEFAULTS: "C0. the same loop, librdkafka defaults (`fetch.queue.backoff.ms=1000`)",
    KEY_LOOP: "C. plain confluent-kafka loop, 2 processes → S3 (`fetch.queue.backoff.ms=10`)",
}


# -- data ---------------------------------------------------------------------------------------
_EVENTS = (b"page_view", b"click", b"search", b"add_to_cart", b"checkout", b"purchase")
_COUNTRIES = (b"US", b"DE", b"FR", b"GB", b"JP", b"BR", b"IN", b"CA")


def value_maker(partition: int) -> Callable[[int], bytes]:
    """Deterministic ~200-byte JSON values for one partition: fields plus a random-hex token."""
    rng = random.Random(SEED * 16 + partition)
    randrange, randbytes, choice = rng.randrange, rng.randbytes, rng.choice

    def make(i: int) -> bytes:
        return (
            b'{"id":%d,"partition":%d,"user":"user-%06d","event":"%s","country":"%s",'
            b'"amount":%d.%02d,"currency":"EUR","ts":%d,"session":"%s","trace":"%s","ok":true}'
            % (
                i,
                partition,
                randrange(1_000_000),
                choice(_EVENTS),
                choice(_COUNTRIES),
                randrange(1000),
                randrange(100),
                1_795_305_600_000 + i * 37,
                randbytes(8).hex().encode(),
                randbytes(16).hex().encode(),
            )
        )

    return make


@dataclass(frozen=True)
class Dataset:
    """The produced topic: exact high watermarks and the bytes of the values."""

    topic: str
    watermarks: dict[int, int]
    value_bytes: int
    key_bytes: int
    produce_s: float

    @property
    def records(self) -> int:
        return sum(self.watermarks.values())


def produce_dataset(kafka, topic: str, per_partition: int) -> Dataset:
    """``per_partition - 1`` keyed records per partition in large batches, then
    ``produce_bulk``'s single-record sentinel per partition (exact high watermarks)."""
    from confluent_kafka import Producer

    started = time.perf_counter()
    kafka.create_topic(topic, partitions=PARTITIONS)
    producer = Producer(
        kafka.client_config(
            {
                "linger.ms": 5,
                "batch.num.messages": 10_000,
                "queue.buffering.max.messages": 1_000_000,
            }
        )
    )
    errors: list[Any] = []

    def delivered(error, _message) -> None:
        if error is not None:
            errors.append(error)

    value_bytes = key_bytes = 0
    bulk = per_partition - 1
    for partition in range(PARTITIONS):
        make = value_maker(partition)
        for i in range(bulk):
            value, key = make(i), b"k%06d" % (i % 1_000_000)
            value_bytes += len(value)
            key_bytes += len(key)
            while True:
                try:
                    producer.produce(topic, value, key, partition=partition, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.1)
    if producer.flush(120):
        raise TimeoutError("records left undelivered")
    if errors:
        raise RuntimeError(f"{len(errors)} records not delivered: {errors[0]}")
    sentinels = {p: value_maker(p + 100)(bulk) for p in range(PARTITIONS)}
    value_bytes += sum(map(len, sentinels.values()))
    watermarks = kafka.produce_bulk(
        topic, 0, PARTITIONS, value_fn=lambda partition, _i: sentinels[partition]
    )
    if watermarks != dict.fromkeys(range(PARTITIONS), per_partition):
        raise AssertionError(f"unexpected high watermarks {watermarks}")
    return Dataset(topic, watermarks, value_bytes, key_bytes, time.perf_counter() - started)


# -- checking the outputs -------------------------------------------------------------------------
@dataclass
class Output:
    """What a case wrote: records found by decompressing it, and sizes."""

    objects: int = 0
    records: int = 0
    compressed: int = 0
    uncompressed: int = 0
    per_partition: dict[int, int] = field(default_factory=dict)
    check_s: float = 0.0


def _count_lines(data: bytes) -> tuple[int, int]:
    from isal import igzip

    raw = igzip.decompress(data)
    return raw.count(b"\n"), len(raw)


def check_s3_output(store, prefix: str, topic: str) -> Output:
    """Decompress every data object of ``topic`` (default key layout); check each index
    sidecar agrees with it and that each partition's objects cover contiguous offsets from 0."""
    from blockgz.archive.layout import Layout
    from blockgz.blocks.index import BlockIndex
    from blockgz.written.sidecars import sidecar_key

    started = time.perf_counter()
    out = Output()
    layout = Layout()
    refs = [layout.parse_data_key(i.key) for i in store.list(layout.topic_prefix(prefix, topic))]
    objects = sorted(
        (ref for ref in refs if ref is not None and ref.extension == "json.gz"),
        key=lambda ref: ref.key,
    )
    ranges: dict[int, list[tuple[int, int]]] = {}
    for ref in objects:
        data = store.get(ref.key)
        lines, size = _count_lines(data)
        index = BlockIndex.from_json(store.get(sidecar_key(ref.key)))
        if index.record_count != lines or index.byte_length != len(data):
            raise AssertionError(f"{ref.key}: index says {index.record_count} records, has {lines}")
        ranges.setdefault(ref.partition, []).append((index.first_offset, index.record_count))
        out.objects += 1
        out.records += lines
        out.compressed += len(data)
        out.uncompressed += size
        out.per_partition[ref.partition] = out.per_partition.get(ref.partition, 0) + lines
    for partition, spans in ranges.items():
        expected = 0
        for first, count in sorted(spans):
            if first != expected:
                raise AssertionError(f"partition {partition}: gap or overlap at {expected}")
            expected = first + count
    out.check_s = time.perf_counter() - started
    return out


def check_local_output(directory: Path, pattern: str) -> Output:
    """Decompress Spark's ``part-*`` files under ``directory`` and count the lines."""
    started = time.perf_counter()
    out = Output()
    for path in sorted(directory.glob(pattern)):
        data = path.read_bytes()
        lines, size = _count_lines(data)
        out.objects += 1
        out.records += lines
        out.compressed += len(data)
        out.uncompressed += size
    out.check_s = time.perf_counter() - started
    return out
