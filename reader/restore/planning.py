"""What a restore will do, worked out from the archive alone: the plan ``blockgz restore`` prints
with ``--dry-run`` and then carries out.

For each archived topic chosen (names, or a regex over the archive's topics): the target topic
(a rename map, or a prefix/suffix for all), each partition's window (offsets, times) with its
record count and its offset and time range, the topic's partition count and configs as the
newest snapshot of the source cluster at or before the point in time recorded them
(:mod:`blockgz.commits.cluster_snapshots`), and each consumer group's committed offset there
translated
to the restored topic's offsets (:mod:`blockgz.reader.reading.window_counts`). Nothing here talks to
Kafka.

The request itself (what the user asked for) is :mod:`blockgz.reader.restore.request`.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from dataclasses import dataclass
from typing import Any

from blockgz.commits.cluster_snapshots import ClusterSnapshot, Snapshots, TopicState
from blockgz.errors import ConfigError
from blockgz.reader.reading.window_counts import Window, WindowCount, count_window
from blockgz.reader.restore.request import RestoreRequest, select_topics
from blockgz.times import iso_ms


@dataclass(frozen=True)
class PartitionPlan:
    """One source partition: its window, what the window holds, and the time range of the
    objects that hold it (from the catalog; ``None`` where unknown)."""

    partition: int
    window: Window
    count: WindowCount
    min_time: int | None = None
    max_time: int | None = None
    #: Tombstones kept as keys only (``store.kafka.keys``), in the window: in :attr:`count`.
    tombstones: int = 0
    #: Records in the window that are nulls kept as values under the tombstone directory
    #: (:mod:`blockgz.reader.restore.tombstones`): in :attr:`count`, sent as ``--json-null``
    #: says.
    kept_nulls: int = 0


@dataclass(frozen=True)
class TopicPlan:
    """One source topic, its target, its partitions' windows, and what the snapshot says."""

    source: str
    target: str
    partitions: tuple[PartitionPlan, ...]
    #: From the snapshot at or before the point in time; ``None``: no snapshot has the topic.
    state: TopicState | None = None

    @property
    def records(self) -> int:
        return sum(p.count.records for p in self.partitions)

    @property
    def partition_count(self) -> int:
        """Partitions a target created for it gets: the source's, else enough for 1:1."""
        highest = max((p.partition for p in self.partitions), default=0) + 1
        return max(self.state.partitions, highest) if self.state is not None else highest


@dataclass(frozen=True)
class GroupOffset:
    """A consumer group's committed offset on a source partition, and where the same record
    is in the restored partition (counted from an empty target; a run adds the target
    partition's starting offset). With ``--by-key`` ``target_offset`` is only how many restored
    records of the source partition come before it: the target partitions are known once sent
    (:mod:`blockgz.reader.restore.group_markers`)."""

    group: str
    source: str
    partition: int
    source_offset: int
    target: str
    target_offset: int
    #: The source offset was past the restored range: mapped to its end.
    beyond: bool = False


