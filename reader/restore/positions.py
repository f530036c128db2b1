"""How a restore resumes: each target partition's restored source position, committed in the same
Kafka transaction as the records it covers.

A restore one partition to one sends each source partition's records through a **transactional
producer** of its own, ``transactional.id`` = ``blockgz.restore.<target topic>.<partition>``
(:func:`transactional_id`). Every :data:`TRANSACTION_RECORDS` records, and at the partition's
end, it commits a transaction holding those records **and**, through
``send_offsets_to_transaction``, the committed offset of the target partition for the consumer
group ``blockgz.restore.<target topic>`` (:func:`position_group`): the **next source offset** to
send, with the restore's fingerprint (source, window, rename) and the target offsets of the
records where the source's consumer groups stood (:class:`Position`) as its metadata. Kafka
makes both visible together or neither: a killed restore leaves an open transaction that the
rerun's ``init_transactions`` (same ``transactional.id``) fences and aborts, so its records are
never read by a ``read_committed`` consumer, and the position still names the first record the
committed transactions do not hold.

A rerun reads the positions (:func:`read_positions`) and sends each partition's records from its
position on: it never counts or reads what the target holds, so records anyone else wrote to the
target between the runs neither skip nor repeat a record. A position with another fingerprint
(another restore into the same target) is refused in one line.

The target's consumers must read with ``isolation.level=read_committed`` (librdkafka's default;
Java's is ``read_uncommitted``) or they also see the records of aborted transactions. Each commit
leaves a transaction marker in the partition (one offset), so restored offsets are no longer
``0, 1, 2, ...``; the consumer groups' offsets are therefore placed from the recorded target
offsets (:attr:`Position.landmarks`), not counted.

>>> p = Position("a1b2", 120, {100: 104})
>>> Position.parse(p.metadata(), 120) == p
True
>>> Position.parse("something a consumer wrote", 5) is None
True
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from blockgz.errors import ReplayError, RestoreError

#: Records per transaction: what a killed restore sends again at most, per partition.
TRANSACTION_RECORDS = 20_000
_TIMEOUT_S = 30.0
#: Coordinator errors of a cluster still loading its offsets topic (a fresh DR cluster): retried.
_SETTLING = (
    "NOT_COORDINATOR",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
    "UNSTABLE_OFFSET_COMMIT",
)
T = TypeVar("T")


def position_group(target: str) -> str:
    """The consumer group on the target whose committed offsets are the restore's positions."""
    return f"blockgz.restore.{target}"


def transactional_id(target: str, partition: int) -> str:
    """The producer's ``transactional.id`` for one target partition: a rerun's fences the
    killed run's."""
    return f"blockgz.restore.{target}.{partition}"


@dataclass(frozen=True)
class Position:
    """Where a restore of one target partition stands."""

    #: The restore's fingerprint (:meth:`~blockgz.reader.restore.planning.RestorePlan.fingerprint`).
    fingerprint: str
    #: The next source offset to send (every record before it is committed on the target).
    next_offset: int
    #: Source offset -> target offset of the first restored record at or after it: where the
    #: source's consumer groups stood, placed on the target.
    landmarks: Mapping[int, int] = field(default_factory=dict)

    def metadata(self) -> str:
        marks = {str(k): v for k, v in sorted(self.landmarks.items())}
        return json.dumps({"blockgz.restore": self.fingerprint, "at": marks})

    @classmethod
    def parse(cls, metadata: str | None, offset: int) -> Position | None:
        """The position a committed offset with ``metadata`` records; ``None`` when none."""
        try:
            doc = json.loads(metadata or "")
            marks = {int(k): int(v) for k, v in doc.get("at", {}).items()}
            return cls(str(doc["blockgz.restore"]), offset, marks)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def fence(client: Mapping[str, Any], target: str, partitions: Iterable[int]) -> None:
    """Fence every earlier producer of ``target``'s ``partitions`` (a killed restore) and abort
    its open transaction, so the positions read next are settled."""
    from confluent_kafka import KafkaException, Producer

    for partition in partitions:
        config = {"log_level": 3, **client, "transactional.id": transactional_id(target, partition)}
        try:
            Producer(config).init_transactions(_TIMEOUT_S)
        except KafkaException as exc:
            raise RestoreError(
                f"cannot start a transaction on {target}[{partition}] (the principal needs WRITE "
                f"on transactional id {config['transactional.id']}): {_text(exc)}"
            ) from exc


def claim(client: Mapping[str, Any], target: str, starts: Mapping[int, Position]) -> None:
    """Record ``starts`` (target partition -> position) as the restore's positions, each in an
    empty transaction of its partition's producer: a rerun then knows the restore reached the
    partition, whatever else is written there."""
    for partition, position in sorted(starts.items()):
        sender = PartitionTransactions(client, target, partition, position)
        try:
            sender.begin()
            sender.commit()
        finally:
            sender.close()


