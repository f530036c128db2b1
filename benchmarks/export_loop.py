"""The plain confluent-kafka consumer loop of the export benchmark: the ceiling of the Python
stack (consume, validate, block-GZIP, multipart upload, index), one process per job.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LoopJob:
    """What one consumer-loop process does (picklable)."""

    bootstrap: str
    topic: str
    partitions: tuple[int, ...]
    ends: dict[int, int]
    bucket_url: str
    s3_options: dict[str, str]
    offsets_per_object: int
    consumer_config: dict[str, Any] = field(default_factory=dict)


class _LoopObject:
    """One object of the loop: a block-GZIP multipart upload plus its sidecar, like the sink's."""

    def __init__(self, store, prefix: str, topic: str, partition: int, start: int):
        from blockgz.archive.layout import Layout, default_partition
        from blockgz.blocks.codecs.gzip_members import Compression
        from blockgz.blocks.writer import DEFAULT_BLOCK_SIZE
        from blockgz.written.upload import BlockGzipUpload

        partitioned_path = f"{topic}/{default_partition(partition)}"
        key = Layout().data_key(prefix, partitioned_path, topic, partition, start, ".json.gz")
        self.out = BlockGzipUpload(
            store,
            key,
            block_size=DEFAULT_BLOCK_SIZE,
            compression=Compression(),
            threads=1,
            first_offset=start,
        )
        self.records = 0

    def close(self) -> tuple[str, int, int]:
        """Finish the object, then write its ``.index.json``: (key, records, bytes)."""
        index = self.out.close()
        return self.out.key, self.records, index.byte_length


def run_loop(job: LoopJob) -> dict[str, Any]:
    """One consumer-loop process: read the partitions to their end, validate each value
    (orjson), block-GZIP it into S3, one object (+ index) per ``offsets_per_object``."""
    import orjson
    from confluent_kafka import KafkaError, TopicPartition

    from blockgz.store import open_store

    started = time.time()
    store, prefix = open_store(job.bucket_url, job.s3_options)
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": job.bootstrap,
            "group.id": f"bench-loop-{os.getpid()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            **job.consumer_config,
        }
    )
    consumer.assign([TopicPartition(job.topic, p, 0) for p in job.partitions])
    position = dict.fromkeys(job.partitions, 0)
    objects: dict[int, _LoopObject] = {}
    done: list[tuple[str, int, int]] = []
    records = value_bytes = 0
    first_message = None
    loads = orjson.loads
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
                loads(value)  # the sink validates every JSON value
                obj = objects.get(p)
                if obj is None:
                    obj = objects[p] = _LoopObject(store, prefix, job.topic, p, offset)
                obj.out.writer.write(value, offset)  # the writer itself, as before
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


def _peak_rss() -> int:
    """This process's peak RSS (``VmHWM``). Not ``ru_maxrss``: after fork + exec that keeps
    the parent's high-water mark (a spawned child of a 600 MB parent reports 600 MB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def run_loop_processes(jobs: list[LoopJob]) -> list[dict[str, Any]]:
    """Start one ``spawn`` process per job (process start is part of the time); wait."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with context.Pool(len(jobs)) as pool:
        return pool.map(run_loop, jobs, chunksize=1)


def loop_result(records: int, value_bytes: int, objects, started: float, first_message) -> dict:
    """What one loop process reports: its counts, times, CPU and peak RSS."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "pid": os.getpid(),
        "records": records,
        "value_bytes": value_bytes,
        "objects": objects,
        "started": started,
        "first_message": first_message,
        "finished": time.time(),
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "max_rss": _peak_rss(),
    }
