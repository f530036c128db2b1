"""One Spark write task: Arrow batches of Kafka rows in, objects and a commit message out.

Each task writes the topic-partitions it is given, in offset order, through one
:class:`~blockgz.sink.write.partition_writer.TopicPartitionWriter` per topic-partition. A batch
holding only one topic-partition's non-null values (what a Kafka source gives each task) is written
whole when the settings allow; anything else goes record by record. On any failure, every
object this attempt wrote is deleted before the error goes on to Spark.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from blockgz.errors import ConfigError
from blockgz.sink.deadletter import (
    DeadLetters,
    KafkaDeadLetters,
    StoreDeadLetters,
    log_bad_record,
)
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.commit import TaskCommitMessage
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.hooks import TaskInfo, load_input_reader, load_listener
from blockgz.sink.write.partition_writer import TopicPartitionWriter
from blockgz.sink.write.transforming import RecordTransformer, StageError
from blockgz.store.request_stats import REQUESTS
from blockgz.written.files import WrittenFile

log = logging.getLogger("blockgz.sink")

#: Writers a task closes at once when a micro-batch ends (their PUTs overlap).
CLOSE_THREADS = 8


def with_topic(batches: Iterable[Any], topic: str) -> Iterator[Any]:
    """The Arrow batches, each with a ``topic`` column of ``topic`` where it has none.

    The export leaves the column out of a one-topic job's rows
    (:data:`~blockgz.sink.write.options.INPUT_TOPIC`): Spark would copy the name into every
    row's Arrow batch. Here it is one array, sliced to each batch's length.

    >>> import pyarrow as pa
    >>> rows = pa.RecordBatch.from_pydict({"value": [b"a", b"b"], "partition": [0, 0]})
    >>> next(with_topic([rows], "orders")).column("topic").to_pylist()
    ['orders', 'orders']
    """
    import pyarrow as pa

    name = pa.scalar(topic, pa.string())
    column = pa.array([], pa.string())
    for batch in batches:
        if "topic" in batch.schema.names:
            yield batch
            continue
        if len(column) < batch.num_rows:
            column = pa.repeat(name, batch.num_rows)
        yield batch.append_column("topic", column.slice(0, batch.num_rows))


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
    has_kinds = "timestampType" in names
    kinds = batch.column("timestampType").to_pylist() if has_kinds else [None] * n
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
        yield KafkaRecord(
            topics[i], partitions[i], offsets[i], stamps[i], key, value, headers[i],
            timestamp_type=kinds[i],
        )  # fmt: skip


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


def run_timestamps(batch) -> Any:
    """The batch's Kafka timestamps as epoch ms (int64 numpy array, -1 where there is none),
    or ``None`` when the batch has no ``timestamp`` column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "timestamp" not in batch.schema.names:
        return None
    micros = pc.fill_null(pc.cast(batch.column("timestamp"), pa.int64()), -1000)
    return micros.to_numpy(zero_copy_only=False) // 1000


def run_timestamp_types(batch) -> Any:
    """The batch's Kafka timestamp types (int64 numpy array, -1 where there is none), or
    ``None`` when the batch has no ``timestampType`` column."""
    import pyarrow.compute as pc

    if "timestampType" not in batch.schema.names:
        return None
    return pc.fill_null(batch.column("timestampType"), -1).to_numpy(zero_copy_only=False)


def run_companions(batch, config: SinkSettings) -> tuple[Any, Any]:
    """The batch's key and headers columns (Arrow) when files beside the values keep them,
    else ``None``; a column the batch lacks is all nulls."""
    import pyarrow as pa

    from blockgz.sink.records import kafka_arrow_schema

    names = batch.schema.names
    wanted = (("key", config.store_keys), ("headers", config.store_headers))
    columns: list[Any] = []  # an Arrow column, or None where not kept
    for name, kept in wanted:
        if not kept:
            columns.append(None)
        elif name in names:
            columns.append(batch.column(name))
        else:
            columns.append(pa.nulls(batch.num_rows, kafka_arrow_schema(True).field(name).type))
    return columns[0], columns[1]


