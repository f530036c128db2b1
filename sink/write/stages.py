"""The way of a record through a topic-partition's writer, one stage each: route → convert →
place → append → rotate.

* **route** (:class:`NullRoute`): a value goes on; a null value (a tombstone) is skipped, fails
  the record or goes to ``tombstone.encoded.partition``, by ``behavior.on.null.values``;
* **convert**: ``value.converter`` decodes the value (a :class:`~blockgz.sink.convert.converters.
  Converter`, already a stage of its own);
* **place** (:class:`Placement`): the encoded partition (partitioner, then
  ``s3.schema.partition.affix.type``) and the value schema the file keeps
  (``schema.compatibility``);
* **append** (:func:`append`, :func:`append_run`): the encoded record, or a run of them, into
  its open file and the keys and headers files beside it;
* **rotate** (:class:`Rotator`): which open files to commit before and after the append, by
  Confluent's rotation settings (:mod:`blockgz.sink.write.rotation`) and
  ``partitioner.max.open.files``.

:class:`~blockgz.sink.write.partition_writer.TopicPartitionWriter` runs them in that order; each is
tested alone.

>>> from blockgz.sink.records import KafkaRecord
>>> NullRoute("ignore", "tombstone").route(KafkaRecord("t", 0, 5, 0, None, None))
<Route.SKIP: 'skip'>
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Protocol

import numpy as np

from blockgz.errors import RecordFramingError
from blockgz.sink.convert.evolution import SchemaPolicy
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.rotation import RotationRules, Schedule

log = logging.getLogger("blockgz.sink")


# -- route ---------------------------------------------------------------------------------------
class Route(enum.Enum):
    """Where a record goes: on as a value, to the tombstone partition, or nowhere."""

    VALUE = "value"
    TOMBSTONE = "tombstone"
    SKIP = "skip"


@dataclass(frozen=True)
class NullRoute:
    """``behavior.on.null.values`` (``fail``, ``ignore`` or ``write``), and whether a skipped
    null is reported to the dead-letter queue (``report.null.values.to.dlq``, with one).

    >>> from blockgz.sink.records import KafkaRecord
    >>> NullRoute("write", "tombstone").route(KafkaRecord("t", 0, 5, 0, None, None))
    <Route.TOMBSTONE: 'tombstone'>
    >>> NullRoute("fail", "tombstone").route(KafkaRecord("t", 0, 5, 0, None, b"{}"))
    <Route.VALUE: 'value'>
    """

    behavior: str
    tombstone_partition: str
    report_to_dead_letters: bool = False

    @classmethod
    def of(cls, config: Any, *, dead_letters: bool) -> NullRoute:
        """The route of a :class:`~blockgz.sink.write.config.SinkSettings` (``dead_letters``: the
        task has a dead-letter queue)."""
        return cls(
            config.null_behavior,
            config.tombstone_partition,
            dead_letters and config.dead_letters.report_nulls,
        )

    def route(self, record: KafkaRecord) -> Route:
        """Where ``record`` goes; raises :class:`~blockgz.errors.BadRecordError` for a null
        that fails (``fail``, or ``ignore`` reported to the dead-letter queue)."""
        if record.value is not None:
            return Route.VALUE
        if self.behavior == "ignore":
            if self.report_to_dead_letters:
                raise record.fail(
                    "value is null (a tombstone), skipped (behavior.on.null.values=ignore, "
                    "report.null.values.to.dlq=true)"
                )
            return Route.SKIP
        if self.behavior == "fail":
            raise record.fail(
                "value is null (a tombstone) and behavior.on.null.values=fail; "
                "allowed: fail, ignore (skip it), write (store it under "
                f"{self.tombstone_partition!r})"
            )
        return Route.TOMBSTONE


# -- place ---------------------------------------------------------------------------------------
@dataclass(eq=False)
class Placement:
    """The encoded partition of a record and the value schema its file keeps.

    >>> from types import SimpleNamespace
    >>> from blockgz.sink.records import KafkaRecord
    >>> by_day = SimpleNamespace(encode_partition=lambda record: "dt=2026-11-25")
    >>> place = Placement(by_day, affix="NONE", directory_delim="/")
    >>> place.encoded(KafkaRecord("t", 0, 5, 0, None, b"{}"))
    'dt=2026-11-25'
    """

    partitioner: Any
    _: KW_ONLY
    affix: str = "NONE"
    directory_delim: str = "/"
    tombstone_partition: str = "tombstone"
    tombstones_keys_only: bool = False
    compatibility: str = "NONE"
    schemas: SchemaPolicy = field(init=False)

    def __post_init__(self) -> None:
        self.schemas = SchemaPolicy(self.compatibility)

    @classmethod
    def of(cls, config: Any, partitioner: Any) -> Placement:
        """The placement of a :class:`~blockgz.sink.write.config.SinkSettings`."""
        return cls(
            partitioner,
            affix=config.schema_affix,
            directory_delim=config.partitioning.directory_delim,
            tombstone_partition=config.tombstone_partition,
            tombstones_keys_only=config.keeps_tombstone_keys_only,
            compatibility=config.schema_compatibility,
        )

    def encoded(self, record: KafkaRecord) -> str:
        """The partitioner's encoded partition with the schema affix; it may not be the
        directory that holds only tombstones' keys."""
        encoded = self._affixed(self.partitioner.encode_partition(record), record)
        if encoded == self.tombstone_partition and self.tombstones_keys_only:
            raise record.fail(
                f"its encoded partition {encoded!r} is tombstone.encoded.partition, where "
                "only tombstones' keys are kept; set tombstone.encoded.partition to a "
                "directory no record's partition can have"
            )
        return encoded

    def _affixed(self, encoded: str, record: KafkaRecord) -> str:
        """``s3.schema.partition.affix.type``: ``schema_name=<name>`` before or after."""
        if self.affix == "NONE":
            return encoded
        if record.schema is None:
            raise record.fail(
                f"s3.schema.partition.affix.type={self.affix} needs a value schema; this value "
                "has none"
            )
        segment = f"schema_name={record.schema.name}"
        parts = (segment, encoded) if self.affix == "PREFIX" else (encoded, segment)
        return self.directory_delim.join(parts)

    def schema(self, record: KafkaRecord, current: Any) -> tuple[Any, str | None]:
        """``schema.compatibility`` for ``record`` against its open file's schema (``current``,
        ``None``: no file open): ``(the schema the record is kept in, why every open file must
        rotate first or None)``; :meth:`project` then brings the record into that schema."""
        target, rotate = self.schemas.place(record.schema, current, record)
        if not rotate:
            return target, None
        return target, f"value schema ({target.label}, schema.compatibility={self.compatibility})"

    @staticmethod
    def project(record: KafkaRecord, target: Any) -> None:
        """The record's value projected to ``target`` (when it is another schema)."""
        schema = record.schema
        if target is not schema:
            record.set_decoded(target, schema.project(record.json(), target, record))


