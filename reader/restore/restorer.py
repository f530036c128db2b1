"""Carry out a :class:`~blockgz.reader.restore.planning.RestorePlan`: topics, records, groups.

In order: create the missing target topics as the snapshot describes them, or check the existing
ones (:mod:`blockgz.reader.restore.target_topics`); read where a previous run of the same restore
stood in each one-to-one target partition, as its own committed transactions recorded it, and
claim the partitions it never reached (:mod:`blockgz.reader.restore.positions`); send each
topic's records with :func:`blockgz.reader.restore.send.send_records` (partition to partition,
keys, headers, timestamps and tombstones as kept, in transactions that commit each partition's
position with its records); and, once every record is delivered, set the consumer groups'
offsets on the target (:mod:`blockgz.reader.restore.group_offsets`) at the target offsets the
transactions recorded. A failure before the groups leaves them untouched: a rerun continues the
records and then sets them. A target topic that held records of its own before the restore
first reached it, and a ``--by-key`` restore, are restored with the ``blockgz.replay`` markers
instead (:mod:`blockgz.reader.restore.markers`), as before.

Example (with a broker)::

    with open_archive("s3://bucket/exports") as archive:
        plan = plan_restore(archive, RestoreRequest(topics=("orders",), to_time=t))
        result = restore(archive, plan, RestoreSettings({"bootstrap.servers": "dr:9092"}))
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from blockgz.errors import ConfigError, RestoreError
from blockgz.reader.restore.group_offsets import GroupsResult, set_group_offsets
from blockgz.reader.restore.markers import admin_settings
from blockgz.reader.restore.planning import RestorePlan, TopicPlan
from blockgz.reader.restore.positions import (
    TRANSACTION_RECORDS,
    Position,
    fence,
    read_positions,
)
from blockgz.reader.restore.send import SendResult, SendSettings, send_records
from blockgz.reader.restore.spark_send import send_on_spark
from blockgz.reader.restore.target_topics import (
    TargetTopic,
    ensure_topics,
    message_limits,
    sized_producer,
)
from blockgz.registry import RegistrySettings


@dataclass
class RestoreSettings:
    """Where to restore to."""

    #: librdkafka settings (``bootstrap.servers`` at least); idempotence is always on.
    producer: dict[str, Any] = field(default_factory=dict)
    #: The target cluster's schema registry (see
    # :class:`~blockgz.reader.restore.send.SendSettings`).
    registry: RegistrySettings | None = None
    #: Allow restoring with markers into a non-empty target named as its source topic.
    allow_same_topic: bool = False
    #: ``--json-null`` (:mod:`blockgz.reader.restore.tombstones`).
    json_null: str | None = None
    #: Records per transaction (:mod:`blockgz.reader.restore.positions`).
    transaction_records: int = TRANSACTION_RECORDS


@dataclass
class TopicOutcome:
    source: str
    target: str
    created: bool
    #: ``positions`` (resumed from its transactions' records, records unchanged) or
    #: ``markers`` (``blockgz.replay``).
    resume: str
    result: SendResult


@dataclass
class RestoreResult:
    topics: list[TopicOutcome] = field(default_factory=list)
    groups: GroupsResult = field(default_factory=GroupsResult)
    seconds: float = 0.0

    @property
    def sent(self) -> int:
        return sum(t.result.total_sent for t in self.topics)

    @property
    def skipped(self) -> int:
        return sum(sum(t.result.skipped.values()) for t in self.topics)


@dataclass
class _Prepared:
    """One topic's sends (one per distinct window)."""

    topic: TopicPlan
    target: TargetTopic
    resume: str
    runs: list[SendSettings]


