"""Send an archived range into an existing Kafka topic: the one send loop of ``blockgz restore``.

Each topic-partition's records go in offset order to the same partition number of the target
topic (or, ``by_key``, to the partition Kafka's default partitioner picks for the key:
:mod:`blockgz.reader.restore.partitioner`), through an idempotent producer, so retries inside a
run never duplicate a record. :mod:`blockgz.reader.restore.restorer` runs it once per topic and
window; ``blockgz replay`` (a deprecated alias) runs it once into a topic it names.

**Resuming after a kill, without duplicates**, one of two ways:

* with :attr:`SendSettings.positions` (a restore into partitions only it filled), each target
  partition's records go in Kafka transactions that commit the partition's next source offset
  with them (:mod:`blockgz.reader.restore.positions`); records go unchanged;
* otherwise every record carries one more header, ``blockgz.replay``, naming its source offset;
  a rerun reads the newest ones back from the target partitions and skips what they already
  hold (:mod:`blockgz.reader.restore.markers`). The partition of every record is computed here
  (Kafka's murmur2 for keys, the offset for null keys) rather than left to the client, so the
  rerun knows where each record went. ``mark=False`` leaves the header out and gives up
  resuming.

:func:`send_on_spark` runs the same loop as a Spark job, one task per archived partition.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from blockgz.blocks.decode import Record
from blockgz.errors import ConfigError, ReplayError
from blockgz.kafka.security import librdkafka_settings
from blockgz.option_defs import OptionDef, OptionSet
from blockgz.reader.reading.archive import Archive
from blockgz.reader.reading.read_options import check_reader_options
from blockgz.reader.restore.markers import admin_settings, delivered_so_far
from blockgz.reader.restore.partitioner import partition_of
from blockgz.reader.restore.produce import Failures, produce_block
from blockgz.reader.restore.target_topics import (
    check_partition_numbers,
    check_target_access,
    refuse_same_topic,
    target_partitions,
)
from blockgz.reader.restore.value_bytes import KafkaBytes
from blockgz.registry import RegistrySettings
from blockgz.runtime.gc_control import fewer_collections
from blockgz.times import epoch_ms

log = logging.getLogger("blockgz.restore")

#: Kafka's timestamp type id of a time the broker set at append.
LOG_APPEND_TIME = 1
#: The restore's own options (owner ``replay``, the name users' scripts know); the others are
#: the archive's (:func:`blockgz.reader.open_archive`).
SEND_OPTIONS = OptionSet(
    OptionDef(
        "kafka.",
        "text",
        "",
        "the producer's settings (librdkafka names), e.g. "
        "`kafka.compression.type=zstd`; idempotence is always on",
        "replay",
        prefix=True,
    ),
)

#: Per source partition: its keys-only tombstones in the window, and the offsets of its nulls
#: kept as values (:mod:`blockgz.reader.restore.tombstones`).
Tombstones = Mapping[int, tuple[list[Record], set[int]]]


def restore_options(
    options: Mapping[str, Any], command: str = "restore"
) -> tuple[dict[str, str], dict[str, str]]:
    """``options`` checked and split into (the archive's options, the producer's settings);
    ``command`` names the command in the error of an unknown option.

    >>> restore_options({"kafka.acks": "all", "topics.dir": "t"})
    ({'topics.dir': 't'}, {'acks': 'all'})
    >>> restore_options({"kafka.acks": "all", "prefech": "4"}, "replay")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: replay: prefech: not a setting blockgz knows; did you mean ...?
    """
    check_reader_options(options, command, owners=("reader", "replay"), more=(SEND_OPTIONS,))
    producer = {k[len("kafka.") :]: str(v) for k, v in options.items() if k.startswith("kafka.")}
    archive = {k: str(v) for k, v in options.items() if not k.startswith("kafka.")}
    return archive, librdkafka_settings(producer)


@dataclass
class SendSettings:
    """What to send, and where to."""

    topic: str
    to_topic: str
    partitions: list[int] | None = None
    start: int | None = None
    end: int | None = None
    #: ISO-8601 text, ``datetime`` (no zone: UTC) or epoch ms; kept as epoch ms.
    from_time: int | str | dt.datetime | None = None
    to_time: int | str | dt.datetime | None = None
    by_key: bool = False
    mark: bool = True
    allow_same_topic: bool = False
    #: The target cluster's schema registry: an Avro archive's values go back in Confluent's
    #: wire format with its ids (:mod:`blockgz.reader.restore.value_bytes`); required for one.
    registry: RegistrySettings | None = None
    #: librdkafka settings (``bootstrap.servers`` at least); idempotence is always on.
    producer: dict[str, Any] = field(default_factory=dict)
    #: ``--json-null``: what nulls kept as values under the tombstone directory were
    #: (``tombstone``/``value``; :mod:`blockgz.reader.restore.tombstones`); ``None``: such
    #: records are refused before anything is sent.
    json_null: str | None = None
    #: The export's ``tombstone.encoded.partition``.
    tombstone_directory: str = "tombstone"
    #: Per source partition, where a restore stands (:mod:`blockgz.reader.restore.positions`):
    #: its records then go in transactions that commit the position with them (no marker).
    positions: dict[int, Any] | None = None
    #: Per source partition, the source offsets whose target offsets the restore records (where
    #: consumer groups stood).
    landmarks: dict[int, list[int]] | None = None
    #: Records per transaction, with :attr:`positions`.
    transaction_records: int = 20_000

    def __post_init__(self) -> None:
        self.from_time = epoch_ms(self.from_time, name="from_time")
        self.to_time = epoch_ms(self.to_time, name="to_time")
        low, high = self.from_time, self.to_time
        if low is not None and high is not None and high <= low:  # as a reversed offset window
            raise ConfigError(
                f"--from-time ({self.from_time} ms) is not before --to-time "
                f"({self.to_time} ms): the window holds no record"
            )


@dataclass
class SendResult:
    """Per source partition: records sent now, and records skipped as delivered before."""

    sent: dict[int, int] = field(default_factory=dict)
    skipped: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0
    #: What the archive did not keep of the records sent (``"timestamps"``, ``"keys and
    #: headers"``): Kafka gave them the restore's time, no key and no headers instead.
    not_kept: list[str] = field(default_factory=list)
    #: Whether some records were LogAppendTime in the source (sent as CreateTime, same time).
    append_times: bool = False

    @property
    def total_sent(self) -> int:
        return sum(self.sent.values())

    def merge(self, done: SendResult) -> None:
        """Add another run's partitions (and what it did not keep) to this result."""
        self.sent.update(done.sent)
        self.skipped.update(done.skipped)
        self.seconds += done.seconds
        self.not_kept += [w for w in done.not_kept if w not in self.not_kept]


