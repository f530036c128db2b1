"""The Avro benchmarks' settings, data, consumer loop and output checks (``test_avro_bench.py``).

1. **Export**: N records of a 10-field Avro schema (a nested record, a ``timestamp-millis``, a
   union with null) produced with confluent-kafka's ``AvroSerializer`` against the registry
   stand-in, exported per ``avro.codec`` by ``run_export`` (``format.class=avro``) and by a
   plain consumer loop (:func:`run_avro_loop`: ``assign`` → strip the 5-byte wire header →
   ``fastavro.schemaless_reader`` → ``fastavro`` ``Writer`` → multipart upload), both to the
   same SeaweedFS S3.
2. **Seek**: a ~1 GiB ``.avro`` object built with ``AvroUpload`` on SeaweedFS, read through a
   20 ms, 50 MB/s proxy: ``IndexedReader.open_object`` + seek against reading from the start.

Nothing here imports pyspark: the loop processes import this module.
"""

from __future__ import annotations

import io
import json
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.export_support import LOOP_CONSUMER_TUNING, Dataset, Output
from benchmarks.support import SCALE, GiB, MiB

RESULTS_PATH = Path(__file__).resolve().parent / "results" / "avro.md"
REPRODUCE = (
    ".venv/bin/python -m pytest benchmarks/test_avro_bench.py -p no:cacheprovider --benchmark-only"
)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return default if not raw else int(float(raw))


# -- 1. export settings -----------------------------------------------------------------------
PARTITIONS = 4
#: ``BLOCKGZ_BENCH_AVRO_RECORDS`` overrides the record count (default 1M × scale).
RECORDS = max(
    PARTITIONS * 1000,
    round(_env_int("BLOCKGZ_BENCH_AVRO_RECORDS", round(1_000_000 * SCALE)) / PARTITIONS)
    * PARTITIONS,
)
PER_PARTITION = RECORDS // PARTITIONS  # includes produce_bulk's one sentinel
FULL_RECORDS = 1_000_000
MAX_OFFSETS_PER_TRIGGER = RECORDS // 4  # 4 micro-batches, as in the JSON export benchmark
#: The loop cuts an object every this many offsets, like one micro-batch does (flush.size-like).
OFFSETS_PER_OBJECT = MAX_OFFSETS_PER_TRIGGER // PARTITIONS
ARROW_BATCH_ROWS = 10_000
BLOCK_SIZE = MiB  # Avro block size of both sides (blockgz's default s3.compression.block.size)
#: ``BLOCKGZ_BENCH_AVRO_CODECS`` (comma-separated) picks the codecs; the goal is on the first two.
CODECS = tuple(
    c.strip()
    for c in os.environ.get("BLOCKGZ_BENCH_AVRO_CODECS", "null,deflate,snappy,zstandard").split(",")
    if c.strip()
)
GOAL_CODECS = ("null", "deflate")
TARGET_VS_LOOP = 0.5
SEED = 20261124

KEY_BLOCKGZ = "blockgz"
KEY_LOOP = "loop"


def case_key(impl: str, codec: str) -> str:
    return f"{impl} {codec}"


# -- 2. seek settings -------------------------------------------------------------------------
SEEK_OBJECT_BYTES = max(8 * MiB, int(GiB * SCALE))  # encoded record bytes (codec null)
SEEK_CODEC = "null"  # Confluent's default avro.codec
LATENCY_S = 0.020
BANDWIDTH_BPS = 50e6  # per connection, each direction
SEEK_SPEEDUP_TARGET = 100.0
SEEK_TOPIC = "avro_seek"