def prepare(archive_plan: RestorePlan, settings: RestoreSettings, admin: Any) -> list[_Prepared]:
    """Create or check the target topics and claim their partitions: what each topic's
    sends must do (``admin``: a :class:`~blockgz.kafka.access.QuietAdmin` of the target).
    Talks to the target cluster, sends no record."""
    client = admin_settings(settings.producer)
    bootstrap = str(settings.producer.get("bootstrap.servers"))
    targets = ensure_topics(admin.client, archive_plan, bootstrap)
    limits = {}
    if "message.max.bytes" not in settings.producer:  # sized from the topics, not defaulted
        limits = {t.name: int(t.configs["max.message.bytes"]) for t in targets if _set(t)}
        ask = [t.name for t in targets if t.name not in limits]
        limits.update(message_limits(admin.client, ask, bootstrap))
    prepared = []
    for topic, target in zip(archive_plan.topics, targets, strict=True):
        starts = None
        if not archive_plan.request.by_key:
            starts = _positions(client, archive_plan, topic)
        mark = starts is None
        if mark and topic.target == topic.source and not settings.allow_same_topic:
            raise ConfigError(
                f"topic {topic.target!r} exists with records of its own and is named as the "
                "archived topic; restoring into it would append a second copy (rename the "
                "target, or pass --allow-same-topic)"
            )
        runs = []
        for window, partitions in _by_window(topic).items():
            runs.append(
                SendSettings(
                    topic=topic.source,
                    to_topic=topic.target,
                    partitions=partitions,
                    start=window.start,
                    end=window.end,
                    from_time=window.from_time,
                    to_time=window.to_time,
                    by_key=archive_plan.request.by_key,
                    mark=mark,
                    allow_same_topic=True,  # checked above, with what restore knows
                    registry=settings.registry,
                    producer=sized_producer(settings.producer, limits.get(target.name)),
                    json_null=settings.json_null,
                    tombstone_directory=archive_plan.request.tombstone_directory,
                    positions=None if starts is None else {p: starts[p] for p in partitions},
                    landmarks=_landmarks(archive_plan, topic),
                    transaction_records=settings.transaction_records,
                )
            )
        prepared.append(_Prepared(topic, target, "markers" if mark else "positions", runs))
    return prepared


def _set(target: TargetTopic) -> bool:
    """Whether the restore created ``target`` with a ``max.message.bytes`` of its own."""
    return str(target.configs.get("max.message.bytes", "")).strip().isdigit()


def _positions(client: Mapping[str, Any], plan: RestorePlan, topic: TopicPlan):
    """Where this restore stands in each target partition of ``topic`` (source partition ->
    :class:`Position`), the partitions it never reached claimed at the start; ``None`` when the
    target held records of its own before the restore first reached it (markers, then)."""
    from blockgz.reader.restore.positions import claim

    fingerprints = {p.partition: plan.fingerprint(topic, p) for p in topic.partitions}
    fence(client, topic.target, fingerprints)
    found = read_positions(client, topic.target, fingerprints)
    for partition, position in sorted(found.items()):
        if position.fingerprint != fingerprints.get(partition):
            raise RestoreError(
                f"{topic.target}[{partition}] holds the records of another restore (another "
                "source, window or rename); restore into a new topic (--rename)"
            )
    if not found and _holds_records(client, topic.target, fingerprints):
        return None
    fresh = {p: Position(fp, 0) for p, fp in fingerprints.items() if p not in found}
    claim(client, topic.target, fresh)
    return {**fresh, **found}