@dataclass
class _Sending:
    """What one :func:`send_records` call works with, past its checks."""

    archive: Archive
    settings: SendSettings
    restored: KafkaBytes
    tombstones: Tombstones
    deliveries: Failures
    on_progress: Callable[[int, int], None] | None
    result: SendResult = field(default_factory=SendResult)

    def progress(self, source: int, sent: int) -> None:
        if self.on_progress is not None:
            self.on_progress(source, sent)


def send_records(
    archive: Archive,
    settings: SendSettings,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    admin: Any = None,
) -> SendResult:
    """Send the archived range into ``settings.to_topic``; see the module's notes.

    ``on_progress(partition, records sent so far)`` is called now and then. ``admin``: a
    :class:`~blockgz.kafka.access.QuietAdmin` of the target cluster to use (a restore shares
    one over its runs); one is made when ``None``.
    """
    refuse_same_topic(settings.topic, settings.to_topic, allow=settings.allow_same_topic)
    deliveries = Failures()
    config = {
        "linger.ms": 20,
        "acks": "all",
        **settings.producer,
        "enable.idempotence": True,
        "delivery.report.only.error": True,
        "on_delivery": deliveries,
    }
    if admin is None:
        from blockgz.kafka.access import quiet_admin

        # librdkafka's connection chatter kept off the terminal: failures are one line below
        admin = quiet_admin(admin_settings(config))
    targets = target_partitions(admin.client, config, settings.to_topic)
    check_target_access(admin, config, settings.to_topic, mark=settings.mark)
    sources = (
        settings.partitions
        if settings.partitions is not None
        else archive.partitions(settings.topic)
    )
    if not settings.by_key:
        check_partition_numbers(settings.topic, settings.to_topic, sources, targets)
    job = _Sending(
        archive,
        settings,
        KafkaBytes.check(archive, settings.topic, sources, settings.registry, settings.to_topic),
        _tombstones(archive, settings, sources),
        deliveries,
        on_progress,
    )
    if settings.positions is not None:
        return _send_in_transactions(job, config, sources)
    return _send_with_markers(job, config, sources, targets)


