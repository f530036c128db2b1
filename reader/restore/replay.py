"""Replay an archive into a Kafka topic: keys, headers and timestamps where kept, in order.

Each topic-partition's records go in offset order to the same partition number of the target
topic (or, ``by_key``, to the partition Kafka's default partitioner picks for the key:
:mod:`blockgz.reader.restore.partitioner`), through an idempotent producer, so retries inside a
run never duplicate a record.

**Resuming after a kill, without duplicates.** Every replayed record carries one more header,
``blockgz.replay``, naming its source offset; a rerun reads the newest ones back from the target
partitions and skips what they already hold (:mod:`blockgz.reader.restore.markers`). The
partition of every record is computed here (Kafka's murmur2 for keys, the offset for null keys)
rather than left to the client, so the rerun knows where each record went. ``mark=False``
leaves the header out and gives up resuming. The Spark job's driver is
:mod:`blockgz.reader.restore.spark_driver`.

>>> kafka_partition(b"user-1", 12)  # the partition Kafka's Java producer picks
8
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
from blockgz.reader.restore.markers import MARKER, admin_settings, delivered_so_far
from blockgz.reader.restore.partitioner import kafka_partition as kafka_partition
from blockgz.reader.restore.partitioner import murmur2 as murmur2
from blockgz.reader.restore.partitioner import partition_of
from blockgz.reader.restore.value_bytes import KafkaBytes
from blockgz.registry import RegistrySettings
from blockgz.runtime.gc_control import fewer_collections
from blockgz.times import epoch_ms

log = logging.getLogger("blockgz.replay")

#: Kafka's timestamp type id of a time the broker set at append.
LOG_APPEND_TIME = 1
#: Replay's own options; the others are the archive's (:func:`blockgz.reader.open_archive`).
REPLAY_OPTIONS = OptionSet(
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


def replay_options(options: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """``options`` checked and split into (the archive's options, the producer's settings).

    >>> replay_options({"kafka.acks": "all", "topics.dir": "t"})
    ({'topics.dir': 't'}, {'acks': 'all'})
    >>> replay_options({"kafka.acks": "all", "prefech": "4"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: replay: prefech: not a setting blockgz knows; did you mean ...?
    """
    check_reader_options(options, "replay", owners=("reader", "replay"))
    producer = {k[len("kafka.") :]: str(v) for k, v in options.items() if k.startswith("kafka.")}
    archive = {k: str(v) for k, v in options.items() if not k.startswith("kafka.")}
    return archive, librdkafka_settings(producer)


@dataclass
class ReplaySettings:
    """What to replay, and where to."""

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
class ReplayResult:
    """Per source partition: records sent now, and records skipped as delivered before."""

    sent: dict[int, int] = field(default_factory=dict)
    skipped: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0
    #: What the archive did not keep of the records sent (``"timestamps"``, ``"keys and
    #: headers"``): Kafka gave them the replay's time, no key and no headers instead.
    not_kept: list[str] = field(default_factory=list)
    #: Whether some records were LogAppendTime in the source (sent as CreateTime, same time).
    append_times: bool = False

    @property
    def total_sent(self) -> int:
        return sum(self.sent.values())


class _Failures:
    """The producer's delivery callback: it only hears of failures
    (``delivery.report.only.error``), so a good record costs no Python call."""

    def __init__(self):
        self.failures: list[str] = []

    def __call__(self, error, message) -> None:
        if error is not None:
            self.failures.append(
                f"{message.topic()}[{message.partition()}]: {error} "
                f"({dict(message.headers() or []).get(MARKER, b'').decode()})"
            )


def replay(
    archive: Archive,
    settings: ReplaySettings,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    admin: Any = None,
) -> ReplayResult:
    """Replay the archived range into ``settings.to_topic``; see the module's notes.

    ``on_progress(partition, records sent so far)`` is called now and then. ``admin``: a
    :class:`~blockgz.kafka.access.QuietAdmin` of the target cluster to use (a restore shares
    one over its runs); one is made when ``None``.
    """
    from confluent_kafka import KafkaException, Producer

    if settings.to_topic == settings.topic and not settings.allow_same_topic:
        raise ConfigError(
            f"--to-topic {settings.to_topic!r} is the topic the archive holds; replaying into "
            "it would append a second copy of its records (pass --allow-same-topic if that is "
            "what you want)"
        )
    deliveries = _Failures()
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
    targets = _target_partitions(admin.client, config, settings.to_topic)
    _check_target_access(admin, config, settings.to_topic, mark=settings.mark)
    sources = (
        settings.partitions
        if settings.partitions is not None
        else archive.partitions(settings.topic)
    )
    if not settings.by_key:
        missing = [p for p in sources if p >= targets]
        if missing:
            raise ConfigError(
                f"topic {settings.to_topic!r} has {targets} partitions; partitions {missing} of "
                f"{settings.topic!r} have no partition of the same number there (create it with "
                "more partitions, or pass --by-key to spread records by key)"
            )
    restored = KafkaBytes.check(
        archive, settings.topic, sources, settings.registry, settings.to_topic
    )
    tombstones = _tombstones(archive, settings, sources)
    if settings.positions is not None:
        return _replay_in_transactions(
            archive, settings, config, deliveries, restored, tombstones, sources, on_progress
        )
    delivered = (
        delivered_so_far(config, settings.to_topic, targets, settings.topic, set(sources))
        if settings.mark
        else {}
    )
    try:
        producer = Producer(config)
    except KafkaException as exc:  # librdkafka checks the settings as a whole
        raise ConfigError(f"the producer settings (-O kafka.*) were refused: {exc}") from exc
    result = ReplayResult()
    started = time.monotonic()
    with fewer_collections():  # millions of short-lived records: see blockgz/runtime/gc_control.py
        try:
            for source in sources:
                sent = skipped = 0
                blocks = _blocks(archive, settings, source, tombstones)
                last_delivered = {t: n for (src, t), n in delivered.items() if src == source}
                floor = last_delivered.get(source, -1)  # without --by-key all goes to `source`
                marker = f"{settings.topic}/{source}/".encode() if settings.mark else None
                for _, block in blocks:
                    _note_not_kept(block[0], result, settings.topic, source)
                    routes: Iterable[int]
                    keys = restored.keys(source, block)  # the bytes Kafka held (None: as read)
                    if settings.by_key:
                        routes = [
                            partition_of(r, targets, None if keys is None else keys[n])
                            for n, r in enumerate(block)
                        ]
                        due = [
                            r.offset > last_delivered.get(t, -1)
                            for r, t in zip(block, routes, strict=True)
                        ]
                        unsent = list(itertools.compress(block, due))
                        routes = list(itertools.compress(routes, due))
                        keys = None if keys is None else list(itertools.compress(keys, due))
                    else:
                        unsent = (
                            block
                            if block[0].offset > floor
                            else [r for r in block if r.offset > floor]
                        )
                        routes = itertools.repeat(source)
                        if keys is not None and len(unsent) < len(block):
                            keys = keys[len(block) - len(unsent) :]
                    values = restored.values(source, unsent) if unsent else None
                    _send(producer, settings.to_topic, unsent, routes, marker, values, keys)
                    sent += len(unsent)
                    skipped += len(block) - len(unsent)
                    producer.poll(0)  # serve failure reports once per block
                    if deliveries.failures:
                        break
                    if on_progress is not None:
                        on_progress(source, sent)
                result.sent[source], result.skipped[source] = sent, skipped
                if on_progress is not None:
                    on_progress(source, sent)
                log.info(
                    "%s-%d -> %s: %d records sent, %d already there",
                    settings.topic,
                    source,
                    settings.to_topic,
                    sent,
                    skipped,
                )
                if deliveries.failures:
                    break
        finally:
            remaining = producer.flush(60)
    result.seconds = time.monotonic() - started
    if deliveries.failures or remaining:
        what = deliveries.failures[0] if deliveries.failures else f"{remaining} still queued"
        raise ReplayError(
            f"replay into {settings.to_topic!r} stopped: {what}; "
            f"{len(deliveries.failures)} records failed. Run it again: it resumes after what "
            "each partition holds"
        )
    return result


def _tombstones(
    archive: Archive, settings: ReplaySettings, sources: Iterable[int]
) -> dict[int, tuple[list[Record], set[int]]]:
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
    archive: Archive,
    settings: ReplaySettings,
    source: int,
    tombstones: Mapping[int, tuple[list[Record], set[int]]],
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


def _replay_in_transactions(
    archive: Archive,
    settings: ReplaySettings,
    config: dict[str, Any],
    deliveries: _Failures,
    restored: KafkaBytes,
    tombstones: Mapping[int, tuple[list[Record], set[int]]],
    sources: list[int],
    on_progress: Callable[[int, int], None] | None,
) -> ReplayResult:
    """:func:`replay` one partition to one, each target partition's records in transactions
    that commit its position (:mod:`blockgz.reader.restore.positions`); no marker is added."""
    from blockgz.reader.restore.positions import PartitionTransactions

    assert settings.positions is not None
    result = ReplayResult()
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
                result.sent[source], result.skipped[source] = _send_in_transactions(
                    archive, settings, sender, (deliveries, result), restored, tombstones,
                    on_progress,
                )  # fmt: skip
            finally:
                sender.close()
            log.info(
                "%s-%d -> %s: %d records sent, %d committed before",
                settings.topic,
                source,
                settings.to_topic,
                result.sent[source],
                result.skipped[source],
            )
    result.seconds = time.monotonic() - started
    return result


def _send_in_transactions(
    archive: Archive,
    settings: ReplaySettings,
    sender: Any,
    reports: tuple[_Failures, ReplayResult],
    restored: KafkaBytes,
    tombstones: Mapping[int, tuple[list[Record], set[int]]],
    on_progress: Callable[[int, int], None] | None,
) -> tuple[int, int]:
    """One source partition through ``sender`` from its recorded position: (sent, skipped)."""
    deliveries, result = reports
    source = sender.partition
    start = sender.position.next_offset
    sent = skipped = 0
    for _, block in _blocks(archive, settings, source, tombstones):
        if block[0].value is not None:  # a keys-only tombstone holds no value to judge by
            _note_not_kept(block[0], result, settings.topic, source)
        unsent = block if block[0].offset >= start else [r for r in block if r.offset >= start]
        skipped += len(block) - len(unsent)
        if not unsent:
            continue
        keys = restored.keys(source, block)
        if keys is not None and len(unsent) < len(block):
            keys = keys[len(block) - len(unsent) :]
        values = restored.values(source, unsent)
        sender.begin()
        callbacks = sender.callbacks([r.offset for r in unsent])
        _send(
            sender.producer, settings.to_topic, unsent, itertools.repeat(source), None,
            values, keys, callbacks,
        )  # fmt: skip
        sender.producer.poll(0)
        if deliveries.failures:
            sender._abort(deliveries.failures[0])
        sent += len(unsent)
        sender.sent(len(unsent), unsent[-1].offset)
        if on_progress is not None:
            on_progress(source, sent)
    sender.commit()
    if deliveries.failures:
        sender._abort(deliveries.failures[0])
    return sent, skipped


#: What the replayed records get for what the archive did not keep, and what keeps it.
_NOT_KEPT = {
    "timestamps": ("the replay's time", "store.kafka.timestamps, on by default"),
    "keys and headers": (
        "no key and no headers",
        "format.json.envelope=true, or store.kafka.keys/store.kafka.headers",
    ),
    "keys": ("no key", "store.kafka.keys"),
    "headers": ("no headers", "store.kafka.headers"),
}


def _note_not_kept(record: Record, result: ReplayResult, topic: str, partition: int) -> None:
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


def _send(
    producer,
    topic: str,
    records: list,
    partitions: Iterable[int],
    marker,
    values: list[bytes | None] | None = None,
    keys: list[bytes | None] | None = None,
    callbacks: list[Any] | None = None,
) -> None:
    """Hand ``records`` to the producer, each to its partition, with its resume marker, its
    value and key (``values``/``keys`` re-encoded, or the record's own); while the producer's
    queue is full, wait for it to drain."""
    if values is None:
        values = [r.value for r in records]
    if keys is None:
        keys = [r.key for r in records]
    for column in (values, keys):  # checked up front, in C: never sent as something else
        if not set(map(type, column)) <= _BYTES_OR_NONE:
            bad = next(n for n, v in enumerate(column) if type(v) not in _BYTES_OR_NONE)
            raise ReplayError(
                f"{topic}: offset {records[bad].offset} holds a decoded key or value, not bytes"
            )
    produce = producer.produce
    report = itertools.repeat(None) if callbacks is None else callbacks
    rows = zip(records, partitions, values, keys, report, strict=False)
    for record, partition, value, key, callback in rows:
        headers = record.headers
        if marker is not None:
            headers = [*(headers or ()), (MARKER, marker + b"%d" % record.offset)]
        try:
            # Positional (topic, value, key, partition, callback, on_delivery, timestamp,
            # headers): no keyword dict per record.
            produce(topic, value, key, partition, callback, None, record.timestamp or 0, headers)
        except BufferError:
            _produce_when_queued(
                producer,
                (topic, value, key, partition, callback, None, record.timestamp or 0, headers),
            )
        except Exception as exc:  # KafkaException: a record librdkafka refuses (its size)
            raise ReplayError(_refused(topic, partition, record.offset, value, key, exc)) from exc


def _refused(topic: str, partition: int, offset: int, value, key, exc: Exception) -> str:
    """One line for a record the producer refused to take."""
    error = exc.args[0] if exc.args else exc
    text = error.str() if callable(getattr(error, "str", None)) else str(error)
    size = len(value or b"") + len(key or b"")
    return (
        f"{topic}[{partition}]: the record of offset {offset} ({size} bytes) was refused by the "
        f"producer: {text}; a rerun resumes where delivery stopped"
    )


def _produce_when_queued(producer, args: tuple) -> None:
    """``producer.produce(*args)`` once its queue has room."""
    while True:
        # Only failures are reported (``delivery.report.only.error``), so no event would end
        # a longer wait early: wait briefly, then offer it again.
        producer.poll(0.005)
        try:
            producer.produce(*args)
            return
        except BufferError:
            continue


_BYTES_OR_NONE = frozenset({bytes, type(None)})


def _target_partitions(admin: Any, config: Mapping[str, Any], topic: str) -> int:
    try:
        metadata = admin.list_topics(timeout=15)  # all topics: asking for one may create it
    except Exception as exc:  # KafkaException: the brokers cannot be reached
        raise ReplayError(
            f"cannot reach Kafka at {config.get('bootstrap.servers')}: {exc}"
        ) from exc
    found = metadata.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        raise ConfigError(
            f"topic {topic!r} does not exist at {config.get('bootstrap.servers')}; create it "
            "first (blockgz replay does not create topics: their settings are yours to choose)"
        )
    return len(found.partitions)


def _check_target_access(admin: Any, config: Mapping[str, Any], topic: str, *, mark: bool) -> None:
    """The principal may WRITE the target topic, and READ it when the resume markers are read
    back; a :class:`ReplayError` in one line naming the missing ACL."""
    from blockgz.kafka.access import grant_hint, missing_operation, principal

    needed = ["WRITE", "READ"] if mark else ["WRITE"]
    denied = missing_operation(admin, [topic], needed, timeout_s=15)
    if denied is not None:
        who, operation = principal(config), denied[1]
        why = " (a rerun reads its resume markers back; --no-marker needs WRITE only)"
        raise ReplayError(
            f"--to-topic {topic}: {who} may not {operation} it"
            f"{why if operation == 'READ' else ''}; grant it {operation} "
            f"({grant_hint(who, operation, topic)})"
        )