# -- the schema and the data ------------------------------------------------------------------
SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "PageEvent",
    "namespace": "com.example.bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "partition", "type": "int"},
        {"name": "event", "type": "string"},
        {
            "name": "user",
            "type": {
                "type": "record",
                "name": "User",
                "fields": [
                    {"name": "id", "type": "long"},
                    {"name": "name", "type": "string"},
                    {"name": "tier", "type": "int"},
                ],
            },
        },
        {"name": "country", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "url", "type": "string"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "session", "type": "string"},
        {"name": "trace", "type": ["null", "string"], "default": None},
    ],
}
_EVENTS = ("page_view", "click", "search", "add_to_cart", "checkout", "purchase")
_COUNTRIES = ("US", "DE", "FR", "GB", "JP", "BR", "IN", "CA")
_PAGES = ("electronics", "garden", "books", "toys", "kitchen", "sports", "fashion")
_REFS = ("newsletter", "search", "social", "direct", "partner")
TS0 = 1_795_305_600_000


def record_maker(partition: int) -> Callable[[int], dict[str, Any]]:
    """Deterministic records of one partition; ``id`` is the record's Kafka offset there."""
    rng = random.Random(SEED * 16 + partition)
    randrange, randbytes, choice, random_ = rng.randrange, rng.randbytes, rng.choice, rng.random

    def make(i: int) -> dict[str, Any]:
        user = randrange(1_000_000)
        return {
            "id": i,
            "partition": partition,
            "event": choice(_EVENTS),
            "user": {"id": user, "name": f"user-{user:06d}", "tier": user % 4},
            "country": choice(_COUNTRIES),
            "amount": randrange(100_000) / 100,
            "url": f"https://shop.example.com/{choice(_PAGES)}/item-{randrange(100_000):05d}"
            f"?ref={choice(_REFS)}&q={randbytes(4).hex()}",
            "ts": TS0 + i * 37,
            "session": randbytes(8).hex(),
            "trace": randbytes(16).hex() if random_() < 0.8 else None,
        }

    return make


def seek_records(start: int, count: int, pool: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records ``start .. start+count-1`` of the seek object: the pool's fields, cycled, with
    their own ``id`` (= offset) and ``ts``."""
    size = len(pool)
    return [{**pool[i % size], "id": i, "ts": TS0 + i * 37} for i in range(start, start + count)]


def produce_avro_dataset(kafka, registry_url: str, topic: str, per_partition: int) -> Dataset:
    """``per_partition - 1`` records per partition in large batches, then ``produce_bulk``'s
    single-record sentinel per partition (kept so the data matches the older runs on Tansu,
    whose watermark it made exact); every value serialized by
    confluent-kafka's ``AvroSerializer`` (the schema auto-registered as ``<topic>-value``)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    started = time.perf_counter()
    kafka.create_topic(topic, partitions=PARTITIONS)
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(SCHEMA))
    context = SerializationContext(topic, MessageField.VALUE)
    makers = [record_maker(p) for p in range(PARTITIONS)]
    total = [0]

    def value(partition: int, i: int) -> bytes:
        data = serializer(makers[partition](i), context)
        total[0] += len(data)
        return data

    watermarks = kafka.produce_bulk(topic, per_partition - 1, PARTITIONS, value_fn=value)
    if watermarks != dict.fromkeys(range(PARTITIONS), per_partition):
        raise AssertionError(f"unexpected high watermarks {watermarks}")
    return Dataset(topic, watermarks, total[0], 0, time.perf_counter() - started)


# -- the consumer loop ------------------------------------------------------------------------
@dataclass(frozen=True)
class AvroLoopJob:
    """What one consumer-loop process does (picklable)."""

    bootstrap: str
    registry_url: str
    topic: str
    partitions: tuple[int, ...]
    ends: dict[int, int]
    bucket_url: str
    s3_options: dict[str, str]
    offsets_per_object: int
    codec: str
    block_size: int = BLOCK_SIZE
    consumer_config: dict[str, Any] = field(default_factory=lambda: dict(LOOP_CONSUMER_TUNING))


class _Appender:
    """The upload as fastavro's ``Writer`` wants a file: writable, not seekable."""

    def __init__(self, upload):
        self.write = upload.write

    def seekable(self) -> bool:
        return False

    def flush(self) -> None:
        """Nothing: the upload sends its parts itself."""