def _holds_records(client: Mapping[str, Any], target: str, partitions: Iterable[int]) -> bool:
    """Whether some of ``target``'s ``partitions`` hold records (from their watermarks)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**client, "group.id": "blockgz.restore.check", "log_level": 3})
    try:
        for p in partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(target, p), timeout=15, cached=False
            )
            if high > low:
                return True
    finally:
        consumer.close()
    return False


def _landmarks(plan: RestorePlan, topic: TopicPlan) -> dict[int, list[int]]:
    """Per source partition, the source offsets where the chosen groups stood."""
    found: dict[int, list[int]] = {}
    for g in plan.groups:
        if g.source == topic.source:
            found.setdefault(g.partition, []).append(g.source_offset)
    return found


def _by_window(topic: TopicPlan) -> dict[Any, list[int]]:
    grouped: dict[Any, list[int]] = {}
    for part in topic.partitions:
        if part.count.records:
            grouped.setdefault(part.window, []).append(part.partition)
    return grouped


def restore(
    archive,
    plan: RestorePlan,
    settings: RestoreSettings,
    *,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> RestoreResult:
    """Restore ``plan`` from ``archive`` into the target cluster; see the module's notes.
    ``on_progress(source topic, partition, records sent so far)`` is called now and then."""
    started = time.monotonic()
    admin = _admin(settings)  # one admin client of the target for the whole restore
    prepared = prepare(plan, settings, admin)
    result = RestoreResult()
    for item in prepared:
        done = SendResult()
        for run in item.runs:
            source = item.topic.source
            progress = None
            if on_progress is not None:
                progress = lambda p, n, s=source: on_progress(s, p, n)  # noqa: E731
            done.merge(send_records(archive, run, on_progress=progress, admin=admin))
        result.topics.append(
            TopicOutcome(
                item.topic.source, item.topic.target, item.target.created, item.resume, done
            )
        )
    result.groups = _set_groups(plan, settings, prepared, admin)
    result.seconds = time.monotonic() - started
    return result


def _admin(settings: RestoreSettings) -> Any:
    from blockgz.kafka.access import quiet_admin

    return quiet_admin(admin_settings(settings.producer))


def _set_groups(
    plan: RestorePlan, settings: RestoreSettings, prepared: list[_Prepared], admin: Any
) -> GroupsResult:
    if not plan.groups:
        return GroupsResult()
    client = admin_settings(settings.producer)
    placed = _placed_by_markers(plan, client, prepared)
    placed.update(_placed_by_positions(plan, client, prepared))
    return set_group_offsets(admin.client, plan.groups, {}, placed)


def _placed_by_positions(
    plan: RestorePlan, client: Mapping[str, Any], prepared: list[_Prepared]
) -> dict[tuple[str, str], dict[int, int] | str]:
    """``(group, target topic) ->`` its offsets on a topic restored in transactions: the target
    offset the transactions recorded for each group's source offset; past every restored
    record, the partition's end; or why it cannot be placed (an earlier run sent the record
    without recording it: other groups were chosen then)."""
    from confluent_kafka import Consumer, TopicPartition

    placed: dict[tuple[str, str], dict[int, int] | str] = {}
    consumer = Consumer({**client, "group.id": "blockgz.restore.check", "log_level": 3})
    try:
        for item in prepared:
            entries = [g for g in plan.groups if g.source == item.topic.source]
            if item.resume != "positions" or not entries:
                continue
            target = item.topic.target
            last = {p.partition: p.count.last for p in item.topic.partitions}
            positions = read_positions(client, target, {g.partition for g in entries})
            for g in entries:
                marks = positions[g.partition].landmarks if g.partition in positions else {}
                offset = marks.get(g.source_offset)
                end = last.get(g.partition)
                if offset is None and end is not None and g.source_offset <= end:
                    placed[(g.group, target)] = (
                        f"{target}[{g.partition}]: the run that restored source offset "
                        f"{g.source_offset} did not record its target offset (other groups were "
                        "chosen then)"
                    )
                    continue
                if offset is None:  # past the restored records (or none restored there)
                    _, offset = consumer.get_watermark_offsets(
                        TopicPartition(target, g.partition), timeout=15, cached=False
                    )
                found = placed.setdefault((g.group, target), {})
                if isinstance(found, dict):
                    found[g.partition] = offset
    finally:
        consumer.close()
    return placed


def _placed_by_markers(
    plan: RestorePlan, client: Mapping[str, Any], prepared: list[_Prepared]
) -> dict[tuple[str, str], dict[int, int] | str]:
    """``(group, target topic) ->`` its offsets on a topic restored with markers, from the
    records read back (:mod:`blockgz.reader.restore.group_markers`), or why none is exact."""
    from blockgz.reader.restore.group_markers import place_group, restored_records

    placed: dict[tuple[str, str], dict[int, int] | str] = {}
    for item in prepared:
        if item.resume != "markers":
            continue
        entries = [g for g in plan.groups if g.source == item.topic.source]
        if not entries:
            continue
        target = item.topic.target
        restored, ends = restored_records(client, target, item.target.partitions, item.topic.source)
        committed: dict[str, dict[int, int]] = {}
        for entry in entries:
            committed.setdefault(entry.group, {})[entry.partition] = entry.source_offset
        for group, offsets in committed.items():
            placed[(group, target)] = place_group(
                restored, ends, offsets, by_key=plan.request.by_key, target=target
            )
    return placed


def restore_on_spark(
    spark: Any,
    source: str,
    archive_options: Mapping[str, Any],
    plan: RestorePlan,
    settings: RestoreSettings,
    *,
    task_env: Mapping[str, str] | None = None,
) -> RestoreResult:
    """:func:`restore` as a Spark job: topics are created, partitions claimed and groups set by
    the driver; each archived topic-partition is one task (its records must go in order,
    :func:`~blockgz.reader.restore.spark_send.send_on_spark`), which resumes as a local restore
    does, so a task Spark retries sends only what is missing. ``task_env``: environment
    variables each task sets (see there)."""
    started = time.monotonic()
    admin = _admin(settings)  # the driver's; each task makes its own
    prepared = prepare(plan, settings, admin)
    runs = [run for item in prepared for run in item.runs]
    done = iter(send_on_spark(spark, source, archive_options, runs, task_env=task_env))
    result = RestoreResult()
    for item in prepared:
        merged = SendResult()
        for _ in item.runs:
            merged.merge(next(done))
        merged.seconds = 0.0
        result.topics.append(
            TopicOutcome(
                item.topic.source, item.topic.target, item.target.created, item.resume, merged
            )
        )
    result.groups = _set_groups(plan, settings, prepared, admin)
    result.seconds = time.monotonic() - started
    return result