def _send_with_markers(
    job: _Sending, config: dict[str, Any], sources: list[int], targets: int
) -> SendResult:
    """Each source partition through one idempotent producer, its records marked (unless
    ``mark`` is off) and skipped where the markers read back say they were delivered."""
    from confluent_kafka import KafkaException, Producer

    settings = job.settings
    delivered = (
        delivered_so_far(config, settings.to_topic, targets, settings.topic, set(sources))
        if settings.mark
        else {}
    )
    try:
        producer = Producer(config)
    except KafkaException as exc:  # librdkafka checks the settings as a whole
        raise ConfigError(f"the producer settings (-O kafka.*) were refused: {exc}") from exc
    started = time.monotonic()
    with fewer_collections():  # millions of short-lived records: see blockgz/runtime/gc_control.py
        try:
            for source in sources:
                last_delivered = {t: n for (src, t), n in delivered.items() if src == source}
                sent, skipped = _send_partition(job, producer, source, targets, last_delivered)
                job.result.sent[source], job.result.skipped[source] = sent, skipped
                job.progress(source, sent)
                log.info(
                    "%s-%d -> %s: %d records sent, %d already there",
                    settings.topic,
                    source,
                    settings.to_topic,
                    sent,
                    skipped,
                )
                if job.deliveries.failures:
                    break
        finally:
            remaining = producer.flush(60)
    job.result.seconds = time.monotonic() - started
    failures = job.deliveries.failures
    if failures or remaining:
        what = failures[0] if failures else f"{remaining} still queued"
        raise ReplayError(
            f"replay into {settings.to_topic!r} stopped: {what}; "
            f"{len(failures)} records failed. Run it again: it resumes after what "
            "each partition holds"
        )
    return job.result


def _send_partition(
    job: _Sending, producer: Any, source: int, targets: int, last_delivered: Mapping[int, int]
) -> tuple[int, int]:
    """One source partition's window handed to ``producer``, past what each target partition
    holds already (``last_delivered``: its newest marked source offset): (sent, skipped)."""
    settings = job.settings
    floor = last_delivered.get(source, -1)  # without --by-key all goes to `source`
    marker = f"{settings.topic}/{source}/".encode() if settings.mark else None
    sent = skipped = 0
    for _, block in _blocks(job.archive, settings, source, job.tombstones):
        _note_not_kept(block[0], job.result, settings.topic, source)
        keys = job.restored.keys(source, block)  # the bytes Kafka held (None: as read)
        routes: Iterable[int]  # each record's target partition
        if settings.by_key:
            unsent, routes, keys = _due_by_key(block, keys, targets, last_delivered)
        else:
            unsent = _due_after(block, floor)
            keys, routes = _keys_of(keys, block, unsent), itertools.repeat(source)
        values = job.restored.values(source, unsent) if unsent else None
        produce_block(producer, settings.to_topic, unsent, routes, marker, values, keys)
        sent += len(unsent)
        skipped += len(block) - len(unsent)
        producer.poll(0)  # serve failure reports once per block
        if job.deliveries.failures:
            break
        job.progress(source, sent)
    return sent, skipped