class _LoopAvroObject:
    """One object of the loop: a plain Avro container file streamed into a multipart upload
    (no index: what Confluent's sink writes)."""

    def __init__(self, store, prefix: str, job: AvroLoopJob, partition: int, start: int, schema):
        from fastavro.write import Writer

        from blockgz.archive.layout import Layout, default_partition

        path = f"{job.topic}/{default_partition(partition)}"
        self.key = Layout().data_key(prefix, path, job.topic, partition, start, ".avro")
        self.upload = store.open_upload(self.key)
        self.writer = Writer(
            _Appender(self.upload), schema, codec=job.codec, sync_interval=job.block_size
        )
        self.records = 0

    def close(self) -> tuple[str, int]:
        self.writer.flush()
        self.upload.close()
        return self.key, self.records


def run_avro_loop(job: AvroLoopJob) -> dict[str, Any]:
    """One consumer-loop process: read the partitions to their end, decode each value as
    confluent-kafka's ``AvroDeserializer`` does (wire header off, ``schemaless_reader`` with the
    registry's schema), write it with fastavro, one object per ``offsets_per_object``."""
    import fastavro
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from benchmarks.export_loop import loop_result
    from blockgz.store import open_store

    started = time.time()
    store, prefix = open_store(job.bucket_url, job.s3_options)
    registry = SchemaRegistryClient({"url": job.registry_url})
    schemas: dict[int, Any] = {}
    consumer = Consumer(
        {
            "bootstrap.servers": job.bootstrap,
            "group.id": f"bench-avro-loop-{os.getpid()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            **job.consumer_config,
        }
    )
    consumer.assign([TopicPartition(job.topic, p, 0) for p in job.partitions])
    position = dict.fromkeys(job.partitions, 0)
    objects: dict[int, _LoopAvroObject] = {}
    done: list[tuple[str, int]] = []
    records = value_bytes = 0
    first_message = None
    read = fastavro.schemaless_reader
    try:
        while any(position[p] < job.ends[p] for p in job.partitions):
            left = sum(max(0, job.ends[p] - position[p]) for p in job.partitions)
            messages = consumer.consume(num_messages=min(10_000, left), timeout=0.2)
            if first_message is None and messages:
                first_message = time.time()
            for message in messages:
                error = message.error()
                p = message.partition()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"partition {p}: {error}")
                offset = message.offset()
                if offset < position[p] or offset >= job.ends[p]:
                    continue
                value = message.value()
                if len(value) < 5 or value[0] != 0:
                    raise ValueError(f"offset {offset}: not Confluent's Avro wire format")
                schema_id = int.from_bytes(value[1:5], "big")
                schema = schemas.get(schema_id)
                if schema is None:
                    text = registry.get_schema(schema_id).schema_str
                    schema = schemas[schema_id] = fastavro.parse_schema(json.loads(text))
                buffer = io.BytesIO(value)
                buffer.seek(5)
                datum = read(buffer, schema, None)
                obj = objects.get(p)
                if obj is None:
                    obj = objects[p] = _LoopAvroObject(store, prefix, job, p, offset, schema)
                obj.writer.write(datum)
                obj.records += 1
                records += 1
                value_bytes += len(value)
                position[p] = offset + 1
                if obj.records >= job.offsets_per_object or position[p] >= job.ends[p]:
                    done.append(objects.pop(p).close())
        for p in list(objects):
            done.append(objects.pop(p).close())
    finally:
        consumer.close()
        store.close()
    return loop_result(records, value_bytes, done, started, first_message)