@dataclass(frozen=True)
class RestorePlan:
    request: RestoreRequest
    topics: tuple[TopicPlan, ...]
    groups: tuple[GroupOffset, ...] = ()
    #: When the snapshot used was taken (epoch ms); ``None``: the archive has none.
    snapshot_at: int | None = None
    #: One line each: what the plan could not know (no snapshot, a snapshot's missing lines).
    notes: tuple[str, ...] = ()

    @property
    def records(self) -> int:
        return sum(t.records for t in self.topics)

    @property
    def ambiguities(self) -> list[str]:
        """One line per partition whose nulls kept as values cannot be told from the JSON text
        ``null`` while ``--json-null`` is not given: the restore refuses them."""
        from blockgz.reader.restore.tombstones import ambiguity

        if self.request.json_null is not None:
            return []
        where = self.request.tombstone_directory
        return [
            ambiguity(t.source, p.partition, p.kept_nulls, where)
            for t in self.topics
            for p in t.partitions
            if p.kept_nulls
        ]

    def fingerprint(self, topic: TopicPlan, partition: PartitionPlan) -> str:
        """A short hash of what one partition's restore sends (source, window, rename): a
        rerun of the same restore continues it, another restore into the same target is
        refused (:mod:`blockgz.reader.restore.positions`)."""
        w = partition.window
        text = f"{topic.source}/{partition.partition}->{topic.target}:{w.start},{w.end},"
        text += f"{w.from_time},{w.to_time},{int(self.request.by_key)}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        """The plan as ``--dry-run --output json`` prints it."""
        return {
            "records": self.records,
            "snapshot_at": iso_ms(self.snapshot_at),
            "topics": [
                {
                    "source": t.source,
                    "target": t.target,
                    "records": t.records,
                    "partitions": t.partition_count,
                    "configs": dict(t.state.configs) if t.state is not None else None,
                    "windows": [
                        {
                            "partition": p.partition,
                            "records": p.count.records,
                            "tombstones": p.tombstones,
                            "kept_nulls": p.kept_nulls,
                            "first_offset": p.count.first,
                            "last_offset": p.count.last,
                            "from_offset": p.window.start,
                            "to_offset": p.window.end,
                            "from_time": iso_ms(p.window.from_time),
                            "to_time": iso_ms(p.window.to_time),
                            "min_time": iso_ms(p.min_time),
                            "max_time": iso_ms(p.max_time),
                        }
                        for p in t.partitions
                    ],
                }
                for t in self.topics
            ],
            "groups": [
                {
                    "group": g.group,
                    "source": g.source,
                    "partition": g.partition,
                    "source_offset": g.source_offset,
                    "target": g.target,
                    "target_offset": g.target_offset,
                    "beyond_restored": g.beyond,
                }
                for g in self.groups
            ],
            "notes": list(self.notes),
            "json_null": self.request.json_null,
            "ambiguities": self.ambiguities,
        }


def find_snapshot(archive, at_ms: int | None) -> ClusterSnapshot | None:
    """The source cluster at or before ``at_ms`` (``None``: the newest), from the snapshots
    of every export under the archive's prefix (several jobs may archive different topics:
    each topic and group offset comes from the newest snapshot that has it)."""
    layout = archive.layout
    if not hasattr(layout, "exports_prefix"):
        return None  # a layout without exports (DeviantArt's): no snapshots
    store, prefix = archive.store, archive.prefix
    found = []
    for job_dir in store.list_prefixes(layout.exports_prefix(prefix)):
        name = layout.job_of_directory(job_dir)
        snapshot = Snapshots(store, prefix, layout, name).at_or_before(at_ms)
        if snapshot is not None:
            found.append(snapshot)
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    topics: dict[str, TopicState] = {}
    groups: dict[str, dict[str, dict[int, int]]] = {}
    missing: list[str] = []
    for snap in sorted(found, key=lambda s: s.at_ms):
        topics.update(snap.topics)
        for group, offsets in snap.groups.items():
            for topic, parts in offsets.items():
                groups.setdefault(group, {})[topic] = dict(parts)
        missing += [m for m in snap.missing if m not in missing]
    latest = max(s.at_ms for s in found)
    return ClusterSnapshot(latest, topics, groups, {}, tuple(missing))


def plan_restore(archive, request: RestoreRequest) -> RestorePlan:
    """The plan for ``request`` over ``archive`` (an
    :class:`~blockgz.reader.reading.archive.Archive`);
    see the module's notes."""
    chosen = select_topics(archive.topics(), request.topics, request.topics_regex)
    for option, named in (("--offsets", request.offsets), ("--partition", request.only)):
        unknown = sorted({t for t, _ in named} - set(chosen))
        if unknown:
            raise ConfigError(f"{option} names {', '.join(unknown)}, which is not restored here")
    targets = {t: request.rename.target(t) for t in chosen}
    clash = {t for t in targets.values() if list(targets.values()).count(t) > 1}
    if clash:
        raise ConfigError(f"two topics would be restored into {sorted(clash)[0]!r}: rename one")
    snapshot = find_snapshot(archive, request.to_time)
    notes: list[str] = []
    if snapshot is None:
        notes.append(
            "no snapshot of the source cluster at or before the point in time: target topics "
            "are created with the archive's partitions and the broker's default configs, and "
            "no consumer group offsets are set"
        )
    else:
        notes += [f"the snapshot lacks {m}" for m in snapshot.missing]
    group_pattern = _groups_pattern(request)
    wanted = _group_offsets(snapshot, group_pattern, chosen) if request.groups else {}
    topics, groups = [], []
    for topic in chosen:
        state = snapshot.topics.get(topic) if snapshot is not None else None
        if snapshot is not None and state is None:
            notes.append(f"the snapshot has no configs for {topic!r}: defaults are used")
        parts = []
        for partition in _partitions(archive, request, topic):
            window = request.window(topic, partition)
            below = [o for (g, p), o in wanted.get(topic, {}).items() if p == partition]
            count = count_window(archive, topic, partition, window, below)
            low, high = _time_range(archive, archive.objects(topic, partition), count, window)
            count, dead, nulls = _with_tombstones(archive, request, topic, partition, count)
            parts.append(PartitionPlan(partition, window, count, low, high, dead, nulls))
        plan = TopicPlan(topic, targets[topic], tuple(parts), state)
        topics.append(plan)
        by_partition = {p.partition: p for p in parts}
        for (group, partition), offset in sorted(wanted.get(topic, {}).items()):
            part = by_partition.get(partition)
            if part is None:
                continue  # the archive holds nothing of that partition
            translated = part.count.below[offset]
            beyond = part.count.last is not None and offset > part.count.last + 1
            groups.append(
                GroupOffset(group, topic, partition, offset, plan.target, translated, beyond)
            )
    if request.by_key and groups:
        notes.append(
            "--by-key spreads records over the target's partitions: each group's offsets there "
            "are found after sending, from the records' blockgz.replay headers (a group is left "
            "alone when no single offset per partition resumes it exactly)"
        )
    return RestorePlan(
        request,
        tuple(topics),
        tuple(groups),
        None if snapshot is None else snapshot.at_ms,
        tuple(notes),
    )


