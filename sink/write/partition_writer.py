"""Per topic-partition writing: partition each record, rotate files, name them like Confluent.

One :class:`TopicPartitionWriter` owns the open files of one Kafka topic-partition (one per
encoded partition, e.g. per day or per field value). Records must come in offset order. A file
rotates when it holds ``flush.size`` records or ``flush.size.bytes`` bytes, when the record time
has moved ``rotate.interval.ms`` past its first record, on the wall-clock schedule
``rotate.schedule.interval.ms``, and at the end of every micro-batch (:meth:`close`).

A record goes through the stages of :mod:`blockgz.sink.write.stages`: route (nulls) → convert
(``value.converter``) → place (encoded partition, schema) → append → rotate.

Everything but the wall-clock parts is a pure function of the records, so a replayed batch
produces the same keys and the same bytes (the README's "Exactly once" says why that matters).

>>> import tempfile
>>> from blockgz.sink.write.config import SinkSettings
>>> from blockgz.sink.records import KafkaRecord
>>> cfg = SinkSettings.from_options({"path": tempfile.mkdtemp(), "flush.size": "3"})
>>> w = TopicPartitionWriter("s3_topic", 0, cfg, cfg.make_store()[0])
>>> for n in range(7):
...     w.write(KafkaRecord("s3_topic", 0, n, 0, None, b'{"n": %d}' % n))
>>> for f in w.close():  # each value file (a plain one: with the hidden file of its timestamps)
...     print(f.key.rsplit("/", 1)[1], f.role)
s3_topic+0+0000000000.json value
.s3_topic+0+0000000000.timestamps.json timestamps
s3_topic+0+0000000003.json value
.s3_topic+0+0000000003.timestamps.json timestamps
s3_topic+0+0000000006.json value
.s3_topic+0+0000000006.timestamps.json timestamps

A block-GZIP value file keeps its timestamps in its ``.index.json`` sidecar instead:

>>> cfg = SinkSettings.from_options({"path": tempfile.mkdtemp(), "flush.size": "3",
...                                  "s3.compression.type": "blockgzip"})
>>> w = TopicPartitionWriter("s3_topic", 0, cfg, cfg.make_store()[0])
>>> for n in range(4):
...     w.write(KafkaRecord("s3_topic", 0, n, 1700000000000 + n, None, b'{"n": %d}' % n))
>>> [f.key.rsplit("/", 1)[1] for f in w.close()]
['s3_topic+0+0000000000.json.gz', 's3_topic+0+0000000003.json.gz']
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import numpy as np

from blockgz.archive.layout import default_partition
from blockgz.commits.intents import DirectoryIntents
from blockgz.errors import BadRecordError, OffsetOrderError
from blockgz.formats.base import KEYS
from blockgz.formats.output import ObjectWriter
from blockgz.sink.convert.schemas import ValueSchema
from blockgz.sink.deadletter import DeadLetters, log_bad_record
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.companions import Companions
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.encoders import encoder_for
from blockgz.sink.write.object_writer import NoValueFile
from blockgz.sink.write.open_files import OpenFiles
from blockgz.sink.write.stages import (
    NullRoute,
    OpenFile,
    Placement,
    Rotator,
    Route,
    Run,
    append,
    append_run,
)
from blockgz.sink.write.transforming import TransformedRecord
from blockgz.store.base import ObjectStore
from blockgz.written.files import WrittenFile

log = logging.getLogger("blockgz.sink")


class TopicPartitionWriter:
    """Writes one topic-partition's records of one micro-batch into rotated objects."""

    def __init__(
        self,
        topic: str,
        partition: int,
        config: SinkSettings,
        store: ObjectStore,
        prefix: str = "",
        *,
        partitioner=None,
        clock: Callable[[], float] = time.time,
        on_file: Callable[[WrittenFile], None] | None = None,
        dead_letters: DeadLetters | None = None,
    ):
        self.topic = topic
        self.partition = partition
        self.config = config
        self.store = store
        self.prefix = prefix
        self.partitioner = partitioner or config.partitioner()
        self.encoder = encoder_for(config)
        self.converter = config.value_converter.build() if config.decodes_values else None
        self.key_converter = config.key_converter.build() if config.store_keys else None
        #: Where bad records go under ``errors.tolerance=all`` (``None``: they fail the batch).
        self.dead_letters = dead_letters
        # The stages of a record's way (blockgz.sink.write.stages) and the files they fill.
        self.route = NullRoute.of(config, dead_letters=dead_letters is not None)
        self.placement = Placement.of(config, self.partitioner)
        self.rotator = Rotator.of(config, self.partitioner, clock)
        self.files = OpenFiles(
            store,
            topic,
            partition,
            on_file=on_file,
            converters={
                "value": config.value_converter.label(unwrap_payload=config.unwrap_payload),
                KEYS: config.key_converter.label(),
            },
        )
        self._stage = "TASK_PUT"
        self.skipped_nulls = 0
        self.last_offset: int | None = None
        #: Whether :meth:`write_values` may take whole runs of records.
        self.writes_runs = self._takes_runs()
        #: Under a field or time partitioner, the directories written are recorded first.
        self.intents = (
            None
            if self.partitioner.partition_directories
            else DirectoryIntents(store, prefix, config.layout, config.name, topic, partition)
        )

    def _takes_runs(self) -> bool:
        """Whether records may go in runs: the default partitioner, values stored as they are,
        no converter and no rotation that looks at time."""
        config = self.config
        return (
            self.partitioner.partition_directories
            and self.encoder.may_pass_through
            and self.converter is None
            and (self.key_converter is None and config.format_for(KEYS).writes_companion_runs)
            and not config.rotate_interval_ms
            and not config.rotate_schedule_interval_ms
        )

    @property
    def open_files(self) -> dict[str, OpenFile]:
        """The open writers by encoded partition."""
        return self.files.open

    @property
    def written(self) -> list[WrittenFile]:
        """The files committed in this attempt."""
        return self.files.written

    # -- naming -------------------------------------------------------------------------------
    def key_for(self, encoded: str, start_offset: int) -> str:
        """``<topics.dir>/<topic>/<encoded>/<topic>+<partition>+<start>.<ext>``, as Confluent."""
        return self.config.layout.data_key(
            self.prefix,
            self.partitioner.partitioned_path(self.topic, encoded),
            self.topic,
            self.partition,
            start_offset,
            self.config.extension,
        )

    # -- writing ------------------------------------------------------------------------------
    def write(self, record: KafkaRecord) -> None:
        """Partition, encode and append one record (offsets must increase)."""
        self._check_order(record.offset, record)
        self.last_offset = record.offset
        self.rotator.on_clock(self.files)
        if self.dead_letters is None:
            self._write_one(record)
            return
        try:
            self._write_one(record)
        except BadRecordError as exc:
            if isinstance(exc, OffsetOrderError):
                raise
            self._dead_letter(record, exc)

    def _check_order(self, offset: int, record: KafkaRecord) -> None:
        if self.last_offset is not None and offset <= self.last_offset:
            raise OffsetOrderError(
                f"offset {offset} came after {self.last_offset}; the blockgz sink needs "
                "each topic-partition's records in increasing offset order within a task (do "
                "not repartition the Kafka DataFrame, or sortWithinPartitions('topic', "
                "'partition', 'offset'))",
                topic=record.topic,
                partition=record.partition,
                offset=offset,
            )

    def _dead_letter(self, record: KafkaRecord, error: BaseException) -> None:
        """``errors.tolerance=all``: the record goes to the queue; files it left empty go."""
        assert self.dead_letters is not None
        log_bad_record(self.config.dead_letters, record, error)
        self.dead_letters.send(record, error, self._stage)
        self.files.drop_empty()  # opened for this record only

    def _write_one(self, record: KafkaRecord) -> None:
        """route → convert → place → append → rotate."""
        self._stage = "TASK_PUT"
        route = self.route.route(record)
        if route is Route.SKIP:
            self.skipped_nulls += 1
            return
        if route is Route.TOMBSTONE:
            encoded = self.config.tombstone_partition
            # With keys stored, a tombstone is its key (and headers) only, as in Confluent.
            keys_only = self.config.keeps_tombstone_keys_only
            data = None if keys_only else self.encoder.encode_tombstone(record)
        else:
            self._convert(record)
            encoded = self.placement.encoded(record)
            if record.schema is not None:
                self._place_schema(record, encoded)
            data = self.encoder.encode(record)
        writer, stamp = self.rotator.before(self.files, encoded, record)
        if writer is None:
            writer = self._open(encoded, record.offset, record.schema, record)
            writer.first_timestamp = stamp
        append(writer, record, data)
        self.rotator.after(self.files, encoded, writer)

    def _convert(self, record: KafkaRecord) -> None:
        """``value.converter`` decodes the value (a failure is the converter's stage)."""
        if self.converter is not None and not isinstance(record, TransformedRecord):
            self._stage = "VALUE_CONVERTER"
            self.converter.decode(record)
            self._stage = "TASK_PUT"

    def _place_schema(self, record: KafkaRecord, encoded: str) -> None:
        """Apply ``schema.compatibility``: rotate every open file (as Confluent commits all
        of a topic-partition's files) or project the record to the schema files are kept in."""
        current = self.files.get(encoded)
        target, rotate = self.placement.schema(record, getattr(current, "schema", None))
        if rotate is not None:
            self.files.commit_all(rotate, record.offset)
        self.placement.project(record, target)

    def write_values(
        self,
        values: list[bytes],
        offsets: np.ndarray,
        keys: Any = None,
        headers: Any = None,
        *,
        timestamps: np.ndarray | None = None,
        timestamp_types: np.ndarray | None = None,
        checked: bool = False,
    ) -> bool:
        """Write a run of this topic-partition's non-null values at once, or return ``False``
        having written nothing (the caller then uses :meth:`write` per record).

        The run goes through whole when the default partitioner is used, no rotation looks at
        time, offsets increase and the encoder stores the values as they are. Files rotate on
        ``flush.size``/``flush.size.bytes`` at exactly the records :meth:`write` would pick,
        and blocks are cut at the same places, so both paths give the same objects. With
        ``store.kafka.keys``/``headers`` the run's ``keys`` and ``headers`` (Arrow columns, as
        the batch holds them) go to the files beside it in bulk too. ``timestamps``: the
        records' Kafka timestamps (epoch ms, negative: none), for each file's time range and
        the timestamps file, with ``timestamp_types`` (Kafka's ids, -1: none).
        ``checked``: the caller found every value storable as it is
        (:meth:`~blockgz.formats.base.RecordEncoder.rejected`).
        """
        run = self._run_of(values, offsets, keys, headers, timestamps, checked)
        if run is not None and timestamp_types is not None:
            run = replace(run, timestamp_types=timestamp_types)
        if run is None:
            return False
        self.last_offset = int(offsets[-1])
        encoded = default_partition(self.partition)
        count, start = len(values), 0
        while start < count:
            # Runs are taken only where values are stored as they are (_takes_runs): by a
            # framed format's ObjectWriter, which takes framed records.
            writer = self.files.get(encoded) or self._open(encoded, int(offsets[start]))
            assert isinstance(writer, ObjectWriter), "runs go to framed formats' writers only"
            stop = self.rotator.run_stop(writer, run, start, count)
            append_run(writer, run, start, stop)
            self.rotator.after(self.files, encoded, writer)
            start = stop
        return True

    def _run_of(self, values, offsets, keys, headers, timestamps, checked) -> Run | None:
        """The values framed as one run, or ``None`` when they cannot go as one (see
        :meth:`write_values`)."""
        count = len(values)
        if not self.writes_runs or count == 0:
            return None
        if (self.last_offset is not None and offsets[0] <= self.last_offset) or (
            count > 1 and not bool(np.all(offsets[1:] > offsets[:-1]))
        ):
            return None  # write() raises OutOfOrderError naming the record
        sep = self.config.separator
        framed = sep.join(values) + sep
        if not checked and not self.encoder.passes_through(values, framed):
            return None
        ends = np.cumsum(np.fromiter(map(len, values), np.int64, count) + len(sep))
        return Run(memoryview(framed), ends, offsets, timestamps, keys, headers)

    def _open(
        self,
        encoded: str,
        offset: int,
        schema: ValueSchema | None = None,
        record: KafkaRecord | None = None,
    ) -> OpenFile:
        writer = self._open_value_file(encoded, offset, schema)
        if self.config.store_keys or self.config.store_headers or self.config.store_timestamps:
            try:
                writer.companions = Companions.open(
                    self.config,
                    self.store,
                    writer.key,
                    self.topic,
                    self.partition,
                    encoded,
                    first=record,
                    key_converter=self.key_converter,
                    sidecar=getattr(writer, "sidecar_upload", None),
                    keys_only=isinstance(writer, NoValueFile),
                )
            except BaseException:
                writer.abort()
                del self.files.open[encoded]
                raise
        return writer

    def _open_value_file(
        self, encoded: str, offset: int, schema: ValueSchema | None = None
    ) -> OpenFile:
        cfg = self.config
        writer: OpenFile
        if self.intents is not None:
            self.intents.note(self.key_for(encoded, offset), start_offset=offset)
        if encoded == cfg.tombstone_partition and cfg.keeps_tombstone_keys_only:
            writer = NoValueFile(self.key_for(encoded, offset), self.topic, self.partition, encoded)
            return self.files.add(encoded, writer)
        opened = cfg.format_for().open_writer(
            self.store,
            self.key_for(encoded, offset),
            cfg,
            schema=schema,
            topic=self.topic,
            partition=self.partition,
            encoded_partition=encoded,
        )
        # Format.open_writer names only the writers' common base; each format's writer
        # (ObjectWriter, AvroObjectWriter, ParquetObjectWriter) writes records.
        return self.files.add(encoded, cast(OpenFile, opened))

    # -- the end of a micro-batch -------------------------------------------------------------
    def close(self) -> list[WrittenFile]:
        """Commit every open file (the micro-batch ends) and return all files written."""
        self.files.commit_all()
        return self.written

    def abort(self) -> None:
        """Drop open files and delete the ones already finished in this attempt."""
        cleaned = self.files.abort()
        if self.intents is not None and cleaned:  # else a restart still needs them
            try:
                self.intents.discard()
            except Exception:
                log.warning("could not delete the intents of %s-%d", self.topic, self.partition)