def _due_by_key(
    block: list[Record],
    keys: list[bytes | None] | None,
    targets: int,
    last_delivered: Mapping[int, int],
) -> tuple[list[Record], list[int], list[bytes | None] | None]:
    """The records of ``block`` not yet in the target partition their key picks, with those
    partitions and their keys."""
    routes = [
        partition_of(r, targets, None if keys is None else keys[n]) for n, r in enumerate(block)
    ]
    due = [r.offset > last_delivered.get(t, -1) for r, t in zip(block, routes, strict=True)]
    unsent = list(itertools.compress(block, due))
    routes = list(itertools.compress(routes, due))
    keys = None if keys is None else list(itertools.compress(keys, due))
    return unsent, routes, keys


def _due_after(block: list[Record], floor: int) -> list[Record]:
    """The records of ``block`` after offset ``floor`` (a suffix: offsets ascend)."""
    return block if block[0].offset > floor else [r for r in block if r.offset > floor]


def _keys_of(
    keys: list[bytes | None] | None, block: list[Record], unsent: list[Record]
) -> list[bytes | None] | None:
    """The keys of ``unsent``, a suffix of ``block`` whose keys are ``keys``."""
    if keys is not None and len(unsent) < len(block):
        return keys[len(block) - len(unsent) :]
    return keys


def _tombstones(archive: Archive, settings: SendSettings, sources: Iterable[int]) -> Tombstones:
    """Per source partition, its keys-only tombstones in the window and the offsets of its
    nulls kept as values (:mod:`blockgz.reader.restore.tombstones`); a :class:`ConfigError`
    naming each partition whose nulls cannot be told apart when ``json_null`` is not given."""
    from blockgz.reader.reading.window_counts import Window
    from blockgz.reader.restore.tombstones import (
        ambiguity,
        kept_null_offsets,
        kept_tombstones,
        tombstone_records,
    )

    window = Window(settings.start, settings.end, settings.from_time, settings.to_time)  # type: ignore[arg-type]
    found: dict[int, tuple[list[Record], set[int]]] = {}
    unclear = []
    for source in sources:
        kept = kept_tombstones(archive, settings.topic, source, settings.tombstone_directory)
        dead = list(tombstone_records(archive, kept.keys_only, window))
        nulls = set(kept_null_offsets(archive, kept.kept_nulls, window))
        if nulls and settings.json_null is None:
            unclear.append(
                ambiguity(settings.topic, source, len(nulls), settings.tombstone_directory)
            )
        found[source] = (dead, nulls)
    if unclear:
        raise ConfigError("; ".join(unclear))
    return found


def _blocks(
    archive: Archive, settings: SendSettings, source: int, tombstones: Tombstones
) -> Iterable[tuple[int, list[Record]]]:
    """``(source, block)`` of the source partition's window in offset order, keys-only
    tombstones in their places, nulls kept as values resolved as ``json_null`` says."""
    from blockgz.reader.restore.tombstones import merged_blocks, resolved_nulls

    blocks = archive.record_blocks(
        settings.topic,
        [source],
        start=settings.start,
        end=settings.end,
        from_time=settings.from_time,
        to_time=settings.to_time,
    )
    dead, nulls = tombstones.get(source, ([], set()))
    values = (block for _, block in blocks)
    for block in merged_blocks(values, iter(dead)):
        if nulls:
            block = resolved_nulls(block, nulls, settings.json_null or "value")
        yield source, block


