"""Build a multi-object, multi-block partition in any store, the way the sink lays it out."""

from __future__ import annotations

import random
from typing import Any

from blockgz.archive.layout import Layout, default_partition
from blockgz.commits.catalog import compact_every
from blockgz.sample import events
from blockgz.sink.records import KafkaRecord
from blockgz.store import ObjectStore
from blockgz.written.upload import BlockGzipUpload


def build_partition(
    store: ObjectStore,
    prefix: str = "",
    *,
    topic: str = "orders",
    partition: int = 0,
    objects: int = 3,
    records_per_object: int = 400,
    block_size: int = 16 * 1024,
    gap_every: int = 0,
) -> dict[int, bytes]:
    """Write ``objects`` block-GZIP objects plus indexes; return {offset: value}.

    With ``gap_every`` > 0, every n-th offset is skipped (as compaction would leave it).
    """
    expected: dict[int, bytes] = {}
    offset = 0
    values = iter(events(objects * records_per_object * 2))
    for _ in range(objects):
        start = offset
        path = f"{topic}/{default_partition(partition)}"
        key = Layout().data_key(prefix, path, topic, partition, start, ".json.gz")
        with BlockGzipUpload(
            store, key, block_size=block_size, first_offset=start, threads=2
        ) as out:
            for _ in range(records_per_object):
                if gap_every and offset % gap_every == gap_every - 1:
                    offset += 1
                value = next(values)
                out.write(value, offset)
                expected[offset] = value
                offset += 1
    return expected


# -- time- and field-partitioned exports, through the write task -------------------------------
HOUR = 3_600_000
T0 = 1_700_000_000_000 - 1_700_000_000_000 % (24 * HOUR)

LAYOUTS = {
    "field": {"partitioner.class": "FieldPartitioner", "partition.field.name": "kind"},
    "hourly": {
        "partitioner.class": "TimeBasedPartitioner",
        "path.format": "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH",
        "partition.duration.ms": str(HOUR),
        "locale": "en-US",
        "timezone": "UTC",
        "timestamp.extractor": "Record",
    },
}


#: Every layout ``export_batches`` takes: the default partitioner besides ``LAYOUTS``.
PARTITIONERS = {"default": {}, **LAYOUTS}


def input_records(count: int, partitions: int = 2) -> list[KafkaRecord]:
    """Records whose kind and hour jump around (late records, several open files at once),
    with compaction and transaction-marker gaps in the offsets."""
    rng = random.Random(7)
    out = []
    for p in range(partitions):
        offset = 0
        for n in range(count):
            kind = rng.choice(["click", "view", "buy"])
            stamp = T0 + rng.choice([0, 0, 1, 2, 3]) * HOUR + n
            value = b'{"kind": "%s", "n": %d, "p": %d}' % (kind.encode(), n, p)
            out.append(KafkaRecord("ev", p, offset, stamp, b"k%d" % n, value))
            offset += rng.choice([1, 1, 1, 2, 4])
    return out


def export_batches(
    path: str,
    records: list[KafkaRecord],
    layout: str,
    *,
    batches: int,
    every: int = 4,
    **extra: Any,
):
    """``batches`` micro-batches through the real write task into ``path`` (a directory or
    ``s3://`` URL, S3 settings in ``extra``), a manifest each, compacted every ``every``."""
    from blockgz.sink.write.commit import write_manifest
    from blockgz.sink.write.config import SinkSettings
    from blockgz.sink.write.task import write_task
    from testkit.batches import arrow_batches

    config = SinkSettings.from_options(
        {
            "path": path,
            "name": "job",
            "flush.size": "7",
            "s3.compression.type": "blockgzip",
            "s3.compression.block.records": "3",
            "blockgz.catalog.every": str(every),
            # The value objects alone, as the tests on these archives count them.
            "store.kafka.timestamps": "false",
            **PARTITIONERS[layout],
            **extra,
        }
    )
    log = config.manifest_log()
    by_partition: dict[int, list[KafkaRecord]] = {}
    for r in records:
        by_partition.setdefault(r.partition, []).append(r)
    for batch in range(batches):
        messages = []
        for recs in by_partition.values():
            size = -(-len(recs) // batches)
            chunk = recs[batch * size : (batch + 1) * size]
            if chunk:
                messages.append(write_task(config, iter(arrow_batches(chunk))))
        write_manifest(log, batch, messages)
        compact_every(log, batch, config.catalog_every)
    return config


def write_once(records: list[KafkaRecord], options: dict[str, Any]) -> None:
    """``records`` through one real write task with the sink ``options`` (no manifest)."""
    from blockgz.sink.write.config import SinkSettings
    from blockgz.sink.write.task import write_task
    from testkit.batches import arrow_batches

    write_task(SinkSettings.from_options(options), iter(arrow_batches(records)))


def seconds_archive(
    path: str, count: int, *, block_records: int, start: int = T0, **extra: Any
) -> list[KafkaRecord]:
    """One object of ``count`` JSON records of ``ev``/0 a second apart from ``start`` (epoch
    ms), with their timestamps (the envelope) in blocks of ``block_records``: the block index
    says where times are."""
    records = [
        KafkaRecord("ev", 0, n, start + n * 1000, None, b'{"n":%d}' % n) for n in range(count)
    ]
    options = {
        "path": path,
        "flush.size": str(count),
        "s3.compression.type": "blockgzip",
        "s3.compression.block.records": str(block_records),
        "format.json.envelope": "true",
    }
    write_once(records, {**options, **extra})
    return records