# -- append --------------------------------------------------------------------------------------
class OpenFile(Protocol):
    """What the append and rotate stages use of an open object writer."""

    key: str
    first_timestamp: int | None
    companions: Any

    @property
    def records(self) -> int: ...

    @property
    def uncompressed_size(self) -> int: ...

    # data: the encoded record's bytes; None only for a NoValueFile (a tombstone kept as its
    # key only), so each writer types it as it takes it.
    def write(self, data: Any, offset: int, timestamp: int | None = None) -> None: ...

    def note_times(self, low: int, high: int) -> None: ...

    def abort(self) -> None: ...


class RunFile(OpenFile, Protocol):
    """An open writer that also takes runs of framed records (a framed format's
    :class:`~blockgz.formats.output.ObjectWriter`)."""

    def write_framed(self, data: Any, ends: Any, offsets: Any, timestamps: Any = None) -> None: ...


def append(writer: OpenFile, record: KafkaRecord, data: bytes | None) -> None:
    """``data`` (the encoded record) into ``writer``, its time into the file's time range and
    its key and headers into the files beside it."""
    entries = writer.companions.encode(record) if writer.companions else None
    try:
        writer.write(data, record.offset, record.timestamp_ms)
    except RecordFramingError as exc:
        raise record.fail(str(exc)) from exc
    if record.timestamp_ms is not None and record.timestamp_ms >= 0:
        writer.note_times(record.timestamp_ms, record.timestamp_ms)
    if entries is not None:
        writer.companions.write(entries, record.offset)


@dataclass(frozen=True)
class Run:
    """A run of framed values: their bytes, where each ends, their offsets, Kafka timestamps
    (epoch ms, negative: none) and the Arrow key and header columns of the batch."""

    framed: memoryview
    ends: np.ndarray
    offsets: np.ndarray
    timestamps: np.ndarray | None = None
    keys: Any = None
    headers: Any = None
    #: Kafka's timestamp types (-1: none), for the timestamps file.
    timestamp_types: np.ndarray | None = None

    def base(self, start: int) -> int:
        """Where record ``start`` begins in :attr:`framed`."""
        return int(self.ends[start - 1]) if start else 0


def append_run(writer: RunFile, run: Run, start: int, stop: int) -> None:
    """Records ``[start, stop)`` of ``run`` into ``writer`` and the files beside it."""
    base = run.base(start)
    stamps = None if run.timestamps is None else run.timestamps[start:stop]
    writer.write_framed(
        run.framed[base : int(run.ends[stop - 1])],
        run.ends[start:stop] - base,
        run.offsets[start:stop],
        stamps,
    )
    if stamps is not None:
        stamped = stamps[stamps >= 0]
        if stamped.size:
            writer.note_times(int(stamped.min()), int(stamped.max()))
    if writer.companions:
        writer.companions.write_run(
            None if run.keys is None else run.keys[start:stop],
            None if run.headers is None else run.headers[start:stop],
            run.offsets[start:stop],
            stamps,
            None if run.timestamp_types is None else run.timestamp_types[start:stop],
        )


