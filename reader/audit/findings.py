"""What ``blockgz audit`` found: one :class:`Finding` per problem, in one line each, and the
report of one job (:class:`AuditReport`) with its exit code.

Levels: a **note** (exit 0: something to know, e.g. a running export's batch in flight, or a
gap between objects and what explains it), a **warning** (exit 1: nothing is lost, but
something needs a hand — a missing or stale sidecar, a stray, an overlap, a gap nothing
explains) and **damage** (exit 2: committed records are gone, unreadable or not what was
committed — a deleted, truncated, corrupted or swapped object, a tampered sidecar, another
topic's object in the topic's folder, a deleted manifest).

Each finding has a ``kind`` (:data:`KINDS`): a new check adds its kind there and to
:func:`blockgz.reader.audit.repair` 's list of what cannot be repaired.

>>> f = Finding(DAMAGE, "missing_object", "orders", 0, 100, 199,
...             "topics/orders/partition=0/orders+0+0000000100.json.gz",
...             "a manifest committed it, but it is gone")
>>> print(f.line())
damage: orders-0 offsets 100..199 topics/orders/partition=0/orders+0+0000000100.json.gz: \
a manifest committed it, but it is gone
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

NOTE, WARNING, DAMAGE = 0, 1, 2
LEVELS = {NOTE: "note", WARNING: "warning", DAMAGE: "damage"}

#: Every kind of finding, and what it is about.
KINDS = {
    "missing_object": "a committed file is gone",
    "truncated_object": "a committed file is shorter than committed",
    "resized_object": "a committed file is longer than committed",
    "checksum_mismatch": "a committed file's bytes are not those committed (CRC-32)",
    "sidecar_mismatch": "a sidecar's bytes, or the object it names, are not those committed",
    "corrupt_block": "a block does not check (--deep)",
    "unreadable_object": "an object cannot be read whole (--deep)",
    "missing_sidecar": "a committed sidecar is gone",
    "stale_sidecar": "a sidecar describes other offsets or another size",
    "missing_manifest": "a manifest is gone from the job's sequence",
    "foreign_object": "another topic's or partition's object in this topic's folder",
    "topic_lives": "objects of two lives of a topic (deleted and recreated) meet",
    "catalog": "the catalog cannot be read",
    "overlap": "two committed objects hold the same offsets",
    "gap": "offsets in no object, and what explains them",
    "unexplained_gap": "offsets in no object, nothing explains them",
    "not_archived": "Kafka holds records no committed object holds",
    "past_commit": "a committed file holds offsets past the committed offset",
    "stray": "a key that is no data object",
    "uncommitted": "an object no manifest committed",
    "in_flight": "an object a running export may be writing",
}


@dataclass(frozen=True)
class Finding:
    """One problem: where (topic-partition, offsets ``first..last``, key) and what."""

    level: int
    kind: str
    topic: str
    partition: int | None
    first: int | None
    last: int | None
    key: str | None
    message: str
    #: What ``--repair`` does about it, or why it cannot ("" before a repair was asked for).
    repair: str = ""

    def where(self) -> str:
        """``orders-0 offsets 100..199 <key>``: the parts that are known."""
        parts = [self.topic if self.partition is None else f"{self.topic}-{self.partition}"]
        parts = [p for p in parts if p]  # a finding about the job (a manifest) has no topic
        if self.first is not None:
            span = (
                str(self.first) if self.last in (None, self.first) else f"{self.first}..{self.last}"
            )
            parts.append(f"offset{'' if self.last in (None, self.first) else 's'} {span}")
        if self.key:
            parts.append(self.key)
        return " ".join(parts)

    def line(self) -> str:
        """The one line printed for it (with what the repair did, when one ran)."""
        text = f"{LEVELS[self.level]}: {self.where()}: {self.message}"
        return f"{text}; {self.repair}" if self.repair else text

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "level": LEVELS[self.level]}


@dataclass
class PartitionSummary:
    """One topic-partition as audited: its committed span, objects and bytes."""

    topic: str
    partition: int
    first_offset: int | None = None
    committed: int | None = None
    objects: int = 0
    records: int = 0
    bytes: int = 0
    #: Gaps between objects that Kafka explained (retention, or no record there now).
    gaps_explained: int = 0


@dataclass
class AuditReport:
    """One job's audit: its partitions, what was found and, with ``--repair``, what was done."""

    job: str
    archive: str
    deep: bool = False
    kafka: str = ""
    partitions: list[PartitionSummary] = field(default_factory=list)
    #: Every topic the job committed (also those a ``topics`` filter left out).
    topics: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    #: What ``--repair`` did: one line per key written or removed.
    repaired: list[str] = field(default_factory=list)
    #: Requests made (the store's counters), and bytes of object data read (``--deep``).
    requests: str = ""
    bytes_read: int = 0
    seconds: float = 0.0

    def add(self, *findings: Finding) -> None:
        self.findings.extend(findings)

    @property
    def exit_code(self) -> int:
        """0 intact, 1 warnings, 2 damage (a repaired finding counts no more)."""
        left = [f.level for f in self.findings if not f.repair.startswith("repaired")]
        return max(left, default=NOTE)

    @property
    def objects(self) -> int:
        return sum(p.objects for p in self.partitions)

    def counts(self) -> dict[str, int]:
        """Findings per level name."""
        out = {name: 0 for name in LEVELS.values()}
        for f in self.findings:
            out[LEVELS[f.level]] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "archive": self.archive,
            "deep": self.deep,
            "kafka": self.kafka or None,
            "status": ("intact", "warning", "damage")[self.exit_code],
            "exit_code": self.exit_code,
            "objects": self.objects,
            "bytes_read": self.bytes_read,
            "requests": self.requests,
            "seconds": round(self.seconds, 3),
            "partitions": [asdict(p) for p in self.partitions],
            "findings": [f.to_dict() for f in self.findings],
            "repaired": self.repaired,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)