def _groups_pattern(request: RestoreRequest) -> re.Pattern[str] | None:
    if request.groups_regex is None:
        return None
    try:
        return re.compile(request.groups_regex)
    except re.error as exc:
        raise ConfigError(f"--groups-regex {request.groups_regex!r}: not a regex ({exc})") from exc


def _group_offsets(
    snapshot: ClusterSnapshot | None, pattern: re.Pattern[str] | None, topics: list[str]
) -> dict[str, dict[tuple[str, int], int]]:
    """``topic -> (group, partition) -> committed offset`` of the chosen groups."""
    found: dict[str, dict[tuple[str, int], int]] = {}
    if snapshot is None:
        return found
    for group, offsets in snapshot.groups.items():
        if pattern is not None and not pattern.fullmatch(group):
            continue
        for topic in topics:
            for partition, offset in offsets.get(topic, {}).items():
                found.setdefault(topic, {})[(group, partition)] = offset
    return found


def _partitions(archive, request: RestoreRequest, topic: str) -> list[int]:
    held = archive.partitions(topic)
    only = sorted(p for t, p in request.only if t == topic)
    for option, asked in (("--offsets", sorted(p for t, p in request.offsets if t == topic)),
                          ("--partition", only)):  # fmt: skip
        missing = [p for p in asked if p not in held]
        if missing:
            raise ConfigError(
                f"{option} {topic}:{missing[0]}: the archive holds partitions {held} of {topic!r}"
            )
    return only or held


def _with_tombstones(
    archive, request: RestoreRequest, topic: str, partition: int, count: WindowCount
) -> tuple[WindowCount, int, int]:
    """``count`` with the partition's keys-only tombstones in the window added (they take
    target offsets too), their number, and how many records of ``count`` are nulls kept as
    values (:mod:`blockgz.reader.restore.tombstones`)."""
    from blockgz.reader.restore.tombstones import (
        kept_null_offsets,
        kept_tombstones,
        tombstone_records,
    )

    window = request.window(topic, partition)
    kept = kept_tombstones(archive, topic, partition, request.tombstone_directory)
    nulls = len(kept_null_offsets(archive, kept.kept_nulls, window)) if kept.kept_nulls else 0
    dead = [r.offset for r in tombstone_records(archive, kept.keys_only, window)]
    if not dead:
        return count, 0, nulls
    below = {o: n + bisect.bisect_left(dead, o) for o, n in count.below.items()}
    first = dead[0] if count.first is None else min(count.first, dead[0])
    last = dead[-1] if count.last is None else max(count.last, dead[-1])
    return WindowCount(count.records + len(dead), first, last, below), len(dead), nulls


def _time_range(archive, refs, count: WindowCount, window: Window) -> tuple[int | None, int | None]:
    """The time range of the objects holding the window's records (the catalog's, else
    their indexes' blocks), clipped to the window's times."""
    if count.first is None or count.last is None:
        return None, None
    first, last = count.first, count.last
    holding = [
        r
        for r in refs
        if r.start_offset <= last and (r.last_offset is None or r.last_offset >= first)
    ]
    lows = [r.min_timestamp for r in holding]
    highs = [r.max_timestamp for r in holding]
    if holding and (None in lows or None in highs) and all(r.has_index for r in holding):
        chunks = [
            c
            for r in holding
            for c in archive.index(r).chunks
            if c.num_records and c.first_record_offset <= last and c.last_record_offset >= first
        ]
        lows = [c.min_timestamp for c in chunks]
        highs = [c.max_timestamp for c in chunks]
    if not holding or None in lows or None in highs:
        return None, None
    low, high = min(lows), max(highs)
    if window.from_time is not None:
        low = max(low, window.from_time)
    if window.to_time is not None:
        high = min(high, window.to_time - 1)
    return low, high