def run_avro_loop_processes(jobs: list[AvroLoopJob]) -> list[dict[str, Any]]:
    """Start one ``spawn`` process per job (process start is part of the time); wait."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with context.Pool(len(jobs)) as pool:
        return pool.map(run_avro_loop, jobs, chunksize=1)


# -- checking the outputs ---------------------------------------------------------------------
def check_avro_output(store, prefix: str, topic: str, codec: str, *, indexed: bool) -> Output:
    """Read every ``.avro`` object of ``topic`` back with fastavro (every block decompressed,
    its records counted; the first record decoded and checked to be the key's start offset);
    with ``indexed``, check each sidecar against the object; and check that each partition's
    objects cover contiguous offsets from 0. ``uncompressed`` = the blocks' decoded bytes."""
    import fastavro

    from blockgz.archive.layout import Layout
    from blockgz.blocks.index import BlockIndex
    from blockgz.written.sidecars import sidecar_key

    started = time.perf_counter()
    out = Output()
    layout = Layout()
    refs = [layout.parse_data_key(i.key) for i in store.list(layout.topic_prefix(prefix, topic))]
    objects = sorted(
        (ref for ref in refs if ref is not None and ref.extension == "avro"),
        key=lambda ref: ref.key,
    )
    ranges: dict[int, list[tuple[int, int]]] = {}
    for ref in objects:
        data = store.get(ref.key)
        blocks = fastavro.block_reader(io.BytesIO(data))
        found = blocks.metadata.get("avro.codec", "null")
        if found != codec:
            raise AssertionError(f"{ref.key}: codec {found!r}, wanted {codec!r}")
        count = size = 0
        for n, block in enumerate(blocks):
            if n == 0:
                first = next(iter(block))
                if first["id"] != ref.start_offset or first["partition"] != ref.partition:
                    raise AssertionError(f"{ref.key}: first record is {first}")
            count += block.num_records
            size += block.bytes_.getbuffer().nbytes
        if indexed:
            index = BlockIndex.from_json(store.get(sidecar_key(ref.key)))
            if index.record_count != count or index.byte_length != len(data):
                raise AssertionError(f"{ref.key}: index says {index.record_count}, has {count}")
        ranges.setdefault(ref.partition, []).append((ref.start_offset, count))
        out.objects += 1
        out.records += count
        out.compressed += len(data)
        out.uncompressed += size
        out.per_partition[ref.partition] = out.per_partition.get(ref.partition, 0) + count
    for partition, spans in ranges.items():
        expected = 0
        for first_offset, count in sorted(spans):
            if first_offset != expected:
                raise AssertionError(f"partition {partition}: gap or overlap at {expected}")
            expected = first_offset + count
    out.check_s = time.perf_counter() - started
    return out


# -- 2. the seek object -----------------------------------------------------------------------
def build_seek_object(store, key: str, target_bytes: int = SEEK_OBJECT_BYTES):
    """Write ``target_bytes`` of encoded records (offsets from 0) with ``AvroUpload``
    (default 1 MiB blocks, :data:`SEEK_CODEC`); return its index."""
    from blockgz.formats.avro.upload import AvroUpload

    make = record_maker(0)
    pool = [make(i) for i in range(4096)]
    batch = 20_000
    with AvroUpload(store, key, SCHEMA, codec=SEEK_CODEC) as out:
        start = 0
        while out.uncompressed_size < target_bytes:
            out.write_many(seek_records(start, batch, pool), range(start, start + batch))
            start += batch
    return out.index


class ForwardStream:
    """A stream read front to back, with the ``tell()`` fastavro's block reader asks for."""

    def __init__(self, chunks: Iterator[bytes], buffer_size: int = BLOCK_SIZE):
        from blockgz.objects.stream import ChunkStream

        self._raw = io.BufferedReader(ChunkStream(chunks), buffer_size)
        self._position = 0

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self._position += len(data)
        return data

    def tell(self) -> int:
        return self._position


def iter_blocks_until(fileobj, record_index: int) -> Iterator[Any]:
    """What reading a plain Avro file to a record takes: fastavro's ``block_reader`` over the
    stream, counting each block's records (without decoding them) until the block holding
    record ``record_index`` (0-based), whose records are then decoded; yields that record."""
    import fastavro

    seen = 0
    for block in fastavro.block_reader(fileobj):
        if seen + block.num_records > record_index:
            for n, datum in enumerate(block):
                if seen + n == record_index:
                    yield datum
                    return
        seen += block.num_records
    raise AssertionError(f"the object has only {seen} records, wanted record {record_index}")