def read_positions(
    client: Mapping[str, Any], target: str, partitions: Iterable[int]
) -> dict[int, Position]:
    """The recorded position of each of ``target``'s ``partitions`` that has one."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    group = position_group(target)
    consumer = Consumer({**client, "group.id": group, "enable.auto.commit": False, "log_level": 3})
    asked = [TopicPartition(target, p) for p in sorted(set(partitions))]
    try:
        found = _settled(lambda: consumer.committed(asked, timeout=_TIMEOUT_S))
    except KafkaException as exc:  # e.g. GROUP_AUTHORIZATION_FAILED: one line, not a trace
        raise RestoreError(
            f"cannot read the restore's positions on {target} (consumer group {group} on the "
            f"target: the principal needs READ on it): {_text(exc)}"
        ) from exc
    finally:
        consumer.close()
    out = {}
    for tp in found:
        position = Position.parse(tp.metadata, tp.offset) if tp.offset >= 0 else None
        if position is not None:
            out[tp.partition] = position
    return out


class PartitionTransactions:
    """One target partition's records, sent in transactions that commit its position."""

    def __init__(
        self,
        config: Mapping[str, Any],
        target: str,
        partition: int,
        start: Position,
        wanted: Iterable[int] = (),
        every: int = TRANSACTION_RECORDS,
    ):
        from confluent_kafka import Consumer, KafkaException, Producer

        from blockgz.reader.restore.markers import admin_settings

        self.target, self.partition, self.every = target, partition, every
        self.position = start
        self.landmarks = dict(start.landmarks)
        # A source offset below the position that no landmark records was sent by an earlier
        # run that did not want it (other groups chosen then): it cannot be placed now.
        self._wanted = sorted(
            w for w in set(wanted) if w not in self.landmarks and w >= start.next_offset
        )
        self._report = config.get("on_delivery")  # failures: a landmark's callback passes them on
        # librdkafka's retries while a fresh coordinator loads stay off the terminal
        settings = {
            "log_level": 3,
            **config,
            "transactional.id": transactional_id(target, partition),
        }
        if self._wanted:  # the landmarks' offsets come from delivery reports
            settings["delivery.report.only.error"] = False
        try:
            self.producer = Producer(settings)
            self.producer.init_transactions(_TIMEOUT_S)
        except KafkaException as exc:
            raise ReplayError(f"cannot start a transaction on {self._where}: {_text(exc)}") from exc
        group = {**admin_settings(config), "group.id": position_group(target)}
        self._group = Consumer(group)
        self._open = False
        self._pending = 0
        self._next = start.next_offset

    @property
    def _where(self) -> str:
        return f"{self.target}[{self.partition}]"

    def callbacks(self, offsets: list[int]) -> list[Callable[..., None] | None]:
        """Per record about to be sent (source ``offsets``, in order): the delivery callback
        that records a landmark's target offset, or ``None``."""
        out: list[Callable[..., None] | None] = []
        for offset in offsets:
            due = []
            while self._wanted and self._wanted[0] <= offset:
                due.append(self._wanted.pop(0))
            out.append(self._landmark(due) if due else None)
        return out

    def _landmark(self, due: list[int]) -> Callable[..., None]:
        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                if self._report is not None:
                    self._report(error, message)
                return
            for w in due:
                self.landmarks[w] = message.offset()

        return delivered

    def begin(self) -> None:
        """Open a transaction unless one is open."""
        if not self._open:
            self._call(self.producer.begin_transaction)
            self._open = True

    def sent(self, count: int, last_offset: int) -> None:
        """``count`` records up to source offset ``last_offset`` were handed to the producer;
        commit when the transaction holds enough."""
        self._pending += count
        self._next = last_offset + 1
        if self._pending >= self.every:
            self.commit()

    def commit(self) -> None:
        """Commit the open transaction with the position after its records."""
        from confluent_kafka import TopicPartition

        if not self._open:
            return
        remaining = self.producer.flush(_TIMEOUT_S)  # serves the landmarks' reports
        if remaining:
            self._abort(f"{remaining} records not delivered in {_TIMEOUT_S:.0f} s")
        position = Position(self.position.fingerprint, self._next, dict(self.landmarks))
        offsets = [TopicPartition(self.target, self.partition, self._next, position.metadata())]
        metadata = self._group.consumer_group_metadata()
        self._call(lambda: self.producer.send_offsets_to_transaction(offsets, metadata))
        self._call(lambda: self.producer.commit_transaction(_TIMEOUT_S))
        self._open, self._pending, self.position = False, 0, position

    def close(self) -> None:
        self._group.close()

    def _call(self, step: Callable[[], T]) -> T:
        from confluent_kafka import KafkaException

        try:
            return step()
        except KafkaException as exc:
            self._abort(_text(exc))
            raise  # unreachable: _abort raises

    def _abort(self, why: str) -> None:
        from confluent_kafka import KafkaException

        if self._open:  # fenced or broken, it may fail: the rerun's init_transactions aborts it
            with contextlib.suppress(KafkaException):
                self.producer.abort_transaction(_TIMEOUT_S)
        self._open = False
        raise ReplayError(
            f"restore into {self._where} stopped: {why}; run it again: it resumes from the "
            "position its last committed transaction recorded"
        )


def _text(exc: BaseException) -> str:
    error = exc.args[0] if exc.args else exc
    text = getattr(error, "str", None)
    return text() if callable(text) else str(error)


def _settled(call: Callable[[], T], timeout_s: float = 2 * _TIMEOUT_S) -> T:
    """``call()``, again while the group coordinator is still settling (a fresh cluster)."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            name = error.name() if error is not None and hasattr(error, "name") else ""
            if name not in _SETTLING or time.monotonic() > deadline:
                raise
        time.sleep(0.1)  # the coordinator loads the offsets topic; bounded by the deadline
