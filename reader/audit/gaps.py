"""Offsets of a topic-partition that no committed object holds, and whether Kafka explains them.

Between the first archived offset and the committed one, an offset is in no object when Kafka
had no record there when the export read it (compaction, transaction markers, records of aborted
transactions) or the sink skipped it (a null value with ``behavior.on.null.values=ignore``, a
dead letter). Inside an object such gaps are recorded by the writer (the index's
``offset_deltas``): each object's ``first..last`` span is its own account of that stretch. What
is left are the **gaps between objects**: nothing in the archive records why they exist, so they
are checked against Kafka when a broker is reachable (:class:`KafkaFacts`):

* Kafka's log now starts after the gap: retention took those offsets; nothing to compare with,
  the gap counts as explained (a note, as every explained gap is: one line saying why);
* Kafka holds no record in the gap now (a fetch from its first offset returns a record past it):
  compaction or transaction markers, explained;
* Kafka holds a record in the gap: records were committed past but not archived — a
  warning when it can be a skipped null or a dead letter (the partition has dead letters, or
  the record's value is null), damage otherwise;
* no broker (``--no-kafka``, or it did not answer): a warning, "unexplained gap".

>>> gaps_between([(0, 9), (5, 12), (20, 29)], first=0, committed=35)
[(13, 19), (30, 34)]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from blockgz.reader.audit.findings import DAMAGE, NOTE, WARNING, Finding


class KafkaFacts(Protocol):
    """What the audit asks a broker (:mod:`blockgz.sink.export.audit_kafka` asks a real one)."""

    #: Names the brokers in messages (``kafka.bootstrap.servers``).
    brokers: str

    def log_start(self, topic: str, partition: int) -> int:
        """The partition's log start offset now; raises when the broker does not answer."""
        ...

    def first_record(
        self, topic: str, partition: int, offset: int, end: int
    ) -> tuple[int, bool] | None:
        """The first record at ``offset`` or after, below ``end``: its offset, and whether its
        value is null (what ``behavior.on.null.values=ignore`` skips); ``None``: there is none."""
        ...


def gaps_between(
    spans: Iterable[tuple[int, int]], *, first: int, committed: int
) -> list[tuple[int, int]]:
    """The stretches ``(low, high)`` (inclusive) of ``first..committed-1`` that no span covers."""
    gaps: list[tuple[int, int]] = []
    reached = first  # every offset below this is covered
    for low, high in sorted(spans):
        if low > reached:
            gaps.append((reached, min(low, committed) - 1))
        reached = max(reached, high + 1)
        if reached >= committed:
            break
    if reached < committed:
        gaps.append((reached, committed - 1))
    return [(a, b) for a, b in gaps if a <= b]


@dataclass
class GapCheck:
    """Checks one topic-partition's gaps; ``explained`` counts those Kafka accounted for (each
    is also a note saying how)."""

    topic: str
    partition: int
    kafka: KafkaFacts | None
    dead_letters: int = 0
    explained: int = 0
    #: The level of a gap when no broker is asked: a warning for ``audit --no-kafka``, a note
    #: for ``verify`` (which never asks one: each gap is still a line).
    unasked: int = WARNING
    _start: int | None = None
    _kafka_error: str | None = None

    def check(self, low: int, high: int) -> list[Finding]:
        """Findings for the gap ``low..high`` (none when Kafka explains it)."""
        if self.kafka is None:
            why = "no broker to ask (--no-kafka or none given)"
            return [replace(self._unexplained(low, high, why), level=self.unasked)]
        try:
            start = self._log_start()
            if start > high:  # retention: Kafka no longer has them either
                why = f"retention: Kafka's log of {self.topic}-{self.partition} starts at {start}"
                return [self._explained(low, high, why)]
            record = self.kafka.first_record(self.topic, self.partition, max(low, start), high + 1)
        except Exception as exc:  # KafkaException, timeouts: the gap stays unexplained
            self._kafka_error = _why(exc)
            return [self._unexplained(low, high, f"Kafka did not answer: {self._kafka_error}")]
        if record is None or record[0] > high:
            why = (
                "Kafka holds no record there now (compaction, transaction markers or aborted "
                "transactions' records)"
            )
            return [self._explained(low, high, why)]
        return [self._missing(low, high, *record)]

    def _explained(self, low: int, high: int, why: str) -> Finding:
        """A gap Kafka accounts for: a note saying how (exit 0)."""
        self.explained += 1
        return Finding(NOTE, "gap", self.topic, self.partition, low, high, None,
                       f"in no committed object: {why}")  # fmt: skip

    def _log_start(self) -> int:
        if self._start is None:
            self._start = self.kafka.log_start(self.topic, self.partition)  # type: ignore[union-attr]
        return self._start

    def _unexplained(self, low: int, high: int, why: str) -> Finding:
        return Finding(
            WARNING, "unexplained_gap", self.topic, self.partition, low, high, None,
            f"in no committed object, and nothing recorded why ({why}); compaction, transaction "
            "markers, skipped nulls and dead letters leave such gaps",
        )  # fmt: skip

    def _missing(self, low: int, high: int, offset: int, null_value: bool) -> Finding:
        maybe_skipped = null_value or self.dead_letters > 0
        why = (
            "a null value the sink may have skipped"
            if null_value
            else f"perhaps one of the partition's {self.dead_letters} dead letters"
            if self.dead_letters
            else "records committed but not archived"
        )
        return Finding(
            WARNING if maybe_skipped else DAMAGE, "not_archived", self.topic, self.partition,
            low, high, None,
            f"Kafka holds offset {offset} but no committed object does ({why}); "
            f"re-export offsets {low}..{high} from Kafka",
        )  # fmt: skip


def _why(exc: BaseException) -> str:
    error = exc.args[0] if exc.args else exc
    return str(getattr(error, "str", lambda: error)())