# -- rotate --------------------------------------------------------------------------------------
class Files(Protocol):
    """The open files the rotate stage commits
    (:class:`~blockgz.sink.write.open_files.OpenFiles`)."""

    def get(self, encoded: str) -> OpenFile | None: ...

    def __len__(self) -> int: ...

    def oldest(self) -> str: ...

    def commit(self, encoded: str) -> None: ...

    def commit_all(self, reason: str | None = None, offset: int | None = None) -> None: ...


class Rotator:
    """Which open files to commit around an append: ``rotate.file.on.partition.change``, a
    keys file's key schema, ``rotate.interval.ms`` and ``partitioner.max.open.files`` before
    it; ``flush.size``/``flush.size.bytes`` after it; ``rotate.schedule.interval.ms`` on the
    wall clock."""

    def __init__(
        self,
        rules: RotationRules,
        *,
        timestamp: Callable[[KafkaRecord], int | None] | None = None,
        max_open_files: int | None = None,
        schedule: Schedule | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.rules = rules
        #: The record time ``rotate.interval.ms`` counts in (the partitioner's extractor).
        self.timestamp = timestamp
        self.max_open_files = max_open_files
        self.schedule = schedule
        #: The wall clock of the schedule (seconds, as :func:`time.time`).
        self.clock = clock
        self._last_encoded: str | None = None

    @classmethod
    def of(cls, config: Any, partitioner: Any, clock: Callable[[], float] = time.time) -> Rotator:
        """The rotation of a :class:`~blockgz.sink.write.config.SinkSettings`."""
        interval = config.rotate_schedule_interval_ms
        return cls(
            RotationRules.of(config),
            timestamp=lambda record: partitioner.timestamp(record),
            max_open_files=config.max_open_files,
            schedule=Schedule(interval, config.timezone) if interval else None,
            clock=clock,
        )

    def on_clock(self, files: Files) -> None:
        """``rotate.schedule.interval.ms``: commit every open file at a boundary."""
        if self.schedule is not None and self.schedule.due(int(self.clock() * 1000)):
            files.commit_all()

    def before(
        self, files: Files, encoded: str, record: KafkaRecord
    ) -> tuple[OpenFile | None, int | None]:
        """Commit what must rotate before ``record`` goes to ``encoded``: ``(the open file to
        append to, or None to open one; the record time a new file starts its interval at)``."""
        previous, self._last_encoded = self._last_encoded, encoded
        if self.rules.partition_changed(previous, encoded):
            files.commit_all()
        writer = files.get(encoded)
        if writer is not None and writer.companions and not writer.companions.accepts(record):
            files.commit_all("key schema", record.offset)  # an Avro keys file: one key schema
            writer = None
        stamp = None
        if self.rules.rotate_interval_ms:
            stamp = self.timestamp(record) if self.timestamp is not None else None
            if stamp is None:
                stamp = record.timestamp_ms
            if self.rules.interval_passed(writer, stamp):
                files.commit(encoded)
                writer = None
        if writer is None:
            self.make_room(files)
        return writer, stamp

    def make_room(self, files: Files) -> None:
        """``partitioner.max.open.files``: before opening one more, commit the oldest open file
        (the order records opened them in: deterministic)."""
        limit = self.max_open_files
        while limit is not None and len(files) >= limit:
            files.commit(files.oldest())

    def after(self, files: Files, encoded: str, writer: OpenFile) -> None:
        """``flush.size``/``flush.size.bytes``: commit the file once it is full."""
        if self.rules.full(writer):
            files.commit(encoded)

    def run_stop(self, writer: OpenFile, run: Run, start: int, count: int) -> int:
        """Where a run that continues at ``start`` must stop in ``writer``: at the record
        :meth:`after` would rotate it at, as record by record.

        >>> from types import SimpleNamespace as File
        >>> ends = np.array([10, 20, 30, 40])
        >>> run = Run(memoryview(b""), ends, np.arange(4))
        >>> rotator = Rotator(RotationRules(flush_size_bytes=25))
        >>> rotator.run_stop(File(records=0, uncompressed_size=0), run, 0, 4)
        3
        """
        stop = count
        if self.rules.flush_size:
            stop = min(stop, start + self.rules.flush_size - writer.records)
        if self.rules.flush_size_bytes:
            want = self.rules.flush_size_bytes - writer.uncompressed_size + run.base(start)
            stop = min(stop, int(np.searchsorted(run.ends, want, side="left")) + 1)
        return stop