def task_identity() -> tuple[int | None, int]:
    """(micro-batch id, attempt number) of the running Spark task; (None, 0) outside Spark."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - the [spark] extra is not installed
        return None, 0
    context = TaskContext.get()
    if context is None:
        return None, 0
    batch = context.getLocalProperty("streaming.sql.batchId")
    return (int(batch) if batch is not None else None), context.attemptNumber()


class WriteTask:
    """The writers of one task attempt, one per topic-partition, sharing one partitioner."""

    def __init__(self, config: SinkSettings):
        self.config = config
        self.store, self.prefix = config.make_store()
        self.writers: dict[tuple[str, int], TopicPartitionWriter] = {}
        self._partitioner = None
        self._listener = load_listener(config.listener, config.listener_options)
        self._files_done = 0
        self._objects_done = 0
        self._done_lock = threading.Lock()
        self._identity: tuple[int | None, int] | None = None
        self.dead_letters = dead_letter_queue(config, self.store, self.prefix)
        #: Connect's transforms (``None``: none configured); then the offsets read per
        #: topic-partition, and which one each routed topic-partition's records come from.
        self.transformer = RecordTransformer.of(config)
        self.read_offsets: dict[tuple[str, int], int] = {}
        self._routed_from: dict[tuple[str, int], tuple[str, int]] = {}

    def writer_for(self, topic: str, partition: int) -> TopicPartitionWriter:
        writer = self.writers.get((topic, partition))
        if writer is None:
            if self._partitioner is None:
                self._partitioner = self.config.partitioner()
            writer = TopicPartitionWriter(
                topic,
                partition,
                self.config,
                self.store,
                self.prefix,
                partitioner=self._partitioner,
                on_file=self._file_done,
                dead_letters=self.dead_letters,
            )
            self.writers[(topic, partition)] = writer
        return writer

    def _file_done(self, file: WrittenFile) -> None:
        with self._done_lock:  # writers close on several threads (_close_writers)
            self._count_file(file)

    def _count_file(self, file: WrittenFile) -> None:
        self._files_done += 1
        self._objects_done += file.role == "value"
        if self._listener is not None:
            if self._identity is None:
                self._identity = task_identity()
            batch, attempt = self._identity
            info = TaskInfo(batch, attempt, self._files_done, self._objects_done)
            self._listener.file_written(file, info)

    def write(self, batch) -> None:
        """Write one Arrow batch of Kafka rows."""
        if self.transformer is not None:
            if not self._write_routed_run(batch):
                for record in records_of(batch):
                    self._write_transformed(record)
            return
        run = single_partition_run(batch)
        if run is not None:
            writer = self.writer_for(*run)
            if writer.writes_runs and self._write_runs(writer, batch):
                return
        for record in records_of(batch):
            self.writer_for(record.topic, record.partition).write(record)

    def _write_routed_run(self, batch) -> bool:
        """One topic-partition's batch whole (the batch path) through a chain that compiles
        for its topic (:meth:`~blockgz.sink.transforms.chain.Chain.fused`): routers once, value
        transforms in one loop over the parsed JSON values; ``False`` when it cannot (then
        records go one by one)."""
        transformer = self.transformer
        assert transformer is not None
        run = single_partition_run(batch)
        plan = None if run is None else transformer.chain.fused(run[0])
        if run is None or plan is None or (plan.kernels and not transformer.json_values):
            return False
        target = (plan.topic, run[1])
        self._check_route(target, run)
        writer = self.writers.get(target)
        if writer is not None and not writer.writes_runs:
            return False
        values = None
        if plan.kernels:
            # Before the writer is made: if all of them go to the dead-letter queue, none is.
            values = transformer.transform_json_values(plan, run_values(batch)[0], batch)
            if values is None:
                return False
        writer = writer or self.writer_for(*target)
        if not (writer.writes_runs and self._write_runs(writer, batch, values)):
            return False
        import pyarrow.compute as pc

        self.read_offsets[run] = pc.max(batch.column("offset")).as_py()
        return True

    def _check_route(self, target: tuple[str, int], source: tuple[str, int]) -> None:
        """Refuse two topic-partitions routed to one (their objects' names would collide)."""
        first = self._routed_from.setdefault(target, source)
        if first != source:
            raise ConfigError(
                f"the transforms route {first[0]}-{first[1]} and {source[0]}-{source[1]} to "
                f"the same topic-partition {target[0]}-{target[1]}; their objects would "
                "overwrite each other: route different topics to different topics"
            )

    def _write_transformed(self, record: KafkaRecord) -> None:
        """Run the transforms on one record and write what they return (a record they reject
        follows ``errors.tolerance`` like any bad record)."""
        assert self.transformer is not None
        source = (record.topic, record.partition)
        self.read_offsets[source] = record.offset
        try:
            out = self.transformer.apply(record)
        except StageError as exc:
            if self.dead_letters is None:
                raise
            log_bad_record(self.config.dead_letters, record, exc)
            self.dead_letters.send(record, exc, exc.stage)
            return
        if out is None:
            return
        target = (out.topic, out.partition)
        self._check_route(target, source)
        self.writer_for(*target).write(out)

    def _write_runs(
        self, writer: TopicPartitionWriter, batch, transformed: list[bytes] | None = None
    ) -> bool:
        """One topic-partition's batch on the batch path; ``False`` if none of it could go.

        Under ``errors.tolerance=all`` a value the encoder rejects does not send the whole
        batch record by record: the runs before and after it stay on the batch path and only
        it goes through :meth:`TopicPartitionWriter.write` (to the dead-letter queue). Both
        paths cut files and blocks at the same records, so the objects are the same.
        """
        values, offsets = run_values(batch)
        checked = transformed is not None  # serialised by orjson: valid, one line each
        if transformed is not None:
            values = transformed
        keys, headers = run_companions(batch, self.config)
        stamps, kinds = run_timestamps(batch), run_timestamp_types(batch)
        if writer.dead_letters is None:
            return writer.write_values(
                values,
                offsets,
                keys,
                headers,
                timestamps=stamps,
                timestamp_types=kinds,
                checked=checked,
            )
        import pyarrow as pa

        bad_rows = [] if checked else writer.encoder.rejected(values)
        bad_records = records_of(batch.take(pa.array(bad_rows, pa.int64()))) if bad_rows else None
        start, count = 0, len(values)
        for stop in [*bad_rows, count]:
            if stop > start:
                part = slice(start, stop)
                written = writer.write_values(
                    values[part],
                    offsets[part],
                    None if keys is None else keys[part],
                    None if headers is None else headers[part],
                    timestamps=None if stamps is None else stamps[part],
                    timestamp_types=None if kinds is None else kinds[part],
                    checked=True,
                )
                if not written:  # declined (offsets out of order): records from here on
                    if start == 0:
                        return False
                    for record in records_of(batch.slice(start)):
                        writer.write(record)
                    return True
            if stop < count:
                assert bad_records is not None
                writer.write(next(bad_records))
            start = stop + 1
        return True

    def finish(self) -> TaskCommitMessage:
        """Close every writer (the micro-batch ends) and describe what was written."""
        message = TaskCommitMessage()
        if self.dead_letters is not None:
            message.dead_letters = self.dead_letters.finish()
        for (topic, part), last in sorted(self.read_offsets.items()):
            message.next_offsets.setdefault(topic, {})[part] = last + 1  # the topics read
        closed = self._close_writers()
        for (topic, part), writer in sorted(self.writers.items()):
            message.files.extend(closed[(topic, part)])
            message.skipped_nulls += writer.skipped_nulls
            assert writer.last_offset is not None
            if self.transformer is None:
                message.next_offsets.setdefault(topic, {})[part] = writer.last_offset + 1
            dead = message.dead_letters.get(topic, {}).get(part, 0)
            log.info(
                "%s-%d: %d files, next offset %d%s",
                topic,
                part,
                len(writer.written),
                writer.last_offset + 1,
                f", {dead} records to the dead-letter queue" if dead else "",
            )
        return message

    def _close_writers(self) -> dict[tuple[str, int], list[WrittenFile]]:
        """Close every writer; several at once (each its data objects, then their sidecars:
        the order within a file stays), since a task of many small topic-partitions otherwise
        waits for two PUTs per partition one after the other (issue 44). Returns only once
        every close has ended, so an abort never runs beside one; the first error is raised."""
        writers = sorted(self.writers.items())
        if len(writers) <= 1:
            return {tp: writer.close() for tp, writer in writers}
        threads = min(CLOSE_THREADS, len(writers))
        with ThreadPoolExecutor(threads, thread_name_prefix="blockgz-close") as pool:
            futures = {tp: pool.submit(writer.close) for tp, writer in writers}
        return {tp: future.result() for tp, future in futures.items()}

    def abort(self) -> None:
        for writer in self.writers.values():
            writer.abort()
        if self.dead_letters is not None:
            self.dead_letters.abort()


def dead_letter_queue(config: SinkSettings, store, prefix: str) -> DeadLetters | None:
    """This task's dead-letter queue under ``errors.tolerance=all`` (else ``None``).

    The Kafka queue cannot take a record back, so a task of a batch whose manifest already
    exists (Spark replays a batch it committed to blockgz but not to its own log) only counts
    what it would send; the store's queue overwrites its objects with the same bytes anyway.
    """
    settings = config.dead_letters
    if not settings.enabled:
        return None
    if settings.to_store:
        return StoreDeadLetters(store, config.layout, prefix, config.name)
    batch, _ = task_identity()
    if batch is not None and config.manifest_log(store, prefix).read_batch(batch) is not None:
        log.info("batch %d is committed already: its bad records are not sent again", batch)
        return DeadLetters()
    return KafkaDeadLetters(settings, connector=config.name)


def write_task(config: SinkSettings, batches: Iterator[Any]) -> TaskCommitMessage:
    """Write every record of one task; on failure nothing this attempt wrote stays behind."""
    requests_before = REQUESTS.snapshot()
    task = WriteTask(config)
    reader = load_input_reader(config.input_reader)
    try:
        for batch in batches if reader is None else reader(config.input_options, batches):
            task.write(batch)
        message = task.finish()
        message.s3_requests = REQUESTS.since(requests_before)
        return message
    except BaseException:
        task.abort()
        raise
