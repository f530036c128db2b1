"""How a restore resumes without adding a header to the records: claims on the target cluster.

``blockgz replay`` resumes by a ``blockgz.replay`` header on every record, read back from the
end of each target partition. A disaster-recovery restore must give back the records as they
were, headers included, so the default restore (one to one, into target partitions that are
empty when it first reaches them) adds none. Instead, before it sends anything to a target
partition it **claims** it: it commits, for the consumer group :data:`CLAIM_GROUP` on the
target cluster, the partition's end offset then (its *base*, 0 for a topic the restore
created) with the restore's fingerprint as the offset's metadata (source topic and partition,
window). An idempotent producer delivers each partition's records in the order sent, so what a
killed run left in a claimed partition is a prefix of what it sent: a rerun reads the claim and
the partition's end offset, and ``end - base`` is exactly how many records of the source
partition's window are there already; it skips that many and sends the rest. A rerun after a
complete restore sends nothing.

A target partition that is not empty and holds no claim (an existing topic with records of its
own) cannot be counted this way: that topic is restored with the ``blockgz.replay`` markers, as
``replay`` does, and so is a ``--by-key`` restore (its records mix in the target partitions).
A claim made by another restore (another source or window) on a partition that has received
records since is refused: the two would be mixed.

>>> claim_metadata("a1b2", 0)
'{"blockgz.restore": "a1b2", "base": 0}'
>>> parse_claim('{"blockgz.restore": "a1b2", "base": 0}')
('a1b2', 0)
>>> parse_claim("something a consumer wrote") is None
True
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from blockgz.errors import RestoreError

#: The consumer group on the target cluster whose committed offsets hold the restores' claims.
CLAIM_GROUP = "blockgz.restore.claims"
_TIMEOUT_S = 15.0
#: Coordinator errors of a cluster still loading its offsets topic (a fresh DR cluster): retried.
_SETTLING = ("NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE")
T = TypeVar("T")


def claim_metadata(fingerprint: str, base: int) -> str:
    return json.dumps({"blockgz.restore": fingerprint, "base": base})


def parse_claim(metadata: str | None) -> tuple[str, int] | None:
    """``(fingerprint, base)`` of a claim's offset metadata; ``None`` when it is none."""
    try:
        doc = json.loads(metadata or "")
        return str(doc["blockgz.restore"]), int(doc["base"])
    except (ValueError, KeyError, TypeError):
        return None


def delivered_by_count(
    client: Mapping[str, Any], topic: str, fingerprints: Mapping[int, str]
) -> dict[int, tuple[int, int]] | None:
    """Claim the target partitions of ``topic`` (``partition -> fingerprint``) and return,
    per partition, ``(base, records)``: its claimed starting offset and how many records it
    already holds from this restore (0 on a first run); ``None`` when some
    partition holds records and no claim, so the topic must be restored with markers. Raises a
    :class:`RestoreError` when another restore's records are there."""
    from confluent_kafka import Consumer, KafkaException

    consumer = Consumer(
        {**client, "group.id": CLAIM_GROUP, "enable.auto.commit": False, "log_level": 3}
    )
    try:
        return _claim(consumer, topic, fingerprints)
    except KafkaException as exc:  # e.g. GROUP_AUTHORIZATION_FAILED: one line, not a trace
        error = exc.args[0] if exc.args else exc
        text = error.str() if hasattr(error, "str") else str(error)
        raise RestoreError(
            f"cannot claim {topic} for the restore (consumer group {CLAIM_GROUP} on the target: "
            f"the principal needs READ on it): {text}"
        ) from exc
    finally:
        consumer.close()


def _claim(
    consumer: Any, topic: str, fingerprints: Mapping[int, str]
) -> dict[int, tuple[int, int]] | None:
    """:func:`delivered_by_count` with ``consumer`` of the claim group."""
    from confluent_kafka import TopicPartition

    asked = [TopicPartition(topic, p) for p in sorted(fingerprints)]
    claims = {
        tp.partition: parse_claim(tp.metadata) if tp.offset >= 0 else None
        for tp in _settled(lambda: consumer.committed(asked, timeout=_TIMEOUT_S))
    }
    delivered: dict[int, tuple[int, int]] = {}
    fresh: dict[int, int] = {}
    foreign: list[int] = []
    for partition, fingerprint in sorted(fingerprints.items()):
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=_TIMEOUT_S, cached=False
        )
        claim = claims.get(partition)
        if claim is not None and claim[0] == fingerprint and high >= claim[1]:
            delivered[partition] = (claim[1], high - claim[1])
        elif claim is not None and high > claim[1]:
            raise RestoreError(
                f"{topic}[{partition}] holds {high - claim[1]} records of another restore "
                "(another source, window or rename); restore into a new topic (--rename)"
            )
        elif high > low:
            foreign.append(partition)  # records of its own: resume by markers
        else:
            fresh[partition] = high
            delivered[partition] = (high, 0)
    if foreign:
        if any(n for _, n in delivered.values()):
            raise RestoreError(
                f"{topic}[{foreign[0]}] received records from elsewhere while this restore "
                "filled the topic's other partitions; restore into a new topic (--rename)"
            )
        return None
    if fresh:  # one OffsetCommit for all: a kill leaves all of them claimed or none
        offsets = [
            TopicPartition(topic, p, base, claim_metadata(fingerprints[p], base))
            for p, base in fresh.items()
        ]
        _settled(lambda: consumer.commit(offsets=offsets, asynchronous=False))
    return delivered


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
