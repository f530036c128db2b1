"""The ``blockgz`` Spark data source: write Kafka-shaped DataFrames in Confluent's S3 layout.

Streaming (``writeStream.format("blockgz")``) and batch (``write.format("blockgz")``). Options
are Confluent's S3-sink names (see :mod:`sink.config`). Each task writes the topic-partitions it
is given, in offset order, and returns the files it made; the driver's ``commit`` writes the
batch manifest; ``abort`` deletes what a failed batch wrote.

Example (needs Spark, so not a doctest)::

    (spark.readStream.format("blockgz-kafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:9092").option("subscribe", "s3_topic")
        .load()
        .writeStream.format("blockgz")
        .option("s3.bucket.name", "quickstart").option("flush.size", "3")
        .option("checkpointLocation", "/tmp/ckpt")
        .start())
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
)

from sink import faults
from sink.commit import TaskCommitMessage, delete_files, write_manifest
from sink.config import SinkConfig
from sink.partition_writer import TopicPartitionWriter
from sink.records import KafkaRecord

log = logging.getLogger("blockgz.sink")

REQUIRED_COLUMNS = ("value", "topic", "partition", "offset")


def _check_schema(schema, config: SinkConfig) -> None:
    from blockgz.errors import ConfigError
    from sink.kafka_source import RANGE_COLUMNS

    names = set(schema.fieldNames())
    if names == set(RANGE_COLUMNS):
        if not config.kafka_source_options():
            raise ConfigError(
                "the rows are Kafka offset ranges (blockgz-kafka with blockgz.emit=ranges): "
                "give the sink the source's options as blockgz.source.<option> so its tasks "
                "can read them, or let blockgz export set this up"
            )
        return
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise ConfigError(
            f"the blockgz sink needs Kafka's columns; missing: {', '.join(missing)} "
            "(expected key, value, topic, partition, offset, timestamp, timestampType, "
            "and optionally headers)"
        )


def records_of(batch) -> Iterator[KafkaRecord]:
    """Turn one Arrow batch of Kafka rows into :class:`KafkaRecord` objects, column-wise."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = batch.schema.names
    n = batch.num_rows
    values = batch.column("value").to_pylist()
    topics = batch.column("topic").to_pylist()
    partitions = batch.column("partition").to_pylist()
    offsets = batch.column("offset").to_pylist()
    keys = batch.column("key").to_pylist() if "key" in names else [None] * n
    if "timestamp" in names:
        micros = pc.cast(batch.column("timestamp"), pa.int64()).to_pylist()
        stamps = [None if t is None else t // 1000 for t in micros]
    else:
        stamps = [None] * n
    if "headers" in names:
        headers = [
            None if h is None else [(e["key"], e["value"]) for e in h]
            for h in batch.column("headers").to_pylist()
        ]
    else:
        headers = [None] * n
    for i in range(n):
        value = values[i]
        if isinstance(value, str):  # a CAST(value AS STRING) DataFrame
            value = value.encode()
        key = keys[i]
        if isinstance(key, str):
            key = key.encode()
        yield KafkaRecord(topics[i], partitions[i], offsets[i], stamps[i], key, value, headers[i])


def record_batches(config: SinkConfig, batches: Iterator[Any]) -> Iterator[Any]:
    """The Arrow batches of Kafka records to write: the input itself, or, when its rows are
    offset ranges (``blockgz.emit=ranges``), those ranges read from Kafka by this task."""
    from sink.kafka_options import parse_options
    from sink.kafka_source import KafkaInputPartition, read_range

    source = None
    for batch in batches:
        if "endOffset" not in batch.schema.names:
            yield batch
            continue
        if source is None:
            source = parse_options(config.kafka_source_options())
        for row in batch.to_pylist():
            part = KafkaInputPartition(
                row["topic"], row["partition"], row["startOffset"], row["endOffset"]
            )
            log.info("%s-%d: reading [%d, %d)", part.topic, part.partition, part.start, part.end)
            yield from read_range(source, part)


def single_partition_run(batch) -> tuple[str, int] | None:
    """``(topic, partition)`` when every row of the Arrow batch has that topic-partition and
    a non-null value (what a Kafka source gives each task), else ``None``."""
    import pyarrow.compute as pc

    if batch.num_rows == 0 or batch.column("value").null_count:
        return None
    topics, partitions = batch.column("topic"), batch.column("partition")
    if topics.null_count or partitions.null_count or batch.column("offset").null_count:
        return None
    bounds = pc.min_max(partitions)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low != high or pc.count_distinct(topics).as_py() != 1:
        return None
    return topics[0].as_py(), low


def run_values(batch) -> tuple[list[bytes], Any]:
    """The values (as ``bytes``) and offsets (int64 numpy array) of a batch."""
    import pyarrow as pa

    values = batch.column("value")
    if not pa.types.is_binary(values.type):  # a CAST(value AS STRING) DataFrame
        values = values.cast(pa.binary())
    offsets = batch.column("offset").to_numpy(zero_copy_only=False)
    return values.to_pylist(), offsets


def _task_identity() -> tuple[int | None, int]:
    """(micro-batch id, attempt number) of the running Spark task; (None, 0) outside Spark."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return None, 0
    batch = context.getLocalProperty("streaming.sql.batchId")
    return (int(batch) if batch is not None else None), context.attemptNumber()


def write_task(config: SinkConfig, batches: Iterator[Any]) -> TaskCommitMessage:
    """Write every record of one task; on failure nothing this attempt wrote stays behind."""
    store, prefix = config.make_store()
    writers: dict[tuple[str, int], TopicPartitionWriter] = {}
    partitioner = None
    fault = faults.parse_fault(config.options.get(faults.OPTION))
    fault_pending = fault is not None
    files_done = 0
    try:

        def writer_for(topic: str, part: int) -> TopicPartitionWriter:
            nonlocal partitioner
            writer = writers.get((topic, part))
            if writer is None:
                if partitioner is None:
                    partitioner = config.partitioner()
                writer = TopicPartitionWriter(
                    topic, part, config, store, prefix, partitioner=partitioner
                )
                writers[(topic, part)] = writer
            return writer

        def after_write(writer: TopicPartitionWriter) -> None:
            nonlocal fault_pending, files_done
            if fault_pending and len(writer.written) > files_done:
                files_done = len(writer.written)
                fault_pending = faults.after_file(fault, files_done, *_task_identity())

        for batch in record_batches(config, batches):
            run = single_partition_run(batch)
            if run is not None:
                writer = writer_for(*run)
                if writer.writes_runs and writer.write_values(*run_values(batch)):
                    after_write(writer)
                    continue
            for record in records_of(batch):
                writer = writer_for(record.topic, record.partition)
                writer.write(record)
                after_write(writer)
        message = TaskCommitMessage()
        for (topic, part), writer in sorted(writers.items()):
            message.files.extend(writer.close())
            message.skipped_nulls += writer.skipped_nulls
            assert writer.last_offset is not None
            message.next_offsets.setdefault(topic, {})[part] = writer.last_offset + 1
            log.info(
                "%s-%d: %d files, next offset %d",
                topic,
                part,
                len(writer.written),
                writer.last_offset + 1,
            )
        return message
    except BaseException:
        for writer in writers.values():
            writer.abort()
        raise


class _Writer:
    def __init__(self, options: dict[str, str], schema):
        self.config = SinkConfig.from_options(options)
        _check_schema(schema, self.config)

    def write(self, iterator: Iterator[Any]) -> TaskCommitMessage:
        return write_task(self.config, iterator)

    def _commit(self, messages: list[TaskCommitMessage | None], batch_id: int | str) -> None:
        store, prefix = self.config.make_store()
        key = write_manifest(store, prefix, self.config, batch_id, messages)
        files = sum(len(m.files) for m in messages if m is not None)
        log.info("batch %s committed: %d files, manifest %s", batch_id, files, key)
        if isinstance(batch_id, int):
            faults.in_commit(faults.parse_fault(self.config.options.get(faults.OPTION)), batch_id)

    def _abort(self, messages: list[TaskCommitMessage | None], batch_id: int | str) -> None:
        store, _ = self.config.make_store()
        removed = delete_files(store, (f for m in messages if m is not None for f in m.files))
        log.warning("batch %s aborted: removed %d objects written by its tasks", batch_id, removed)


class BlockGzStreamWriter(_Writer, DataSourceStreamArrowWriter):
    """Streaming writer: one manifest per micro-batch (batch id from the task's local property)."""

    def commit(self, messages, batchId: int) -> None:
        self._commit(messages, batchId)

    def abort(self, messages, batchId: int) -> None:
        self._abort(messages, batchId)


class BlockGzBatchWriter(_Writer, DataSourceArrowWriter):
    """Batch writer: the manifest is named after a hash of the files it lists."""

    def commit(self, messages) -> None:
        keys = sorted(f.key for m in messages if m is not None for f in m.files)
        digest = hashlib.sha1("\n".join(keys).encode()).hexdigest()[:16]
        self._commit(messages, f"batch-{digest}")

    def abort(self, messages) -> None:
        self._abort(messages, "batch")


class BlockGzDataSource(DataSource):
    """``format("blockgz")``: Kafka rows to objects laid out like Confluent's S3 sink."""

    @classmethod
    def name(cls) -> str:
        return "blockgz"

    def writer(self, schema, overwrite: bool) -> BlockGzBatchWriter:
        return BlockGzBatchWriter(self.options, schema)

    def streamWriter(self, schema, overwrite: bool) -> BlockGzStreamWriter:
        return BlockGzStreamWriter(self.options, schema)