def _send_in_transactions(job: _Sending, config: dict[str, Any], sources: list[int]) -> SendResult:
    """:func:`send_records` one partition to one, each target partition's records in
    transactions that commit its position (:mod:`blockgz.reader.restore.positions`); no
    marker is added."""
    from blockgz.reader.restore.positions import PartitionTransactions

    settings = job.settings
    assert settings.positions is not None
    started = time.monotonic()
    with fewer_collections():
        for source in sources:
            sender = PartitionTransactions(
                config,
                settings.to_topic,
                source,
                settings.positions[source],
                (settings.landmarks or {}).get(source, ()),
                settings.transaction_records,
            )
            try:
                sent, skipped = _send_partition_in_transactions(job, sender)
                job.result.sent[source], job.result.skipped[source] = sent, skipped
            finally:
                sender.close()
            log.info(
                "%s-%d -> %s: %d records sent, %d committed before",
                settings.topic,
                source,
                settings.to_topic,
                job.result.sent[source],
                job.result.skipped[source],
            )
    job.result.seconds = time.monotonic() - started
    return job.result


def _send_partition_in_transactions(job: _Sending, sender: Any) -> tuple[int, int]:
    """One source partition through ``sender`` from its recorded position: (sent, skipped)."""
    settings, deliveries = job.settings, job.deliveries
    source = sender.partition
    start = sender.position.next_offset
    sent = skipped = 0
    for _, block in _blocks(job.archive, settings, source, job.tombstones):
        if block[0].value is not None:  # a keys-only tombstone holds no value to judge by
            _note_not_kept(block[0], job.result, settings.topic, source)
        unsent = _due_after(block, start - 1)
        skipped += len(block) - len(unsent)
        if not unsent:
            continue
        keys = _keys_of(job.restored.keys(source, block), block, unsent)
        values = job.restored.values(source, unsent)
        sender.begin()
        callbacks = sender.callbacks([r.offset for r in unsent])
        produce_block(
            sender.producer, settings.to_topic, unsent, itertools.repeat(source), None,
            values, keys, callbacks,
        )  # fmt: skip
        sender.producer.poll(0)
        if deliveries.failures:
            sender._abort(deliveries.failures[0])
        sent += len(unsent)
        sender.sent(len(unsent), unsent[-1].offset)
        job.progress(source, sent)
    sender.commit()
    if deliveries.failures:
        sender._abort(deliveries.failures[0])
    return sent, skipped


#: What the sent records get for what the archive did not keep, and what keeps it.
_NOT_KEPT = {
    "timestamps": ("the replay's time", "store.kafka.timestamps, on by default"),
    "keys and headers": (
        "no key and no headers",
        "format.json.envelope=true, or store.kafka.keys/store.kafka.headers",
    ),
    "keys": ("no key", "store.kafka.keys"),
    "headers": ("no headers", "store.kafka.headers"),
}


def _note_not_kept(record: Record, result: SendResult, topic: str, partition: int) -> None:
    """Warn, once per kind, when the archive did not keep what Kafka held beside a value
    (:attr:`Record.holds`); and once when records were stamped at append (LogAppendTime):
    no producer can set that, so they go with their original time as CreateTime."""
    holds = record.holds
    missing = [] if "timestamp" in holds else ["timestamps"]
    if "key" not in holds or "headers" not in holds:
        kept = "key" in holds or "headers" in holds
        missing.append(("headers" if "key" in holds else "keys") if kept else "keys and headers")
    for what in missing:
        if what not in result.not_kept:
            result.not_kept.append(what)
            instead, keeps = _NOT_KEPT[what]
            log.warning(
                "%s-%d: the archive kept no record %s, so the replayed records get %s "
                "(%s keeps them)",
                topic,
                partition,
                what,
                instead,
                keeps,
            )
    if record.timestamp_type == LOG_APPEND_TIME and not result.append_times:
        result.append_times = True
        log.warning(
            "%s-%d: the source topic stamped its records when the broker appended them "
            "(LogAppendTime); a producer cannot set that, so they go with their original "
            "timestamps as CreateTime (a target topic with message.timestamp.type="
            "LogAppendTime would replace them with the replay's time)",
            topic,
            partition,
        )
