"""Carry out a :class:`~blockgz.reader.restore_plan.RestorePlan`: topics, records, groups.

In order: create the missing target topics as the snapshot describes them, or check the existing
ones (:mod:`blockgz.reader.restore_topics`); claim each one-to-one target partition and learn
how far a previous run got (:mod:`blockgz.reader.restore_claims`), or fall back to the
``blockgz.replay`` markers where a claim cannot count; send each topic's records with
:func:`blockgz.reader.replay.replay` (idempotent producer, partition to partition, keys, headers
and timestamps as kept); and, once every record is delivered, set the consumer groups' offsets
on the target (:mod:`blockgz.reader.group_offsets`). A failure before the groups leaves them
untouched: a rerun continues the records and then sets them.

Example (with a broker)::

    with open_archive("s3://bucket/exports") as archive:
        plan = plan_restore(archive, RestoreRequest(topics=("orders",), to_time=t))
        result = restore(archive, plan, RestoreSettings({"bootstrap.servers": "dr:9092"}))
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from blockgz.errors import ConfigError
from blockgz.reader.group_offsets import GroupsResult, set_group_offsets
from blockgz.reader.replay import ReplayResult, ReplaySettings, replay
from blockgz.reader.replay_markers import admin_settings
from blockgz.reader.restore_claims import delivered_by_count
from blockgz.reader.restore_plan import RestorePlan, TopicPlan
from blockgz.reader.restore_topics import TargetTopic, ensure_topics
from blockgz.registry import RegistrySettings


@dataclass
class RestoreSettings:
    """Where to restore to."""

    #: librdkafka settings (``bootstrap.servers`` at least); idempotence is always on.
    producer: dict[str, Any] = field(default_factory=dict)
    #: The target cluster's schema registry (see :class:`~blockgz.reader.replay.ReplaySettings`).
    registry: RegistrySettings | None = None
    #: Allow restoring with markers into a non-empty target named as its source topic.
    allow_same_topic: bool = False


@dataclass
class TopicOutcome:
    source: str
    target: str
    created: bool
    #: ``claims`` (resumed by counting, records unchanged) or ``markers`` (``blockgz.replay``).
    resume: str
    result: ReplayResult


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
    """One topic's replays (one per distinct window) and its claimed bases."""

    topic: TopicPlan
    target: TargetTopic
    resume: str
    runs: list[ReplaySettings]
    bases: dict[tuple[str, int], int]


def prepare(archive_plan: RestorePlan, settings: RestoreSettings, admin: Any) -> list[_Prepared]:
    """Create or check the target topics and claim their partitions: what each topic's
    replay must do (``admin``: a :class:`~blockgz.kafka_access.QuietAdmin` of the target).
    Talks to the target cluster, sends no record."""
    client = admin_settings(settings.producer)
    bootstrap = str(settings.producer.get("bootstrap.servers"))
    targets = ensure_topics(admin.client, archive_plan, bootstrap)
    prepared = []
    for topic, target in zip(archive_plan.topics, targets, strict=True):
        claimed = None
        if not archive_plan.request.by_key:
            fingerprints = {
                p.partition: archive_plan.fingerprint(topic, p) for p in topic.partitions
            }
            claimed = delivered_by_count(client, topic.target, fingerprints)
        mark = claimed is None
        if mark and topic.target == topic.source and not settings.allow_same_topic:
            raise ConfigError(
                f"topic {topic.target!r} exists with records of its own and is named as the "
                "archived topic; restoring into it would append a second copy (rename the "
                "target, or pass --allow-same-topic)"
            )
        runs = []
        for window, partitions in _by_window(topic).items():
            runs.append(
                ReplaySettings(
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
                    producer=dict(settings.producer),
                    already=None if claimed is None else {p: n for p, (_, n) in claimed.items()},
                )
            )
        bases = {} if claimed is None else {(topic.target, p): b for p, (b, _) in claimed.items()}
        prepared.append(_Prepared(topic, target, "markers" if mark else "claims", runs, bases))
    return prepared


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
        done = ReplayResult()
        for run in item.runs:
            source = item.topic.source
            progress = None
            if on_progress is not None:
                progress = lambda p, n, s=source: on_progress(s, p, n)  # noqa: E731
            _merge(done, replay(archive, run, on_progress=progress, admin=admin))
        result.topics.append(
            TopicOutcome(
                item.topic.source, item.topic.target, item.target.created, item.resume, done
            )
        )
    result.groups = _set_groups(plan, settings, prepared, admin)
    result.seconds = time.monotonic() - started
    return result


def _admin(settings: RestoreSettings) -> Any:
    from blockgz.kafka_access import quiet_admin

    return quiet_admin(admin_settings(settings.producer))


def _merge(into: ReplayResult, done: ReplayResult) -> None:
    into.sent.update(done.sent)
    into.skipped.update(done.skipped)
    into.seconds += done.seconds
    into.not_kept += [w for w in done.not_kept if w not in into.not_kept]


def _set_groups(
    plan: RestorePlan, settings: RestoreSettings, prepared: list[_Prepared], admin: Any
) -> GroupsResult:
    if not plan.groups:
        return GroupsResult()
    bases: dict[tuple[str, int], int] = {}
    for item in prepared:
        bases.update(item.bases)
    placed = _placed_by_markers(plan, admin_settings(settings.producer), prepared)
    return set_group_offsets(admin.client, plan.groups, bases, placed)


def _placed_by_markers(
    plan: RestorePlan, client: Mapping[str, Any], prepared: list[_Prepared]
) -> dict[tuple[str, str], dict[int, int] | str]:
    """``(group, target topic) ->`` its offsets on a topic restored with markers, from the
    records read back (:mod:`blockgz.reader.group_markers`), or why none is exact."""
    from blockgz.reader.group_markers import place_group, restored_records

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
) -> RestoreResult:
    """:func:`restore` as a Spark job: topics are created, partitions claimed and groups set by
    the driver; each archived topic-partition is one task (its records must go in order),
    which resumes as a local restore does, so a task Spark retries sends only what is
    missing."""
    started = time.monotonic()
    admin = _admin(settings)  # the driver's; each task makes its own
    prepared = prepare(plan, settings, admin)
    tasks = [
        (n, replace(run, partitions=[p]))
        for n, item in enumerate(prepared)
        for run in item.runs
        for p in run.partitions or []
    ]
    result = RestoreResult()
    rows: list[tuple[int, int, int, int, list[str]]] = []
    if tasks:
        options = dict(archive_options)

        def one_partition(task: tuple[int, ReplaySettings]) -> tuple[int, int, int, int, list[str]]:
            from blockgz.reader.archive import open_archive as open_on_executor

            number, run = task
            partition = (run.partitions or [0])[0]
            with open_on_executor(source, options) as executor_archive:
                done = replay(executor_archive, run)
            sent, skipped = done.sent.get(partition, 0), done.skipped.get(partition, 0)
            return number, partition, sent, skipped, done.not_kept

        rows = spark.sparkContext.parallelize(tasks, len(tasks)).map(one_partition).collect()
    for number, item in enumerate(prepared):
        done = ReplayResult()
        for n, partition, sent, skipped, not_kept in rows:
            if n == number:
                done.sent[partition], done.skipped[partition] = sent, skipped
                done.not_kept += [w for w in not_kept if w not in done.not_kept]
        result.topics.append(
            TopicOutcome(
                item.topic.source, item.topic.target, item.target.created, item.resume, done
            )
        )
    result.groups = _set_groups(plan, settings, prepared, admin)
    result.seconds = time.monotonic() - started
    return result
