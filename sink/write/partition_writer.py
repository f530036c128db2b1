"""Per topic-partition writing: partition each record, rotate files, name them like Confluent.

One :class:`TopicPartitionWriter` owns the open files of one Kafka topic-partition (one per
encoded partition, e.g. per day or per field value). Records must come in offset order. A file
rotates when it holds ``flush.size`` records or ``flush.size.bytes`` bytes, when the record time
has moved ``rotate.interval.ms`` past its first record, on the wall-clock schedule
``rotate.schedule.interval.ms``, and at the end of every micro-batch (:meth:`close`).

Everything but the wall-clock parts is a pure function of the records, so a replayed batch
produces the same keys and the same bytes (see DESIGN.md, "Deterministic bytes").

>>> import tempfile
>>> from sink.write.config import SinkConfig
>>> from sink.records import KafkaRecord
>>> cfg = SinkConfig.from_options({"path": tempfile.mkdtemp(), "flush.size": "3"})
>>> w = TopicPartitionWriter("s3_topic", 0, cfg, cfg.make_store()[0])
>>> for n in range(7):
...     w.write(KafkaRecord("s3_topic", 0, n, 0, None, b'{"n": %d}' % n))
>>> [f.key for f in w.close()]  # doctest: +NORMALIZE_WHITESPACE
['topics/s3_topic/partition=0/s3_topic+0+0000000000.json',
 'topics/s3_topic/partition=0/s3_topic+0+0000000003.json',
 'topics/s3_topic/partition=0/s3_topic+0+0000000006.json']
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from blockgz.archive.intents import DirectoryIntents
from blockgz.archive.layout import default_partition
from blockgz.archive.manifests import WrittenFile
from blockgz.errors import BadRecordError, OffsetOrderError, RecordFramingError
from blockgz.store.base import ObjectStore
from blockgz.store.s3 import offset_tags
from sink.convert.evolution import SchemaPolicy
from sink.convert.schemas import ValueSchema
from sink.partitioning.partitioners import DefaultPartitioner
from sink.records import KafkaRecord
from sink.write.companions import Companions
from sink.write.config import SinkConfig
from sink.write.deadletter import DeadLetters, log_bad_record
from sink.write.encoders import encoder_for
from sink.write.object_writer import NoValueFile, ObjectWriter
from sink.write.rotation import RotationRules, Schedule

if TYPE_CHECKING:
    from sink.write.avro_writer import AvroObjectWriter

    OpenFile = ObjectWriter | AvroObjectWriter | NoValueFile

log = logging.getLogger("blockgz.sink")


class TopicPartitionWriter:
    """Writes one topic-partition's records of one micro-batch into rotated objects."""

    def __init__(
        self,
        topic: str,
        partition: int,
        config: SinkConfig,
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
        self.schemas = SchemaPolicy(config.schema_compatibility)
        self.codec = config.compression_settings()
        self.clock = clock
        self.on_file = on_file
        #: Where bad records go under ``errors.tolerance=all`` (``None``: they fail the batch).
        self.dead_letters = dead_letters
        self._stage = "TASK_PUT"
        self._last_encoded: str | None = None
        self.open_files: dict[str, OpenFile] = {}
        self.written: list[WrittenFile] = []
        self.skipped_nulls = 0
        self.last_offset: int | None = None
        #: When files rotate (:mod:`sink.write.rotation`).
        self.rotation = RotationRules.of(config)
        self.schedule = (
            Schedule(config.rotate_schedule_interval_ms, config.timezone)
            if config.rotate_schedule_interval_ms
            else None
        )
        #: Whether :meth:`write_values` may take whole runs of records.
        self.writes_runs = (
            type(self.partitioner) is DefaultPartitioner
            and self.encoder.may_pass_through
            and self.converter is None
            and (self.key_converter is None and config.keys_format != "bytearray")
            and not config.rotate_interval_ms
            and not config.rotate_schedule_interval_ms
        )
        self._default_encoded = default_partition(partition)
        #: Under a field or time partitioner, the directories written are recorded first.
        self.intents = (
            None
            if type(self.partitioner) is DefaultPartitioner
            else DirectoryIntents(store, prefix, config.layout, config.name, topic, partition)
        )

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
        if self.last_offset is not None and record.offset <= self.last_offset:
            raise OffsetOrderError(
                f"offset {record.offset} came after {self.last_offset}; the blockgz sink needs "
                "each topic-partition's records in increasing offset order within a task (do "
                "not repartition the Kafka DataFrame, or sortWithinPartitions('topic', "
                "'partition', 'offset'))",
                topic=record.topic,
                partition=record.partition,
                offset=record.offset,
            )
        self.last_offset = record.offset
        if self.schedule is not None and self.schedule.due(int(self.clock() * 1000)):
            self._commit_all()
        if self.dead_letters is None:
            self._write_one(record)
            return
        try:
            self._write_one(record)
        except BadRecordError as exc:
            if isinstance(exc, OffsetOrderError):
                raise
            self._dead_letter(record, exc)

    def _dead_letter(self, record: KafkaRecord, error: BaseException) -> None:
        """``errors.tolerance=all``: the record goes to the queue; files it left empty go."""
        assert self.dead_letters is not None
        log_bad_record(self.config.dead_letters, record, error)
        self.dead_letters.send(record, error, self._stage)
        for encoded, writer in list(self.open_files.items()):
            if writer.records == 0:  # opened for this record only
                writer.abort()
                if writer.companions:
                    writer.companions.abort()
                del self.open_files[encoded]

    def _write_one(self, record: KafkaRecord) -> None:
        self._stage = "TASK_PUT"
        if record.value is None:
            behavior = self.config.null_behavior
            if behavior == "ignore":
                if self.dead_letters is not None and self.config.dead_letters.report_nulls:
                    raise record.fail(
                        "value is null (a tombstone), skipped (behavior.on.null.values=ignore, "
                        "report.null.values.to.dlq=true)"
                    )
                self.skipped_nulls += 1
                return
            if behavior == "fail":
                raise record.fail(
                    "value is null (a tombstone) and behavior.on.null.values=fail; "
                    "allowed: fail, ignore (skip it), write (store it under "
                    f"{self.config.tombstone_partition!r})"
                )
            encoded = self.config.tombstone_partition
            # With keys stored, a tombstone is its key (and headers) only, as in Confluent.
            keys_only = self.config.keeps_tombstone_keys_only
            data = None if keys_only else self.encoder.encode_tombstone(record)
        else:
            if self.converter is not None:
                self._stage = "VALUE_CONVERTER"
                self.converter.decode(record)
                self._stage = "TASK_PUT"
            encoded = self._affixed(self.partitioner.encode_partition(record), record)
            if encoded == self.config.tombstone_partition and self.config.keeps_tombstone_keys_only:
                raise record.fail(
                    f"its encoded partition {encoded!r} is tombstone.encoded.partition, where "
                    "only tombstones' keys are kept; set tombstone.encoded.partition to a "
                    "directory no record's partition can have"
                )
            if record.schema is not None:
                self._place_schema(record, encoded)
            data = self.encoder.encode(record)
        self._rotate_on_partition_change(encoded)
        writer = self.open_files.get(encoded)
        if writer is not None and writer.companions and not writer.companions.accepts(record):
            self._rotate_all(record, "key schema")  # an Avro keys file holds one key schema
            writer = None
        stamp = None
        if self.config.rotate_interval_ms:
            stamp = self.partitioner.timestamp(record)
            if stamp is None:
                stamp = record.timestamp_ms
            if self.rotation.interval_passed(writer, stamp):
                self._commit(encoded)
                writer = None
        if writer is None:
            self._limit_open_files()
            writer = self._open(encoded, record.offset, record.schema, record)
            writer.first_timestamp = stamp
        entries = writer.companions.encode(record) if writer.companions else None
        try:
            writer.write(data, record.offset, record.timestamp_ms)
        except RecordFramingError as exc:
            raise record.fail(str(exc)) from None
        if record.timestamp_ms is not None and record.timestamp_ms >= 0:
            writer.note_times(record.timestamp_ms, record.timestamp_ms)
        if entries is not None:
            writer.companions.write(entries, record.offset)
        if self.rotation.full(writer):
            self._commit(encoded)

    def _rotate_all(self, record: KafkaRecord, what: str) -> None:
        """Commit every open file of the topic-partition, as Confluent does on a schema change."""
        log.info(
            "%s-%d: %s changed at offset %d: rotating %d open files",
            self.topic,
            self.partition,
            what,
            record.offset,
            len(self.open_files),
        )
        self._commit_all()

    def _affixed(self, encoded: str, record: KafkaRecord) -> str:
        """``s3.schema.partition.affix.type``: ``schema_name=<name>`` before or after."""
        affix = self.config.schema_affix
        if affix == "NONE":
            return encoded
        if record.schema is None:
            raise record.fail(
                f"s3.schema.partition.affix.type={affix} needs a value schema; this value has none"
            )
        segment = f"schema_name={record.schema.name}"
        delim = self.config.partitioning.directory_delim
        return f"{segment}{delim}{encoded}" if affix == "PREFIX" else f"{encoded}{delim}{segment}"

    def _rotate_on_partition_change(self, encoded: str) -> None:
        """``rotate.file.on.partition.change``: commit every open file, as Confluent does."""
        previous, self._last_encoded = self._last_encoded, encoded
        if self.rotation.partition_changed(previous, encoded):
            self._commit_all()

    def _limit_open_files(self) -> None:
        """``partitioner.max.open.files``: before opening one more, commit the oldest open file
        (the order records opened them in: deterministic)."""
        limit = self.config.max_open_files
        while limit is not None and len(self.open_files) >= limit:
            self._commit(next(iter(self.open_files)))

    def _place_schema(self, record: KafkaRecord, encoded: str) -> None:
        """Apply ``schema.compatibility``: rotate every open file (as Confluent commits all
        of a topic-partition's files) or project the record to the schema files are kept in."""
        schema: ValueSchema = record.schema
        current = self.open_files.get(encoded)
        target, rotate = self.schemas.place(
            schema, getattr(current, "schema", None) if current is not None else None, record
        )
        if rotate:
            self._rotate_all(
                record,
                f"value schema ({target.label}, "
                f"schema.compatibility={self.config.schema_compatibility})",
            )
        if target is not schema:
            record.set_decoded(target, schema.project(record.json(), target, record))

    def write_values(
        self,
        values: list[bytes],
        offsets: np.ndarray,
        keys: Any = None,
        headers: Any = None,
        *,
        timestamps: np.ndarray | None = None,
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
        records' Kafka timestamps (epoch ms, negative: none), for each file's time range.
        ``checked``: the caller found every value storable as it is
        (:meth:`~sink.write.encoders.RecordEncoder.rejected`).
        """
        count = len(values)
        if not self.writes_runs or count == 0:
            return False
        if (self.last_offset is not None and offsets[0] <= self.last_offset) or (
            count > 1 and not bool(np.all(offsets[1:] > offsets[:-1]))
        ):
            return False  # write() raises OutOfOrderError naming the record
        sep = self.config.separator
        framed = sep.join(values) + sep
        if not checked and not self.encoder.passes_through(values, framed):
            return False
        ends = np.cumsum(np.fromiter(map(len, values), np.int64, count) + len(sep))
        self.last_offset = int(offsets[-1])
        encoded = self._default_encoded
        view = memoryview(framed)
        cfg = self.config
        start = 0
        while start < count:
            writer = self.open_files.get(encoded) or self._open(encoded, int(offsets[start]))
            base = int(ends[start - 1]) if start else 0
            stop = count
            if cfg.flush_size:
                stop = min(stop, start + cfg.flush_size - writer.records)
            if cfg.flush_size_bytes:
                want = cfg.flush_size_bytes - writer.uncompressed_size + base
                stop = min(stop, int(np.searchsorted(ends, want, side="left")) + 1)
            writer.write_framed(
                view[base : int(ends[stop - 1])],
                ends[start:stop] - base,
                offsets[start:stop],
                None if timestamps is None else timestamps[start:stop],
            )
            if timestamps is not None:
                stamped = timestamps[start:stop]
                stamped = stamped[stamped >= 0]
                if stamped.size:
                    writer.note_times(int(stamped.min()), int(stamped.max()))
            if writer.companions:
                writer.companions.write_run(
                    None if keys is None else keys[start:stop],
                    None if headers is None else headers[start:stop],
                    offsets[start:stop],
                )
            if self.rotation.full(writer):
                self._commit(encoded)
            start = stop
        return True

    def _open(
        self,
        encoded: str,
        offset: int,
        schema: ValueSchema | None = None,
        record: KafkaRecord | None = None,
    ) -> OpenFile:
        writer = self._open_value_file(encoded, offset, schema)
        if self.config.store_keys or self.config.store_headers:
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
                )
            except BaseException:
                writer.abort()
                del self.open_files[encoded]
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
            self.open_files[encoded] = writer
            return writer
        if cfg.format == "avro":
            from sink.write.avro_writer import AvroObjectWriter

            assert schema is not None  # the config check makes sure values have schemas
            writer = AvroObjectWriter(
                self.store,
                self.key_for(encoded, offset),
                schema,
                codec=cfg.avro_codec,
                block_size=cfg.block_size,
                block_records=cfg.block_records,
                indexed=cfg.avro_index,
                connect_meta_data=cfg.connect_meta_data,
                topic=self.topic,
                partition=self.partition,
                encoded_partition=encoded,
            )
            self.open_files[encoded] = writer
            return writer
        writer = ObjectWriter(
            self.store,
            self.key_for(encoded, offset),
            cfg.compression,
            self.codec,
            framing=cfg.framing,
            block_size=cfg.block_size,
            block_records=cfg.block_records,
            topic=self.topic,
            partition=self.partition,
            encoded_partition=encoded,
        )
        writer.schema = schema
        self.open_files[encoded] = writer
        return writer

    def _commit(self, encoded: str) -> None:
        writer = self.open_files.pop(encoded)
        done = writer.close()
        if done is not None:
            self.written.append(done)
        if writer.companions:  # the keys and headers files, after their value file
            for companion in writer.companions.close():
                self.written.append(companion)
                if self.on_file is not None:
                    self.on_file(companion)
        if done is None:  # tombstones kept as keys only (NoValueFile)
            return
        if self.store.tags_objects:  # s3.object.tagging, as Confluent tags committed files
            self.store.tag(done.key, offset_tags(done.first_offset, done.last_offset, done.records))
        log.debug(
            "%s-%d: wrote %s (%d records, offsets %d..%d, %d bytes)",
            self.topic,
            self.partition,
            done.key,
            done.records,
            done.first_offset,
            done.last_offset,
            done.size,
        )
        if self.on_file is not None:
            self.on_file(done)

    def _commit_all(self) -> None:
        for encoded in list(self.open_files):
            self._commit(encoded)

    # -- the end of a micro-batch -------------------------------------------------------------
    def close(self) -> list[WrittenFile]:
        """Commit every open file (the micro-batch ends) and return all files written."""
        self._commit_all()
        return self.written

    def abort(self) -> None:
        """Drop open files and delete the ones already finished in this attempt."""
        left = False  # something of this attempt may still be in the store
        for writer in self.open_files.values():
            try:
                writer.abort()
                if writer.companions:
                    writer.companions.abort()
            except Exception:  # keep cleaning up; the original error is what matters
                left = True
                log.warning("could not abort the upload of %s", writer.key, exc_info=True)
        self.open_files.clear()
        for done in self.written:
            for key in (done.index_key, done.key):
                if key:
                    try:
                        self.store.delete(key)
                    except Exception:
                        left = True
                        log.warning("could not delete %s after a failure", key, exc_info=True)
        if self.intents is not None and not left:  # else a restart still needs them
            try:
                self.intents.discard()
            except Exception:
                log.warning("could not delete the intents of %s-%d", self.topic, self.partition)
        self.written.clear()
