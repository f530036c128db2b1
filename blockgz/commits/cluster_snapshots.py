"""What the source cluster looked like, now and then: what a restore needs besides the records.

A restore into another cluster must recreate the topics as they were (partition count,
``cleanup.policy``, retention, compression, ...) and put every consumer group back where it
stood, translated to the restored topic's offsets. The records alone say neither, and the source
cluster may be gone by then. So a running export writes, every ``blockgz.snapshot.interval``, a
**snapshot**: the archived topics' partition counts and configs, the committed offsets of the
consumer groups on them, and what the archive had committed at that moment, stamped with the
time. A restore to time T uses the newest snapshot at or before T.

Snapshots sit under the job's directory, one directory per UTC day
(:meth:`~blockgz.archive.job_keys.JobKeys.snapshot_key`), so finding the one for T costs a LIST
of the days and a LIST of one day, however long the job has run.

>>> import tempfile
>>> from blockgz.archive.layout import Layout
>>> from blockgz.store import LocalStore
>>> snaps = Snapshots(LocalStore(tempfile.mkdtemp()), "", Layout(), "s3-sink")
>>> _ = snaps.write(ClusterSnapshot(at_ms=1_000, topics={"t": TopicState(2, {})}))
>>> _ = snaps.write(ClusterSnapshot(at_ms=5_000, groups={"g": {"t": {0: 7}}}))
>>> snaps.at_or_before(4_000).at_ms, snaps.at_or_before(9_000).groups
(1000, {'g': {'t': {0: 7}}})
>>> snaps.at_or_before(999) is None
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from blockgz.archive.layout import Layout
from blockgz.archive.partition_offsets import Offsets, merge_offsets, offsets_doc
from blockgz.archive.versions import check_major
from blockgz.errors import CorruptManifestError
from blockgz.store.base import ObjectStore

SNAPSHOT_VERSION = 1


@dataclass(frozen=True)
class TopicState:
    """One topic as the cluster had it: its partition count and the configs set on it (those
    that differ from the broker's defaults, as ``kafka-configs --describe`` lists them)."""

    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterSnapshot:
    """The archived topics, the consumer groups' offsets on them, and the archive's committed
    offsets, at ``at_ms`` (epoch milliseconds)."""

    at_ms: int
    topics: Mapping[str, TopicState] = field(default_factory=dict)
    #: Per group, per topic and partition: the group's committed offset (the next it reads).
    groups: Mapping[str, Offsets] = field(default_factory=dict)
    #: What the archive had committed then (per topic and partition: the next offset).
    archived: Offsets = field(default_factory=dict)
    #: What could not be read (one line each, e.g. the configs of a topic the principal may
    #: not DESCRIBE_CONFIGS): a restore says so rather than guessing.
    missing: tuple[str, ...] = ()

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "version": SNAPSHOT_VERSION,
            "at_ms": self.at_ms,
            "topics": {
                name: {"partitions": t.partitions, "configs": dict(sorted(t.configs.items()))}
                for name, t in sorted(self.topics.items())
            },
            "groups": {g: offsets_doc(o) for g, o in sorted(self.groups.items())},
            "archived": offsets_doc(self.archived),
        }
        if self.missing:
            doc["missing"] = list(self.missing)
        return json.dumps(doc, indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes | str, *, source: str = "snapshot") -> ClusterSnapshot:
        """Read a snapshot; fields this blockgz does not know are ignored, a newer major
        version is refused."""
        try:
            doc = json.loads(data)
            check_major(doc, SNAPSHOT_VERSION, what="snapshot", source=source)
            return cls(
                at_ms=int(doc["at_ms"]),
                topics={
                    str(name): TopicState(
                        int(t["partitions"]),
                        {str(k): str(v) for k, v in t.get("configs", {}).items()},
                    )
                    for name, t in doc.get("topics", {}).items()
                },
                groups={str(g): merge_offsets({}, o) for g, o in doc.get("groups", {}).items()},
                archived=merge_offsets({}, doc.get("archived", {})),
                missing=tuple(str(m) for m in doc.get("missing", ())),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptManifestError(f"{source}: not a blockgz snapshot ({exc})") from exc


@dataclass
class Snapshots:
    """The snapshots of one export job (``name``) under a store prefix."""

    store: ObjectStore
    prefix: str
    layout: Layout
    name: str

    def write(self, snapshot: ClusterSnapshot) -> str:
        """Write ``snapshot`` (one PUT) and return its key."""
        key = self.layout.snapshot_key(self.prefix, self.name, snapshot.at_ms)
        self.store.put(key, snapshot.to_json())
        return key

    def at_or_before(self, at_ms: int | None = None) -> ClusterSnapshot | None:
        """The newest snapshot taken at or before ``at_ms`` (``None``: the newest of all), or
        ``None`` when there is none that early."""
        root = self.layout.snapshots_prefix(self.prefix, self.name)
        last_day = None if at_ms is None else self.layout.snapshot_key("", "", at_ms).split("/")[-2]
        for day in sorted(self.store.list_prefixes(root), reverse=True):
            if last_day is not None and day[len(root) :].rstrip("/") > last_day:
                continue  # a day after at_ms: nothing in it is early enough
            taken = [
                (when, info.key)
                for info in self.store.list(day)
                if (when := self.layout.snapshot_time(info.key)) is not None
                and (at_ms is None or when <= at_ms)
            ]
            if taken:
                when, key = max(taken)
                return ClusterSnapshot.from_json(self.store.get(key), source=self.store.url(key))
        return None
